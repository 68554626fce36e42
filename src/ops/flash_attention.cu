// Our flash attention (the custom-attention switch, version 3): causal, grouped key/value heads
// read in place from the fused qkv buffer, and instead of the probabilities P[B, H, T, T] only
// the log-sum-exp of each row (lse[B, H, T], fp32) is saved; the backward recomputes P.
// Scores never leave the chip, so memory grows with T, not T^2.
//
// bf16, tensor cores (mma.sync m16n8k16, fp32 accumulation), 4 warps per block:
//   forward  one block per (query tile, batch, head). The query tile sits in shared memory;
//            key/value tiles stream through a double-buffered shared-memory pipeline
//            (cp.async); scores, the online softmax and the output stay in registers (the
//            score accumulators are reused as the A operand of P.V without leaving them);
//            tiles past the causal diagonal are never loaded.
//   backward delta = rowsum(dO * O) first; then two kernels that each own what they write, so
//            no atomics are needed and the result is bitwise reproducible:
//            dK, dV  one block per (key tile, batch, kv head); its warps own 16 keys each and
//                    loop over the query heads of the group and the query tiles at or below the
//                    diagonal, so the group's sum happens in registers in a fixed order;
//            dQ      one block per (query tile, batch, head), looping over key tiles like the
//                    forward.
//            P and dP are recomputed in both: seven tile products against the five of a
//            backward that sums dQ with atomics. That is the price of determinism.
// fp32, CUDA cores (FMA): the same algorithm with one warp per row (its lanes split the head
//   dimension) and the shared tiles in fp32; exact fp32 arithmetic (cuDNN has no fp32 flash
//   attention).
#include <cuda_bf16.h>

#include <string>
#include <type_traits>

#include "ops/attention.h"
#include "ops/cuda_common.cuh"

namespace tt::cuda {
namespace {

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;
constexpr int kWarps = 4;  // warps per block of the tensor-core kernels
constexpr int kThreads = 32 * kWarps;

// ---- cp.async, ldmatrix and mma.sync ----------------------------------------------------

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
// Copies 16 bytes global -> shared without stopping the thread; bytes past `valid` are zeroed.
__device__ __forceinline__ void cp_async_16(void* dst, const void* src, int valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(valid));
}
__device__ __forceinline__ void cp_async_4(void* dst, const void* src, int valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(valid));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::); }

// Four 8x8 bf16 matrices from shared memory; lanes 8i..8i+7 give the row addresses of matrix i.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const bf16_t* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const bf16_t* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
// c[16x8] += a[16x16] b[16x8]. Thread (g = lane/4, t = lane%4) holds c at rows g, g+8 and
// columns 2t, 2t+1: c[0], c[1] on row g, c[2], c[3] on row g + 8.
__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// A warp's tile products. Accumulators acc[m][n] are 16x8 tiles: rows 16m.., columns 8n...
// One 16-wide slice of the reduction, A given as fragments; B is a shared-memory tile, either
// stored with the reduction along its rows (kBRowsAreK: B[k][n], as V in P.V) or across them
// (B[n][k], as K in Q.K^T).
template <int kM, int kN, bool kBRowsAreK>
__device__ __forceinline__ void mma_k16(float (&acc)[kM][kN][4], const uint32_t (&a)[kM][4], const bf16_t* b,
                                        int ldb, int k) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int n = 0; n < kN; n += 2) {
    uint32_t f[4];
    if constexpr (kBRowsAreK)
      ldmatrix_x4_trans(f, b + (k + (lane & 7) + ((lane >> 3) & 1) * 8) * ldb + n * 8 + (lane >> 4) * 8);
    else
      ldmatrix_x4(f, b + (n * 8 + (lane & 7) + (lane >> 4) * 8) * ldb + k + ((lane >> 3) & 1) * 8);
#pragma unroll
    for (int m = 0; m < kM; ++m) {
      mma_bf16(acc[m][n], a[m], f[0], f[1]);
      mma_bf16(acc[m][n + 1], a[m], f[2], f[3]);
    }
  }
}
// acc += A B^T over a reduction of kK, A and B both row-major shared tiles (16 kM rows of A).
template <int kM, int kN, int kK>
__device__ __forceinline__ void mma_abt(float (&acc)[kM][kN][4], const bf16_t* a, int lda, const bf16_t* b,
                                        int ldb) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int k = 0; k < kK; k += 16) {
    uint32_t f[kM][4];
#pragma unroll
    for (int m = 0; m < kM; ++m) ldmatrix_x4(f[m], a + (m * 16 + (lane & 15)) * lda + k + (lane >> 4) * 8);
    mma_k16<kM, kN, false>(acc, f, b, ldb, k);
  }
}
// acc += S B, where S (kM x 16kS.. accumulators, e.g. the probabilities) becomes the A operand
// in registers: the accumulator layout of two neighbouring 16x8 tiles is the A fragment of a
// 16x16 slice.
template <int kM, int kS, int kN>
__device__ __forceinline__ void mma_sb(float (&acc)[kM][kN][4], const float (&s)[kM][kS][4], const bf16_t* b,
                                       int ldb) {
#pragma unroll
  for (int kc = 0; kc < kS / 2; ++kc) {
    uint32_t f[kM][4];
#pragma unroll
    for (int m = 0; m < kM; ++m) {
      f[m][0] = pack_bf16(s[m][2 * kc][0], s[m][2 * kc][1]);
      f[m][1] = pack_bf16(s[m][2 * kc][2], s[m][2 * kc][3]);
      f[m][2] = pack_bf16(s[m][2 * kc + 1][0], s[m][2 * kc + 1][1]);
      f[m][3] = pack_bf16(s[m][2 * kc + 1][2], s[m][2 * kc + 1][3]);
    }
    mma_k16<kM, kN, true>(acc, f, b, ldb, kc * 16);
  }
}

