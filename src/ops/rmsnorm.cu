// RMSNorm on the GPU (see rmsnorm.h for the contract). Version 1 splits it the way eager
// PyTorch does, one kernel per step: a row reduction for rstd, then an elementwise scaling;
// backward: a row reduction for the coefficient, an elementwise kernel for dx, and a
// two-stage column reduction for dw (partial sums over fixed row chunks, then the chunks in
// order), which keeps the weight gradient deterministic without atomics.
#include "ops/cuda_common.cuh"
#include "ops/rmsnorm.h"

namespace tt::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kRowsPerBlock = kThreads / 32;  // one warp per row in the row reductions
constexpr int kDwChunks = 64;                 // row chunks of the first dw stage

// rstd[i] = 1 / sqrt(mean(x[i]^2) + eps), one warp per row.
template <class T>
__global__ void rms_kernel(float* rstd, const T* x, int64_t n, int c, float eps) {
  const int64_t row = int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  if (row >= n) return;
  const T* xr = x + row * c;
  float sum = 0.0f;
  for (int j = threadIdx.x % 32; j < c; j += 32) {
    const float v = to_float(xr[j]);
    sum += v * v;
  }
  sum = warp_sum(sum);
  if (threadIdx.x % 32 == 0) rstd[row] = rsqrtf(sum / c + eps);
}

// out = x * rstd[row] * w[col]
template <class T>
__global__ void rms_scale_kernel(T* out, const T* x, const float* rstd, const T* w, int64_t n, int c) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n * c) return;
  const int64_t row = i / c;
  out[i] = from_float<T>(to_float(x[i]) * rstd[row] * to_float(w[i - row * c]));
}

// coef[i] = rstd^3 * mean_j(w g x), one warp per row.
template <class T>
__global__ void rms_backward_coef_kernel(float* coef, const T* dout, const T* x, const T* w, const float* rstd,
                                         int64_t n, int c) {
  const int64_t row = int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  if (row >= n) return;
  float dot = 0.0f;
  for (int j = threadIdx.x % 32; j < c; j += 32)
    dot += to_float(w[j]) * to_float(dout[row * c + j]) * to_float(x[row * c + j]);
  dot = warp_sum(dot);
  const float r = rstd[row];
  if (threadIdx.x % 32 == 0) coef[row] = r * r * r * dot / c;
}

// dx = rstd * w * g - x * coef
template <class T>
__global__ void rms_backward_dx_kernel(T* dx, const T* dout, const T* x, const T* w, const float* rstd,
                                       const float* coef, int64_t n, int c) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n * c) return;
  const int64_t row = i / c;
  dx[i] = from_float<T>(rstd[row] * to_float(w[i - row * c]) * to_float(dout[i]) - to_float(x[i]) * coef[row]);
}

// partial[chunk, j] = sum over the chunk's rows of g x rstd, rows in order.
template <class T>
__global__ void rms_dw_partial_kernel(float* partial, const T* dout, const T* x, const float* rstd, int64_t n,
                                      int c) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= c) return;
  const int64_t rows = (n + kDwChunks - 1) / kDwChunks;
  const int64_t begin = blockIdx.y * rows, end = min(n, begin + rows);
  float acc = 0.0f;
  for (int64_t i = begin; i < end; ++i) acc += to_float(dout[i * c + j]) * to_float(x[i * c + j]) * rstd[i];
  partial[int64_t(blockIdx.y) * c + j] = acc;
}

// dw[j] += sum of the chunks' partial sums, in chunk order.
__global__ void rms_dw_sum_kernel(float* dw, const float* partial, int c) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= c) return;
  float acc = 0.0f;
  for (int k = 0; k < kDwChunks; ++k) acc += partial[int64_t(k) * c + j];
  dw[j] += acc;
}

}  // namespace

int64_t rmsnorm_scratch_numel(int64_t n, int c) { return n + int64_t(kDwChunks) * c; }

void rmsnorm_forward(const Tensor& out, const Tensor& rstd, const Tensor& x, const Tensor& w, int64_t n, int c,
                     float eps, Stream s) {
  TT_DISPATCH_ACT(x.dtype, {
    rms_kernel<T><<<blocks_for(n, kRowsPerBlock), kThreads, 0, s>>>(rstd.data<float>(),
                                                                    static_cast<const T*>(x.ptr), n, c, eps);
    CUDA_CHECK_LAUNCH("rms_kernel");
    rms_scale_kernel<T><<<blocks_for(n * c, kThreads), kThreads, 0, s>>>(
        static_cast<T*>(out.ptr), static_cast<const T*>(x.ptr), rstd.data<float>(), static_cast<const T*>(w.ptr),
        n, c);
    CUDA_CHECK_LAUNCH("rms_scale_kernel");
  });
}

void rmsnorm_backward(const Tensor& dx, const Tensor& dw, const Tensor& dout, const Tensor& x, const Tensor& w,
                      const Tensor& rstd, int64_t n, int c, const Tensor& scratch, Stream s) {
  TT_CHECK(scratch.numel >= rmsnorm_scratch_numel(n, c), "rmsnorm scratch too small");
  float* coef = scratch.data<float>();
  float* partial = coef + n;
  TT_DISPATCH_ACT(x.dtype, {
    const T* g = static_cast<const T*>(dout.ptr);
    const T* xp = static_cast<const T*>(x.ptr);
    const T* wp = static_cast<const T*>(w.ptr);
    rms_backward_coef_kernel<T><<<blocks_for(n, kRowsPerBlock), kThreads, 0, s>>>(coef, g, xp, wp,
                                                                                  rstd.data<float>(), n, c);
    CUDA_CHECK_LAUNCH("rms_backward_coef_kernel");
    rms_backward_dx_kernel<T><<<blocks_for(n * c, kThreads), kThreads, 0, s>>>(
        static_cast<T*>(dx.ptr), g, xp, wp, rstd.data<float>(), coef, n, c);
    CUDA_CHECK_LAUNCH("rms_backward_dx_kernel");
    rms_dw_partial_kernel<T><<<dim3(blocks_for(c, kThreads), kDwChunks), kThreads, 0, s>>>(partial, g, xp,
                                                                                           rstd.data<float>(), n, c);
    CUDA_CHECK_LAUNCH("rms_dw_partial_kernel");
  });
  rms_dw_sum_kernel<<<blocks_for(c, kThreads), kThreads, 0, s>>>(dw.data<float>(), partial, c);
  CUDA_CHECK_LAUNCH("rms_dw_sum_kernel");
}

}  // namespace tt::cuda
