// The device's copy bandwidth, the ceiling of the memory-bound rows of `tiny_llama kernels`:
// a large device-to-device cudaMemcpyAsync timed with events, counted as bytes read + written.
#include <cuda_runtime.h>

#include <algorithm>

#include "core/cuda_check.h"
#include "bench/event_timer.h"
#include "bench/kernels.h"

namespace tt {

namespace {

// The buffers and stream of one measurement, released however it ends.
struct CopyRig {
  void *src = nullptr, *dst = nullptr;
  cudaStream_t stream = nullptr;
  ~CopyRig() {
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
  CUDA_CHECK(cudaMemsetAsync(r.src, 1, bytes, r.stream));
  EventTimer timer(r.stream);
  const double ms = timer.median_ms(
      [&] { CUDA_CHECK(cudaMemcpyAsync(r.dst, r.src, bytes, cudaMemcpyDeviceToDevice, r.stream)); },
      std::max(warmup, 1), repeats);
  return 2.0 * double(bytes) / (ms * 1e-3) / 1e9;
}

}  // namespace tt
