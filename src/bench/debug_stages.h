// `tiny_llama debug STAGE`: the performance-debugging journey as runnable stages, in the order of
// the original workshop's five, each showing a symptom, then its fix, with measured numbers and
// the lesson:
//   broken   a broken initialisation (weights N(0, 1): the loss far above ln(vocab)) against
//            the project's N(0, 0.02)
//   slow     a memory-bound kernel reading a transposed (non-contiguous) view
//   better   the same kernel on input made contiguous once
//   same     GPU work timed by the host clock without synchronizing, against CUDA events: the
//            fast number was a lie
//   optimal  hand-written GEMMs against cuBLAS, and the training step of v1 against the latest
//            version
// `all` runs them in order and ends with one table of each stage's number before and after.
// broken runs on the CPU or the GPU; the others need a GPU. docs/exercises/performance-debugging.md
// walks through them.
#pragma once
#include <ostream>
#include <string>

#include "train/trainer.h"

namespace tt {

struct DebugOptions {
  std::string stage;   // broken, slow, better, same, optimal or all
  TrainOptions train;  // init: the model and run; gemm: its FFN shape (batch x seq tokens, hidden -> ffn)
  int repeats = 10;    // timed repetitions of the GPU stages
};

// Throws UsageError for an unknown stage, bad flags, or a GPU stage without a GPU.
void run_debug(const DebugOptions& o, std::ostream& log);

// The init stage's numbers: the loss of the first step (before any update) and of the last,
// with the broken and with the project's initialisation.
struct InitStageResult {
  double ln_vocab = 0;
  double broken_first = 0, broken_last = 0, fixed_first = 0, fixed_last = 0;
};
InitStageResult run_init_stage(const TrainOptions& base, std::ostream& log);

// The GPU stages' measurements (src/bench/debug_gpu.cu).
struct LayoutTimes {
  int rows = 0, cols = 0;
  double contiguous_ms = 0, strided_ms = 0, transpose_ms = 0;  // the fix: transpose, then contiguous
  bool same_result = false;  // strided and contiguous outputs bitwise equal
};
struct SyncTimes {
  int gemms = 0, size = 0;
  double no_sync_ms = 0, host_sync_ms = 0, events_ms = 0;
};
struct GemmTimes {
  int m = 0, n = 0, k = 0;
  double naive_ms = 0, tiled_ms = 0, cublas_fp32_ms = 0, cublas_bf16_ms = 0;
  double naive_error = 0, tiled_error = 0, bf16_error = 0;  // max |C - C_cublas_fp32| / max |C_cublas_fp32|
};
LayoutTimes measure_layout(int rows, int cols, int repeats);
SyncTimes measure_sync(int size, int gemms, int repeats);
GemmTimes measure_gemm(int m, int n, int k, int repeats);

}  // namespace tt
