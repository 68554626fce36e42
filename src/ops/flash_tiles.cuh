// Our flash attention's tiles, the forward of one block and the one-block backward
// (flash_attention.cu says what the algorithm is), shared by flash_attention.cu's kernels and the
// persistent kernels, which run the forward (block_forward.cu) and the backward (block_backward.cu)
// of a sequence and a head as one of their tasks: the shared-memory layout wgmma reads, the copies
// into it, RoPE's turns, and the warpgroup products the kernels are made of.
#pragma once
#include <cooperative_groups.h>
#include <cuda_bf16.h>

#include "ops/attention.h"
#include "ops/cuda_common.cuh"
#include "ops/hopper.cuh"
#include "ops/quantize.cuh"
#include "ops/rope.cuh"

namespace tt::cuda::flash {

constexpr int kTileKeys = 64;    // keys of a forward or dQ step, and of a dK/dV block

// The maximum of f(kFirst) .. f(kFirst + kN - 1), kN a power of two, as a tree: log2(kN)
// dependent steps instead of kN (a chain of fmaxf waits on each previous result). Written as a
// recursion of templates, not as loops over an array: at kN = 16 nvcc left such an array in
// local memory (a 64-byte stack frame, 16 stores and loads per row and tile), which made a
// forward with 128-key tiles run at half speed (docs/experiments.md).
template <int kN, int kFirst = 0, class F>
__device__ __forceinline__ float tree_max(F f) {
  if constexpr (kN == 1)
    return f(kFirst);
  else
    return fmaxf(tree_max<kN / 2, kFirst>(f), tree_max<kN / 2, kFirst + kN / 2>(f));
}

// ---- shared-memory tiles in the layout wgmma reads -----------------------------------------
// A tile row is one head vector (D bf16). It is stored in column blocks of kRowBytes (64 bytes
// at D = 32, else 128; D = 128 is two blocks, the second after all rows of the first). Inside
// each group of 8 rows, the 16-byte chunks of row r are permuted by XOR with r: the 64- or
// 128-byte swizzle of the hardware, so the 8 rows that one 8x8 core matrix reads are in
// different banks. The same tile serves as a K-major operand (the reduction along its rows'
// D elements, as K in Q K^T) and as an MN-major one (the reduction down its rows, as V in P V).
template <int D>
struct Smem {
  static constexpr int kRowBytes = D >= 64 ? 128 : 64;
  static constexpr int kCols = kRowBytes / 2;  // elements per row of a column block
  static constexpr uint64_t kSwizzle = kRowBytes == 128 ? 1 : 2;  // the descriptor's code for it
  static constexpr int bytes(int rows) { return rows * D * 2; }
  // Byte offset of elements (r, c .. c + 7), c a multiple of 8, in a tile of `rows` rows.
  __device__ static unsigned offset(unsigned rows, unsigned r, unsigned c) {
    const unsigned chunk = ((c % kCols) / 8) ^ ((r * kRowBytes / 128) % (kRowBytes / 16));
    return (c / kCols) * rows * kRowBytes + r * kRowBytes + chunk * 16;
  }
  // wgmma's descriptor of the tile at addr, with this layout's swizzle.
  __device__ static uint64_t desc(uint32_t addr, uint32_t lbo, uint32_t sbo) { return wgmma_desc(addr, lbo, sbo, kSwizzle); }
  // K-major operand: rows r0.. of the tile at reduction columns 0..15; consecutive 8-row groups
  // are 8 kRowBytes apart. Adding k_step<rows>(ks) moves it to columns 16 ks .. 16 ks + 15.
  __device__ static uint64_t k_major(uint32_t tile, int r0) { return desc(tile + r0 * kRowBytes, 16, 8 * kRowBytes); }
  template <int kTileRows>
  static constexpr uint64_t k_step(int ks) {
    return ((16 * ks / kCols) * kTileRows * kRowBytes + (16 * ks % kCols) * 2) >> 4;
  }
  // MN-major B operand: the reduction runs down rows 0..15, N over all D columns (the column
  // blocks are kTileRows rows apart). Adding mn_step(ks) moves it to rows 16 ks .. 16 ks + 15.
  template <int kTileRows>
  __device__ static uint64_t mn_major(uint32_t tile) {
    return desc(tile, kTileRows * kRowBytes, 8 * kRowBytes);
  }
  static constexpr uint64_t mn_step(int ks) { return (16 * ks * kRowBytes) >> 4; }
};

// Rows [row0, row0 + kRows) of a [T, ld] matrix (D columns from `src`, T * ld < 2^31) into a
// tile, by the kThreads threads of the block; rows at or past T are zero-filled. The thread
// count is a template argument so that the loop unrolls and the index arithmetic is shifts and
// masks of constants: written with a runtime stride it cost 38 instructions per 16-byte copy,
// a third of the forward kernel's instructions.
template <int kRows, int D, int kThreads>
__device__ __forceinline__ void load_tile(unsigned char* dst, const bf16_t* src, int ld, int row0, int T) {
  constexpr int kChunks = D / 8, kPerThread = kRows * kChunks / kThreads;  // 16-byte chunks
  static_assert(kPerThread * kThreads == kRows * kChunks, "each thread copies the same number of chunks");
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    const unsigned i = threadIdx.x + k * kThreads, r = i / kChunks, c = i % kChunks * 8;
    const int row = row0 + int(r);
    cp_async_16(dst + Smem<D>::offset(kRows, r, c), src + (min(row, T - 1) * ld + int(c)), row < T ? 16 : 0);
  }
}
template <int kRows, int kThreads>
__device__ __forceinline__ void load_row_stats(float* dst, const float* src, int row0, int T) {
  static_assert(kRows <= kThreads, "one value per thread");
  const int r = threadIdx.x;
  if (r < kRows) cp_async_4(dst + r, src + min(row0 + r, T - 1), row0 + r < T ? 4 : 0);
}

