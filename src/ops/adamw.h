// AdamW with decoupled weight decay, exactly as torch.optim.AdamW computes it:
//   p <- p * (1 - lr * wd)
//   m <- b1 m + (1 - b1) g ;  v <- b2 v + (1 - b2) g^2
//   p <- p - (lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
// applied elementwise to parameters, gradients and the two moment buffers (all fp32 master
// copies; a backend that computes in bf16 also refreshes its bf16 copy of the parameters).
#pragma once
#include "core/stream.h"
#include "core/tensor.h"
#include <cmath>
#include <cstdint>

namespace tt {

struct AdamWStep {
  double lr = 3e-4, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.01;
  int64_t t = 1;  // 1-based step count, for the bias corrections
  double bias_correction1() const { return 1.0 - std::pow(beta1, double(t)); }
  double bias_correction2() const { return 1.0 - std::pow(beta2, double(t)); }
};

namespace ref {

template <class T>
void adamw(T* p, const T* g, T* m, T* v, int64_t n, const AdamWStep& s) {
  const T decay = T(1.0 - s.lr * s.weight_decay);
  // 1 - beta is formed in double: 1 - 0.999f in fp32 would be off by 5e-5 relative.
  const T b1 = T(s.beta1), b2 = T(s.beta2), c1 = T(1.0 - s.beta1), c2 = T(1.0 - s.beta2);
  const T eps = T(s.eps);
  const T step_size = T(s.lr / s.bias_correction1());
  const T bc2_sqrt = T(std::sqrt(s.bias_correction2()));
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) {
    p[i] *= decay;
    m[i] = b1 * m[i] + c1 * g[i];
    v[i] = b2 * v[i] + c2 * g[i] * g[i];
    p[i] -= step_size * m[i] / (std::sqrt(v[i]) / bc2_sqrt + eps);
  }
}

}  // namespace ref
}  // namespace tt

// CUDA launcher (src/ops/adamw.cu): one elementwise kernel over the tensors given, reading the
// step's scalars from device memory (so that a CUDA graph replays with new ones). Under
// programmatic launch the kernel reads p, m and v while the kernel before it still runs: that
// kernel must not write them (in a training step it is the backward's last or another
// tensor's AdamW).
namespace tt::cuda {
struct AdamWScalars {
  float decay, b1, b2, c1, c2, eps, step_size, bc2_sqrt;
};
AdamWScalars adamw_scalars(const AdamWStep& step);
void adamw(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v, const Tensor& p_act,
           const AdamWScalars* device_scalars, Stream s);
}  // namespace tt::cuda
