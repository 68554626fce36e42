// RMSNorm over the last dimension, with a learned scale and no bias:
//   rstd[i]   = 1 / sqrt(mean_j x[i,j]^2 + eps)
//   out[i, j] = x[i, j] * rstd[i] * w[j]
// forward:  out (overwritten), rstd saved for the backward.
// backward: dx (overwritten), dw (accumulated):
//   dx[i,j] = rstd[i] * (w[j] dout[i,j] - x[i,j] rstd[i]^2 mean_k(w[k] dout[i,k] x[i,k]))
//   dw[j]  += sum_i dout[i,j] x[i,j] rstd[i]
#pragma once
#include <cmath>
#include <cstdint>

namespace tt::ref {

template <class T, class S>
void rmsnorm_forward(T* out, S* rstd, const T* x, const T* w, int64_t n, int c, double eps) {
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) {
    const T* xi = x + i * c;
    T sum = 0;
    for (int j = 0; j < c; ++j) sum += xi[j] * xi[j];
    const T r = T(1) / std::sqrt(sum / T(c) + T(eps));
    for (int j = 0; j < c; ++j) out[i * c + j] = xi[j] * r * w[j];
    rstd[i] = S(r);
  }
}

template <class T, class S>
void rmsnorm_backward(T* dx, T* dw, const T* dout, const T* x, const T* w, const S* rstd,
                      int64_t n, int c) {
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) {
    const T* xi = x + i * c;
    const T* gi = dout + i * c;
    const T r = T(rstd[i]);
    T dot = 0;
    for (int j = 0; j < c; ++j) dot += w[j] * gi[j] * xi[j];
    const T coef = r * r * dot / T(c);
    for (int j = 0; j < c; ++j) dx[i * c + j] = r * (w[j] * gi[j] - xi[j] * coef);
  }
  for (int64_t i = 0; i < n; ++i) {  // in row order: deterministic
    const T r = T(rstd[i]);
    for (int j = 0; j < c; ++j) dw[j] += dout[i * c + j] * x[i * c + j] * r;
  }
}

}  // namespace tt::ref