// ---- RoPE inside the attention (rope-in-attention) ------------------------------------------
// The pair (2i, 2i + 1) of a head vector at position pos turns by the angle whose cosine and
// sine are table[(pos D/2 + i) 2] and [.. + 1] (src/ops/rope.h); `rope` is null when the model
// rotated Q and K itself. A tile's rows are rotated in shared memory once they have landed, each
// thread the 16-byte chunks it copied (load_tile's assignment), with the arithmetic of the RoPE
// kernel; dQ and dK, computed against the rotated Q and K, turn back in registers before they
// are written (a thread holds both elements of each of its pairs).
template <int kRows, int D, int kThreads>
__device__ __forceinline__ void rotate_tile(unsigned char* tile, const float* rope, int row0, int T) {
  if (!rope) return;
  constexpr int kChunks = D / 8, kPerThread = kRows * kChunks / kThreads;
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    const unsigned i = threadIdx.x + k * kThreads, r = i / kChunks, c = i % kChunks * 8;
    const int pos = row0 + int(r);
    if (pos >= T) continue;  // a zero row past the sequence
    bf16_t* at = reinterpret_cast<bf16_t*>(tile + Smem<D>::offset(kRows, r, c));
    Vec<bf16_t, 8> v = Vec<bf16_t, 8>::load(at);
    const Vec<float, 4> cs0 = Vec<float, 4>::load(rope + int64_t(pos) * D + c);
    const Vec<float, 4> cs1 = Vec<float, 4>::load(rope + int64_t(pos) * D + c + 4);
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const float cos = q < 2 ? cs0.v[2 * q] : cs1.v[2 * q - 4], sin = q < 2 ? cs0.v[2 * q + 1] : cs1.v[2 * q - 3];
      const float x0 = to_float(v.v[2 * q]), x1 = to_float(v.v[2 * q + 1]);
      v.v[2 * q] = from_float<bf16_t>(x0 * cos - x1 * sin);
      v.v[2 * q + 1] = from_float<bf16_t>(x0 * sin + x1 * cos);
    }
    v.store(at);
  }
}
// Pair `pair` (x, y) of position pos turned back: the transposed rotation, for dQ and dK (without
// a table, the pair as it is). Where a thread turns back many pairs with nothing read before, it
// reads their (cos, sin) first (rope_pair), all in flight at once, then turns them (turn_back):
// with stores between them each read waits for the store before it, the compiler unable to tell
// the table from the output.
template <int D>
__device__ __forceinline__ float2 rope_pair(const float* rope, int pos, int pair) {
  return rope ? rope_cos_sin(rope, D, pos, pair) : float2{};
}
__device__ __forceinline__ float2 turn_back(float x, float y, const float* rope, float2 cs) {
  return rope ? make_float2(x * cs.x + y * cs.y, y * cs.x - x * cs.y) : make_float2(x, y);
}
template <int D>
__device__ __forceinline__ float2 unrotate(float x, float y, const float* rope, int pos, int pair) {
  return turn_back(x, y, rope, rope_pair<D>(rope, pos, pair));
}

// The key/value pipeline of the forward and dQ kernels (tiles sk, sv of kKeys rows in kStages
// buffers; the forward keeps three, as the product of tile j - 1 runs on during step j). Once
// tile j has landed (tiles_landed), every warpgroup is done with tile j + 1 - kStages, whose
// buffer this starts loading tile j + 1 into. The forward calls it after issuing S = Q K^T, so
// that the copies' instructions run while the tensor cores work (forward 6-8% faster at B8
// and B1 T8192, docs/experiments.md); the dQ kernel before its products: there the copies'
// registers, live across two products, cost 29 registers and so one of its two blocks per SM.
template <int kKeys, int D, int kStages, int kThreads>
__device__ __forceinline__ void load_next_kv_tile(int j, int tiles, unsigned char* sk, unsigned char* sv,
                                                  const bf16_t* kg, const bf16_t* vg, int ld, int T) {
  constexpr int kTile = Smem<D>::bytes(kKeys);
  if (j + 1 < tiles) {
    load_tile<kKeys, D, kThreads>(sk + (j + 1) % kStages * kTile, kg, ld, (j + 1) * kKeys, T);
    load_tile<kKeys, D, kThreads>(sv + (j + 1) % kStages * kTile, vg, ld, (j + 1) * kKeys, T);
    cp_async_commit();
  }
}

