// Softmax cross-entropy of the logits against the next-token targets.
//   forward:  losses[i] = logsumexp(logits[i, :]) - logits[i, targets[i]]
//             (the model's loss is the mean of losses over all n = B*T tokens)
//   backward: dlogits[i, j] = scale * (softmax(logits[i, :])_j - [j == targets[i]]),
//             scale = 1/n for the mean; dlogits may be the logits buffer itself.
// Sums run in double on the CPU and in fp32 on the GPU, whatever the logits' type.
#pragma once
#include "core/stream.h"
#include "core/tensor.h"
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
void cross_entropy_forward(S* losses, const T* logits, const int32_t* targets, int64_t n, int v) {
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) {
    const T* row = logits + i * v;
    losses[i] = S(logsumexp_row(row, v) - double(row[targets[i]]));
  }
}

template <class T>
void cross_entropy_backward(T* dlogits, const T* logits, const int32_t* targets, int64_t n, int v,
                            double scale) {
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) {
    const T* row = logits + i * v;
    const double lse = logsumexp_row(row, v);
    for (int j = 0; j < v; ++j) {
      const double p = std::exp(double(row[j]) - lse);
      dlogits[i * v + j] = T(scale * (p - (j == targets[i] ? 1.0 : 0.0)));
    }
  }
}

}  // namespace tt::ref

// CUDA launchers (src/ops/cross_entropy.cu): one block per row, sums in fp32.
namespace tt::cuda {
void cross_entropy_forward(const Tensor& losses, const Tensor& logits, const Tensor& targets, int64_t n, int v,
                           Stream s);
void cross_entropy_backward(const Tensor& dlogits, const Tensor& logits, const Tensor& targets, int64_t n, int v,
                            float scale, Stream s);
}  // namespace tt::cuda
