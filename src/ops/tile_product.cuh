// Our own product tiles with an epilogue (gated_product.cuh, rope_product.cuh, block_forward.cu's
// residual tiles): 128 token rows (two warpgroups of 64) by kN columns a part (128, or 64 or 32 for
// more tiles), A K-major, through buffers that TMA fills a chunk of 64 along K at a time
// (128-byte-swizzled boxes), as in weight_gradients.cu, the sums in the order of cuBLAS's; and the
// store of the tile, staged in the free buffers, as 16-byte pieces of whole rows (write_staged).
#pragma once
#include <string>

#include "ops/cuda_common.cuh"
#include "ops/gemm.h"
#include "ops/hopper.cuh"

namespace tt::cuda::tile {

constexpr int kRows = 128, kCols = 128, kChunk = 64, kStages = 4, kThreads = 2 * kWarpgroup;
constexpr int kABytes = kRows * 128, kBPartBytes = kCols * 128;  // a chunk of A's rows, of one part of B
constexpr int kBox = 64 * kRows * 2;  // a [128 rows][64 columns] box of bf16 (the 128-byte swizzle): 16 KB

// The sums of a tile of 128 rows (a warpgroup's 64 in each thread's acc) over C / 64 chunks of K:
// kParts wgmma of kN columns a step, acc[p] from part p of B (kN rows of a K-major B, or kN (128
// or 64) columns of an MN-major one with kTransB). The chunks run through kBuffers buffers at `smem`
// (tma_ring of hopper.cuh: the copies kBuffers - 2 chunks ahead). Thread 0 asks for chunk c by
// `load_weights(c, buffer, bar)`, B's parts after A's place (kN x 128 bytes each) and the bytes the
// barrier expects for the whole chunk, then `load_inputs(c, buffer, bar)`, A at the buffer.
// B is a layer's weights, and the first kEarly chunks' B parts (by default all kBuffers - 2 that the
// ring asks for at its start) are asked for before `wait()` (await_previous_kernel in a kernel of its
// own; in block_forward.cu's persistent kernel, the wait for the tile's rows), so that under
// programmatic launch they arrive while the kernel before is still running (in the persistent
// kernel, while the tiles its rows wait for are made); A, the activations, after it.
// That is safe while nothing that may still run writes the weights: under programmatic launch only
// the kernel just before on the stream may (every kernel lets its successor in only past its own
// wait, cuda_common.cuh), and the kernels before these tiles are norms; the persistent kernel
// writes none. The weights are written by the optimizer on the update lane, which the main stream
// joins by an event at the step's end, and by gathers and loads that whole kernels follow before
// any product reads them.
template <int kParts, int kTransB, int kN = kCols, int kBuffers = kStages, int kEarly = kBuffers - 2, class LoadWeights,
          class LoadInputs, class Wait>
__device__ __forceinline__ void tile_sums(float (&acc)[kParts][kN / 2], unsigned char* smem, uint32_t bars, int chunks,
                                          Wait&& wait, LoadWeights&& load_weights, LoadInputs&& load_inputs) {
  static_assert(kN == kCols || kN == 64 || (kN == 32 && !kTransB), "tiles of 128 or 64 columns, or 32 of a K-major B");
  static_assert(kEarly >= 0 && kEarly <= kBuffers - 2, "early weights only for chunks the ring starts with");
  constexpr int kPartBytes = kN * 128, kStageBytes = kABytes + kParts * kPartBytes;
  const int wg = threadIdx.x / kWarpgroup;
#pragma unroll
  for (int p = 0; p < kParts; ++p)
#pragma unroll
    for (int i = 0; i < kN / 2; ++i) acc[p][i] = 0.0f;
  if (threadIdx.x == 0)
    for (int c = 0; c < kEarly && c < chunks; ++c) load_weights(c, smem_addr(smem + c * kStageBytes), bars + 8 * c);
  wait();
  auto load = [&](int c, uint32_t st, uint32_t bar) {
    if (c >= kEarly) load_weights(c, st, bar);
    load_inputs(c, st, bar);
  };
  tma_ring<kBuffers>(smem, kStageBytes, bars, chunks, load, [&](uint32_t st) {
    const uint64_t da = k_major_sw128(st + wg * 64 * 128);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < kChunk / 16; ++ks)
#pragma unroll
      for (int p = 0; p < kParts; ++p) {
        const uint32_t b = st + kABytes + p * kPartBytes;
        const uint64_t db = kTransB ? mn_major_sw128(b) + ks * (2048 >> 4) : k_major_sw128(b) + 2 * ks;
        Wgmma<kN>::template ss<kTransB>(acc[p], da + 2 * ks, db, 1);
      }
    wgmma_commit();
    wgmma_wait<1>(acc);  // chunk c - 1's products done
  });
  wgmma_wait<0>(acc);
  __syncthreads();  // both warpgroups done reading the buffers: free for the epilogue
}