// acc = A B^T over the D columns (issued, not waited for): A the 64 rows r0.. of K-major tile
// a (kARows rows), B all N rows of K-major tile b.
template <int N, int D, int kARows>
__device__ __forceinline__ void wg_abt(float (&acc)[N / 2], uint32_t a, int r0, uint32_t b) {
  using L = Smem<D>;
  const uint64_t da = L::k_major(a, r0), db = L::k_major(b, 0);
  wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks)
    Wgmma<N>::template ss<0>(acc, da + L::template k_step<kARows>(ks), db + L::template k_step<N>(ks), ks > 0);
  wgmma_commit();
}
// P (64 x kK accumulators of the warpgroup) rounded to bf16 as A operands: the accumulator
// layout of a 16-column slice is the A fragment layout.
template <int kK>
__device__ __forceinline__ void to_a_operand(uint32_t (&f)[kK / 16][4], const float (&p)[kK / 2]) {
#pragma unroll
  for (int kc = 0; kc < kK / 16; ++kc)
#pragma unroll
    for (int i = 0; i < 4; ++i) f[kc][i] = pack_bf16(p[8 * kc + 2 * i], p[8 * kc + 2 * i + 1]);
}
// acc += P B (issued, not waited for): P as A operands in registers (to_a_operand; they must
// stay untouched until the product is waited for), B the MN-major tile b of kK rows, D columns.
template <int kK, int D>
__device__ __forceinline__ void wg_pb(float (&acc)[D / 2], const uint32_t (&p)[kK / 16][4], uint32_t b) {
  const uint64_t db = Smem<D>::template mn_major<kK>(b);
  wgmma_fence();
#pragma unroll
  for (int kc = 0; kc < kK / 16; ++kc) Wgmma<D>::template rs<1>(acc, p[kc], db + Smem<D>::mn_step(kc), 1);
  wgmma_commit();
}

// acc = A B (issued, not waited for): A the K-major tile a of 64 rows and kK columns (the
// reduction), B the MN-major tile b of kK rows and D columns.
template <int kK, int D>
__device__ __forceinline__ void wg_ab(float (&acc)[D / 2], uint32_t a, uint32_t b) {
  using LA = Smem<kK>;
  const uint64_t da = LA::k_major(a, 0), db = Smem<D>::template mn_major<kK>(b);
  wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < kK / 16; ++ks)
    Wgmma<D>::template ss<1>(acc, da + LA::template k_step<64>(ks), db + Smem<D>::mn_step(ks), ks > 0);
  wgmma_commit();
}

// The tile shapes, for kWG warpgroups per block (two only where the grid stays large:
// with_warpgroups; the dK/dV kernel always has one). A block owns 64 kWG rows: queries in the
// forward and dQ kernels, keys in the dK/dV one. Tuning them is an exercise of
// docs/versions/v3.md.
template <int D, int kWG>
struct Tiles {
  static constexpr int kThreads = kWarpgroup * kWG;
  static constexpr int kRows = 64 * kWG;              // rows a block owns
  static constexpr int kKeys = kTileKeys;             // forward and dQ: key tile per step
  static constexpr int kFwdStages = 3;                // forward: key/value buffers (dQ: 2)
};