// Rows [row0, row0 + kRows) of a [T, ld] matrix (D columns from `src`) into a shared tile with
// row stride D + 8 (the padding puts the 8 rows one ldmatrix reads in different banks).
// Rows at or past T are zero-filled.
template <int kRows, int D>
__device__ __forceinline__ void load_tile(bf16_t* dst, const bf16_t* src, int64_t ld, int row0, int T) {
  constexpr int kChunks = D / 8;
  for (int i = threadIdx.x; i < kRows * kChunks; i += blockDim.x) {
    const int r = i / kChunks, c = (i % kChunks) * 8, row = row0 + r;
    cp_async_16(dst + r * (D + 8) + c, src + int64_t(min(row, T - 1)) * ld + c, row < T ? 16 : 0);
  }
}
template <int kRows>
__device__ __forceinline__ void load_row_stats(float* dst, const float* src, int row0, int T) {
  for (int r = threadIdx.x; r < kRows; r += blockDim.x)
    cp_async_4(dst + r, src + min(row0 + r, T - 1), row0 + r < T ? 4 : 0);
}

// One step of the key/value pipeline of the forward and dQ kernels (double-buffered tiles
// sk, sv of kKeys rows): waits for tile j, starts loading tile j + 1 into the other buffer,
// and returns the offset of tile j's buffer.
template <int kKeys, int D>
__device__ __forceinline__ int next_kv_tile(int j, int tiles, bf16_t* sk, bf16_t* sv, const bf16_t* kg,
                                            const bf16_t* vg, int64_t ld, int T) {
  constexpr int kTile = kKeys * (D + 8);
  cp_async_wait_all();
  __syncthreads();  // tile j has landed, and every warp is done with the other buffer
  if (j + 1 < tiles) {
    load_tile<kKeys, D>(sk + ((j + 1) & 1) * kTile, kg, ld, (j + 1) * kKeys, T);
    load_tile<kKeys, D>(sv + ((j + 1) & 1) * kTile, vg, ld, (j + 1) * kKeys, T);
    cp_async_commit();
  }
  return (j & 1) * kTile;
}

// The tile shapes, for kM 16-row slices per warp (two only up to head size 64: registers). A
// block owns 16 kM kWarps rows: queries in the forward and dQ kernels, keys in the dK/dV one.
// Tuning them is an exercise of docs/versions/v3.md.
template <int D, int kM>
struct Tiles {
  static_assert(kM == 1 || (kM == 2 && D <= 64), "two slices per warp only up to head size 64");
  static constexpr int kLd = D + 8;                  // shared row stride (elements)
  static constexpr int kRows = 16 * kM * kWarps;     // rows a block owns
  static constexpr int kKeys = 64;                   // forward: key tile per step
  static constexpr int kDqKeys = kM == 2 ? 32 : 64;  // dQ: key tile per step
  static constexpr int kBwdRows = kM == 1 && D <= 64 ? 64 : 32;  // dK/dV: query tile per step
};

