// Our flash attention (the custom-attention switch, version 3): causal, grouped key/value heads
// read in place from the fused qkv buffer, and instead of the probabilities P[B, H, T, T] only
// the log-sum-exp of each row (lse[B, H, T], fp32) is saved; the backward recomputes P.
// Scores never leave the chip, so memory grows with T, not T^2.
//
// bf16, Hopper tensor cores (wgmma: a warpgroup of 4 warps multiplies 64 rows at a time,
// asynchronously, with operands read straight from shared memory, fp32 accumulation); a
// block is one or two warpgroups:
//   forward  one block per (query tile, batch, head). The query tile sits in shared memory;
//            key/value tiles stream through a double-buffered shared-memory pipeline
//            (cp.async); scores, the online softmax and the output stay in registers (the
//            probabilities are the A operand of P.V straight from the score accumulators);
//            tiles past the causal diagonal are never loaded.
//   backward two kernels that each own what they write, so no atomics are needed and the
//            result is bitwise reproducible:
//            dQ      one block per (query tile, batch, head), looping over key tiles like the
//                    forward. It first computes delta = rowsum(dO * O) of its rows, which it
//                    needs, and leaves it in memory for the next kernel (no launch of its own);
//            dK, dV  one block per (key tile, batch, kv head); each warpgroup owns 64 keys and
//                    loops over the query heads of the group and the query tiles at or below
//                    the diagonal, so the group's sum happens in registers in a fixed order.
//            At small batches and long sequences, the long columns of both are split into
//            chunks whose sums a third kernel adds in order (ColumnSplit).
//            P and dP are recomputed in both: seven tile products against the five of a
//            backward that sums dQ with atomics (the fused backward below, in a fixed order).
//   fused backward (fused-attention-backward, opt-in; D <= 64 where no column is split):
//            the dK/dV kernel also makes dQ: it puts its tile of dS into shared memory and
//            adds dS K into an fp32 dQ in memory, five tile products a step instead of seven.
//            The adds into a query tile take turns, key tiles from the diagonal down, each
//            block waiting on a counter for the one before, so the sum has one order, the same
//            bits every run. The blocks take their places from a ticket in the order they start,
//            shortest column first, so the block a turn waits on is running and a step ahead: it
//            rarely waits, and never on a block not yet started. delta comes from a kernel before
//            it, and one after it turns the sums into dqkv's bf16. Slower than the two kernels:
//            at gpt2-small on an H200, 405 us a layer against 150 + 161 (195 without the adds).
//            The L2's fp32 adds of 16 KB a step cost more than the two products saved; 16-byte
//            atomics, the copy engine's bulk reductions, and those sent in the background by
//            warp 0 during the next step (FlashAttention-3's dQ writer: 520 us) were no faster
//            (docs/versions/v5.md).
//   one-block backward (attention-backward-in-one-block, version 6; D = 64, T <= 128): a block per
//            (batch, query head) makes the head's dQ, dK and dV over the whole sequence, dQ summed
//            on chip; the blocks of a kv head's group, a cluster, add dK and dV through
//            distributed shared memory in a fixed order. At the default shape on an H200, 12.0 us
//            a layer against 8.7 + 9.4 for the two kernels, the v5 step 1.124 -> 1.113 ms; in v6,
//            not v5, as its sums' orders change the bits v5 shares with v4 (docs/versions/v6.md).
// Version 5 (fp8-fused-attention): the forward also writes its output in FP8 with delayed
// scaling, both layouts the output product takes (rows [tokens, H D] and the transpose), the
// bytes of quantizing the bf16 it stores: each thread converts its bf16 values into a shared tile
// of the block's rows, from which the rows go out in 8-byte runs and the transpose in 4 x 4 blocks
// of bytes (store_transposed of src/ops/quantize.cuh); the tile's amax joins the slot's. The
// separate pass read the bf16 output again (2 bytes an element) to write the two FP8 forms. At
// gpt2-small on an H200 the forward took 109 us a layer against 92 without it, less than the pass
// (ablation rows +0.4%, +0.7%), each lane gathering a 16-byte run of the transpose a byte at a
// time; in 4 x 4 blocks, 104.4 against 105.8 in one job (docs/versions/v5.md).
// fp32 runs take the same algorithm on the CUDA cores (src/ops/attention_fp32.cu). The Hopper
// primitives (cp.async, wgmma) are in src/ops/hopper.cuh; the tiles, the forward of a block and the
// one-block backward, which the persistent kernels (block_forward.cu, block_backward.cu) run too, in
// src/ops/flash_tiles.cuh.
#include <cooperative_groups.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <climits>
#include <initializer_list>
#include <string>
#include <type_traits>

#include "ops/attention.h"
#include "ops/cuda_common.cuh"
#include "ops/flash_tiles.cuh"
#include "ops/hopper.cuh"
#include "ops/quantize.cuh"
#include "ops/rope.cuh"