// The forward of one block: query rows q0 .. q0 + 64 kWG - 1 of sequence b and head h, through
// the shared memory at smem (Smem<D>::bytes(kRows + 2 kFwdStages kKeys), 1024-byte aligned).
template <int D, int kWG, bool kFp8, bool kRope>
__device__ __forceinline__ void flash_forward_tile(unsigned char* smem, int b, int h, int q0, bf16_t* att, float* lse,
                                                   const bf16_t* qkv, const float* rope, const AttnShape& s,
                                                   float scale_log2, const Fp8Out& f8) {
  if constexpr (!kRope) rope = nullptr;  // (with_rope)
  using C = Tiles<D, kWG>;
  constexpr int kRows = C::kRows, kKeys = C::kKeys;
  unsigned char* sq = smem;                                        // [kRows][D]
  unsigned char* sk = sq + Smem<D>::bytes(kRows);                  // [kFwdStages][kKeys][D]
  unsigned char* sv = sk + C::kFwdStages * Smem<D>::bytes(kKeys);  // [kFwdStages][kKeys][D]

  const int kvh = h / (s.H / s.KVH);
  const int ld = (s.H + 2 * s.KVH) * D;
  const bf16_t* base = qkv + int64_t(b) * s.T * ld;
  const bf16_t* kg = base + int64_t(s.H + kvh) * D;
  const bf16_t* vg = base + int64_t(s.H + s.KVH + kvh) * D;
  const int tiles = (min(s.T, q0 + kRows) - 1) / kKeys + 1;  // key tiles up to the diagonal

  load_tile<kRows, D, C::kThreads>(sq, base + int64_t(h) * D, ld, q0, s.T);
  load_tile<kKeys, D, C::kThreads>(sk, kg, ld, 0, s.T);
  load_tile<kKeys, D, C::kThreads>(sv, vg, ld, 0, s.T);
  cp_async_commit();

  const int wg = threadIdx.x / kWarpgroup, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int wrow = 16 * (threadIdx.x / 32);  // the warp's first row in the tile
  float o[D / 2] = {};
  float mx[2] = {-INFINITY, -INFINITY}, sum[2] = {0.0f, 0.0f};
  uint32_t p[kKeys / 16][4];  // the probabilities of the previous tile, as A operands
  int prev = 0;               // the previous tile's buffer

  for (int j = 0; j < tiles; ++j) {
    const int buf = j % C::kFwdStages * Smem<D>::bytes(kKeys);
    tiles_landed([&] {
      if (j == 0) rotate_tile<kRows, D, C::kThreads>(sq, rope, q0, s.T);
      rotate_tile<kKeys, D, C::kThreads>(sk + buf, rope, j * kKeys, s.T);
    });
    float sc[kKeys / 2] = {};
    wg_abt<kKeys, D, kRows>(sc, smem_addr(sq), 64 * wg, smem_addr(sk + buf));  // S = Q K^T
    load_next_kv_tile<kKeys, D, C::kFwdStages, C::kThreads>(j, tiles, sk, sv, kg, vg, ld, s.T);  // while S runs
    if (j > 0) {
      wg_pb<kKeys, D>(o, p, smem_addr(sv + prev));  // O += P V of the previous tile, during this softmax
      wgmma_wait<1>(sc);
    } else {
      wgmma_wait<0>(sc);
    }

    const int k0 = j * kKeys;
    if (k0 + kKeys - 1 > q0 + wrow || k0 + kKeys > s.T) {  // the tile crosses the diagonal or the end
#pragma unroll
      for (int i = 0; i < kKeys / 2; ++i) {
        const int row = q0 + wrow + g + 8 * (i % 4 / 2), col = k0 + i / 4 * 8 + 2 * t + i % 2;
        if (col > row || col >= s.T) sc[i] = -INFINITY;
      }
    }
    float alpha[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {  // rows g and g + 8; the scores are scaled inside the exponent
      float tile_max = tree_max<kKeys / 8>([&](int n) { return fmaxf(sc[4 * n + 2 * r], sc[4 * n + 2 * r + 1]); });
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
      const float new_max = fmaxf(mx[r], tile_max * scale_log2);
      const float shift = new_max == -INFINITY ? 0.0f : new_max;  // a row with no key yet
      alpha[r] = fast_exp2(mx[r] - shift);
      float part[4] = {};  // four running sums: four short dependency chains instead of one long one
#pragma unroll
      for (int n = 0; n < kKeys / 8; ++n)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float& x = sc[4 * n + 2 * r + e];
          part[(2 * n + e) % 4] += (x = fast_exp2(fmaf(x, scale_log2, -shift)));
        }
      sum[r] = sum[r] * alpha[r] + ((part[0] + part[1]) + (part[2] + part[3]));
      mx[r] = new_max;
    }
    wgmma_wait<0>(o);  // the previous tile's P V is in: rescale to the new maximum
#pragma unroll
    for (int n = 0; n < D / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[4 * n + e] *= alpha[e / 2];
    to_a_operand<kKeys>(p, sc);
    prev = buf;
  }
  wg_pb<kKeys, D>(o, p, smem_addr(sv + prev));
  wgmma_wait<0>(o);

  const int64_t ld_att = int64_t(s.H) * D;
  // FP8: the block's rows as bytes, [kRows][kPitch] over the query tile (every warpgroup is done
  // with it once all have passed the barrier).
  constexpr int kPitch = fp8_transpose_pitch(D);
  static_assert(kPitch <= 2 * D, "the FP8 tile fits where the query tile was");
  uint8_t* const tile = sq;
  float amax = 0.0f;
  const float scale = kFp8 ? f8.slot[1] : 1.0f;
  if (kFp8) __syncthreads();
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float total = sum[r];
    total += __shfl_xor_sync(0xffffffffu, total, 1);
    total += __shfl_xor_sync(0xffffffffu, total, 2);
    const int row = q0 + wrow + g + 8 * r;
    if (row >= s.T) continue;
    const float inv = 1.0f / total;
    bf16_t* out = att + (int64_t(b) * s.T + row) * ld_att + int64_t(h) * D + 2 * t;
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      const __nv_bfloat162 pair = __floats2bfloat162_rn(o[4 * n + 2 * r] * inv, o[4 * n + 2 * r + 1] * inv);
      *reinterpret_cast<__nv_bfloat162*>(out + n * 8) = pair;
      if (kFp8) {  // the stored bf16, as the quantizing pass reads it
        const float2 v = __bfloat1622float2(pair);
        *reinterpret_cast<uint16_t*>(tile + (wrow + g + 8 * r) * kPitch + n * 8 + 2 * t) =
            fp8x2(v.x, v.y, scale, f8.format, amax);
      }
    }
    if (t == 0) lse[(int64_t(b) * s.H + h) * s.T + row] = (mx[r] + log2f(total)) * kLn2;
  }
  if constexpr (kFp8) {
    __shared__ float scratch[32];
    __syncthreads();
    const int64_t row0 = int64_t(b) * s.T + q0;  // the tile's first token
    const int rows = min(kRows, s.T - q0);       // its rows in this sequence
    if (f8.rows)
      for (int k = threadIdx.x; k < kRows * (D / 8); k += C::kThreads) {  // row i, bytes c .. c + 7
        const int i = k / (D / 8), c = k % (D / 8) * 8;
        const uint32_t* at = reinterpret_cast<const uint32_t*>(tile + i * kPitch + c);  // 4-byte aligned
        if (i < rows) *reinterpret_cast<uint2*>(f8.rows + (row0 + i) * f8.ld + int64_t(h) * D + c) = make_uint2(at[0], at[1]);
      }
    if (f8.cols)
      store_transposed<C::kThreads, kRows>(f8.cols + int64_t(h) * D * f8.ld_t + row0, f8.ld_t, f8.wide_t, tile, kPitch, D,
                                           rows);
    amax = block_max(amax, scratch);
    if (threadIdx.x == 0) atomicMax(reinterpret_cast<unsigned*>(f8.slot + 2), __float_as_uint(amax));  // >= 0: ordered as bits
  }
}

