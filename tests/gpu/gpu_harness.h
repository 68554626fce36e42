// Helpers for the GPU tests: device buffers filled from double host data (converted to the
// tensor's type), poisoned outputs, and a CUDA backend with its scratch laid out.
#pragma once
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "backend/backend.h"
#include "core/arena.h"
#include "core/cuda_check.h"
#include "cpu/gradcheck.h"

namespace tt::test {

class DeviceBuffer {
 public:
  DeviceBuffer(DType dtype, int64_t n) {
    tensor_ = Tensor{nullptr, dtype, n};
    if (cudaMalloc(&tensor_.ptr, std::max<size_t>(tensor_.bytes(), 4)) != cudaSuccess)
      throw std::runtime_error("cudaMalloc failed in a test");
  }
  DeviceBuffer(DType dtype, const std::vector<double>& host) : DeviceBuffer(dtype, int64_t(host.size())) {
    set(host);
  }
  ~DeviceBuffer() { cudaFree(tensor_.ptr); }
  DeviceBuffer(const DeviceBuffer&) = delete;

  const Tensor& t() const { return tensor_; }
  operator const Tensor&() const { return tensor_; }

  void set(const std::vector<double>& host) {
    std::vector<char> raw(tensor_.bytes());
    for (size_t i = 0; i < host.size(); ++i) {
      if (tensor_.dtype == DType::F32) reinterpret_cast<float*>(raw.data())[i] = float(host[i]);
      else if (tensor_.dtype == DType::BF16) reinterpret_cast<bf16*>(raw.data())[i] = float_to_bf16(float(host[i]));
      else if (tensor_.dtype == DType::I32) reinterpret_cast<int32_t*>(raw.data())[i] = int32_t(host[i]);
      else throw std::runtime_error("unsupported test dtype");
    }
    cudaMemcpy(tensor_.ptr, raw.data(), raw.size(), cudaMemcpyHostToDevice);
    cudaDeviceSynchronize();  // the backend's stream does not wait for the legacy stream
  }
  std::vector<double> get() const {
    cudaDeviceSynchronize();
    std::vector<char> raw(tensor_.bytes());
    cudaMemcpy(raw.data(), tensor_.ptr, raw.size(), cudaMemcpyDeviceToHost);
    std::vector<double> out(size_t(tensor_.numel));
    for (size_t i = 0; i < out.size(); ++i) {
      if (tensor_.dtype == DType::F32) out[i] = reinterpret_cast<float*>(raw.data())[i];
      else if (tensor_.dtype == DType::BF16) out[i] = bf16_to_float(reinterpret_cast<bf16*>(raw.data())[i]);
      else out[i] = reinterpret_cast<int32_t*>(raw.data())[i];
    }
    return out;
  }
  // All bits set: NaN in fp32 and bf16, so an element the kernel forgets fails the check. The
  // memset runs on the legacy stream, which the backend's stream neither waits for nor holds
  // back: the device is idle before and after it.
  void poison() {
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemset(tensor_.ptr, 0xff, tensor_.bytes()));
    CUDA_CHECK(cudaDeviceSynchronize());
  }

 private:
  Tensor tensor_;
};

inline bool gpu_present() {
  std::string why;
  return cuda_available(&why);
}

// A CUDA backend with its scratch laid out for `shape`.
struct GpuBackend {
  std::unique_ptr<Backend> be;
  std::unique_ptr<Arena> arena;
  GpuBackend(const Plan& plan, const ModelShape& shape) {
    be = make_backend({DeviceKind::Cuda, plan});
    arena = std::make_unique<Arena>(be->memory());
    arena->build([&](Arena& a) { be->layout_workspace(a, shape); });
  }
  Backend* operator->() { return be.get(); }
};

inline bool all_finite(const std::vector<double>& v) {
  for (double x : v)
    if (!std::isfinite(x)) return false;
  return true;
}

// Checks a result against the double reference: every element written (finite) and
// ||gpu - ref|| / ||ref|| under tol.
#define EXPECT_MATCHES(gpu, ref, tol)                                              \
  do {                                                                             \
    const std::vector<double> g_ = (gpu), r_ = (ref);                              \
    ASSERT_EQ(g_.size(), r_.size());                                               \
    EXPECT_TRUE(::tt::test::all_finite(g_)) << #gpu " has unwritten (NaN) elements"; \
    EXPECT_LT(::tt::test::rel_error(g_, r_), (tol)) << #gpu;                       \
  } while (0)

#define REQUIRE_GPU() \
  if (!::tt::test::gpu_present()) GTEST_SKIP() << "no GPU: GPU tests run on the GPU machine (label gpu)"

}  // namespace tt::test