// ---- forward, bf16 ------------------------------------------------------------------------

template <int D, int kM>
__global__ void __launch_bounds__(kThreads) flash_forward_kernel(bf16_t* att, float* lse, const bf16_t* qkv,
                                                                 AttnShape s, float scale_log2) {
  using C = Tiles<D, kM>;
  constexpr int kRows = C::kRows, kKeys = C::kKeys, kLd = C::kLd, kN = kKeys / 8;
  extern __shared__ __align__(16) unsigned char smem[];
  bf16_t* sq = reinterpret_cast<bf16_t*>(smem);  // [kRows][kLd]
  bf16_t* sk = sq + kRows * kLd;                  // [2][kKeys][kLd]
  bf16_t* sv = sk + 2 * kKeys * kLd;              // [2][kKeys][kLd]

  const int q0 = (gridDim.x - 1 - blockIdx.x) * kRows;  // the longest causal rows start first
  const int b = blockIdx.y / s.H, h = blockIdx.y % s.H, kvh = h / (s.H / s.KVH);
  const int64_t ld = int64_t(s.H + 2 * s.KVH) * D;
  const bf16_t* base = qkv + int64_t(b) * s.T * ld;
  const bf16_t* kg = base + int64_t(s.H + kvh) * D;
  const bf16_t* vg = base + int64_t(s.H + s.KVH + kvh) * D;
  const int tiles = (min(s.T, q0 + kRows) - 1) / kKeys + 1;  // key tiles up to the diagonal

  load_tile<kRows, D>(sq, base + int64_t(h) * D, ld, q0, s.T);
  load_tile<kKeys, D>(sk, kg, ld, 0, s.T);
  load_tile<kKeys, D>(sv, vg, ld, 0, s.T);
  cp_async_commit();

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int wrow = warp * 16 * kM;  // the warp's first row in the tile
  float o[kM][D / 8][4] = {};
  float mx[kM][2], sum[kM][2];
#pragma unroll
  for (int m = 0; m < kM; ++m) mx[m][0] = mx[m][1] = -INFINITY, sum[m][0] = sum[m][1] = 0.0f;

  for (int j = 0; j < tiles; ++j) {
    const int buf = next_kv_tile<kKeys, D>(j, tiles, sk, sv, kg, vg, ld, s.T);
    const bf16_t *kt = sk + buf, *vt = sv + buf;
    float sc[kM][kN][4] = {};
    mma_abt<kM, kN, D>(sc, sq + wrow * kLd, kLd, kt, kLd);

    const int k0 = j * kKeys;
    const bool edge = k0 + kKeys - 1 > q0 + wrow || k0 + kKeys > s.T;  // causal diagonal or sequence end
#pragma unroll
    for (int m = 0; m < kM; ++m)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int row = q0 + wrow + m * 16 + g + 8 * r;
        float tile_max = -INFINITY;
#pragma unroll
        for (int n = 0; n < kN; ++n)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int col = k0 + n * 8 + 2 * t + e;
            float& x = sc[m][n][2 * r + e];
            x = (edge && (col > row || col >= s.T)) ? -INFINITY : x * scale_log2;
            tile_max = fmaxf(tile_max, x);
          }
        tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
        tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
        const float new_max = fmaxf(mx[m][r], tile_max);
        const float shift = new_max == -INFINITY ? 0.0f : new_max;  // a row with no key yet
        const float alpha = exp2f(mx[m][r] - shift);
        float tile_sum = 0.0f;
#pragma unroll
        for (int n = 0; n < kN; ++n)
#pragma unroll
          for (int e = 0; e < 2; ++e) tile_sum += (sc[m][n][2 * r + e] = exp2f(sc[m][n][2 * r + e] - shift));
        sum[m][r] = sum[m][r] * alpha + tile_sum;
        mx[m][r] = new_max;
#pragma unroll
        for (int n = 0; n < D / 8; ++n) o[m][n][2 * r] *= alpha, o[m][n][2 * r + 1] *= alpha;
      }
    mma_sb<kM, kN, D / 8>(o, sc, vt, kLd);
  }

  const int64_t ld_att = int64_t(s.H) * D;
