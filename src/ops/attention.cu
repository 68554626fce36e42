// Materialized causal attention on the GPU, the way eager PyTorch computes it (see
// attention.h). Launches per forward: 3 head splits, a batched product for the scores, the
// scale (version 1 only), the masked softmax, a batched product with V, a head merge.
#include "ops/attention.h"
#include "ops/cuda_common.cuh"

namespace tt::cuda {
namespace {

constexpr int kThreads = 256;

// Copies `heads` heads between the token-major matrix [B*T, ld] (starting at column col) and
// a head-major buffer [B, heads, T, D]: split when kMerge is false, merge when true.
template <class T, bool kMerge>
__global__ void heads_kernel(Successor next, T* head_major, T* token_major, int64_t ld, int64_t col, int B, int Tn,
                             int heads, int D) {
  await_previous_kernel(next);
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= int64_t(B) * heads * Tn * D) return;
  const int d = int(i % D);
  const int64_t t = (i / D) % Tn;
  const int h = int((i / (int64_t(D) * Tn)) % heads);
  const int64_t b = i / (int64_t(D) * Tn * heads);
  T* tm = token_major + (b * Tn + t) * ld + col + int64_t(h) * D + d;
  if (kMerge)
    *tm = head_major[i];
  else
    head_major[i] = *tm;
}

template <class T>
__global__ void scale_kernel(Successor next, T* x, int64_t n, float s) {
  await_previous_kernel(next);
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] = from_float<T>(to_float(x[i]) * s);
}

// Row r of the scores [B*H*T, T] sits at position t = r % T: softmax over columns 0..t
// (times `scale` first when kScale), zeros above the diagonal. In place.
template <class T, bool kScale>
__global__ void causal_softmax_kernel(Successor next, T* scores, int Tn, float scale) {
  await_previous_kernel(next);
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  const int t = int(row % Tn);
  T* r = scores + row * Tn;
  const float s = kScale ? scale : 1.0f;
  float mx = -INFINITY;
  for (int j = threadIdx.x; j <= t; j += blockDim.x) mx = fmaxf(mx, to_float(r[j]) * s);
  mx = block_max(mx, scratch);
  float sum = 0.0f;
  for (int j = threadIdx.x; j <= t; j += blockDim.x) sum += expf(to_float(r[j]) * s - mx);
  sum = block_sum(sum, scratch);
  const float inv = 1.0f / sum;
  for (int j = threadIdx.x; j < Tn; j += blockDim.x)
    r[j] = from_float<T>(j <= t ? expf(to_float(r[j]) * s - mx) * inv : 0.0f);
}

// dS = P * (dP - sum_j P_j dP_j) (times `scale` when kScale), in place over dP.
template <class T, bool kScale>
__global__ void causal_softmax_backward_kernel(Successor next, T* dp, const T* probs, int Tn, float scale) {
  await_previous_kernel(next);
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  const int t = int(row % Tn);
  T* d = dp + row * Tn;
  const T* p = probs + row * Tn;
  float dot = 0.0f;
  for (int j = threadIdx.x; j <= t; j += blockDim.x) dot += to_float(p[j]) * to_float(d[j]);
  dot = block_sum(dot, scratch);
  const float s = kScale ? scale : 1.0f;
  for (int j = threadIdx.x; j < Tn; j += blockDim.x)
    d[j] = from_float<T>(j <= t ? s * to_float(p[j]) * (to_float(d[j]) - dot) : 0.0f);
}

template <class T, bool kMerge>
void heads(const Tensor& head_major, const Tensor& token_major, int64_t ld, int64_t col, const AttnShape& s,
           int heads, Stream st) {
  const int64_t n = int64_t(s.B) * heads * s.T * s.D;
  launch("heads_kernel", heads_kernel<T, kMerge>, blocks_for(n, kThreads), kThreads, 0, st,
         static_cast<T*>(head_major.ptr), static_cast<T*>(token_major.ptr), ld, col, s.B, s.T, heads, s.D);
}

// Q, K and V of the qkv buffer into their head-major scratch buffers.
template <class T>
void split_qkv(const AttentionScratch& w, const Tensor& qkv, const AttnShape& s, Stream st) {
  heads<T, false>(w.qh, qkv, s.ld(), 0, s, s.H, st);
  heads<T, false>(w.kh, qkv, s.ld(), s.k_col(), s, s.KVH, st);
  heads<T, false>(w.vh, qkv, s.ld(), s.v_col(), s, s.KVH, st);
}

template <class T>
void scale(const Tensor& x, int64_t n, float s, Stream st) {
  launch("scale_kernel", scale_kernel<T>, blocks_for(n, kThreads), kThreads, 0, st, static_cast<T*>(x.ptr), n, s);
}