namespace tt::cuda {
namespace {

using namespace flash;

// dK/dV (one warpgroup of 64 keys): the query tile of one step (registers).
constexpr int dkdv_queries(int d) { return d <= 64 ? 64 : 32; }

// The backward kernels' columns, and how the long ones are split. A dK/dV block owns a key
// tile and walks the group's query heads and the query tiles from the diagonal on; a dQ block
// owns a query tile and walks the key tiles up to the diagonal. So key tile 0 and the last
// query tile have the most steps, and at a small batch and a long sequence those blocks alone
// set the kernel's time while most SMs idle (B1 T4096: 128 dK/dV steps in one block, against
// about 40 per block slot if the work were spread). Columns are therefore cut into chunks of at
// most `chunk` steps, sized for about kSplitTargetBlocks blocks. A column of more than one chunk
// has each chunk write its fp32 sums to its own slot, and flash_backward_split_sum_kernel adds
// the slots in chunk order, so the result is the same bits every run.
constexpr int kSplitTargetBlocks = 1024;  // about 2.6 waves of 3 blocks per SM on 132 SMs
constexpr int kSplitMinChunk = 8;         // steps: a chunk's sums written and read against its reads
struct ColumnSplit {
  bool keys;       // dK/dV columns (key tiles); else dQ columns (query tiles)
  int rows;        // keys or queries of a column
  int columns;     // per (batch, head of the kernel's grid)
  int mats;        // matrices a slot holds: dK and dV, or dQ; [rows][D] each
  int query_rows;  // dK/dV: the query tile of one step
  int tiles;       // dK/dV: query tiles of the sequence; dQ: key tiles of the sequence
  int group;       // dK/dV: query heads per kv head
  int chunk;       // steps per chunk
  int slots;       // chunks of the longest column; 1: no column is split
  // Steps of column n: dK/dV, the group's query tiles from the diagonal on; dQ, the key tiles
  // (of kTileKeys) up to the diagonal.
  __host__ __device__ int steps(int n) const {
    return keys ? group * (tiles - n * rows / query_rows) : min(tiles, (n + 1) * rows / kTileKeys);
  }
  __host__ __device__ int chunks(int n) const { return (steps(n) + chunk - 1) / chunk; }
  __host__ __device__ int64_t slot_floats(int d) const { return int64_t(mats) * rows * d; }
  // Where the slot of chunk c of column n of grid row `row` (batch x head) starts, in floats.
  __host__ __device__ int64_t slot(int64_t row, int n, int c, int d) const {
    return ((row * columns + n) * slots + c) * slot_floats(d);
  }
};

// ---- forward, bf16 ------------------------------------------------------------------------
// A block per (sequence and head, query tile): flash_forward_tile, the longest causal rows first.
template <int D, int kWG, bool kFp8, bool kRope>
__global__ void __launch_bounds__(Tiles<D, kWG>::kThreads)
    flash_forward_kernel(Successor next, bf16_t* att, float* lse, const bf16_t* qkv, const float* rope, AttnShape s,
                         float scale_log2, Fp8Out f8) {
  await_previous_kernel(next);
  flash_forward_tile<D, kWG, kFp8, kRope>(aligned_smem(), int(blockIdx.x) / s.H, int(blockIdx.x) % s.H,
                                          int(gridDim.y - 1 - blockIdx.y) * Tiles<D, kWG>::kRows, att, lse, qkv, rope,
                                          s, scale_log2, f8);
}

// ---- backward, bf16 -----------------------------------------------------------------------

// dQ = scale * dS K for one (query tile, batch, head), or one chunk of its key tiles
// (ColumnSplit). The tile's delta = rowsum(dO * O) is computed here, each row by the four
// threads that hold it, and written out by the column's first chunk for the dK/dV kernel.
template <int D, int kWG, bool kRope>
__global__ void __launch_bounds__(Tiles<D, kWG>::kThreads)
    flash_backward_dq_kernel(Successor next, bf16_t* dqkv, float* partial, float* delta, const bf16_t* datt,
                             const bf16_t* att, const bf16_t* qkv, const float* rope, const float* lse, AttnShape s,
                             ColumnSplit split, float scale, float scale_log2) {
  if constexpr (!kRope) rope = nullptr;  // (with_rope)
  await_previous_kernel(next);
  using C = Tiles<D, kWG>;
  constexpr int kRows = C::kRows, kKeys = C::kKeys;
  unsigned char* sq = aligned_smem();                  // [kRows][D]
  unsigned char* sdo = sq + Smem<D>::bytes(kRows);     // [kRows][D]
  unsigned char* sk = sdo + Smem<D>::bytes(kRows);     // [2][kKeys][D]
  unsigned char* sv = sk + 2 * Smem<D>::bytes(kKeys);  // [2][kKeys][D]

  const int qt = split.columns - 1 - blockIdx.y / split.slots, chunk = blockIdx.y % split.slots;  // longest first
  const int begin = chunk * split.chunk, end = min(begin + split.chunk, split.steps(qt));
  if (begin >= end) return;  // the column has fewer chunks than the longest
  const int q0 = qt * kRows;
  const int b = blockIdx.x / s.H, h = blockIdx.x % s.H, kvh = h / (s.H / s.KVH);
  const int ld = (s.H + 2 * s.KVH) * D, ld_att = s.H * D;
  const bf16_t* base = qkv + int64_t(b) * s.T * ld;
  const bf16_t* kg = base + int64_t(s.H + kvh) * D;
  const bf16_t* vg = base + int64_t(s.H + s.KVH + kvh) * D;

  load_tile<kRows, D, C::kThreads>(sq, base + int64_t(h) * D, ld, q0, s.T);
  load_tile<kRows, D, C::kThreads>(sdo, datt + int64_t(b) * s.T * ld_att + int64_t(h) * D, ld_att, q0, s.T);
  load_tile<kKeys, D, C::kThreads>(sk + begin % 2 * Smem<D>::bytes(kKeys), kg, ld, begin * kKeys, s.T);
  load_tile<kKeys, D, C::kThreads>(sv + begin % 2 * Smem<D>::bytes(kKeys), vg, ld, begin * kKeys, s.T);
  cp_async_commit();

  const int wg = threadIdx.x / kWarpgroup, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int wrow = 16 * (threadIdx.x / 32);
  const int64_t stats = (int64_t(b) * s.H + h) * s.T;
  float2 row_stat[2];  // (lse in base 2, delta) of rows g and g + 8
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = min(q0 + wrow + g + 8 * r, s.T - 1);
    const float dl = row_delta<D>(att, datt, (int64_t(b) * s.T + row) * ld_att + int64_t(h) * D, t);
    row_stat[r] = make_float2(lse[stats + row] * kLog2e, dl);
    if (chunk == 0 && t == 0 && q0 + wrow + g + 8 * r < s.T) delta[stats + row] = dl;
  }
  float dq[D / 2] = {};