#pragma unroll
  for (int m = 0; m < kM; ++m)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float total = sum[m][r];
      total += __shfl_xor_sync(0xffffffffu, total, 1);
      total += __shfl_xor_sync(0xffffffffu, total, 2);
      const int row = q0 + wrow + m * 16 + g + 8 * r;
      if (row >= s.T) continue;
      const float inv = 1.0f / total;
      bf16_t* out = att + (int64_t(b) * s.T + row) * ld_att + int64_t(h) * D + 2 * t;
#pragma unroll
      for (int n = 0; n < D / 8; ++n)
        *reinterpret_cast<__nv_bfloat162*>(out + n * 8) =
            __floats2bfloat162_rn(o[m][n][2 * r] * inv, o[m][n][2 * r + 1] * inv);
      if (t == 0) lse[(int64_t(b) * s.H + h) * s.T + row] = (mx[m][r] + log2f(total)) * kLn2;
    }
}

// ---- backward, bf16 -----------------------------------------------------------------------

// P and dS of one tile from the recomputed scores (in sc, overwritten by P) and dP (in dp,
// overwritten by dS): P = exp(score - lse), dS = P (dP - delta). `at(i, n, e)` gives the
// (query, key) position of element e of accumulator tile (i, n); lse2 and delta come per query.
template <int kM, int kN, class Pos, class Stat>
__device__ __forceinline__ void recompute_p_ds(float (&sc)[kM][kN][4], float (&dp)[kM][kN][4], bool edge, int T,
                                               float scale_log2, Pos at, Stat stat) {
#pragma unroll
  for (int m = 0; m < kM; ++m)
#pragma unroll
    for (int n = 0; n < kN; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int2 qk = at(m, n, e);  // x: query, y: key
        const float2 st = stat(m, n, e);  // x: lse in base 2, y: delta
        const bool masked = edge && (qk.y > qk.x || qk.x >= T);
        const float p = masked ? 0.0f : exp2f(sc[m][n][e] * scale_log2 - st.x);
        sc[m][n][e] = p;
        dp[m][n][e] = p * (dp[m][n][e] - st.y);
      }
}

// dQ = scale * dS K for one (query tile, batch, head).
template <int D, int kM>
__global__ void __launch_bounds__(kThreads) flash_backward_dq_kernel(bf16_t* dqkv, const bf16_t* datt,
                                                                     const bf16_t* qkv, const float* lse,
                                                                     const float* delta, AttnShape s, float scale,
                                                                     float scale_log2) {
  using C = Tiles<D, kM>;
  constexpr int kRows = C::kRows, kKeys = C::kDqKeys, kLd = C::kLd, kN = kKeys / 8;
  extern __shared__ __align__(16) unsigned char smem[];
  bf16_t* sq = reinterpret_cast<bf16_t*>(smem);  // [kRows][kLd]
  bf16_t* sdo = sq + kRows * kLd;                 // [kRows][kLd]
  bf16_t* sk = sdo + kRows * kLd;                 // [2][kKeys][kLd]
  bf16_t* sv = sk + 2 * kKeys * kLd;              // [2][kKeys][kLd]

  const int q0 = (gridDim.x - 1 - blockIdx.x) * kRows;
  const int b = blockIdx.y / s.H, h = blockIdx.y % s.H, kvh = h / (s.H / s.KVH);
  const int64_t ld = int64_t(s.H + 2 * s.KVH) * D, ld_att = int64_t(s.H) * D;
  const bf16_t* base = qkv + int64_t(b) * s.T * ld;
  const bf16_t* kg = base + int64_t(s.H + kvh) * D;
  const bf16_t* vg = base + int64_t(s.H + s.KVH + kvh) * D;
  const int tiles = (min(s.T, q0 + kRows) - 1) / kKeys + 1;

  load_tile<kRows, D>(sq, base + int64_t(h) * D, ld, q0, s.T);
  load_tile<kRows, D>(sdo, datt + int64_t(b) * s.T * ld_att + int64_t(h) * D, ld_att, q0, s.T);
  load_tile<kKeys, D>(sk, kg, ld, 0, s.T);
  load_tile<kKeys, D>(sv, vg, ld, 0, s.T);
  cp_async_commit();

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int wrow = warp * 16 * kM;
  const int64_t stats = (int64_t(b) * s.H + h) * s.T;
  float2 row_stat[kM][2];  // (lse in base 2, delta) of rows g and g + 8 of each slice
#pragma unroll
  for (int m = 0; m < kM; ++m)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = min(q0 + wrow + m * 16 + g + 8 * r, s.T - 1);
      row_stat[m][r] = make_float2(lse[stats + row] * kLog2e, delta[stats + row]);
    }
  float dq[kM][D / 8][4] = {};

  for (int j = 0; j < tiles; ++j) {
    const int buf = next_kv_tile<kKeys, D>(j, tiles, sk, sv, kg, vg, ld, s.T);
    const bf16_t *kt = sk + buf, *vt = sv + buf;
    float sc[kM][kN][4] = {}, dp[kM][kN][4] = {};
    mma_abt<kM, kN, D>(sc, sq + wrow * kLd, kLd, kt, kLd);   // S = Q K^T
    mma_abt<kM, kN, D>(dp, sdo + wrow * kLd, kLd, vt, kLd);  // dP = dO V^T
    const int k0 = j * kKeys;
    const bool edge = k0 + kKeys - 1 > q0 + wrow || k0 + kKeys > s.T;
    recompute_p_ds(
        sc, dp, edge, s.T, scale_log2,
        [&](int m, int n, int e) {
          return make_int2(q0 + wrow + m * 16 + g + 8 * (e / 2), k0 + n * 8 + 2 * t + e % 2);
        },
        [&](int m, int, int e) { return row_stat[m][e / 2]; });
    mma_sb<kM, kN, D / 8>(dq, dp, kt, kLd);  // dQ += dS K
  }