// ---- backward ------------------------------------------------------------------------------

// P and dS of one tile from the recomputed scores (in sc, overwritten by P) and dP (in dp,
// overwritten by dS): P = exp(score - lse), dS = P (dP - delta). On tiles that cross the diagonal
// or the sequence end (`edge`), `masked(n, e)` says whether accumulator element 4 n + e is masked;
// `stat(n, e)` gives its query's lse (base 2) and delta.
template <int kN, class Masked, class Stat>
__device__ __forceinline__ void recompute_p_ds(float (&sc)[kN], float (&dp)[kN], bool edge, float scale_log2,
                                               Masked masked, Stat stat) {
  if (edge) {
#pragma unroll
    for (int i = 0; i < kN; ++i)
      if (masked(i / 4, i % 4)) sc[i] = -INFINITY;
  }
#pragma unroll
  for (int i = 0; i < kN; ++i) {
    const float2 st = stat(i / 4, i % 4);  // x: lse in base 2, y: delta
    const float p = fast_exp2(fmaf(sc[i], scale_log2, -st.x));
    sc[i] = p;
    dp[i] = p * (dp[i] - st.y);
  }
}

// delta = rowsum(dO * O) of the row of att and datt at `at`, by the four threads t = 0..3 of a
// quad, D / 4 columns each, their sums added across the quad: every thread gets it, the same bits
// wherever it is computed.
template <int D>
__device__ __forceinline__ float row_delta(const bf16_t* att, const bf16_t* datt, int64_t at, int t) {
  at += t * (D / 4);
  float dl = 0.0f;
#pragma unroll
  for (int c = 0; c < D / 4; c += 8) {
    const Vec<bf16_t, 8> o = Vec<bf16_t, 8>::load(att + at + c), go = Vec<bf16_t, 8>::load(datt + at + c);
#pragma unroll
    for (int e = 0; e < 8; ++e) dl += to_float(go.v[e]) * to_float(o.v[e]);
  }
  dl += __shfl_xor_sync(0xffffffffu, dl, 1);
  dl += __shfl_xor_sync(0xffffffffu, dl, 2);
  return dl;
}