  for (int j = begin; j < end; ++j) {
    const int buf = j % 2 * Smem<D>::bytes(kKeys);
    tiles_landed([&] {
      if (j == begin) rotate_tile<kRows, D, C::kThreads>(sq, rope, q0, s.T);
      rotate_tile<kKeys, D, C::kThreads>(sk + buf, rope, j * kKeys, s.T);
    });
    load_next_kv_tile<kKeys, D, 2, C::kThreads>(j, end, sk, sv, kg, vg, ld, s.T);
    float sc[kKeys / 2] = {}, dp[kKeys / 2] = {};
    wg_abt<kKeys, D, kRows>(sc, smem_addr(sq), 64 * wg, smem_addr(sk + buf));   // S = Q K^T
    wg_abt<kKeys, D, kRows>(dp, smem_addr(sdo), 64 * wg, smem_addr(sv + buf));  // dP = dO V^T
    wgmma_wait<0>(sc, dp);
    const int k0 = j * kKeys;
    const bool edge = k0 + kKeys - 1 > q0 + wrow || k0 + kKeys > s.T;
    recompute_p_ds(
        sc, dp, edge, scale_log2,
        [&](int n, int e) {
          const int row = q0 + wrow + g + 8 * (e / 2), col = k0 + n * 8 + 2 * t + e % 2;
          return col > row || col >= s.T;
        },
        [&](int, int e) { return row_stat[e / 2]; });
    uint32_t ds[kKeys / 16][4];
    to_a_operand<kKeys>(ds, dp);
    wg_pb<kKeys, D>(dq, ds, smem_addr(sk + buf));  // dQ += dS K
    wgmma_wait<0>(dq);
  }
  const bool whole = split.chunks(qt) == 1;
  float* slot = whole ? nullptr : partial + split.slot(blockIdx.x, qt, chunk, D);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = q0 + wrow + g + 8 * r;
    if (row >= s.T) continue;
    bf16_t* out = dqkv + (int64_t(b) * s.T + row) * ld + int64_t(h) * D + 2 * t;
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      const float2 d = unrotate<D>(dq[4 * n + 2 * r], dq[4 * n + 2 * r + 1], rope, row, 4 * n + t);
      if (whole)
        *reinterpret_cast<__nv_bfloat162*>(out + n * 8) = __floats2bfloat162_rn(d.x * scale, d.y * scale);
      else
        *reinterpret_cast<float2*>(slot + (wrow + g + 8 * r) * D + n * 8 + 2 * t) = d;
    }
  }
}

// The query tile of a dK/dV step: tiles first .. tiles - 1 of each head of the group in turn.
struct StepCursor {
  int head, tile;
  __device__ void next(int first, int tiles) {
    if (++tile == tiles) tile = first, ++head;
  }
};

