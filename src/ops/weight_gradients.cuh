// The grouped weight gradients' tile (weight_gradients.h's contract), as a device function:
// weight_gradients.cu launches it a tile a block, and block_backward.cu's persistent kernel runs it as
// one of its tasks. weight_gradients.cu says how a tile is made and why its shapes.
#pragma once
#include "ops/cuda_common.cuh"
#include "ops/hopper.cuh"

namespace tt::cuda::dw_tile {

constexpr int kCols = 128, kChunk = 64, kThreads = 2 * kWarpgroup;
constexpr int kBox = kChunk * 64 * 2;  // [64 tokens][64 columns] of bf16: 8 KB

// Tiles of kPieces * 128 rows of dW: each warpgroup kPieces pieces of 64 rows, the same 128
// columns of x for all. A chunk's buffer holds dout's boxes, then x's two.
template <int kPieces>
struct Tile {
  static_assert(kPieces == 1 || kPieces == 2, "one or two pieces a warpgroup (the kernel waits on those)");
  static constexpr int kRows = 128 * kPieces, kStages = kPieces == 1 ? 5 : 4;
  static constexpr int kStageBytes = (kRows / 64 + kCols / 64) * kBox;
  static constexpr int kSmemBytes = kStages * kStageBytes + 8 * kStages + kSmemAlign;
};

struct Product {
  CUtensorMap dout, x;  // [T, out] and [T, in], boxes of 64 x 64
  float* dw;            // [out, in], row stride ldw
  int64_t ldw;
  int in, first_tile;   // the product's tiles are first_tile ..
};
// Tile `block` of the products' tiles (products[0 .. count), each of `tokens` tokens; dW written,
// or added to with `add`), through T::kStages buffers at smem and as many barriers at bars
// (initialized by the caller).
template <int kPieces>
__device__ __forceinline__ void weight_gradient_tile(const Product* products, int count, int tokens, bool add,
                                                     unsigned char* smem, uint32_t bars, int block) {
  using T = Tile<kPieces>;
  constexpr int kRows = T::kRows, kStages = T::kStages, kStageBytes = T::kStageBytes, kDoutBoxes = kRows / 64;
  int pi = 0;
  while (pi + 1 < count && block >= products[pi + 1].first_tile) ++pi;
  const Product& pr = products[pi];
  const int tile = block - pr.first_tile, tiles_n = pr.in / kCols;
  const int m0 = tile / tiles_n * kRows, n0 = tile % tiles_n * kCols;
  const int wg = threadIdx.x / kWarpgroup;
  float acc[kPieces][kCols / 2];
#pragma unroll
  for (int p = 0; p < kPieces; ++p)
#pragma unroll
    for (int i = 0; i < kCols / 2; ++i) acc[p][i] = 0.0f;
  auto load = [&](int c, uint32_t st, uint32_t bar) {
    mbar_expect(bar, kStageBytes);
#pragma unroll
    for (int b = 0; b < kDoutBoxes; ++b) tma_load_2d(st + b * kBox, &pr.dout, m0 + 64 * b, c * kChunk, bar);
    tma_load_2d(st + kDoutBoxes * kBox, &pr.x, n0, c * kChunk, bar);
    tma_load_2d(st + (kDoutBoxes + 1) * kBox, &pr.x, n0 + 64, c * kChunk, bar);
  };
  tma_ring<kStages>(smem, kStageBytes, bars, tokens / kChunk, load, [&](uint32_t st) {
    const uint64_t db = mn_major_sw128(st + kDoutBoxes * kBox);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < kChunk / 16; ++ks)
#pragma unroll
      for (int p = 0; p < kPieces; ++p)
        Wgmma<kCols>::ss<1, 1>(acc[p], mn_major_sw128(st + (wg * kPieces + p) * kBox) + ks * (2048 >> 4),
                               db + ks * (2048 >> 4), 1);
    wgmma_commit();
    wgmma_wait<1>(acc);  // chunk c - 1's products done
  });
  wgmma_wait<0>(acc);
  // Thread (warp w of its warpgroup, g = lane / 4, t = lane % 4) holds rows 16 w + g and + 8 of each
  // piece, columns 8 n + 2 t and + 1 (hopper.cuh): 8-byte stores, 32 bytes of a row a warp instruction.
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
#pragma unroll
  for (int p = 0; p < kPieces; ++p) {
    const int row = m0 + 64 * (wg * kPieces + p) + 16 * (threadIdx.x % kWarpgroup / 32) + g;
    float* out = pr.dw + int64_t(row) * pr.ldw + n0 + 2 * t;
#pragma unroll
    for (int n = 0; n < kCols / 8; ++n)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        float2* at = reinterpret_cast<float2*>(out + int64_t(8 * r) * pr.ldw + 8 * n);
        float2 v = make_float2(acc[p][4 * n + 2 * r], acc[p][4 * n + 2 * r + 1]);
        if (add) {
          const float2 old = *at;
          v = make_float2(v.x + old.x, v.y + old.y);
        }
        *at = v;
      }
  }
}

}  // namespace tt::cuda::dw_tile