// ---- a short sequence's backward in one launch (attention-backward-in-one-block) --------------
// At T <= 128 the two kernels above run at most 2 and 4 steps a block (64 keys or queries a step),
// each step a chain of small products, and pay a kernel's start and end twice. Here one block of
// kWG warpgroups per (batch, query head) owns the whole sequence, and the blocks of a kv head's
// group of query heads form a cluster. Warpgroup w owns the keys 64 w .. 64 w + 63, as a dK/dV
// block (S^T = K Q^T, so P^T and dS^T are A operands in registers for dV and dK). The warpgroups
// walk the query tiles j together; those past the diagonal (w > j) sit out the products. Each
// puts its dS^T into shared memory as rows of dS, and after a barrier warpgroup j makes query
// tile j's dQ = dS K over all the keys in one chain of products and writes it: dQ is summed on
// chip. The block's dK and dV (its head's part) go to its shared memory in fp32; after the
// cluster's barrier block r adds every r-th pair of elements over the group's blocks, in rank
// order, through distributed shared memory (the same bits every run), and writes them. delta =
// rowsum(dO * O) of the block's rows comes first (row_delta, as the dQ kernel computes it). With
// `rope`, dQ and dK are turned back before they are written; Q and K are rotated as they land too
// with kRotate (rope-in-attention), or were rotated before the attention without it (RoPE's
// backward then needs no kernel of its own).
constexpr int kOneBlockMaxGroup = 8;  // query heads a kv head: the blocks of a portable cluster
template <int kWG>
struct OneBlock {
  static constexpr int D = 64, kKeys = 64 * kWG, kRows = 64, kThreads = kWG * kWarpgroup;  // kRows: queries a step
  static constexpr int kPitch = D + 8;  // floats a row of the fp32 dK and dV (8 more: rows g and g + 4 in other banks)
  static constexpr size_t kTiles = Smem<D>::bytes(2 * kKeys + 4 * kRows) + Smem<kKeys>::bytes(kRows);
  static constexpr size_t kParts = sizeof(float) * 2 * kKeys * kPitch;
  static constexpr size_t kSmem = kSmemAlign + kTiles + kParts + sizeof(float) * 4 * kRows;  // + lse, delta
};
// Block `block` of the kernel's grid (flash_attention.cu's flash_backward_one_block_kernel launches
// it a block each, in clusters of a kv head's group; block_backward.cu's persistent kernel runs it as
// a task where a group is one head), kWG warpgroups, OneBlock<kWG>::kSmem bytes of shared memory.
template <int D, int kWG, bool kRope, bool kRotate>
__device__ __forceinline__ void backward_one_block(int block, bf16_t* dqkv, const bf16_t* datt, const bf16_t* att,
                                                   const bf16_t* qkv, const float* rope, const float* lse, AttnShape s,
                                                   float scale, float scale_log2) {
  using C = OneBlock<kWG>;
  static_assert(D == C::D && (kWG == 1 || kWG == 2), "64 queries a step against up to 128 keys");
  constexpr int kThreads = C::kThreads, kKeys = C::kKeys, kRows = C::kRows, kPitch = C::kPitch;
  if constexpr (!kRope) rope = nullptr;  // (with_rope)
  const float* rotate = kRotate ? rope : nullptr;
  unsigned char* sk = aligned_smem();                     // [kKeys][D]
  unsigned char* sv = sk + Smem<D>::bytes(kKeys);         // [kKeys][D]
  unsigned char* sq = sv + Smem<D>::bytes(kKeys);         // [2][kRows][D]
  unsigned char* sdo = sq + 2 * Smem<D>::bytes(kRows);    // [2][kRows][D]
  unsigned char* sds = sdo + 2 * Smem<D>::bytes(kRows);   // dS [kRows][kKeys]
  float* parts = reinterpret_cast<float*>(sk + C::kTiles);  // dK, dV of this head: [2][kKeys][kPitch]
  float* slse = parts + 2 * kKeys * kPitch;                // [2][kRows]
  float* sdelta = slse + 2 * kRows;                        // [kKeys], the block's rows

  const int group = s.H / s.KVH, tiles = (s.T + kRows - 1) / kRows;
  const int rank = block % group, kvh = block / group % s.KVH, b = block / group / s.KVH;
  const int h = kvh * group + rank;
  const int ld = (s.H + 2 * s.KVH) * D, ld_att = s.H * D;
  const bf16_t* base = qkv + int64_t(b) * s.T * ld;
  auto load_step = [&](int j, int buf) {  // query tile j
    load_tile<kRows, D, kThreads>(sq + buf * Smem<D>::bytes(kRows), base + int64_t(h) * D, ld, j * kRows, s.T);
    load_tile<kRows, D, kThreads>(sdo + buf * Smem<D>::bytes(kRows), datt + int64_t(b) * s.T * ld_att + int64_t(h) * D,
                                  ld_att, j * kRows, s.T);
    load_row_stats<kRows, kThreads>(slse + buf * kRows, lse + (int64_t(b) * s.H + h) * s.T, j * kRows, s.T);
  };
  load_tile<kKeys, D, kThreads>(sk, base + int64_t(s.H + kvh) * D, ld, 0, s.T);
  load_tile<kKeys, D, kThreads>(sv, base + int64_t(s.H + s.KVH + kvh) * D, ld, 0, s.T);
  load_step(0, 0);
  cp_async_commit();
  // RoPE applied before the attention: nothing reads the table until dQ and dK are turned back;
  // its rows go to L1 now, while the tiles land (the kernel 24.7 -> 20.6 us a call before the
  // reads were put ahead of the stores, below).
  if (rope && !rotate)
    for (int line = int(threadIdx.x); line < s.T * D / 32; line += kThreads) prefetch_l1(rope + 32 * line);
  // delta of the block's rows while the copies land, 0 past the sequence's end (a masked row's dS
  // is P (dP - delta) with P = 0: it must stay finite): a quad of threads a row, every quad of a
  // warp through the same number of rounds (row_delta's shuffles take the whole warp).
  // The rows are kKeys (tiles kRows, as T > 64 exactly when kWG is 2): a fixed count of rounds,
  // unrolled, so that all their loads are in flight at once.
#pragma unroll
  for (int round = 0; round < kKeys / (kThreads / 4); ++round) {
    const int pos = round * (kThreads / 4) + int(threadIdx.x) / 4;
    const float dl =
        row_delta<D>(att, datt, ((int64_t(b) * s.T + min(pos, s.T - 1)) * s.H + h) * D, int(threadIdx.x % 4));
    if (threadIdx.x % 4 == 0) sdelta[pos] = pos < s.T ? dl : 0.0f;
  }

  // The warpgroup, read from lane 0 so that the compiler sees it is the same across the warp, and
  // the step's last wait outside the conditions: with the products and their waits under
  // conditions on a plain threadIdx.x / 128, ptxas serialized every wgmma of the kernel (warning
  // C7518, "divergent path"; either change alone removes it).
  const int wg = __shfl_sync(0xffffffffu, int(threadIdx.x) / kWarpgroup, 0);
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int k0 = 64 * wg, wkey = 16 * (threadIdx.x % kWarpgroup / 32);  // the warpgroup's keys; the warp's first
  float dk[D / 2] = {}, dv[D / 2] = {};
  for (int j = 0; j < tiles; ++j) {
    const int q0 = j * kRows;
    tiles_landed([&] {  // tile j has landed (and delta), and every warp is done with tile j - 1's buffers
      if (j == 0) rotate_tile<kKeys, D, kThreads>(sk, rotate, 0, s.T);
      rotate_tile<kRows, D, kThreads>(sq + (j & 1) * Smem<D>::bytes(kRows), rotate, q0, s.T);
    });
    const uint32_t qt = smem_addr(sq + (j & 1) * Smem<D>::bytes(kRows));
    const uint32_t dot = smem_addr(sdo + (j & 1) * Smem<D>::bytes(kRows));
    const bool active = wg <= j;  // keys at or below some query of the tile
    float st[kRows / 2] = {}, dpt[kRows / 2] = {};
    if (active) {
      wg_abt<kRows, D, kKeys>(st, smem_addr(sk), k0, qt);    // S^T = K Q^T
      wg_abt<kRows, D, kKeys>(dpt, smem_addr(sv), k0, dot);  // dP^T = V dO^T
    }
    if (j + 1 < tiles) {  // the next tile's copies, while the tensor cores work
      load_step(j + 1, (j + 1) & 1);
      cp_async_commit();
    }
    uint32_t p[kRows / 16][4], ds[kRows / 16][4];
    if (active) {
      wgmma_wait<0>(st, dpt);
      const float* lse_t = slse + (j & 1) * kRows;
      recompute_p_ds(
          st, dpt, k0 + wkey + 15 > q0 || q0 + kRows > s.T, scale_log2,
          [&](int n, int e) {
            const int query = q0 + n * 8 + 2 * t + e % 2, key = k0 + wkey + g + 8 * (e / 2);
            return key > query || query >= s.T;
          },
          [&](int n, int e) {  // the query pair of column n, read as one 8-byte word each
            const float2 l = *reinterpret_cast<const float2*>(lse_t + n * 8 + 2 * t);
            const float2 d = *reinterpret_cast<const float2*>(sdelta + q0 + n * 8 + 2 * t);
            return e % 2 ? make_float2(l.y * kLog2e, d.y) : make_float2(l.x * kLog2e, d.x);
          });
      to_a_operand<kRows>(p, st);
      to_a_operand<kRows>(ds, dpt);
#pragma unroll
      for (int a = 0; a < kRows / 2; ++a) {  // dS as rounded for dK, the queries as rows: fragment ds[a / 8][a % 8 / 2]
        const int query = a / 4 * 8 + 2 * t + a % 2, key = k0 + wkey + g + 8 * (a % 4 / 2);
        *reinterpret_cast<uint16_t*>(sds + Smem<kKeys>::offset(kRows, query, key & ~7) + (key & 7) * 2) =
            uint16_t(ds[a / 8][a % 8 / 2] >> (16 * (a % 2)));
      }
      wg_pb<kRows, D>(dv, p, dot);  // dV += P^T dO
      wg_pb<kRows, D>(dk, ds, qt);  // dK += dS^T Q
    }
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();  // the tile's dS complete
    if (wg == j) {  // query tile j's dQ = scale dS K, over the keys 0 .. 64 j + 63
      float dq[D / 2];
      if (kWG == 1 || j == 0)
        wg_ab<64, D>(dq, smem_addr(sds), smem_addr(sk));
      else
        wg_ab<kKeys, D>(dq, smem_addr(sds), smem_addr(sk));
      wgmma_wait<0>(dv, dk, dq);
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int query = q0 + wkey + g + 8 * r;
        if (query >= s.T) continue;
        bf16_t* out = dqkv + (int64_t(b) * s.T + query) * ld + int64_t(h) * D + 2 * t;
        float2 cs[D / 8];  // (read one by one between the stores: 20.3 us a call at 8 x 128 on an H200, not 14.8)
#pragma unroll
        for (int c = 0; c < D / 8; ++c) cs[c] = rope_pair<D>(rope, query, 4 * c + t);
#pragma unroll
        for (int c = 0; c < D / 8; ++c) {
          const float2 q2 = turn_back(dq[4 * c + 2 * r], dq[4 * c + 2 * r + 1], rope, cs[c]);
          *reinterpret_cast<__nv_bfloat162*>(out + c * 8) = __floats2bfloat162_rn(q2.x * scale, q2.y * scale);
        }
      }
    }
    wgmma_wait<0>(dv, dk);  // (nothing left to wait for where the warpgroup sat out or made dQ)
  }
  // This head's dK and dV into shared memory; then the group's sums, block `rank` taking every
  // group-th run of four elements, each added over the blocks in rank order. A thread's kRuns runs
  // are read together, so that their distributed shared memory loads are in flight at once.