// Counters in global memory: one thread reads (acquire) or writes (release) for its block,
// ordered with the block's other threads by a barrier.
__device__ __forceinline__ int load_acquire(const int* p) {
  int v;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void store_release(int* p, int v) {
  asm volatile("st.release.gpu.global.b32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}

// The fused backward's dQ part of one step (64 queries x D accumulators of the warpgroup) added
// into `out` (row stride ld, `rows` rows valid) when *turn == mine: the first turn stores, the
// others add. Then the next turn is the next block's.
template <int D>
__device__ __forceinline__ void add_in_turn(float* out, int64_t ld, int rows, const float (&dq)[D / 2], int* turn,
                                            int mine) {
  if (threadIdx.x == 0)
    while (load_acquire(turn) != mine) {
    }
  __syncthreads();
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4, row0 = 16 * (threadIdx.x / 32) + g;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (row0 + 8 * r >= rows) continue;
    float* at = out + (row0 + 8 * r) * ld + 2 * t;
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      const float2 v = make_float2(dq[4 * n + 2 * r], dq[4 * n + 2 * r + 1]);
      if (mine == 0)
        *reinterpret_cast<float2*>(at + n * 8) = v;
      else
        atomicAdd(reinterpret_cast<float2*>(at + n * 8), v);
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) store_release(turn, mine + 1);
}

// dK = scale * dS^T Q and dV = P^T dO for one (key tile, batch, kv head), summed over the query
// heads of the group, or one chunk of that sum (ColumnSplit). The block is one warpgroup that
// owns 64 keys and computes the transposed tiles S^T = K Q^T and dP^T = V dO^T, so P^T and dS^T
// are A operands in registers for dV and dK. (One warpgroup per block: at up to 168 registers
// per thread, which the launch bounds ask of D <= 64, three blocks fit an SM.)
// kFusedDq (the fused backward, one chunk a column): dQ's sums too, into dq_acc, taking turns
// on turns[] (see the top of the file).
template <int D, bool kFusedDq, bool kRope>
__global__ void __launch_bounds__(Tiles<D, 1>::kThreads, D <= 64 ? 3 : 1)
    flash_backward_dkdv_kernel(Successor next, bf16_t* dqkv, float* partial, float* dq_acc, int* turns,
                               const bf16_t* datt, const bf16_t* qkv, const float* rope, const float* lse,
                               const float* delta, AttnShape s, ColumnSplit split, float scale, float scale_log2) {
  if constexpr (!kRope) rope = nullptr;  // (with_rope)
  await_previous_kernel(next);
  using C = Tiles<D, 1>;
  constexpr int kKeys = C::kRows, kRows = dkdv_queries(D);
  static_assert(kKeys == kTileKeys, "a dK/dV block owns kTileKeys keys");
  static_assert(!kFusedDq || kRows == 64, "the fused dQ product takes 64 queries a step");
  unsigned char* sk = aligned_smem();                  // [kKeys][D]
  unsigned char* sv = sk + Smem<D>::bytes(kKeys);      // [kKeys][D]
  unsigned char* sq = sv + Smem<D>::bytes(kKeys);      // [2][kRows][D]
  unsigned char* sdo = sq + 2 * Smem<D>::bytes(kRows);  // [2][kRows][D]
  unsigned char* sds = sdo + 2 * Smem<D>::bytes(kRows);  // fused: dS [kRows][kKeys]
  float* slse = reinterpret_cast<float*>(sds + (kFusedDq ? Smem<kKeys>::bytes(kRows) : 0));  // [2][kRows]
  float* sdelta = slse + 2 * kRows;                                                        // [2][kRows]
  // The block's place in the grid. The fused dQ's blocks take theirs from a ticket in the order
  // they start, so that a block waits only on blocks already running.
  int place = blockIdx.y * gridDim.x + blockIdx.x;
  if constexpr (kFusedDq) {
    int* ticket = reinterpret_cast<int*>(slse);  // not yet in use
    if (threadIdx.x == 0) *ticket = atomicAdd(turns + int64_t(s.B) * s.H * split.tiles, 1);
    __syncthreads();
    place = *ticket;
    __syncthreads();
  }
  const int row_block = place % gridDim.x, column = place / gridDim.x;
  // Key tile and its chunk: the longest columns first, or for the fused dQ the shortest.
  const int kt = kFusedDq ? split.columns - 1 - column : column / split.slots;
  const int chunk = kFusedDq ? 0 : column % split.slots;
  const int begin = chunk * split.chunk, end = min(begin + split.chunk, split.steps(kt));
  if (begin >= end) return;  // the column has fewer chunks than the longest

  const int k0 = kt * kKeys;
  const int b = row_block / s.KVH, kvh = row_block % s.KVH, group = s.H / s.KVH;
  const int ld = (s.H + 2 * s.KVH) * D, ld_att = s.H * D;
  const bf16_t* base = qkv + int64_t(b) * s.T * ld;
  // Step i of the loop: query tile first + i % per_head of query head kvh * group + i / per_head.
  // Two cursors walk the steps, one loading a step ahead of the one computing (no divisions).
  const int first = kt * kKeys / kRows, per_head = split.tiles - first;
  StepCursor loading{begin / per_head, first + begin % per_head}, computing = loading;
  auto load_step = [&](int buf) {
    const int h = kvh * group + loading.head, q0 = loading.tile * kRows;
    const int64_t stats = (int64_t(b) * s.H + h) * s.T;
    load_tile<kRows, D, C::kThreads>(sq + buf * Smem<D>::bytes(kRows), base + int64_t(h) * D, ld, q0, s.T);
    load_tile<kRows, D, C::kThreads>(sdo + buf * Smem<D>::bytes(kRows),
                                     datt + int64_t(b) * s.T * ld_att + int64_t(h) * D, ld_att, q0, s.T);
    load_row_stats<kRows, C::kThreads>(slse + buf * kRows, lse + stats, q0, s.T);
    load_row_stats<kRows, C::kThreads>(sdelta + buf * kRows, delta + stats, q0, s.T);
    loading.next(first, split.tiles);
  };
  load_tile<kKeys, D, C::kThreads>(sk, base + int64_t(s.H + kvh) * D, ld, k0, s.T);
  load_tile<kKeys, D, C::kThreads>(sv, base + int64_t(s.H + s.KVH + kvh) * D, ld, k0, s.T);
  load_step(begin & 1);
  cp_async_commit();

  const int wg = threadIdx.x / kWarpgroup, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int wkey = 16 * (threadIdx.x / 32);  // the warp's first key in the tile
  float dk[D / 2] = {}, dv[D / 2] = {};
  for (int i = begin; i < end; ++i) {
    const int q0 = computing.tile * kRows, computing_head = computing.head;
    computing.next(first, split.tiles);
    tiles_landed([&] {  // step i has landed, and every warp is done with step i - 1's buffers
      if (i == begin) rotate_tile<kKeys, D, C::kThreads>(sk, rope, k0, s.T);
      rotate_tile<kRows, D, C::kThreads>(sq + (i & 1) * Smem<D>::bytes(kRows), rope, q0, s.T);
    });
    const uint32_t qt = smem_addr(sq + (i & 1) * Smem<D>::bytes(kRows));
    const uint32_t dot = smem_addr(sdo + (i & 1) * Smem<D>::bytes(kRows));
    const float* lse_t = slse + (i & 1) * kRows;
    const float* delta_t = sdelta + (i & 1) * kRows;
    float st[kRows / 2] = {}, dpt[kRows / 2] = {};
    wg_abt<kRows, D, kKeys>(st, smem_addr(sk), 64 * wg, qt);    // S^T = K Q^T
    wg_abt<kRows, D, kKeys>(dpt, smem_addr(sv), 64 * wg, dot);  // dP^T = V dO^T
    if (i + 1 < end) {  // the next step's copies, while the tensor cores work
      load_step((i + 1) & 1);
      cp_async_commit();
    }
    wgmma_wait<0>(st, dpt);
    const bool edge = k0 + wkey + 15 > q0 || q0 + kRows > s.T;
    recompute_p_ds(
        st, dpt, edge, scale_log2,
        [&](int n, int e) {
          const int query = q0 + n * 8 + 2 * t + e % 2, key = k0 + wkey + g + 8 * (e / 2);
          return key > query || query >= s.T;
        },
        [&](int n, int e) {  // the query pair of column n, read as one 8-byte word each
          const float2 l = *reinterpret_cast<const float2*>(lse_t + n * 8 + 2 * t);
          const float2 d = *reinterpret_cast<const float2*>(delta_t + n * 8 + 2 * t);
          return e % 2 ? make_float2(l.y * kLog2e, d.y) : make_float2(l.x * kLog2e, d.x);
        });
    uint32_t p[kRows / 16][4], ds[kRows / 16][4];
    to_a_operand<kRows>(p, st);
    to_a_operand<kRows>(ds, dpt);
    if constexpr (kFusedDq) {  // dS as rounded for dK into shared memory, the queries as rows
#pragma unroll
      for (int i = 0; i < kRows / 2; ++i) {  // accumulator i: fragment ds[i / 8][i % 8 / 2], half i % 2
        const int query = i / 4 * 8 + 2 * t + i % 2, key = wkey + g + 8 * (i % 4 / 2);
        *reinterpret_cast<uint16_t*>(sds + Smem<kKeys>::offset(kRows, query, key & ~7) + (key & 7) * 2) =
            uint16_t(ds[i / 8][i % 8 / 2] >> (16 * (i % 2)));
      }
    }
    wg_pb<kRows, D>(dv, p, dot);  // dV += P^T dO
    wg_pb<kRows, D>(dk, ds, qt);  // dK += dS^T Q
    if constexpr (kFusedDq) {  // dQ's part dS K, added into dq_acc in this key tile's turn
      asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
      __syncthreads();
      float dq[D / 2];
      wg_ab<kKeys, D>(dq, smem_addr(sds), smem_addr(sk));  // dQ part = dS K
      wgmma_wait<0>(dv, dk, dq);
      const int q_tile = q0 / kRows, h = kvh * group + computing_head;
      add_in_turn<D>(dq_acc + (int64_t(b) * s.T + q0) * (int64_t(s.H) * D) + int64_t(h) * D, int64_t(s.H) * D,
                     s.T - q0, dq, turns + (int64_t(b) * s.H + h) * split.tiles + q_tile, q_tile - kt);
    } else {
      wgmma_wait<0>(dv, dk);
    }
  }
  const bool whole = split.chunks(kt) == 1;
  float* slot = whole ? nullptr : partial + split.slot(blockIdx.x, kt, chunk, D);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int key = k0 + wkey + g + 8 * r;
    if (key >= s.T) continue;
    bf16_t* row = dqkv + (int64_t(b) * s.T + key) * ld + 2 * t;
    bf16_t* dk_out = row + int64_t(s.H + kvh) * D;
    bf16_t* dv_out = row + int64_t(s.H + s.KVH + kvh) * D;
#pragma unroll
    for (int c = 0; c < D / 8; ++c) {
      const float2 k2 = unrotate<D>(dk[4 * c + 2 * r], dk[4 * c + 2 * r + 1], rope, key, 4 * c + t);
      const float2 v2 = make_float2(dv[4 * c + 2 * r], dv[4 * c + 2 * r + 1]);
      if (whole) {
        *reinterpret_cast<__nv_bfloat162*>(dk_out + c * 8) = __floats2bfloat162_rn(k2.x * scale, k2.y * scale);
        *reinterpret_cast<__nv_bfloat162*>(dv_out + c * 8) = __floats2bfloat162_rn(v2.x, v2.y);
      } else {
        float* at = slot + (wkey + g + 8 * r) * D + c * 8 + 2 * t;
        *reinterpret_cast<float2*>(at) = k2;
        *reinterpret_cast<float2*>(at + kKeys * D) = v2;
      }
    }
  }
}

// ---- a short sequence's backward in one launch (attention-backward-in-one-block) --------------
// flash_tiles.cuh's backward_one_block, a block each.
template <int D, int kWG, bool kRope, bool kRotate>
__global__ void __launch_bounds__(kWG * kWarpgroup)
    flash_backward_one_block_kernel(Successor next, bf16_t* dqkv, const bf16_t* datt, const bf16_t* att,
                                    const bf16_t* qkv, const float* rope, const float* lse, AttnShape s, float scale,
                                    float scale_log2) {
  await_previous_kernel(next);
  backward_one_block<D, kWG, kRope, kRotate>(int(blockIdx.x), dqkv, datt, att, qkv, rope, lse, s, scale, scale_log2);
}

// dK and dV, or dQ, of the split columns: the slots of a column added in chunk order (the same
// bits every run), matrix 0 (dK or dQ) scaled, all rounded into dqkv, where matrix m of head
// `head` is the column block col0 + m * heads + head. One thread per 4 consecutive elements of
// [batch * heads][row][matrix][D].
template <int D>
__global__ void flash_backward_split_sum_kernel(Successor next, bf16_t* dqkv, const float* partial, AttnShape s,
                                                ColumnSplit split, int heads, int col0, float scale) {
  await_previous_kernel(next);
  const int64_t i = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * 4;
  const int d = int(i % D), mat = int(i / D % split.mats), row = int(i / D / split.mats % s.T);
  const int64_t bh = i / D / split.mats / s.T;  // batch * heads + head
  if (bh >= int64_t(s.B) * heads) return;
  const int n = row / split.rows, chunks = split.chunks(n);
  if (chunks == 1) return;  // written by its one block
  const float* p = partial + split.slot(bh, n, 0, D) + (mat * split.rows + row % split.rows) * D + d;
  float4 acc = *reinterpret_cast<const float4*>(p);
  for (int c = 1; c < chunks; ++c) {
    const float4 x = *reinterpret_cast<const float4*>(p + c * split.slot_floats(D));
    acc.x += x.x, acc.y += x.y, acc.z += x.z, acc.w += x.w;
  }
  const float k = mat == 0 ? scale : 1.0f;
  const int64_t b = bh / heads, head = bh % heads;
  bf16_t* out = dqkv + (b * s.T + row) * int64_t(s.H + 2 * s.KVH) * D + (col0 + mat * heads + head) * D + d;
  reinterpret_cast<__nv_bfloat162*>(out)[0] = __floats2bfloat162_rn(acc.x * k, acc.y * k);
  reinterpret_cast<__nv_bfloat162*>(out)[1] = __floats2bfloat162_rn(acc.z * k, acc.w * k);
}

// The fused backward's first kernel: delta = rowsum(dO * O) of every query row, four threads a
// row as in the dQ kernel (the same bits), and the turns and the ticket of the dK/dV kernel set
// to 0.
template <int D>
__global__ void flash_backward_delta_kernel(Successor next, float* delta, int* turns, int64_t turn_count,
                                            const bf16_t* datt, const bf16_t* att, AttnShape s) {
  await_previous_kernel(next);
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < turn_count) turns[i] = 0;
  const int64_t rows = int64_t(s.B) * s.T * s.H, row = min(i / 4, rows - 1);  // (batch, position, head)
  const float dl = row_delta<D>(att, datt, row * D, int(i % 4));  // every thread of a quad takes part
  if (i / 4 < rows && i % 4 == 0) {
    const int64_t h = row % s.H, pos = row / s.H % s.T, b = row / s.H / s.T;
    delta[(b * s.H + h) * s.T + pos] = dl;
  }
}