// The sums of y = x W^T's tile of rows m0.. and kN columns c0.. over K: x [n, K] and W [N, K] both
// K-major, through maps of boxes of 64 columns by 128 rows (x) and kN rows (W); one part (the QKV
// product's tile, rope_product.cuh, and block_forward.cu's residual products).
template <int kN, int kBuffers, int kEarly, class Wait>
__device__ __forceinline__ void linear_tile_sums(float (&acc)[1][kN / 2], unsigned char* smem, uint32_t bars, int k,
                                                 const CUtensorMap& x, const CUtensorMap& w, int m0, int c0,
                                                 Wait&& wait) {
  tile_sums<1, 0, kN, kBuffers, kEarly>(
      acc, smem, bars, k / kChunk, wait,
      [&](int c, uint32_t st, uint32_t bar) {
        mbar_expect(bar, kABytes + kN * 128);
        tma_load_2d(st + kABytes, &w, c * kChunk, c0, bar);
      },
      [&](int c, uint32_t st, uint32_t bar) { tma_load_2d(st, &x, c * kChunk, m0, bar); });
}

// Thread (warp w of its warpgroup, g = lane / 4, t = lane % 4) holds rows 16 w + g and + 8 of its
// warpgroup's 64, columns 8 n + 2 t and + 1 of each part (hopper.cuh).
struct Fragment {
  int row0, t;
  __device__ Fragment()
      : row0(64 * int(threadIdx.x / kWarpgroup) + 16 * int(threadIdx.x % kWarpgroup / 32) + int(threadIdx.x % 32 / 4)),
        t(int(threadIdx.x % 4)) {}
  // Where the pair of columns 8 n + 2 t, + 1 of row `row` is staged, rows `pitch` bytes apart
  // (write_staged's rows).
  __device__ __nv_bfloat162* staged(unsigned char* smem, int pitch, int row, int n) const {
    return reinterpret_cast<__nv_bfloat162*>(smem + row * pitch + (8 * n + 2 * t) * 2);
  }
};

// The staged rows (kParts pieces of kN bf16 each, 16 bytes apart against bank conflicts) written
// as 16-byte pieces of whole rows: piece p of row r to out(r, p) .. + kN.
template <int kParts, int kN = kCols, class Out>
__device__ __forceinline__ void write_staged(const unsigned char* staged, Out out) {
  constexpr int kPitch = kParts * kN * 2 + 16, kPartPieces = kN * 2 / 16, kPieces = kParts * kPartPieces;
  __syncthreads();
  for (int i = threadIdx.x; i < kRows * kPieces; i += kThreads) {
    const int r = i / kPieces, piece = i % kPieces;
    reinterpret_cast<int4*>(out(r, piece / kPartPieces))[piece % kPartPieces] =
        *reinterpret_cast<const int4*>(staged + r * kPitch + piece * 16);
  }
}

// What the tile kernels take: bf16 operands, 16-byte rows and bases, tiles of 128 rows and chunks of
// 64, and where they pay, at most 1024 tokens (each kernel checks its own columns).
inline std::string shape_misfit(const Gemm& g) {
  // An empty product, refused here with its reason (the gated backward's epilogue would also wait
  // for gate and up, which come with the first chunk).
  if (std::string empty = empty_product_misfit(g); !empty.empty()) return empty;
  if (g.a.dtype != DType::BF16 || g.b.dtype != DType::BF16 || g.c.dtype != DType::BF16) return "operands not bf16";
  if (g.m % kRows || g.k % kChunk)
    return "a product of " + std::to_string(g.m) + " x " + std::to_string(g.n) + " x " + std::to_string(g.k) +
           " (tokens and F multiples of 128, the hidden size of 64)";
  if (g.lda % 8 || g.ldb % 8 || !aligned16(g.a.ptr) || !aligned16(g.b.ptr) || !aligned16(g.c.ptr))
    return "rows or bases not on 16-byte boundaries";
  if (g.m > 1024) return std::to_string(g.m) + " tokens, more than 1024";
  return "";
}
inline bool plain(const Gemm& g) {
  return g.alpha == 1.0f && g.beta == 0.0f && (g.c_in.empty() || g.c_in.ptr == g.c.ptr) && g.a_scale.empty() &&
         g.b_scale.empty();
}

}  // namespace tt::cuda::tile
