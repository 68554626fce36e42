// A layer's weight gradients in one launch (see weight_gradients.h for the contract).
//
// Block b takes tile b of the products' tiles, in the products' order: 256 rows of dW (two
// warpgroups of two pieces of 64) by 128 columns where every product's outputs are a multiple of
// 256, else 128 rows (a piece of 64 a warpgroup). Both operands are read along the tokens, so both
// are MN-major for wgmma: each chunk of 64 tokens arrives as [64 tokens] x [64 columns] boxes of the
// tensor memory accelerator (a 128-byte swizzle), dout's (four or two) then x's two, and wgmma reads
// them transposed. The chunks run through kStages buffers, each with a barrier that counts its
// bytes (tma_ring of hopper.cuh: the copies run kStages - 2 chunks ahead of the products). A tile's
// height changes no sum: each element still adds its tokens chunk by chunk, in cuBLAS's order.
// Chosen by measurement on an H200: 128 x 128 with 5 buffers against 128 x 64 and 4 or 6, 18.6 us
// for the default shape's four products against 19.3-25.0 (docs/data/2026-11-29-h200-v6-grouped-dw);
// then 256 x 128 with 4 buffers, one wave there (120 tiles, not 240), 20.6 -> 18.2 us a layer in the
// step and the step 1.083 -> 1.078 ms, 8 x 256 1.596 -> 1.574; and past 2048 tokens, where the
// tiles of 128 rows were never measured, 8 x 512 2.612 -> 2.474, 16 x 1024 8.957 -> 8.571 ms. Past
// two waves of 128-row tiles (medium in bf16: 19.26 -> 19.57 ms) it does not pay
// (docs/data/2026-11-30-h200-dw-tall-tiles). Beside the backward's own kernels (a lane of its own,
// weight-gradients-behind) a tile holds a whole SM they wait for: from 2048 tokens the tiles of 128
// rows, each half as long, give the SMs back sooner, and v6 went 8 x 256 1.541-1.542 -> 1.520-1.522
// ms, 2 x 1024 1.772-1.773 -> 1.744-1.745, 8 x 512 2.437-2.449 -> 2.429-2.433, 1 x 4096 3.788-3.801
// -> 3.786-3.796; below 2048 they lost there too, 8 x 128 1.035-1.036 -> 1.058-1.059, 12 x 128
// 1.262 -> 1.276-1.283 (docs/data/2026-11-30-h200-dw-tiles-beside).
#include "ops/weight_gradients.h"

#include <algorithm>
#include <string>

#include "ops/cuda_common.cuh"
#include "ops/hopper.cuh"

namespace tt::cuda {
namespace {

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
struct Products {
  Product p[kGroupedMaxProducts];
  int count, tokens;
  bool add;  // beta 1: dW += ...
};

template <int kPieces>
__global__ void __launch_bounds__(kThreads) grouped_gemm_dw_kernel(Successor next, const __grid_constant__ Products ps) {
  using T = Tile<kPieces>;
  constexpr int kRows = T::kRows, kStages = T::kStages, kStageBytes = T::kStageBytes, kDoutBoxes = kRows / 64;
  await_previous_kernel(next);
  unsigned char* smem = aligned_smem();
  const uint32_t bars = smem_addr(smem + kStages * kStageBytes);
  int pi = 0;
  while (pi + 1 < ps.count && int(blockIdx.x) >= ps.p[pi + 1].first_tile) ++pi;
  const Product& pr = ps.p[pi];
  const int tile = int(blockIdx.x) - pr.first_tile, tiles_n = pr.in / kCols;
  const int m0 = tile / tiles_n * kRows, n0 = tile % tiles_n * kCols;
  mbar_init_all(bars, kStages);
  __syncthreads();
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
  tma_ring<kStages>(smem, kStageBytes, bars, ps.tokens / kChunk, load, [&](uint32_t st) {
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
        if (ps.add) {
          const float2 old = *at;
          v = make_float2(v.x + old.x, v.y + old.y);
        }
        *at = v;
      }
  }
}

int tiles_of(const Gemm& g, int rows) { return (g.m / rows) * (g.n / kCols); }
// Tiles of 256 rows where every product's outputs have them, else of 128.
bool tall_tiles(const std::vector<Gemm>& products) {
  return std::all_of(products.begin(), products.end(), [](const Gemm& g) { return g.m % 256 == 0; });
}

}  // namespace

std::string weight_gradients_misfit(const std::vector<Gemm>& products, int sms) {
  if (products.empty() || int(products.size()) > kGroupedMaxProducts)
    return "from 1 to " + std::to_string(kGroupedMaxProducts) + " products, not " + std::to_string(products.size());
  int tiles = 0;
  for (const Gemm& g : products) {
    if (!g.trans_a || g.trans_b || g.alpha != 1.0f || g.beta != products[0].beta || (g.beta != 0.0f && g.beta != 1.0f) ||
        (!g.c_in.empty() && g.c_in.ptr != g.c.ptr) || !g.a_scale.empty())
      return "a product not of linear_dw_gemm's form (A transposed, alpha 1, beta 0 or 1 for all)";
    if (std::string empty = empty_product_misfit(g); !empty.empty()) return empty;
    if (g.a.dtype != DType::BF16 || g.b.dtype != DType::BF16 || g.c.dtype != DType::F32)
      return "operands not bf16 into fp32";
    if (g.m % 128 || g.n % kCols || g.k != products[0].k || g.k % kChunk)
      return "a product of " + std::to_string(g.m) + " x " + std::to_string(g.n) + " x " + std::to_string(g.k) +
             " (multiples of 128, 128 and 64, the same tokens for all)";
    if (g.lda % 8 || g.ldb % 8 || g.ldc % 2 || !aligned16(g.a.ptr) || !aligned16(g.b.ptr) ||
        reinterpret_cast<uintptr_t>(g.c.ptr) % 8)
      return "rows or bases not on 16-byte boundaries";
    tiles += tiles_of(g, 128);
  }
  if (tiles > 2 * sms) return std::to_string(tiles) + " tiles, more than two waves of " + std::to_string(sms) + " SMs";
  if (products[0].k > 2048 && !tall_tiles(products))
    return std::to_string(products[0].k) + " tokens, more than 2048 for outputs not a multiple of 256";
  return "";
}

void weight_gradients(const std::vector<Gemm>& products, Stream s, bool beside) {
  Products ps{};
  ps.count = int(products.size());
  ps.tokens = products[0].k;
  ps.add = products[0].beta == 1.0f;
  auto go = [&](auto kernel, int rows, int smem) {
    int tiles = 0;
    for (int i = 0; i < ps.count; ++i) {
      const Gemm& g = products[size_t(i)];
      ps.p[i] = {bf16_boxes(g.a, g.k, g.m, g.lda, 64), bf16_boxes(g.b, g.k, g.n, g.ldb, 64), static_cast<float*>(g.c.ptr),
                 g.ldc, g.n, tiles};
      tiles += tiles_of(g, rows);
    }
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    launch("grouped_gemm_dw_kernel", kernel, tiles, kThreads, smem, s, ps);
  };
  if (tall_tiles(products) && !(beside && ps.tokens >= 2048)) go(grouped_gemm_dw_kernel<2>, Tile<2>::kRows, Tile<2>::kSmemBytes);
  else go(grouped_gemm_dw_kernel<1>, Tile<1>::kRows, Tile<1>::kSmemBytes);
}

}  // namespace tt::cuda
