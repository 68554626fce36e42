// `tiny_llama kernels`: each operation that version 3 replaces with a kernel of our own
// (attention, RMSNorm, SwiGLU, RoPE) against version 2's, each that version 4 fuses (the
// residual add with the RMSNorm, the cross-entropy's loss with its gradient) against version
// 3's, version 5's FP8 (the quantizing pass, SwiGLU made in FP8, the gate/up products) and version
// 6's attention backward in one kernel, each an op case (op_case.h, src/bench/ops/), timed per
// implementation through the Backend interface at the default shape and at long sequences,
// against ceilings measured in the same run: the
// tensor-core rate of a large cuBLAS GEMM and the bandwidth of a large device-to-device copy. A
// memory-bound row whose bytes fit in the L2 cache is marked as such: its rate is not an HBM
// rate, and it is not held to a target.
//
// Accounting (also printed in the table's header):
//   attention (causal): forward FLOPs = 4 B H T^2 D / 2 (q k^T and P v, half under the mask);
//                       backward = 2.5 x forward (five products of the same size).
//   memory-bound ops:   the bytes they must move at least, each tensor read or written once:
//     RMSNorm  fwd: x, w read; out, rstd written.  bwd: dout, x, w, rstd read; dx written,
//                   dw (fp32) read and written.
//     SwiGLU   fwd: gate|up [n, 2F] read, h [n, F] written.  bwd: dh, gate|up read, dgate|up written.
//     RoPE     fwd and bwd: the Q and K heads read and written in place, the table read.
//     residual_norm fwd: a, b, w read; their sum, out, rstd written.  bwd: dout, x, w, rstd and
//                   the residual gradient read; the residual gradient written, dw read and written.
//     cross_entropy fwd+bwd: the logits read, their gradient written, targets read, losses written
//                   (rows = B*T, at most one fused-classifier chunk of 16384; the vocabulary padded
//                   to a multiple of 128 as the model lays it out).
#pragma once
#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "plan/plan.h"

namespace tt {

struct KernelBenchOptions {
  std::vector<int> versions = versions_from(2);  // implementations, by level (v1 too when asked)
  std::string precision = "bf16";      // bf16 (activations bf16, statistics fp32) or fp32
  int batch = 8, seq_len = 128;        // the default shape (the default training step)
  std::vector<int> seq_lens = {1024, 2048, 4096, 8192};  // the long sequences
  int long_batch = 1;                                    // their batch
  int hidden = 512, heads = 8, kv_heads = 4, head_dim = 64, intermediate = 2048;
  int vocab = 50257;  // the cross-entropy's
  int warmup = 3, repeats = 20;
  uint64_t seed = 42;
  std::vector<std::string> ops;  // the operations, by their rows' names (empty: every one)
  std::string csv_path, json_path;
  // Instead of timing: each row's calls against the CPU reference in double, at the default shape
  // (op_case.h: the same cases); the error, the bound and whether a second run repeats the bits.
  bool check = false;
  // Each case's calls launched programmatically where the version's step launches so (Hopper's
  // programmatic launch, v3 on): a call's first instructions (our tiles' early weights, say)
  // overlap the end of the same op's call before it (in a step, another kernel's). Off, every call
  // waits for the one before to finish, as a kernel alone. Each row says how it was launched.
  bool programmatic = false;

  void validate() const;  // throws UsageError naming the flag
  bool runs(const std::string& op) const;  // whether `op`'s rows are asked for
};

struct KernelRow {
  std::string op, direction, shape;  // e.g. "attention", "fwd", "B1 T1024"
  int version = 0;
  std::string status = "ok";  // ok, "not implemented", or why the row did not run
  double ms = 0, ms_min = 0, ms_max = 0;  // per call: median, min, max over the repetitions
  double flops = 0, bytes = 0;            // per call (flops for attention, bytes for the others)
  double tflops = 0, gbps = 0;
  double ceiling_fraction = 0;  // of the GEMM rate (attention) or the copy bandwidth (the others)
  int base_version = 0;         // the implementation it is compared with (OpCase::base_version)
  double vs_base = 0;           // the base's ms / this ms (0 when the base did not run)
  bool in_l2 = false;           // a memory-bound row whose bytes fit in the L2 cache
  int sm_mhz = 0;               // the SM clock while it ran (median of the repetitions; 0: unknown)
  double clock_limited = 0;     // the share of its repetitions with the clock held down for power or heat
  bool programmatic = false;    // its calls launched programmatically (--programmatic, v3 on)
  double error = -1, bound = 0;  // --check: the largest output's relative error against the reference, its bound
  bool repeatable = true;        // --check: a second run gave the same bits
};

struct KernelCeilings {
  double gemm_bf16_tflops = 0, gemm_fp32_tflops = 0;  // 8192^3 cuBLAS products
  double copy_gbps = 0;                              // 1 GiB device-to-device copy, (read + write) / time
  size_t l2_bytes = 0;                               // the L2 cache
};

// Runs the benchmark (or the check); the table goes to `log`, the files to --csv / --json, and
// the rows are returned. Needs a GPU.
std::vector<KernelRow> run_kernel_bench(const KernelBenchOptions& o, std::ostream& log);
// The rows that did not run or, checked, did not match.
int kernel_check_failures(const std::vector<KernelRow>& rows);

}  // namespace tt
