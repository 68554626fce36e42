// Residual add on the GPU (see residual.h): out = a + b, elementwise.
#include "ops/cuda_common.cuh"
#include "ops/residual.h"

namespace tt::cuda {
namespace {

template <class T>
__global__ void add_kernel(T* out, const T* a, const T* b, int64_t n) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = from_float<T>(to_float(a[i]) + to_float(b[i]));
}

constexpr int kThreads = 256;

}  // namespace

void add(const Tensor& out, const Tensor& a, const Tensor& b, Stream s) {
  TT_CHECK(a.numel == out.numel && b.numel == out.numel, "add: sizes differ");
  TT_DISPATCH_ACT(out.dtype, {
    add_kernel<T><<<blocks_for(out.numel, kThreads), kThreads, 0, s>>>(
        static_cast<T*>(out.ptr), static_cast<const T*>(a.ptr), static_cast<const T*>(b.ptr), out.numel);
  });
  CUDA_CHECK_LAUNCH("add_kernel");
}

}  // namespace tt::cuda