// The fused backward's last kernel: dQ's fp32 sums [B T, H D] turned back (rope-in-attention),
// scaled and rounded into dqkv, two elements a thread.
template <int D>
__global__ void flash_backward_dq_store_kernel(Successor next, bf16_t* dqkv, const float* dq_acc, const float* rope,
                                               AttnShape s, float scale) {
  await_previous_kernel(next);
  const int64_t i = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * 2, hd = int64_t(s.H) * D;
  if (i >= int64_t(s.B) * s.T * hd) return;
  const int64_t token = i / hd;
  const int col = int(i % hd);
  const float2 v = *reinterpret_cast<const float2*>(dq_acc + i);
  const float2 d = unrotate<D>(v.x, v.y, rope, int(token % s.T), col % D / 2);
  *reinterpret_cast<__nv_bfloat162*>(dqkv + token * (s.H + 2 * s.KVH) * D + col) =
      __floats2bfloat162_rn(d.x * scale, d.y * scale);
}

// ---- launchers ------------------------------------------------------------------------------

// Dynamic shared memory over 48 KiB must be allowed per kernel before its launch.
template <class Kernel>
void allow_smem(Kernel kernel, size_t bytes) {
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
}


// The tensor-core kernels' grid: the (batch, head) rows in x, the columns (query or key tiles,
// or chunks of them; the longest first, but the fused dK/dV kernel's, shortest first) in y. The
// hardware starts blocks x first, so every row's longest column starts before any shorter one,
// and the short ones fill the tail. (With
// the columns in x, the rows of the last wave started their longest columns last: B1 T8192's
// forward took 0.26 ms instead of 0.19.)
dim3 column_grid(int rows, int columns) {
  TT_CHECK(columns <= 65535, "flash attention: the sequence is too long (more than 65535 tiles of blocks)");
  return dim3(unsigned(rows), unsigned(columns));
}

