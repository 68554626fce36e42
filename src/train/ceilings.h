// The ceilings a profile's family table judges each family's rate against: the datasheet's
// dense peaks (peak_flops, train/flops.h) and rates measured on the run's GPU in the same run,
// before the model is built: a cuBLAS product of 8192 x 8192 x 8192 in bf16 and in FP8 (E4M3,
// as v5's forward takes it), and device-to-device copies, counted as bytes read + written over
// the median time: of 256 MiB (HBM), and L2-resident ones (a quarter and an eighth of the L2, the
// rate from their difference; 0, not measured, where the two times are too close to tell it).
#pragma once
#include <string>

#include "backend/backend.h"

namespace tt {

struct Ceilings {
  double peak = 0, fp8_peak = 0;         // datasheet FLOP/s of the run's precision and of FP8 (0: unknown GPU)
  double gemm = 0, fp8_gemm = 0;         // measured FLOP/s (0: not measured)
  double hbm_copy = 0, l2_copy = 0;      // measured bytes/s, read + written (0: not measured)
  std::string precision;                 // "bf16", "fp32", "tf32": the run's products'
};

// Measures the four rates on GPU `gpu` with a backend of its own (its buffers freed after
// each); nothing on the CPU. `precision` is the run's ("fp32" products measure an fp32 product,
// "tf32" one with TF32 inputs).
void measure_ceilings(Ceilings& c, int gpu);

// The measurements behind it (and behind `tiny_llama kernels`' ceilings), on a CUDA backend:
// C = A B^T with n x n operands of `in` into `out`, in FLOP/s (E4M3 operands at scale 1, with
// fast accumulation); a device-to-device copy of `bytes`, in milliseconds a call. Each is the
// median of five timings after three untimed calls.
double measured_product_rate(Backend& be, DType in, DType out, int n);
double measured_copy_ms(Backend& be, size_t bytes);

}  // namespace tt