#pragma unroll
  for (int m = 0; m < kM; ++m)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = q0 + wrow + m * 16 + g + 8 * r;
      if (row >= s.T) continue;
      bf16_t* out = dqkv + (int64_t(b) * s.T + row) * ld + int64_t(h) * D + 2 * t;
#pragma unroll
      for (int n = 0; n < D / 8; ++n)
        *reinterpret_cast<__nv_bfloat162*>(out + n * 8) =
            __floats2bfloat162_rn(dq[m][n][2 * r] * scale, dq[m][n][2 * r + 1] * scale);
    }
}

// dK = scale * dS^T Q and dV = P^T dO for one (key tile, batch, kv head), summed over the query
// heads of the group. Each warp owns 16 kM keys and computes the transposed tiles S^T = K Q^T and
// dP^T = V dO^T, so every product it needs has its operands in registers or shared memory.
template <int D, int kM>
__global__ void __launch_bounds__(kThreads) flash_backward_dkdv_kernel(bf16_t* dqkv, const bf16_t* datt,
                                                                       const bf16_t* qkv, const float* lse,
                                                                       const float* delta, AttnShape s,
                                                                       float scale, float scale_log2) {
  using C = Tiles<D, kM>;
  constexpr int kKeys = C::kRows, kRows = C::kBwdRows, kLd = C::kLd, kN = kRows / 8;
  extern __shared__ __align__(16) unsigned char smem[];
  bf16_t* sk = reinterpret_cast<bf16_t*>(smem);  // [kKeys][kLd]
  bf16_t* sv = sk + kKeys * kLd;                  // [kKeys][kLd]
  bf16_t* sq = sv + kKeys * kLd;                  // [2][kRows][kLd]
  bf16_t* sdo = sq + 2 * kRows * kLd;             // [2][kRows][kLd]
  float* slse = reinterpret_cast<float*>(sdo + 2 * kRows * kLd);  // [2][kRows]
  float* sdelta = slse + 2 * kRows;                                // [2][kRows]

  const int k0 = blockIdx.x * kKeys;  // the longest key columns come first already
  const int b = blockIdx.y / s.KVH, kvh = blockIdx.y % s.KVH, group = s.H / s.KVH;
  const int64_t ld = int64_t(s.H + 2 * s.KVH) * D, ld_att = int64_t(s.H) * D;
  const bf16_t* base = qkv + int64_t(b) * s.T * ld;
  const int first = k0 / kRows, per_head = (s.T - 1) / kRows + 1 - first, steps = group * per_head;
  // Step i of the loop: query tile first + i % per_head of query head kvh * group + i / per_head.
  auto load_step = [&](int i, int buf) {
    const int h = kvh * group + i / per_head, q0 = (first + i % per_head) * kRows;
    const int64_t stats = (int64_t(b) * s.H + h) * s.T;
    load_tile<kRows, D>(sq + buf * kRows * kLd, base + int64_t(h) * D, ld, q0, s.T);
    load_tile<kRows, D>(sdo + buf * kRows * kLd, datt + int64_t(b) * s.T * ld_att + int64_t(h) * D, ld_att, q0,
                        s.T);
    load_row_stats<kRows>(slse + buf * kRows, lse + stats, q0, s.T);
    load_row_stats<kRows>(sdelta + buf * kRows, delta + stats, q0, s.T);
  };
  load_tile<kKeys, D>(sk, base + int64_t(s.H + kvh) * D, ld, k0, s.T);
  load_tile<kKeys, D>(sv, base + int64_t(s.H + s.KVH + kvh) * D, ld, k0, s.T);
  load_step(0, 0);
  cp_async_commit();

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int wkey = warp * 16 * kM;
  float dk[kM][D / 8][4] = {}, dv[kM][D / 8][4] = {};
  for (int i = 0; i < steps; ++i) {
    cp_async_wait_all();
    __syncthreads();
    if (i + 1 < steps) {
      load_step(i + 1, (i + 1) & 1);
      cp_async_commit();
    }
    const bf16_t* qt = sq + (i & 1) * kRows * kLd;
    const bf16_t* dot = sdo + (i & 1) * kRows * kLd;
    const float* lse_t = slse + (i & 1) * kRows;
    const float* delta_t = sdelta + (i & 1) * kRows;
    const int q0 = (first + i % per_head) * kRows;
    float st[kM][kN][4] = {}, dpt[kM][kN][4] = {};
    mma_abt<kM, kN, D>(st, sk + wkey * kLd, kLd, qt, kLd);    // S^T = K Q^T
    mma_abt<kM, kN, D>(dpt, sv + wkey * kLd, kLd, dot, kLd);  // dP^T = V dO^T
    const bool edge = k0 + wkey + 16 * kM - 1 > q0 || q0 + kRows > s.T;
    recompute_p_ds(
        st, dpt, edge, s.T, scale_log2,
        [&](int m, int n, int e) {
          return make_int2(q0 + n * 8 + 2 * t + e % 2, k0 + wkey + m * 16 + g + 8 * (e / 2));
        },
        [&](int, int n, int e) {
          const int c = n * 8 + 2 * t + e % 2;
          return make_float2(lse_t[c] * kLog2e, delta_t[c]);
        });
    mma_sb<kM, kN, D / 8>(dv, st, dot, kLd);   // dV += P^T dO
    mma_sb<kM, kN, D / 8>(dk, dpt, qt, kLd);   // dK += dS^T Q
  }
#pragma unroll
  for (int m = 0; m < kM; ++m)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int key = k0 + wkey + m * 16 + g + 8 * r;
      if (key >= s.T) continue;
      bf16_t* row = dqkv + (int64_t(b) * s.T + key) * ld + 2 * t;
      bf16_t* dk_out = row + int64_t(s.H + kvh) * D;
      bf16_t* dv_out = row + int64_t(s.H + s.KVH + kvh) * D;
#pragma unroll
      for (int n = 0; n < D / 8; ++n) {
        *reinterpret_cast<__nv_bfloat162*>(dk_out + n * 8) =
            __floats2bfloat162_rn(dk[m][n][2 * r] * scale, dk[m][n][2 * r + 1] * scale);
        *reinterpret_cast<__nv_bfloat162*>(dv_out + n * 8) =
            __floats2bfloat162_rn(dv[m][n][2 * r], dv[m][n][2 * r + 1]);
      }
    }
}

