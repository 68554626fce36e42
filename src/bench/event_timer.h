// Timing GPU work on one stream with two CUDA events (CUDA builds only): untimed warm-up
// calls, then the median of the timed ones (the median of repetition_stats, bench.h). Used by
// the GPU stages of `tiny_llama debug`.
#pragma once
#include <cuda_runtime.h>

#include <vector>

#include "core/cuda_check.h"
#include "bench/bench.h"

namespace tt {

class EventTimer {
 public:
  explicit EventTimer(cudaStream_t stream) : stream_(stream) {
    CUDA_CHECK(cudaEventCreate(&start_));
    CUDA_CHECK(cudaEventCreate(&stop_));
  }
  ~EventTimer() {
    cudaEventDestroy(stop_);
    cudaEventDestroy(start_);
  }
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;

  // Median milliseconds of `launch` (work it enqueues on the stream) between two events.
  template <class F>
  double median_ms(F launch, int warmup, int repeats) {
    for (int i = 0; i < warmup; ++i) launch();
    std::vector<double> ms;
    for (int i = 0; i < repeats; ++i) {
      CUDA_CHECK(cudaEventRecord(start_, stream_));
      launch();
      CUDA_CHECK(cudaEventRecord(stop_, stream_));
      CUDA_CHECK(cudaEventSynchronize(stop_));
      float t = 0;
      CUDA_CHECK(cudaEventElapsedTime(&t, start_, stop_));
      ms.push_back(t);
    }
    return repetition_stats(ms, 1).median;
  }

 private:
  cudaStream_t stream_;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

}  // namespace tt
