// SwiGLU activation of the feed-forward block: h = silu(gate) * up, silu(g) = g * sigmoid(g).
// gate and up are the two halves of each row of gateup[n, 2F] (gate in columns [0, F), up in
// [F, 2F)), as the fused gate/up projection writes them.
//   forward:  h[n, F] (overwritten)
//   backward: dgateup[n, 2F] (overwritten):
//             dgate = dh * up * sigmoid(g) * (1 + g * (1 - sigmoid(g))),  dup = dh * silu(g)
#pragma once
#include "core/stream.h"
#include "core/tensor.h"
#include "ops/quantize.h"
#include <cmath>
#include <cstdint>

namespace tt::ref {

template <class T>
T sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

template <class T>
void swiglu_forward(T* h, const T* gateup, int64_t n, int f) {
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i)
    for (int j = 0; j < f; ++j) {
      const T g = gateup[i * 2 * f + j], u = gateup[i * 2 * f + f + j];
      h[i * f + j] = g * sigmoid(g) * u;
    }
}

template <class T>
void swiglu_backward(T* dgateup, const T* dh, const T* gateup, int64_t n, int f) {
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i)
    for (int j = 0; j < f; ++j) {
      const T g = gateup[i * 2 * f + j], u = gateup[i * 2 * f + f + j], d = dh[i * f + j];
      const T sg = sigmoid(g);
      dgateup[i * 2 * f + j] = d * u * sg * (T(1) + g * (T(1) - sg));
      dgateup[i * 2 * f + f + j] = d * g * sg;
    }
}

}  // namespace tt::ref

// CUDA launchers (src/ops/swiglu.cu), in one of three ways chosen by the backend from the plan:
//   Unfused (version 1, like eager PyTorch): SiLU into scratch (n*F elements), then the
//     product; the backward recomputes SiLU and runs the product rule and SiLU's derivative
//     as separate kernels.
//   Fused (gate-up-fusion): one kernel each way, one element per thread; no scratch.
//   Vectorized (custom-swiglu): the fused kernels with 16-byte accesses when F is a multiple
//     of 8 (bf16) or 4 (fp32) and the pointers are 16-byte aligned, else the fused ones.
namespace tt::cuda {
enum class SwiGluKernels { Unfused, Fused, Vectorized };
void swiglu_forward(const Tensor& h, const Tensor& gateup, int64_t n, int f, SwiGluKernels kernels,
                    const Tensor& scratch, Stream s);
void swiglu_backward(const Tensor& dgateup, const Tensor& dh, const Tensor& gateup, int64_t n, int f,
                     SwiGluKernels kernels, const Tensor& scratch, Stream s);
// Version 5 (fp8-fused-swiglu): h [n, F] and dgateup [n, 2F] straight into their FP8 forms, as
// quantize_fp8 would make them from what the vectorized kernels write (the same bytes), without
// writing the act-typed tensor or reading it back. F a multiple of 8, the pointers on 16 bytes.
void swiglu_forward_fp8(const Fp8Matrix& h8, const Tensor& gateup, int64_t n, int f, Fp8Scaling scaling,
                        const Tensor& partials, Stream s);
void swiglu_backward_fp8(const Fp8Matrix& dgateup8, const Tensor& dh, const Tensor& gateup, int64_t n, int f,
                         Fp8Scaling scaling, const Tensor& partials, Stream s);
}  // namespace tt::cuda