// What the bf16 kernels assume of their inputs: 32-bit row offsets within a sequence, and
// tensors that start on 16-byte boundaries (their tiles move in 16-byte copies).
void check_bf16_layout(const AttnShape& s, std::initializer_list<const void*> tensors) {
  TT_CHECK(int64_t(s.T) * (s.H + 2 * s.KVH) * s.D <= INT_MAX,
           "flash attention: one sequence of qkv must hold fewer than 2^31 elements");
  for (const void* p : tensors)
    TT_CHECK(aligned16(p), "flash attention: its bf16 tensors must start on 16-byte boundaries");
}

// The scratch holds delta, then (from a 256-byte boundary, for the vector accesses) the
// partial sums of split columns, or the fused backward's fp32 dQ and its counters.
int64_t delta_numel(const AttnShape& s) { return (int64_t(s.B) * s.H * s.T + 63) / 64 * 64; }

int sm_count() {
  static const int sms = [] {
    int n = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, 0));
    return n;
  }();
  return sms;
}

// Two warpgroups per block share each key/value tile between 128 query rows (half the
// shared-memory traffic per product), but halve the number of blocks: they are used only where
// at least two blocks per SM remain.
int warpgroups_for(int rows, int heads) {
  return int64_t(blocks_of(rows, 2 * 64)) * heads >= 2 * sm_count() ? 2 : 1;
}
template <class F>
void with_warpgroups(int rows, int heads, F&& f) {
  if (warpgroups_for(rows, heads) == 2) return f(std::integral_constant<int, 2>{});
  f(std::integral_constant<int, 1>{});
}

// rope-in-attention's kernels are instances of their own (kRope): the rotation's code holds
// registers even in a kernel that never runs it. With it, the dQ kernel (D 64, two warpgroups)
// took 170 registers instead of 124, one block per SM instead of two, and the forward of one
// warpgroup 146 instead of 128. The splits of the columns come from the kernels without it.
template <class F>
void with_rope(const float* rope, F&& f) {
  if (rope) return f(std::true_type{});
  f(std::false_type{});
}

// Blocks of `kernel` the whole GPU runs at once (registers and shared memory permitting).
template <class Kernel>
int resident_blocks(Kernel kernel, int threads, size_t smem) {
  allow_smem(kernel, smem);
  int per_sm = 0;
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem));
  return std::max(per_sm, 1) * sm_count();
}

// Fills in chunk and slots of a split whose columns are described, for a grid of `heads`
// (batch x heads) rows of which `resident` blocks run at once. Columns are split only where the
// longest is well past the work of one resident block if all were spread evenly (by 1.25x:
// below that the partial sums cost more than the balance gains, as measured at B8 T1024), into
// chunks for about kSplitTargetBlocks blocks, of at least kSplitMinChunk steps.
ColumnSplit with_chunks(ColumnSplit split, int64_t heads, int resident) {
  int64_t steps = 0;
  int longest = 0;
  for (int n = 0; n < split.columns; ++n) steps += split.steps(n), longest = std::max(longest, split.steps(n));
  steps *= heads;
  split.chunk = longest;
  if (4 * int64_t(longest) * resident > 5 * steps) {
    const int64_t per_block = (steps + kSplitTargetBlocks - 1) / kSplitTargetBlocks;
    split.chunk = int(std::min<int64_t>(longest, std::max<int64_t>(kSplitMinChunk, per_block)));
  }
  split.slots = (longest + split.chunk - 1) / split.chunk;
  return split;
}

template <int D, int kWG>
size_t dq_smem() {
  return kSmemAlign + Smem<D>::bytes(2 * Tiles<D, kWG>::kRows + 4 * kTileKeys);
}

template <int D, bool kFusedDq>
size_t dkdv_smem() {
  constexpr int kRows = dkdv_queries(D);
  return kSmemAlign + Smem<D>::bytes(2 * kTileKeys + 4 * kRows) + (kFusedDq ? Smem<kTileKeys>::bytes(kRows) : 0) +
         sizeof(float) * 4 * kRows;
}

template <int D, bool kFusedDq = false>
ColumnSplit dkdv_split(const AttnShape& s) {
  ColumnSplit split{};
  split.keys = true;
  split.rows = kTileKeys;
  split.columns = blocks_of(s.T, kTileKeys);
  split.mats = 2;
  split.query_rows = dkdv_queries(D);
  split.tiles = blocks_of(s.T, split.query_rows);
  split.group = s.H / s.KVH;
  return with_chunks(split, int64_t(s.B) * s.KVH,
                     resident_blocks(flash_backward_dkdv_kernel<D, kFusedDq, false>, kWarpgroup, dkdv_smem<D, kFusedDq>()));
}

}  // namespace

