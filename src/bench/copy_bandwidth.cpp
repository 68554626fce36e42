// The device's copy bandwidth, the ceiling of the memory-bound rows of `tiny_llama kernels`:
// a large device-to-device cudaMemcpyAsync timed with events, counted as bytes read + written.
#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "backend/cuda/cuda_check.h"

namespace tt {

namespace {

// The buffers, stream and events of one measurement, released however it ends.
struct CopyRig {
  void *src = nullptr, *dst = nullptr;
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  ~CopyRig() {
    if (stop) cudaEventDestroy(stop);
    if (start) cudaEventDestroy(start);
    if (stream) cudaStreamDestroy(stream);
    if (dst) cudaFree(dst);
    if (src) cudaFree(src);
  }
};

}  // namespace

double device_copy_gbps(size_t bytes, int warmup, int repeats) {
  CopyRig r;
  CUDA_CHECK(cudaMalloc(&r.src, bytes));
  CUDA_CHECK(cudaMalloc(&r.dst, bytes));
  CUDA_CHECK(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking));
  CUDA_CHECK(cudaEventCreate(&r.start));
  CUDA_CHECK(cudaEventCreate(&r.stop));
  CUDA_CHECK(cudaMemsetAsync(r.src, 1, bytes, r.stream));
  for (int i = 0; i < std::max(warmup, 1); ++i)
    CUDA_CHECK(cudaMemcpyAsync(r.dst, r.src, bytes, cudaMemcpyDeviceToDevice, r.stream));
  std::vector<double> ms;
  for (int i = 0; i < repeats; ++i) {
    CUDA_CHECK(cudaEventRecord(r.start, r.stream));
    CUDA_CHECK(cudaMemcpyAsync(r.dst, r.src, bytes, cudaMemcpyDeviceToDevice, r.stream));
    CUDA_CHECK(cudaEventRecord(r.stop, r.stream));
    CUDA_CHECK(cudaEventSynchronize(r.stop));
    float t = 0;
    CUDA_CHECK(cudaEventElapsedTime(&t, r.start, r.stop));
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  const double median = ms[ms.size() / 2];
  return 2.0 * double(bytes) / (median * 1e-3) / 1e9;
}

}  // namespace tt