// One batch entry per (batch, kv head): m rows of the group's query heads.
Gemm group_gemm(bool ta, bool tb, int m, int n, int k, const Tensor& a, int64_t lda, const Tensor& b, int64_t ldb,
                const Tensor& c, int64_t ldc) {
  Gemm g;
  g.trans_a = ta, g.trans_b = tb;
  g.m = m, g.n = n, g.k = k;
  g.a = a, g.lda = lda, g.b = b, g.ldb = ldb, g.c = c, g.ldc = ldc;
  return g;
}

}  // namespace

std::vector<int64_t> attention_scratch_numel(const AttnShape& s) {
  const int64_t q = int64_t(s.B) * s.H * s.T * s.D, kv = int64_t(s.B) * s.KVH * s.T * s.D;
  return {q, kv, kv, q, q, kv, kv, int64_t(s.B) * s.H * s.T * s.T};
}

void attention_forward(const Blas& blas, const Tensor& att, const Tensor& probs, const Tensor& qkv,
                       const AttnShape& s, bool fused_softmax, const AttentionScratch& w) {
  const int rep = s.group(), Tn = s.T, D = s.D, groups = s.B * s.KVH;
  const int64_t rows = int64_t(s.B) * s.H * Tn;
  const float sc = float(s.scale());
  TT_DISPATCH_ACT(qkv.dtype, {
    split_qkv<T>(w, qkv, s, blas.stream);
    // scores of the group's rep*T query rows against its T keys
    gemm(blas, group_gemm(false, true, rep * Tn, Tn, D, w.qh, D, w.kh, D, probs, Tn),
         {groups, int64_t(rep) * Tn * D, int64_t(Tn) * D, int64_t(rep) * Tn * Tn});
    if (fused_softmax) {
      launch("causal_softmax_kernel", causal_softmax_kernel<T, true>, unsigned(rows), kThreads, 0, blas.stream,
             static_cast<T*>(probs.ptr), Tn, sc);
    } else {
      scale<T>(probs, rows * Tn, sc, blas.stream);
      launch("causal_softmax_kernel", causal_softmax_kernel<T, false>, unsigned(rows), kThreads, 0, blas.stream,
             static_cast<T*>(probs.ptr), Tn, sc);
    }
    gemm(blas, group_gemm(false, false, rep * Tn, D, Tn, probs, Tn, w.vh, D, w.oh, D),
         {groups, int64_t(rep) * Tn * Tn, int64_t(Tn) * D, int64_t(rep) * Tn * D});
    heads<T, true>(w.oh, att, int64_t(s.H) * D, 0, s, s.H, blas.stream);
  });
}

void attention_backward(const Blas& blas, const Tensor& dqkv, const Tensor& datt, const Tensor& qkv,
                        const Tensor& probs, const AttnShape& s, bool fused_softmax, const AttentionScratch& w) {
  const int rep = s.group(), Tn = s.T, D = s.D, groups = s.B * s.KVH;
  const int64_t rows = int64_t(s.B) * s.H * Tn;
  const float sc = float(s.scale());
  const int64_t qg = int64_t(rep) * Tn * D, kg = int64_t(Tn) * D, pg = int64_t(rep) * Tn * Tn;
  TT_DISPATCH_ACT(qkv.dtype, {
    const Tensor& doh = w.oh;
    heads<T, false>(doh, datt, int64_t(s.H) * D, 0, s, s.H, blas.stream);
    split_qkv<T>(w, qkv, s, blas.stream);
    gemm(blas, group_gemm(false, true, rep * Tn, Tn, D, doh, D, w.vh, D, w.ds, Tn), {groups, qg, kg, pg});  // dP
    if (fused_softmax) {
      launch("causal_softmax_backward_kernel", causal_softmax_backward_kernel<T, true>, unsigned(rows), kThreads, 0,
             blas.stream, static_cast<T*>(w.ds.ptr), static_cast<const T*>(probs.ptr), Tn, sc);
    } else {
      launch("causal_softmax_backward_kernel", causal_softmax_backward_kernel<T, false>, unsigned(rows), kThreads, 0,
             blas.stream, static_cast<T*>(w.ds.ptr), static_cast<const T*>(probs.ptr), Tn, sc);
      scale<T>(w.ds, rows * Tn, sc, blas.stream);
    }
    gemm(blas, group_gemm(false, false, rep * Tn, D, Tn, w.ds, Tn, w.kh, D, w.dqh, D), {groups, pg, kg, qg});
    // dK and dV sum over the group's query heads inside the product (k = rep * T).
    gemm(blas, group_gemm(true, false, Tn, D, rep * Tn, w.ds, Tn, w.qh, D, w.dkh, D), {groups, pg, qg, kg});
    gemm(blas, group_gemm(true, false, Tn, D, rep * Tn, probs, Tn, doh, D, w.dvh, D), {groups, pg, qg, kg});
    heads<T, true>(w.dqh, dqkv, s.ld(), 0, s, s.H, blas.stream);
    heads<T, true>(w.dkh, dqkv, s.ld(), s.k_col(), s, s.KVH, blas.stream);
    heads<T, true>(w.dvh, dqkv, s.ld(), s.v_col(), s, s.KVH, blas.stream);
  });
}

}  // namespace tt::cuda