bool flash_attention_fused_backward(const AttnShape& s, bool asked) {
  if (!asked || !flash_attention_supports(s) || dkdv_queries(s.D) != 64) return false;
  bool whole = false;
  with_head_dim(s.D, [&](auto dim) {
    constexpr int D = decltype(dim)::value;
    if constexpr (dkdv_queries(D) == 64) whole = dkdv_split<D, true>(s).slots == 1;
  });
  return whole;
}

namespace {
// The fused backward's scratch after delta: dQ's sums [B T, H D], then the turns [B H][query
// tiles] and the dK/dV blocks' ticket counter.
int64_t dq_acc_numel(const AttnShape& s) { return int64_t(s.B) * s.T * s.H * s.D; }
int64_t turn_count(const AttnShape& s) { return int64_t(s.B) * s.H * blocks_of(s.T, 64) + 1; }

template <int D, int kWG>
ColumnSplit dq_split(const AttnShape& s) {
  ColumnSplit split{};
  split.keys = false;
  split.rows = Tiles<D, kWG>::kRows;
  split.columns = blocks_of(s.T, split.rows);
  split.mats = 1;
  split.tiles = blocks_of(s.T, kTileKeys);
  return with_chunks(split, int64_t(s.B) * s.H,
                     resident_blocks(flash_backward_dq_kernel<D, kWG, false>, Tiles<D, kWG>::kThreads, dq_smem<D, kWG>()));
}

}  // namespace

std::string flash_attention_one_block_misfit(const AttnShape& s) {
  if (s.D != 64) return "head size " + std::to_string(s.D) + ", not 64";
  if (s.T > 128) return "sequences of " + std::to_string(s.T) + ", more than 128";
  if (s.H / s.KVH > kOneBlockMaxGroup)
    return std::to_string(s.H / s.KVH) + " query heads a kv head, more than " + std::to_string(kOneBlockMaxGroup);
  return "";
}

bool flash_attention_supports(const AttnShape& s) { return s.D == 32 || s.D == 64 || s.D == 128; }

int64_t flash_attention_scratch_numel(const AttnShape& s, DType dtype, bool fused) {
  if (dtype != DType::BF16 || !flash_attention_supports(s)) return delta_numel(s);
  // The fused backward's fp32 dQ and turns, or (either way, for a call without it) the two
  // kernels' partial sums.
  const int64_t fused_numel = flash_attention_fused_backward(s, fused) ? dq_acc_numel(s) + turn_count(s) : 0;
  // The two backward kernels run one after the other: their partial sums share the space.
  auto partial_numel = [&](const ColumnSplit& split, int heads) {
    return split.slots > 1 ? split.slot(int64_t(s.B) * heads, 0, 0, s.D) : 0;  // the slots of all grid rows
  };
  int64_t partial = 0;
  with_head_dim(s.D, [&](auto dim) {
    constexpr int D = decltype(dim)::value;
    partial = partial_numel(dkdv_split<D>(s), s.KVH);
    with_warpgroups(s.T, s.B * s.H, [&](auto warpgroups) {
      partial = std::max(partial, partial_numel(dq_split<D, decltype(warpgroups)::value>(s), s.H));
    });
  });
  return delta_numel(s) + std::max(partial, fused_numel);
}

// Our flash attention kernels are placed the plain way even under programmatic-launch
// (launch_plainly; they still let the kernel after them in early). Launched programmatically,
// the v3 bf16 step was slower (H200: B1 T4096 4.32 ms against 4.22 ms with these kernels
// plain, B8 T128 1.415 against 1.40 ms). Our reading: blocks placed early land on whichever
// SMs the kernel before frees first, which undoes the heavy-first block order of column_grid.
// The kernels still begin with await_previous_kernel(), so a programmatic launch would stay
// correct.
void flash_attention_forward(const Tensor& att, const Tensor& lse, const Tensor& qkv, const AttnShape& s,
                             const float* rope, Stream st, const Fp8Matrix& att8) {
  TT_CHECK(!rope || qkv.dtype == DType::BF16, "rope-in-attention: the bf16 kernels only");
  const bool fp8 = !att8.slot.empty();
  TT_CHECK(!fp8 || qkv.dtype == DType::BF16, "fp8-fused-attention: the bf16 kernels only");
  Fp8Out f8;
  if (fp8) {
    f8 = fp8_out(att8, int64_t(s.B) * s.T, int64_t(s.H) * s.D);
    // A transpose's 4-byte run starts at a token b T + q0 + 4 k: on a 4-byte boundary where T is a multiple of 4.
    f8.wide_t = f8.wide_t && s.T % 4 == 0;
  }
  const float scale_log2 = float(s.scale()) * kLog2e;
  with_head_dim(s.D, [&](auto dim) {
    constexpr int D = decltype(dim)::value;
    if (qkv.dtype == DType::BF16) {
      check_bf16_layout(s, {qkv.ptr, att.ptr});
      with_warpgroups(s.T, s.B * s.H, [&](auto warpgroups) {
        constexpr int kWG = decltype(warpgroups)::value;
        using C = Tiles<D, kWG>;
        const size_t smem = kSmemAlign + Smem<D>::bytes(C::kRows + 2 * C::kFwdStages * C::kKeys);
        auto run = [&](auto kernel) {
          allow_smem(kernel, smem);
          launch_plainly("flash_forward_kernel", kernel, column_grid(s.B * s.H, blocks_of(s.T, C::kRows)), C::kThreads,
                         smem, st, static_cast<bf16_t*>(att.ptr), lse.data<float>(),
                         static_cast<const bf16_t*>(qkv.ptr), rope, s, scale_log2, f8);
        };
        with_rope(rope, [&](auto with) {
          constexpr bool kRope = decltype(with)::value;
          if (fp8)
            run(flash_forward_kernel<D, kWG, true, kRope>);
          else
            run(flash_forward_kernel<D, kWG, false, kRope>);
        });
      });
    } else {
      TT_CHECK(qkv.dtype == DType::F32, "flash attention: fp32 or bf16 only");
      flash_attention_forward_fp32(att, lse, qkv, s, scale_log2, st);
    }
  });
}