// delta[b, h, t] = sum_d dO[b, t, h, d] * O[b, t, h, d], one warp per (token, head).
template <class T>
__global__ void attention_delta_kernel(float* delta, const T* datt, const T* att, AttnShape s) {
  const int64_t w = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;  // token * H + head
  if (w >= int64_t(s.B) * s.T * s.H) return;
  const int64_t token = w / s.H;
  const int h = int(w % s.H);
  float acc = 0.0f;
  for (int d = threadIdx.x % 32; d < s.D; d += 32) acc += to_float(datt[w * s.D + d]) * to_float(att[w * s.D + d]);
  acc = warp_sum(acc);
  const int b = int(token / s.T), t = int(token % s.T);
  if (threadIdx.x % 32 == 0) delta[(int64_t(b) * s.H + h) * s.T + t] = acc;
}

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
__global__ void __launch_bounds__(32 * kSimtWarps) flash_forward_simt_kernel(float* att, float* lse,
                                                                             const float* qkv, AttnShape s,
                                                                             float scale_log2) {
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
__global__ void __launch_bounds__(32 * kSimtWarps) flash_backward_dq_simt_kernel(float* dqkv, const float* datt,
                                                                                 const float* qkv, const float* lse,
                                                                                 const float* delta, AttnShape s,
                                                                                 float scale, float scale_log2) {
  __shared__ float ks[kSimtTile][D], vs[kSimtTile][D];
  const int b = blockIdx.y / s.H, h = blockIdx.y % s.H, kvh = h / (s.H / s.KVH);
  const int64_t ld = int64_t(s.H + 2 * s.KVH) * D;
  const float* base = qkv + int64_t(b) * s.T * ld;
  const int row = blockIdx.x * kSimtWarps + threadIdx.x / 32, rs = min(row, s.T - 1);
  const int last = min(s.T, (blockIdx.x + 1) * kSimtWarps) - 1;
  const int64_t stat = (int64_t(b) * s.H + h) * s.T + rs;
  const float lse2 = lse[stat] * kLog2e, dl = delta[stat];
  float q[D / 32], g[D / 32], dq[D / 32] = {};
  load_slice<D>(q, base + int64_t(rs) * ld + int64_t(h) * D, scale_log2);
  load_slice<D>(g, datt + (int64_t(b) * s.T + rs) * s.H * D + int64_t(h) * D);
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
__global__ void __launch_bounds__(32 * kSimtWarps) flash_backward_dkdv_simt_kernel(float* dqkv, const float* datt,
                                                                                   const float* qkv,
                                                                                   const float* lse,
                                                                                   const float* delta, AttnShape s,
                                                                                   float scale, float scale_log2) {
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

// ---- launchers ------------------------------------------------------------------------------

// Dynamic shared memory over 48 KiB must be allowed per kernel before its launch.
template <class Kernel>
void allow_smem(Kernel kernel, size_t bytes) {
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
}

// Calls f.template operator()<D>() for the head size of the shape.
template <class F>
void with_head_dim(int d, F&& f) {
  switch (d) {
    case 32: f(std::integral_constant<int, 32>{}); break;
    case 64: f(std::integral_constant<int, 64>{}); break;
    case 128: f(std::integral_constant<int, 128>{}); break;
    default: fail("our flash attention supports head sizes 32, 64 and 128, not " + std::to_string(d));
  }
}

int blocks_of(int n, int per) { return (n + per - 1) / per; }

// Two 16-row slices per warp halve the shared-memory reads per tensor-core instruction, but
// also the number of blocks: they are used only where at least two blocks per SM remain.
template <int D, class F>
void with_slices(int rows, int heads, F&& f) {
  static const int sms = [] {
    int n = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, 0));
    return n;
  }();
  if constexpr (D <= 64)
    if (int64_t(blocks_of(rows, Tiles<D, 2>::kRows)) * heads >= 2 * sms) return f(std::integral_constant<int, 2>{});
  f(std::integral_constant<int, 1>{});
}

}  // namespace

