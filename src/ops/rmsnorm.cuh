// RMSNorm's arithmetic on the GPU, as the kernels that normalize a row in one pass of one warp make
// it (rmsnorm.cu's version 3 and FP8 kernels; a kernel that makes the norm inside another, as
// docs/versions/v6.md's norm in the QKV product's prologue did, takes the same): lane l adds the
// squares of its vectors l, l + 32, ... in that order, the warp's sum by warp_sum, rstd =
// rsqrt(sum / c + eps), and each element x r w rounded once. The same order and roundings, so the
// same rstd and the same bits. Then the one-kernel backward as a device function, a block of its
// grid at a time: rmsnorm.cu launches it, and block_backward.cu's persistent kernel runs its blocks
// as tasks.
#pragma once
#include "ops/cuda_common.cuh"
#include "ops/quantize.cuh"

namespace tt::cuda {

// Element e of the kVec-wide vector v of a row is column v * kVec + e.
template <class T, int kVec>
__device__ __forceinline__ float sum_squares(const Vec<T, kVec>& x) {
  float s = 0.0f;
#pragma unroll
  for (int e = 0; e < kVec; ++e) s += to_float(x.v[e]) * to_float(x.v[e]);
  return s;
}

// A row's rstd from each lane's part of its sum of squares (every lane of the warp gets it).
__device__ __forceinline__ float row_rstd(float lane_squares, int c, float eps) {
  return rsqrtf(warp_sum(lane_squares) / c + eps);
}

template <class T, int kVec>
__device__ __forceinline__ Vec<T, kVec> scaled(const Vec<T, kVec>& x, float r, const Vec<T, kVec>& w) {
  Vec<T, kVec> out;
#pragma unroll
  for (int e = 0; e < kVec; ++e) out.v[e] = from_float<T>(to_float(x.v[e]) * r * to_float(w.v[e]));
  return out;
}

// ---- the one-kernel backward (rmsnorm.cu's version 3 to 5) ----

// The one-kernel backward's threads (rmsnorm.cu), and the vectors a lane keeps in registers between
// a row's dot product and its writes.
constexpr int kNormThreads = 256, kCachedBackward = 2;
// The backward's row chunks: a row a warp while the rows last, at most kMaxFusedChunks of them
// (rmsnorm.cu says why).
constexpr int kMaxFusedChunks = 384;
__host__ __device__ constexpr int norm_row_chunks(int64_t n, int warps) {
  return int((n + warps - 1) / warps < kMaxFusedChunks ? (n + warps - 1) / warps : kMaxFusedChunks);
}
// The backward computes dw in the same kernel up to this many rows, six per thread of a column
// block. B8 rows of 512 in bf16 on the H100, two-stage against one kernel: 1024 rows 5.2 against
// 3.3-4.0 us, 1536 rows 6.1 against 4.4-4.8 us, 2048 rows 6.2 against 6.6-6.9 us, 4096 rows
// 8.8 against 13.8 us (docs/data/2026-11-22-h100-experiments-3/rmsnorm/).
constexpr int64_t kDwColumnRows = 6 * kNormThreads;

template <class T, int kVec>
__device__ __forceinline__ float dot3(const Vec<T, kVec>& w, const Vec<T, kVec>& g, const Vec<T, kVec>& x) {
  float s = 0.0f;
#pragma unroll
  for (int e = 0; e < kVec; ++e) s += to_float(w.v[e]) * to_float(g.v[e]) * to_float(x.v[e]);
  return s;
}

// dx = r w g - x coef for one vector, and, with kAddDw, g x r added to the column sums of its
// elements, which sit `stride` floats apart in shared memory.
template <class T, int kVec, bool kAddDw>
__device__ __forceinline__ Vec<T, kVec> dx_and_dw(const Vec<T, kVec>& g, const Vec<T, kVec>& x,
                                                  const Vec<T, kVec>& w, float r, float coef, float* dw_sum,
                                                  int stride) {
  Vec<T, kVec> dx;
#pragma unroll
  for (int e = 0; e < kVec; ++e) {
    const float ge = to_float(g.v[e]), xe = to_float(x.v[e]);
    dx.v[e] = from_float<T>(r * to_float(w.v[e]) * ge - xe * coef);
    if (kAddDw) dw_sum[e * stride] += ge * xe * r;
  }
  return dx;
}

// a + b rounded to T: the residual stream's next value, exactly as the add kernel makes it.
template <class T, int kVec>
__device__ __forceinline__ Vec<T, kVec> added(const Vec<T, kVec>& a, const Vec<T, kVec>& b) {
  Vec<T, kVec> out;
#pragma unroll
  for (int e = 0; e < kVec; ++e) out.v[e] = from_float<T>(to_float(a.v[e]) + to_float(b.v[e]));
  return out;
}

// dw[j, j + kVec) = sum over all rows of g x rstd, for the kVec columns from j = col_block *
// kVec, by one block: thread t adds rows t, t + kNormThreads, ... in order, then each element is
// summed over the warp's lanes (a fixed shuffle tree) and over the warps (in warp order);
// written, or added to dw with add_dw (gradient accumulation).
template <class T, int kVec>
__device__ __forceinline__ void rms_dw_columns(float* dw, const T* dout, const T* x, const float* rstd, int64_t n,
                                               int c, int col_block, bool add_dw) {
  using V = Vec<T, kVec>;
  __shared__ float warp_sums[kNormThreads / 32][kVec];
  const int j = col_block * kVec;
  float acc[kVec] = {};
#pragma unroll 4
  for (int64_t row = threadIdx.x; row < n; row += kNormThreads) {
    const V g = V::load(dout + row * c + j), xv = V::load(x + row * c + j);
    const float r = rstd[row];
#pragma unroll
    for (int e = 0; e < kVec; ++e) acc[e] += to_float(g.v[e]) * to_float(xv.v[e]) * r;
  }
#pragma unroll
  for (int e = 0; e < kVec; ++e) acc[e] = warp_sum(acc[e]);
  if (threadIdx.x % 32 == 0)
#pragma unroll
    for (int e = 0; e < kVec; ++e) warp_sums[threadIdx.x / 32][e] = acc[e];
  __syncthreads();
  if (threadIdx.x >= kVec) return;
  float total = 0.0f;
  for (int w = 0; w < kNormThreads / 32; ++w) total += warp_sums[w][threadIdx.x];
  dw[j + threadIdx.x] = add_dw ? dw[j + threadIdx.x] + total : total;
}

// Blocks [0, chunks) each own a chunk of rows, [b * rows_per_chunk, (b + 1) * rows_per_chunk);
// their warp w takes rows w, w + warps, ... of it, one row at a time: g and x read once (the
// first kCachedBackward vectors of each lane stay in registers), the dot product w.g.x reduced
// over the warp, dx written. With kPartialDw, g x rstd is also added to the warp's column sums,
// kept in shared memory as [warp][e][v] (element e of vector v) so that the lanes of a warp hit
// consecutive banks, and at the end the block adds the warps' sums in warp order into
// partial[b, :]. Without it, the blocks from `chunks` on compute dw itself, kVec columns each
// (rms_dw_columns), at the same time as the rows. With kAddDx (the fused-residual-norm switch)
// dx is added to the residual stream's gradient dx_in and the sum stored in dx, rounded as the
// add kernel would round the two: in place where dx_in is dx, else out of place (the grouped
// weight gradients read the gradient as it was). With kFp8 (bf16, kVec 8) the stored dx is also
// written in its FP8 forms f8 (see the top of this file); the tile follows the column sums in
// shared memory.
// The tile's pitch: rows 4 bytes longer than c (a multiple of 8), an odd number of words, so that
// the lanes reading a column (32 rows) hit 32 banks.
__host__ __device__ constexpr int fp8_tile_pitch(int c) { return c + 4; }

// Where it adds into the residual gradient at up to kDwColumnRows rows (the model's small steps), a
// row's residual gradient and rstd are loaded with its first loads, not after its sum: one round
// trip less, in registers that two blocks an SM leave room for (110; three blocks an SM would spill
// them). Beside AdamW at the default shape: 9.24 -> 7.56 us a call, the v6 step 1.069-1.071 ->
// 1.056-1.057 ms on an H200; with three blocks an SM and the spills, 1.077-1.080
// (docs/data/2026-11-30-h200-norm-backward-early-loads).
template <bool kPartialDw, bool kAddDx>
constexpr bool kEarlyResidual = kAddDx && !kPartialDw;

// Block `block` of the kernel's grid (rmsnorm.cu's rmsnorm_fused_backward_kernel launches it a
// block each; block_backward.cu's persistent kernel runs it as a task), kNormThreads threads;
// warp_dw: the shared memory the launch gives it ([warps][kVec][nv] floats with kPartialDw, then
// with kFp8 [rows][pitch] bytes; none without either).
template <class T, int kVec, bool kPartialDw, bool kAddDx, bool kFp8>
__device__ __forceinline__ void rmsnorm_fused_backward_block(T* dx, const T* dx_in, float* dw_or_partial,
                                                             const T* dout, const T* x, const T* w,
                                                             const float* rstd, int64_t n, int c,
                                                             int64_t rows_per_chunk, int chunks, bool add_dw,
                                                             Fp8Out f8, int block, float* warp_dw) {
  static_assert(!kFp8 || (std::is_same_v<T, bf16_t> && kVec == 8), "the FP8 forms are made from bf16 vectors of 8");
  if (!kPartialDw && block >= chunks) {
    rms_dw_columns<T, kVec>(dw_or_partial, dout, x, rstd, n, c, block - chunks, add_dw);
    return;
  }
  using V = Vec<T, kVec>;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32, nv = c / kVec;
  float* dw_sum = warp_dw + int64_t(warp) * c;
  if (kPartialDw) {
    for (int j = lane; j < c; j += 32) dw_sum[j] = 0.0f;
    __syncwarp();  // the lanes below add into elements zeroed by other lanes
  }
  const int64_t begin = int64_t(block) * rows_per_chunk;
  const int64_t end = begin + rows_per_chunk < n ? begin + rows_per_chunk : n;
  uint8_t* tile = reinterpret_cast<uint8_t*>(warp_dw + (kPartialDw ? int64_t(warps) * c : 0));
  const int pitch = fp8_tile_pitch(c);
  const float scale = kFp8 ? f8.slot[1] : 0.0f;
  float amax = 0.0f;
  for (int64_t row = begin + warp; row < end; row += warps) {
    const T* gr = dout + row * c;
    const T* xr = x + row * c;
    T* dxr = dx + row * c;
    const T* dinr = dx_in + row * c;
    constexpr bool kEarly = kEarlyResidual<kPartialDw, kAddDx>;
    V g_cached[kCachedBackward], x_cached[kCachedBackward], in_cached[kEarly ? kCachedBackward : 1];
    const float r = rstd[row];
    float dot = 0.0f;
#pragma unroll
    for (int k = 0; k < kCachedBackward; ++k) {
      const int j = (lane + 32 * k) * kVec;
      if (j < c) {
        g_cached[k] = V::load(gr + j);
        x_cached[k] = V::load(xr + j);
        if constexpr (kEarly) in_cached[k] = V::load(dinr + j);
        dot += dot3(V::load(w + j), g_cached[k], x_cached[k]);
      }
    }
    for (int j = (lane + 32 * kCachedBackward) * kVec; j < c; j += 32 * kVec)
      dot += dot3(V::load(w + j), V::load(gr + j), V::load(xr + j));
    const float coef = r * r * r * warp_sum(dot) / c;
    auto store_dx = [&](int v, const V& d, const V* early) {  // early: the residual gradient's loaded vector
      const V out = !kAddDx ? d : added(early ? *early : V::load(dinr + v * kVec), d);
      out.store(dxr + v * kVec);
      if constexpr (kFp8) {
        const uint2 bytes = fp8_chunk(out.v, scale, f8.format, amax);
        *reinterpret_cast<uint2*>(f8.rows + row * f8.ld + v * 8) = bytes;
        uint32_t* at = reinterpret_cast<uint32_t*>(tile + (row - begin) * pitch + v * 8);  // 4-byte aligned
        at[0] = bytes.x;
        at[1] = bytes.y;
      }
    };
#pragma unroll
    for (int k = 0; k < kCachedBackward; ++k) {
      const int v = lane + 32 * k;
      if (v < nv)
        store_dx(v, dx_and_dw<T, kVec, kPartialDw>(g_cached[k], x_cached[k], V::load(w + v * kVec), r, coef,
                                                   dw_sum + v, nv), kEarly ? &in_cached[k] : nullptr);
    }
    for (int v = lane + 32 * kCachedBackward; v < nv; v += 32)
      store_dx(v, dx_and_dw<T, kVec, kPartialDw>(V::load(gr + v * kVec), V::load(xr + v * kVec), V::load(w + v * kVec),
                                                 r, coef, dw_sum + v, nv), nullptr);
  }
  if constexpr (kFp8) {  // column j of the chunk's rows: bytes begin .. end - 1 of the transpose's row j
    __syncthreads();
    const int rows = int(end - begin);
    for (int k = threadIdx.x; k < c * rows; k += blockDim.x) {
      const int j = k / rows, i = k % rows;
      f8.cols[j * f8.ld_t + begin + i] = tile[i * pitch + j];
    }
    amax = block_max(amax, reinterpret_cast<float*>(tile));  // the tile is read: its first words are scratch
    if (threadIdx.x == 0) atomicMax(reinterpret_cast<unsigned*>(f8.slot + 2), __float_as_uint(amax));
  }
  if (!kPartialDw) return;
  __syncthreads();
  for (int j = threadIdx.x; j < c; j += blockDim.x) {
    const int at = (j % kVec) * nv + j / kVec;
    float sum = 0.0f;
    for (int k = 0; k < warps; ++k) sum += warp_dw[int64_t(k) * c + at];
    dw_or_partial[int64_t(block) * c + j] = sum;
  }
}

}  // namespace tt::cuda
