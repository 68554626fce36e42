// Softmax cross-entropy of the logits against the next-token targets.
//   forward:  losses[i] = logsumexp(logits[i, :v]) - logits[i, targets[i]]
//             (the model's loss is the mean of losses over all n = B*T tokens)
//   backward: dlogits[i, j] = scale * (softmax(logits[i, :v])_j - [j == targets[i]]) for j < v,
//             0 for v <= j < ld; scale = 1/n for the mean. dlogits may be the logits buffer.
//   fused:    both at once, the gradient written over the logits (the fused classifier); or,
//             for version 5's head, the gradient's FP8 forms instead (ops/quantize.h), the logits
//             kept, through the slot's scale as delayed scaling uses it.
// Rows are ld elements apart: the columns from v to ld are the output head's vocabulary
// padding (src/model/params.h), which takes no part in the softmax and gets a zero gradient.
// Sums run in double on the CPU and in fp32 on the GPU, whatever the logits' type.
#pragma once
#include "core/stream.h"
#include "core/tensor.h"
#include "ops/quantize.h"
#include <algorithm>
#include <cmath>
#include <cstdint>

namespace tt::ref {

template <class T>
double logsumexp_row(const T* row, int v) {
  double mx = row[0];
  for (int j = 1; j < v; ++j) mx = std::max(mx, double(row[j]));
  double sum = 0;
  for (int j = 0; j < v; ++j) sum += std::exp(double(row[j]) - mx);
  return mx + std::log(sum);
}

template <class T, class S>
void cross_entropy_forward(S* losses, const T* logits, const int32_t* targets, int64_t n, int v, int64_t ld) {
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) {
    const T* row = logits + i * ld;
    losses[i] = S(logsumexp_row(row, v) - double(row[targets[i]]));
  }
}

template <class T>
void cross_entropy_backward(T* dlogits, const T* logits, const int32_t* targets, int64_t n, int v, int64_t ld,
                            double scale) {
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) {
    const T* row = logits + i * ld;
    const double lse = logsumexp_row(row, v);
    for (int j = 0; j < v; ++j) {
      const double p = std::exp(double(row[j]) - lse);
      dlogits[i * ld + j] = T(scale * (p - (j == targets[i] ? 1.0 : 0.0)));
    }
    for (int64_t j = v; j < ld; ++j) dlogits[i * ld + j] = T(0);
  }
}

template <class T, class S>
void cross_entropy_fused(S* losses, T* logits, const int32_t* targets, int64_t n, int v, int64_t ld, double scale) {
  cross_entropy_forward(losses, logits, targets, n, v, ld);
  cross_entropy_backward(logits, logits, targets, n, v, ld, scale);
}

}  // namespace tt::ref

// CUDA launchers (src/ops/cross_entropy.cu): one block per row, sums in fp32.
namespace tt::cuda {
void cross_entropy_forward(const Tensor& losses, const Tensor& logits, const Tensor& targets, int64_t n, int v,
                           int64_t ld, Stream s);
void cross_entropy_backward(const Tensor& dlogits, const Tensor& logits, const Tensor& targets, int64_t n, int v,
                            int64_t ld, float scale, Stream s);
void cross_entropy_fused(const Tensor& losses, const Tensor& logits, const Tensor& targets, int64_t n, int v,
                         int64_t ld, float scale, Stream s);
// lse: scratch of n fp32 (each row's log-sum-exp, from the loss pass to the FP8 one); partials:
// quantize_fp8's (unused: the scaling is the slot's).
void cross_entropy_fused_fp8(const Fp8Matrix& dlogits8, const Tensor& lse, const Tensor& losses, const Tensor& logits,
                             const Tensor& targets, int64_t n, int v, int64_t ld, float scale, const Tensor& partials,
                             Stream s);
}  // namespace tt::cuda
