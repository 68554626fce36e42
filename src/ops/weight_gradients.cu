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

#include "ops/weight_gradients.cuh"

namespace tt::cuda {
namespace {

using namespace dw_tile;

struct Products {
  Product p[kGroupedMaxProducts];
  int count, tokens;
  bool add;  // beta 1: dW += ...
};

template <int kPieces>
__global__ void __launch_bounds__(kThreads) grouped_gemm_dw_kernel(Successor next, const __grid_constant__ Products ps) {
  await_previous_kernel(next);
  unsigned char* smem = aligned_smem();
  const uint32_t bars = smem_addr(smem + Tile<kPieces>::kStages * Tile<kPieces>::kStageBytes);
  mbar_init_all(bars, Tile<kPieces>::kStages);
  __syncthreads();
  weight_gradient_tile<kPieces>(ps.p, ps.count, ps.tokens, ps.add, smem, bars, int(blockIdx.x));
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
