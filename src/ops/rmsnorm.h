// RMSNorm over the last dimension, with a learned scale and no bias:
//   rstd[i]   = 1 / sqrt(mean_j x[i,j]^2 + eps)
//   out[i, j] = x[i, j] * rstd[i] * w[j]
// forward:  out (overwritten), rstd saved for the backward.
// backward: dx and dw (both overwritten; dw added to with add_dw, for gradient accumulation):
//   dx[i,j] = rstd[i] * (w[j] dout[i,j] - x[i,j] rstd[i]^2 mean_k(w[k] dout[i,k] x[i,k]))
//   dw[j]   = sum_i dout[i,j] x[i,j] rstd[i]
// With the residual add before it (the fused-residual-norm switch, version 4):
//   forward:  sum = a + b (the residual stream, overwritten), then the norm of sum;
//   backward: dx added to the residual stream's gradient (dres += dx) instead of written.
// Both round exactly as the separate add would: the fused and unfused paths agree bit for bit.
#pragma once
#include "core/stream.h"
#include "core/tensor.h"
#include "ops/quantize.h"
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace tt {
// The widths the FP8 norm takes (version 5's fp8-fused-norm, rmsnorm_forward_fp8 below): whole
// 16-byte vectors of bf16, and rows whose shared tile (32 rows of fp8_transpose_pitch(c) bytes, at
// most c + 28) fits an SM.
constexpr int kFp8NormMaxWidth = 6144;
constexpr bool fp8_norm_width_fits(int c) { return c % 8 == 0 && c <= kFp8NormMaxWidth; }
}  // namespace tt

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
void add_rmsnorm_forward(T* sum, T* out, S* rstd, const T* a, const T* b, const T* w, int64_t n, int c, double eps) {
  for (int64_t i = 0; i < n * c; ++i) sum[i] = a[i] + b[i];
  rmsnorm_forward(out, rstd, sum, w, n, c, eps);
}

template <class T, class S>
void rmsnorm_backward(T* dx, T* dw, const T* dout, const T* x, const T* w, const S* rstd,
                      int64_t n, int c, bool add_dx, bool add_dw) {
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) {
    const T* xi = x + i * c;
    const T* gi = dout + i * c;
    const T r = T(rstd[i]);
    T dot = 0;
    for (int j = 0; j < c; ++j) dot += w[j] * gi[j] * xi[j];
    const T coef = r * r * dot / T(c);
    for (int j = 0; j < c; ++j) {
      const T d = r * (w[j] * gi[j] - xi[j] * coef);
      dx[i * c + j] = add_dx ? dx[i * c + j] + d : d;
    }
  }
  std::vector<T> sum(size_t(c), T(0));
  for (int64_t i = 0; i < n; ++i) {  // in row order: deterministic
    const T r = T(rstd[i]);
    for (int j = 0; j < c; ++j) sum[size_t(j)] += dout[i * c + j] * x[i * c + j] * r;
  }
  for (int j = 0; j < c; ++j) dw[j] = add_dw ? dw[j] + sum[size_t(j)] : sum[size_t(j)];
}

}  // namespace tt::ref

// CUDA launchers (src/ops/rmsnorm.cu). Version 1 (fused = false) runs it the way eager
// PyTorch does: a reduction kernel for rstd and an elementwise kernel for the scaling; the
// backward is a row reduction, an elementwise kernel for dx and a deterministic two-stage
// column reduction for dw. With fused (the custom-rmsnorm switch): one kernel forward, and
// backward one kernel that computes dx and, for up to 1536 rows (kDwColumnRows), dw in extra
// column blocks; for more rows it writes per-chunk column sums instead, and the same second
// dw stage adds them. Scratch (rmsnorm_scratch_numel, for the same n, c and `fused`) holds the row
// coefficients and the partial column sums (none for the one-kernel path).
namespace tt::cuda {
int64_t rmsnorm_scratch_numel(int64_t n, int c, bool fused);  // fp32 elements
void rmsnorm_forward(const Tensor& out, const Tensor& rstd, const Tensor& x, const Tensor& w, int64_t n, int c,
                     float eps, bool fused, Stream s);
void rmsnorm_backward(const Tensor& dx, const Tensor& dw, const Tensor& dout, const Tensor& x, const Tensor& w,
                      const Tensor& rstd, int64_t n, int c, bool add_dw, bool fused, const Tensor& scratch, Stream s);
// The residual forms, one kernel each way (version 3's, with the add inside), for rows of up to
// 12288 elements (residual_rmsnorm_fits); the backward's scratch is that of fused = true.
bool residual_rmsnorm_fits(int c);
void add_rmsnorm_forward(const Tensor& sum, const Tensor& out, const Tensor& rstd, const Tensor& a, const Tensor& b,
                         const Tensor& w, int64_t n, int c, float eps, Stream s);
// dres = dres_in + the norm's dx: in place where dres_in is dres, else into a tensor apart.
void rmsnorm_backward_add(const Tensor& dres, const Tensor& dres_in, const Tensor& dw, const Tensor& dout,
                          const Tensor& x, const Tensor& w, const Tensor& rstd, int64_t n, int c, bool add_dw,
                          const Tensor& scratch, Stream s);
// Version 5 (fp8-fused-norm): the norm of x straight into its FP8 forms out8 and rstd, with
// delayed scaling (the scale in out8's slot; the amax recorded there): the bytes quantize_fp8
// makes from what rmsnorm_forward(fused) writes, and no bf16 output. For bf16 rows of a multiple
// of 8 elements, up to 6144, on 16-byte boundaries (rmsnorm_fp8_fits).
bool rmsnorm_fp8_fits(const Tensor& x, const Tensor& w, int c);
void rmsnorm_forward_fp8(const Fp8Matrix& out8, const Tensor& rstd, const Tensor& x, const Tensor& w, int64_t n, int c,
                         float eps, Stream s);
// Version 5 (fp8-fused-norm-backward): the one-kernel backward (add_dx: rmsnorm_backward_add's)
// whose dx, as it stores it, is also written in both FP8 forms dx8 with delayed scaling: the bytes
// quantize_fp8 makes from that dx, its amax recorded in dx8's slot. For bf16 rows of a multiple of
// 8 elements on 16-byte boundaries, where a chunk's rows fit the shared tile
// (rmsnorm_backward_fp8_fits); the scratch is that of fused = true.
bool rmsnorm_backward_fp8_fits(const Tensor& dx, const Tensor& dout, const Tensor& x, const Tensor& w, int64_t n, int c);
void rmsnorm_backward_fp8(const Fp8Matrix& dx8, const Tensor& dx, const Tensor& dw, const Tensor& dout,
                          const Tensor& x, const Tensor& w, const Tensor& rstd, int64_t n, int c, bool add_dx,
                          bool add_dw, const Tensor& scratch, Stream s);
}  // namespace tt::cuda
