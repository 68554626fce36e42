// Our flash attention in fp32 (the custom-attention switch, versions 3 and 4, for fp32 runs): the
// algorithm of src/ops/flash_attention.cu on the CUDA cores, one warp per query row (its lanes
// split the head dimension) and the shared tiles in fp32, so the arithmetic is exact fp32
// (cuDNN has no fp32 flash attention). Forward: the output and each row's log-sum-exp; backward:
// dQ (with delta = rowsum(dO * O), left in the scratch for the next kernel), then dK and dV, each
// block owning what it writes (no atomics, bitwise reproducible).
#include <string>

#include "ops/attention.h"
#include "ops/cuda_common.cuh"

namespace tt::cuda {
namespace {

// ---- fp32 on the CUDA cores: one warp per row ----------------------------------------------
// Lane l holds elements l, l + 32, ... of the row's D-vectors (D / 32 of them), so the shared
// tiles are read without bank conflicts; a dot product is a warp sum.

constexpr int kSimtWarps = 8;   // rows (warps) per block
constexpr int kSimtTile = 32;   // rows of the shared tiles

// Rows [row0, row0 + kSimtTile) of D columns of a [T, ld] matrix into a shared fp32 tile (zeros past T).
template <int D>
__device__ __forceinline__ void load_tile_f32(float (*dst)[D], const float* src, int64_t ld, int row0, int T) {
  for (int i = threadIdx.x; i < kSimtTile * D; i += blockDim.x) {
    const int r = i / D, c = i % D;
    dst[r][c] = row0 + r < T ? src[int64_t(row0 + r) * ld + c] : 0.0f;
  }
}
// The lane's slice of a D-vector in global or shared memory.
template <int D>
__device__ __forceinline__ void load_slice(float (&v)[D / 32], const float* row, float scale = 1.0f) {
#pragma unroll
  for (int e = 0; e < D / 32; ++e) v[e] = row[threadIdx.x % 32 + 32 * e] * scale;
}
template <int D>
__device__ __forceinline__ float warp_dot(const float (&a)[D / 32], const float* row) {
  float acc = 0.0f;
#pragma unroll
  for (int e = 0; e < D / 32; ++e) acc += a[e] * row[threadIdx.x % 32 + 32 * e];
  return warp_sum(acc);
}
template <int D>
__device__ __forceinline__ void axpy(float (&y)[D / 32], float a, const float* row) {
#pragma unroll
  for (int e = 0; e < D / 32; ++e) y[e] += a * row[threadIdx.x % 32 + 32 * e];
}
template <int D>
__device__ __forceinline__ void store_slice(float* row, const float (&v)[D / 32], float scale) {
#pragma unroll
  for (int e = 0; e < D / 32; ++e) row[threadIdx.x % 32 + 32 * e] = v[e] * scale;
}

template <int D>
__global__ void __launch_bounds__(32 * kSimtWarps)
    flash_forward_simt_kernel(Successor next, float* att, float* lse, const float* qkv, AttnShape s, float scale_log2) {
  await_previous_kernel(next);
  __shared__ float ks[kSimtTile][D], vs[kSimtTile][D];
  const int b = blockIdx.y / s.H, h = blockIdx.y % s.H, kvh = h / (s.H / s.KVH);
  const int64_t ld = int64_t(s.H + 2 * s.KVH) * D;
  const float* base = qkv + int64_t(b) * s.T * ld;
  const int row = blockIdx.x * kSimtWarps + threadIdx.x / 32;
  const int last = min(s.T, (blockIdx.x + 1) * kSimtWarps) - 1;  // the block's last row
  float q[D / 32], o[D / 32] = {};
  load_slice<D>(q, base + int64_t(min(row, s.T - 1)) * ld + int64_t(h) * D, scale_log2);
  float mx = -INFINITY, sum = 0.0f;
  for (int k0 = 0; k0 <= last; k0 += kSimtTile) {
    __syncthreads();
    load_tile_f32<D>(ks, base + int64_t(s.H + kvh) * D, ld, k0, s.T);
    load_tile_f32<D>(vs, base + int64_t(s.H + s.KVH + kvh) * D, ld, k0, s.T);
    __syncthreads();
    const int keys = row < s.T ? min(kSimtTile, row - k0 + 1) : 0;  // keys at or before the row
    for (int u = 0; u < keys; ++u) {
      const float x = warp_dot<D>(q, ks[u]);
      if (x > mx) {  // a new maximum: rescale what was summed so far
        const float alpha = exp2f(mx - x);
        sum *= alpha;
#pragma unroll
        for (int e = 0; e < D / 32; ++e) o[e] *= alpha;
        mx = x;
      }
      const float p = exp2f(x - mx);
      sum += p;
      axpy<D>(o, p, vs[u]);
    }
  }
  if (row >= s.T) return;
  store_slice<D>(att + (int64_t(b) * s.T + row) * s.H * D + int64_t(h) * D, o, 1.0f / sum);
  if (threadIdx.x % 32 == 0) lse[(int64_t(b) * s.H + h) * s.T + row] = (mx + log2f(sum)) * kLn2;
}

template <int D>
__global__ void __launch_bounds__(32 * kSimtWarps)
    flash_backward_dq_simt_kernel(Successor next, float* dqkv, float* delta, const float* datt, const float* att,
                                  const float* qkv, const float* lse, AttnShape s, float scale, float scale_log2) {
  await_previous_kernel(next);
  __shared__ float ks[kSimtTile][D], vs[kSimtTile][D];
  const int b = blockIdx.y / s.H, h = blockIdx.y % s.H, kvh = h / (s.H / s.KVH);
  const int64_t ld = int64_t(s.H + 2 * s.KVH) * D;
  const float* base = qkv + int64_t(b) * s.T * ld;
  const int row = blockIdx.x * kSimtWarps + threadIdx.x / 32, rs = min(row, s.T - 1);
  const int last = min(s.T, (blockIdx.x + 1) * kSimtWarps) - 1;
  const int64_t stat = (int64_t(b) * s.H + h) * s.T + rs, at = (int64_t(b) * s.T + rs) * s.H * D + int64_t(h) * D;
  float q[D / 32], g[D / 32], dq[D / 32] = {};
  load_slice<D>(q, base + int64_t(rs) * ld + int64_t(h) * D, scale_log2);
  load_slice<D>(g, datt + at);
  const float lse2 = lse[stat] * kLog2e, dl = warp_dot<D>(g, att + at);  // delta = rowsum(dO * O)
  if (row < s.T && threadIdx.x % 32 == 0) delta[stat] = dl;  // for the dK/dV kernel
  for (int k0 = 0; k0 <= last; k0 += kSimtTile) {
    __syncthreads();
    load_tile_f32<D>(ks, base + int64_t(s.H + kvh) * D, ld, k0, s.T);
    load_tile_f32<D>(vs, base + int64_t(s.H + s.KVH + kvh) * D, ld, k0, s.T);
    __syncthreads();
    const int keys = row < s.T ? min(kSimtTile, row - k0 + 1) : 0;
    for (int u = 0; u < keys; ++u) {
      const float p = exp2f(warp_dot<D>(q, ks[u]) - lse2);
      axpy<D>(dq, p * (warp_dot<D>(g, vs[u]) - dl), ks[u]);
    }
  }
  if (row < s.T) store_slice<D>(dqkv + (int64_t(b) * s.T + row) * ld + int64_t(h) * D, dq, scale);
}

template <int D>
__global__ void __launch_bounds__(32 * kSimtWarps)
    flash_backward_dkdv_simt_kernel(Successor next, float* dqkv, const float* datt, const float* qkv, const float* lse,
                                    const float* delta, AttnShape s, float scale, float scale_log2) {
  await_previous_kernel(next);
  __shared__ float qs[kSimtTile][D], gs[kSimtTile][D], lse2s[kSimtTile], deltas[kSimtTile];
  const int b = blockIdx.y / s.KVH, kvh = blockIdx.y % s.KVH, group = s.H / s.KVH;
  const int64_t ld = int64_t(s.H + 2 * s.KVH) * D, ld_att = int64_t(s.H) * D;
  const float* base = qkv + int64_t(b) * s.T * ld;
  const int key = blockIdx.x * kSimtWarps + threadIdx.x / 32, ks = min(key, s.T - 1);
  float k[D / 32], v[D / 32], dk[D / 32] = {}, dv[D / 32] = {};
  load_slice<D>(k, base + int64_t(ks) * ld + int64_t(s.H + kvh) * D, scale_log2);
  load_slice<D>(v, base + int64_t(ks) * ld + int64_t(s.H + s.KVH + kvh) * D);
  for (int h = kvh * group; h < (kvh + 1) * group; ++h) {  // the group's query heads, in order
    const int64_t stats = (int64_t(b) * s.H + h) * s.T;
    for (int q0 = blockIdx.x * kSimtWarps; q0 < s.T; q0 += kSimtTile) {  // query tiles from the diagonal on
      __syncthreads();
      load_tile_f32<D>(qs, base + int64_t(h) * D, ld, q0, s.T);
      load_tile_f32<D>(gs, datt + int64_t(b) * s.T * ld_att + int64_t(h) * D, ld_att, q0, s.T);
      for (int r = threadIdx.x; r < kSimtTile; r += blockDim.x) {
        const int q = min(q0 + r, s.T - 1);
        lse2s[r] = lse[stats + q] * kLog2e, deltas[r] = delta[stats + q];
      }
      __syncthreads();
      if (key >= s.T) continue;
      for (int r = max(0, key - q0); r < min(kSimtTile, s.T - q0); ++r) {  // queries at or after the key
        const float p = exp2f(warp_dot<D>(k, qs[r]) - lse2s[r]);
        axpy<D>(dv, p, gs[r]);
        axpy<D>(dk, p * (warp_dot<D>(v, gs[r]) - deltas[r]), qs[r]);
      }
    }
  }
  if (key >= s.T) return;
  float* row = dqkv + (int64_t(b) * s.T + key) * ld;
  store_slice<D>(row + int64_t(s.H + kvh) * D, dk, scale);
  store_slice<D>(row + int64_t(s.H + s.KVH + kvh) * D, dv, 1.0f);
}

}  // namespace

void flash_attention_forward_fp32(const Tensor& att, const Tensor& lse, const Tensor& qkv, const AttnShape& s,
                                  float scale_log2, Stream st) {
  with_head_dim(s.D, [&](auto dim) {
    constexpr int D = decltype(dim)::value;
    launch_plainly("flash_forward_simt_kernel", flash_forward_simt_kernel<D>,
                   dim3(blocks_of(s.T, kSimtWarps), s.B * s.H), 32 * kSimtWarps, 0, st, att.data<float>(),
                   lse.data<float>(), qkv.data<float>(), s, scale_log2);
  });
}

void flash_attention_backward_fp32(const Tensor& dqkv, float* delta, const Tensor& datt, const Tensor& qkv,
                                   const Tensor& att, const Tensor& lse, const AttnShape& s, float scale,
                                   float scale_log2, Stream st) {
  with_head_dim(s.D, [&](auto dim) {
    constexpr int D = decltype(dim)::value;
    const dim3 block(32 * kSimtWarps);
    launch_plainly("flash_backward_dq_simt_kernel", flash_backward_dq_simt_kernel<D>,
                   dim3(blocks_of(s.T, kSimtWarps), s.B * s.H), block, 0, st, dqkv.data<float>(), delta,
                   datt.data<float>(), att.data<float>(), qkv.data<float>(), lse.data<float>(), s, scale, scale_log2);
    launch_plainly("flash_backward_dkdv_simt_kernel", flash_backward_dkdv_simt_kernel<D>,
                   dim3(blocks_of(s.T, kSimtWarps), s.B * s.KVH), block, 0, st, dqkv.data<float>(),
                   datt.data<float>(), qkv.data<float>(), lse.data<float>(), delta, s, scale, scale_log2);
  });
}

}  // namespace tt::cuda