bool flash_attention_supports(const AttnShape& s) { return s.D == 32 || s.D == 64 || s.D == 128; }

int64_t flash_attention_scratch_numel(const AttnShape& s) { return int64_t(s.B) * s.H * s.T; }

void flash_attention_forward(const Tensor& att, const Tensor& lse, const Tensor& qkv, const AttnShape& s,
                             Stream st) {
  const float scale_log2 = float(s.scale()) * kLog2e;
  with_head_dim(s.D, [&](auto dim) {
    constexpr int D = decltype(dim)::value;
    if (qkv.dtype == DType::BF16) {
      with_slices<D>(s.T, s.B * s.H, [&](auto slices) {
        constexpr int kM = decltype(slices)::value;
        using C = Tiles<D, kM>;
        const size_t smem = sizeof(bf16_t) * C::kLd * (C::kRows + 4 * C::kKeys);
        allow_smem(flash_forward_kernel<D, kM>, smem);
        flash_forward_kernel<D, kM><<<dim3(blocks_of(s.T, C::kRows), s.B * s.H), kThreads, smem, st>>>(
            static_cast<bf16_t*>(att.ptr), lse.data<float>(), static_cast<const bf16_t*>(qkv.ptr), s, scale_log2);
        CUDA_CHECK_LAUNCH("flash_forward_kernel");
      });
    } else {
      TT_CHECK(qkv.dtype == DType::F32, "flash attention: fp32 or bf16 only");
      flash_forward_simt_kernel<D><<<dim3(blocks_of(s.T, kSimtWarps), s.B * s.H), 32 * kSimtWarps, 0, st>>>(
          att.data<float>(), lse.data<float>(), qkv.data<float>(), s, scale_log2);
      CUDA_CHECK_LAUNCH("flash_forward_simt_kernel");
    }
  });
}