#pragma unroll
  for (int r = 0; r < 2; ++r)
#pragma unroll
    for (int c = 0; c < D / 8; ++c) {
      float* at = parts + (k0 + wkey + g + 8 * r) * kPitch + 8 * c + 2 * t;
      *reinterpret_cast<float2*>(at) = make_float2(dk[4 * c + 2 * r], dk[4 * c + 2 * r + 1]);
      *reinterpret_cast<float2*>(at + kKeys * kPitch) = make_float2(dv[4 * c + 2 * r], dv[4 * c + 2 * r + 1]);
    }
  cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
  cluster.sync();  // every block's parts written
  constexpr int kRuns = 4;
  const int runs = 2 * s.T * (D / 4), stride = group * kThreads;  // dK's then dV's, (key, run) within each
  for (int i0 = rank * kThreads + int(threadIdx.x); i0 < runs; i0 += kRuns * stride) {
    float4 sum[kRuns];
    int at[kRuns];
    float2 cs[kRuns][2];  // dK's (cos, sin), read with the parts
#pragma unroll
    for (int u = 0; u < kRuns; ++u) {
      const int i = min(i0 + u * stride, runs - 1), mat = i / (s.T * (D / 4)), key = i / (D / 4) % s.T;
      at[u] = (mat * kKeys + key) * kPitch + 4 * (i % (D / 4));
      const float* table = mat == 0 ? rope : nullptr;  // dK's pairs only
      cs[u][0] = rope_pair<D>(table, key, 2 * (i % (D / 4))), cs[u][1] = rope_pair<D>(table, key, 2 * (i % (D / 4)) + 1);
    }
    for (int src = 0; src < group; ++src) {
      const float* part = cluster.map_shared_rank(parts, src);
#pragma unroll
      for (int u = 0; u < kRuns; ++u) {
        const float4 x = *reinterpret_cast<const float4*>(part + at[u]);
        if (src == 0) sum[u] = x;
        else sum[u].x += x.x, sum[u].y += x.y, sum[u].z += x.z, sum[u].w += x.w;
      }
    }
#pragma unroll
    for (int u = 0; u < kRuns; ++u) {
      const int i = i0 + u * stride;
      if (i >= runs) break;
      const int mat = i / (s.T * (D / 4)), key = i / (D / 4) % s.T, pair = 2 * (i % (D / 4));
      float2 lo = make_float2(sum[u].x, sum[u].y), hi = make_float2(sum[u].z, sum[u].w);
      if (mat == 0) {
        lo = turn_back(lo.x, lo.y, rope, cs[u][0]), hi = turn_back(hi.x, hi.y, rope, cs[u][1]);
        lo.x *= scale, lo.y *= scale, hi.x *= scale, hi.y *= scale;
      }
      __nv_bfloat162* out = reinterpret_cast<__nv_bfloat162*>(
          dqkv + (int64_t(b) * s.T + key) * ld + int64_t(s.H + mat * s.KVH + kvh) * D + 2 * pair);
      out[0] = __floats2bfloat162_rn(lo.x, lo.y);
      out[1] = __floats2bfloat162_rn(hi.x, hi.y);
    }
  }
  cluster.sync();  // no block leaves while another still reads its parts
}


}  // namespace tt::cuda::flash