void flash_attention_backward(const Tensor& dqkv, const Tensor& datt, const Tensor& qkv, const Tensor& att,
                              const Tensor& lse, const AttnShape& s, const float* rope, const Tensor& scratch,
                              bool fused, bool one_block, Stream st, bool rope_before) {
  TT_CHECK(!rope || qkv.dtype == DType::BF16, "rope-in-attention: the bf16 kernels only");
  one_block = one_block && qkv.dtype == DType::BF16 && flash_attention_one_block_misfit(s).empty();
  TT_CHECK(!rope_before || (rope && one_block), "RoPE's backward inside the attention's: the one-block kernel only");
  fused = fused && qkv.dtype == DType::BF16 && flash_attention_fused_backward(s, true);
  TT_CHECK(scratch.numel >= flash_attention_scratch_numel(s, qkv.dtype, fused), "flash attention scratch too small");
  const float scale = float(s.scale()), scale_log2 = scale * kLog2e;
  float* delta = scratch.data<float>();  // written by the dQ or delta kernel, read by the dK/dV kernel
  with_head_dim(s.D, [&](auto dim) {
    constexpr int D = decltype(dim)::value;
    if (qkv.dtype == DType::BF16) {
      check_bf16_layout(s, {dqkv.ptr, datt.ptr, qkv.ptr, att.ptr});
      auto* dq = static_cast<bf16_t*>(dqkv.ptr);
      auto* g = static_cast<const bf16_t*>(datt.ptr);
      auto* o = static_cast<const bf16_t*>(att.ptr);
      auto* x = static_cast<const bf16_t*>(qkv.ptr);
      float* partial = delta + delta_numel(s);
      // Adds the chunks' slots of the split columns into dqkv (matrices from column block col0).
      auto sum_split = [&](const ColumnSplit& split, int heads, int col0) {
        const int64_t elements = int64_t(s.B) * heads * s.T * split.mats * D;
        launch_plainly("flash_backward_split_sum_kernel", flash_backward_split_sum_kernel<D>,
                       blocks_for(elements / 4, 256), 256, 0, st, dq, partial, s, split, heads, col0, scale);
      };
      // The tensor-core kernels: their shared memory allowed (the splits allow only the kernels
      // without rope-in-attention's rotation), then launched.
      auto run = [&](const char* name, auto kernel, dim3 grid, int threads, size_t smem, auto... args) {
        allow_smem(kernel, smem);
        launch_plainly(name, kernel, grid, threads, smem, st, args...);
      };
      with_rope(rope, [&](auto with) {
        constexpr bool kRope = decltype(with)::value;
        if constexpr (D == 64) {
          if (one_block) {
            auto one = [&](auto warpgroups) {
              constexpr int kWG = decltype(warpgroups)::value;
              auto kernel = rope_before ? flash_backward_one_block_kernel<D, kWG, kRope, false>
                                        : flash_backward_one_block_kernel<D, kWG, kRope, kRope>;
              allow_smem(kernel, OneBlock<kWG>::kSmem);
              launch_plainly_in("flash_backward_one_block_kernel", kernel, dim3(unsigned(s.B * s.H)),
                                kWG * kWarpgroup, OneBlock<kWG>::kSmem, st, s.H / s.KVH, dq, g, o, x, rope,
                                lse.data<float>(), s, scale, scale_log2);
            };
            if (s.T > 64) return one(std::integral_constant<int, 2>{});
            return one(std::integral_constant<int, 1>{});
          }
        }
        if constexpr (dkdv_queries(D) == 64) {
          if (fused) {
            float* dq_acc = delta + delta_numel(s);
            int* turns = reinterpret_cast<int*>(dq_acc + dq_acc_numel(s));
            const int64_t threads = std::max(4 * int64_t(s.B) * s.T * s.H, turn_count(s));
            launch_plainly("flash_backward_delta_kernel", flash_backward_delta_kernel<D>, blocks_for(threads, 256), 256,
                           0, st, delta, turns, turn_count(s), g, o, s);
            const ColumnSplit split = dkdv_split<D, true>(s);
            run("flash_backward_dkdv_kernel", flash_backward_dkdv_kernel<D, true, kRope>,
                column_grid(s.B * s.KVH, split.columns), kWarpgroup, dkdv_smem<D, true>(), dq, nullptr, dq_acc, turns,
                g, x, rope, lse.data<float>(), delta, s, split, scale, scale_log2);
            launch_plainly("flash_backward_dq_store_kernel", flash_backward_dq_store_kernel<D>,
                           blocks_for(dq_acc_numel(s) / 2, 256), 256, 0, st, dq, dq_acc, rope, s, scale);
            return;
          }
        }
        with_warpgroups(s.T, s.B * s.H, [&](auto warpgroups) {
          constexpr int kWG = decltype(warpgroups)::value;
          const ColumnSplit split = dq_split<D, kWG>(s);
          run("flash_backward_dq_kernel", flash_backward_dq_kernel<D, kWG, kRope>,
              column_grid(s.B * s.H, split.columns * split.slots), Tiles<D, kWG>::kThreads, dq_smem<D, kWG>(), dq,
              partial, delta, g, o, x, rope, lse.data<float>(), s, split, scale, scale_log2);
          if (split.slots > 1) sum_split(split, s.H, 0);
        });
        const ColumnSplit split = dkdv_split<D>(s);
        run("flash_backward_dkdv_kernel", flash_backward_dkdv_kernel<D, false, kRope>,
            column_grid(s.B * s.KVH, split.columns * split.slots), kWarpgroup, dkdv_smem<D, false>(), dq, partial,
            static_cast<float*>(nullptr), static_cast<int*>(nullptr), g, x, rope, lse.data<float>(), delta, s, split,
            scale, scale_log2);
        if (split.slots > 1) sum_split(split, s.KVH, s.H);
      });
    } else {
      TT_CHECK(qkv.dtype == DType::F32, "flash attention: fp32 or bf16 only");
      flash_attention_backward_fp32(dqkv, delta, datt, qkv, att, lse, s, scale, scale_log2, st);
    }
  });
}

}  // namespace tt::cuda
