// AdamW with decoupled weight decay, exactly as torch.optim.AdamW computes it:
//   p <- p * (1 - lr * wd)            (skipped for a tensor exempt from decay)
//   m <- b1 m + (1 - b1) g ;  v <- b2 v + (1 - b2) g^2
//   p <- p - (lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
// applied elementwise to parameters, gradients and the two moment buffers (all fp32 master
// copies; a backend that computes in bf16 also refreshes its bf16 copy of the parameters).
//
// Gradient clipping by the global norm, as torch.nn.utils.clip_grad_norm_ computes it: with
// sumsq the sum of the squares of every gradient (sum_squares, over every tensor and rank),
//   g <- g * min(1, max_norm / (sqrt(sumsq) + 1e-6))
// which AdamW applies as it reads g (no pass of its own): the norm is the one fused pass.
#pragma once
#include "core/stream.h"
#include "core/tensor.h"
#include <algorithm>
#include <cmath>
#include <cstdint>

namespace tt {

struct AdamWStep {
  double lr = 3e-4, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.01;
  double max_grad_norm = 0;  // > 0: clip to this global norm, given the gradients' sum of squares
  int64_t t = 1;  // 1-based step count, for the bias corrections
  double bias_correction1() const { return 1.0 - std::pow(beta1, double(t)); }
  double bias_correction2() const { return 1.0 - std::pow(beta2, double(t)); }
};

namespace ref {

// The factor clipping scales the gradients by, from their sum of squares.
template <class T>
T clip_factor(T sumsq, double max_norm) {
  return std::min(T(1), T(max_norm) / (std::sqrt(sumsq) + T(1e-6)));
}

// sumsq = (accumulate ? sumsq : 0) + the sum of g[i]^2, in index order.
template <class T>
void sum_squares(T* sumsq, const T* g, int64_t n, bool accumulate) {
  T s = 0;
  for (int64_t i = 0; i < n; ++i) s += g[i] * g[i];
  *sumsq = accumulate ? *sumsq + s : s;
}

// decay: whether this tensor decays; grad_sumsq: the clipping's sum of squares (null: no clipping).
template <class T>
void adamw(T* p, const T* g, T* m, T* v, int64_t n, const AdamWStep& s, bool decay_this, const T* grad_sumsq) {
  const T decay = decay_this ? T(1.0 - s.lr * s.weight_decay) : T(1);
  const T scale = grad_sumsq ? clip_factor(*grad_sumsq, s.max_grad_norm) : T(1);
  // 1 - beta is formed in double: 1 - 0.999f in fp32 would be off by 5e-5 relative.
  const T b1 = T(s.beta1), b2 = T(s.beta2), c1 = T(1.0 - s.beta1), c2 = T(1.0 - s.beta2);
  const T eps = T(s.eps);
  const T step_size = T(s.lr / s.bias_correction1());
  const T bc2_sqrt = T(std::sqrt(s.bias_correction2()));
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) {
    const T gi = grad_sumsq ? g[i] * scale : g[i];
    p[i] *= decay;
    m[i] = b1 * m[i] + c1 * gi;
    v[i] = b2 * v[i] + c2 * gi * gi;
    p[i] -= step_size * m[i] / (std::sqrt(v[i]) / bc2_sqrt + eps);
  }
}

}  // namespace ref
}  // namespace tt

// CUDA launchers (src/ops/adamw.cu): one elementwise kernel over the tensors given, reading the
// step's scalars (and the clipping's sum of squares) from device memory, so that a CUDA graph
// replays with new ones; the sum of squares in two kernels, per-block partial sums over a fixed
// grid, then their sum in a fixed order (deterministic, no atomics). Under
// programmatic launch the kernel reads p, m and v while the kernel before it still runs: that
// kernel must not write them (in a training step it is the backward's last or another
// tensor's AdamW).
namespace tt::cuda {
struct AdamWScalars {
  float decay, b1, b2, c1, c2, eps, step_size, bc2_sqrt, max_norm;
};
AdamWScalars adamw_scalars(const AdamWStep& step);
void adamw(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v, const Tensor& p_act, bool decay,
           const Tensor& grad_sumsq, const AdamWScalars* device_scalars, Stream s);
constexpr int kSumSquaresBlocks = 512;  // the partial sums' scratch holds this many floats
void sum_squares(const Tensor& sumsq, const Tensor& g, bool accumulate, const Tensor& partial, Stream s);
}  // namespace tt::cuda