void flash_attention_backward(const Tensor& dqkv, const Tensor& datt, const Tensor& qkv, const Tensor& att,
                              const Tensor& lse, const AttnShape& s, const Tensor& scratch, Stream st) {
  TT_CHECK(scratch.numel >= flash_attention_scratch_numel(s), "flash attention scratch too small");
  const float scale = float(s.scale()), scale_log2 = scale * kLog2e;
  float* delta = scratch.data<float>();
  const int64_t rows = int64_t(s.B) * s.T * s.H;
  TT_DISPATCH_ACT(att.dtype, {
    attention_delta_kernel<T><<<blocks_for(rows * 32, 256), 256, 0, st>>>(
        delta, static_cast<const T*>(datt.ptr), static_cast<const T*>(att.ptr), s);
  });
  CUDA_CHECK_LAUNCH("attention_delta_kernel");
  with_head_dim(s.D, [&](auto dim) {
    constexpr int D = decltype(dim)::value;
    if (qkv.dtype == DType::BF16) {
      auto* dq = static_cast<bf16_t*>(dqkv.ptr);
      auto* g = static_cast<const bf16_t*>(datt.ptr);
      auto* x = static_cast<const bf16_t*>(qkv.ptr);
      with_slices<D>(s.T, s.B * s.KVH, [&](auto slices) {
        constexpr int kM = decltype(slices)::value;
        using C = Tiles<D, kM>;
        const size_t smem = sizeof(bf16_t) * C::kLd * (2 * C::kRows + 4 * C::kBwdRows) + sizeof(float) * 4 * C::kBwdRows;
        allow_smem(flash_backward_dkdv_kernel<D, kM>, smem);
        flash_backward_dkdv_kernel<D, kM><<<dim3(blocks_of(s.T, C::kRows), s.B * s.KVH), kThreads, smem, st>>>(
            dq, g, x, lse.data<float>(), delta, s, scale, scale_log2);
        CUDA_CHECK_LAUNCH("flash_backward_dkdv_kernel");
      });
      with_slices<D>(s.T, s.B * s.H, [&](auto slices) {
        constexpr int kM = decltype(slices)::value;
        using C = Tiles<D, kM>;
        const size_t smem = sizeof(bf16_t) * C::kLd * (2 * C::kRows + 4 * C::kDqKeys);
        allow_smem(flash_backward_dq_kernel<D, kM>, smem);
        flash_backward_dq_kernel<D, kM><<<dim3(blocks_of(s.T, C::kRows), s.B * s.H), kThreads, smem, st>>>(
            dq, g, x, lse.data<float>(), delta, s, scale, scale_log2);
        CUDA_CHECK_LAUNCH("flash_backward_dq_kernel");
      });
    } else {
      TT_CHECK(qkv.dtype == DType::F32, "flash attention: fp32 or bf16 only");
      const dim3 block(32 * kSimtWarps);
      flash_backward_dkdv_simt_kernel<D><<<dim3(blocks_of(s.T, kSimtWarps), s.B * s.KVH), block, 0, st>>>(
          dqkv.data<float>(), datt.data<float>(), qkv.data<float>(), lse.data<float>(), delta, s, scale,
          scale_log2);
      CUDA_CHECK_LAUNCH("flash_backward_dkdv_simt_kernel");
      flash_backward_dq_simt_kernel<D><<<dim3(blocks_of(s.T, kSimtWarps), s.B * s.H), block, 0, st>>>(
          dqkv.data<float>(), datt.data<float>(), qkv.data<float>(), lse.data<float>(), delta, s, scale,
          scale_log2);
      CUDA_CHECK_LAUNCH("flash_backward_dq_simt_kernel");
    }
  });
}

}  // namespace tt::cuda
