// SwiGLU in the epilogues of the FFN's products (see gated_product.h for the contract).
//
// Both kernels are tile_product.cuh's tiles with an epilogue of their own.
//
// Forward: gated_product.cuh's tile, gate and up in one product and h made in its epilogue. Tiles
// of 128 columns (one wave of 128 tiles at the default shape) took 11.6 us against 13.2 for tiles of
// 64 (two waves) and 13.3 for cuBLAS's product and the SwiGLU kernel
// (docs/data/2026-11-29-h200-swiglu-in-gate-up).
//
// Backward: one part of 128 columns of dh; B (W_down [C, F]) MN-major in boxes of 64 k by 64
// columns, read transposed by wgmma. The tile's gate and up come in by TMA at the start; the
// epilogue rounds dh to bf16 as the unfused path stores it and makes dgate and dup from it as the
// SwiGLU kernel does.
#include "ops/gated_product.h"

#include "ops/gated_product.cuh"

namespace tt::cuda {
namespace {

using namespace gated_tile;

constexpr int kForwardSmem = kBuffersBytes + 8 * kStages + kSmemAlign;

// Forward: gate_up_swiglu_tile of gated_product.cuh, a tile a block.
__global__ void __launch_bounds__(kThreads) gated_gemm_swiglu_kernel(Successor next, const __grid_constant__ Forward op) {
  unsigned char* smem = aligned_smem();
  const uint32_t bars = smem_addr(smem + kBuffersBytes);
  const int tiles_n = op.f / kCols;
  mbar_init_all(bars, kStages);
  __syncthreads();
  gate_up_swiglu_tile(op, smem, bars, int(blockIdx.x) / tiles_n * kRows, int(blockIdx.x) % tiles_n * kCols,
                      [&] { await_previous_kernel(next); });
}

constexpr int kBackwardSmem = kBackwardBytes + 8 * (kStages + 1) + kSmemAlign;

// Backward: down_swiglu_backward_tile of gated_product.cuh, a tile a block.
__global__ void __launch_bounds__(kThreads) down_gemm_swiglu_backward_kernel(Successor next,
                                                                             const __grid_constant__ Backward op) {
  unsigned char* smem = aligned_smem();
  const uint32_t bars = smem_addr(smem + kBackwardBytes);
  const int tiles_n = op.f / kCols;
  mbar_init_all(bars, kStages + 1);
  __syncthreads();
  down_swiglu_backward_tile(op, smem, bars, int(blockIdx.x) / tiles_n * kRows, int(blockIdx.x) % tiles_n * kCols,
                            [&] { await_previous_kernel(next); });
}

}  // namespace

std::string gated_product_misfit(const Gemm& g, int f) {
  if (g.trans_a || !g.trans_b || !plain(g)) return "a product not of linear_gemm's form (y = x W^T, alpha 1, beta 0)";
  if (g.n != 2 * f || g.ldc != 2 * f || f % kCols)
    return "a product of " + std::to_string(g.m) + " x " + std::to_string(g.n) + " x " + std::to_string(g.k) +
           " (tokens and F multiples of 128, the hidden size of 64, gateup contiguous)";
  return shape_misfit(g);
}

void gated_product(const Gemm& g, const Tensor& h, int f, Stream s) {
  TT_CHECK(gated_product_misfit(g, f).empty(), "gated_product: " + gated_product_misfit(g, f));
  TT_CHECK(h.dtype == DType::BF16 && h.numel == int64_t(g.m) * f && aligned16(h.ptr), "gated_product: h is bf16 [n, F]");
  const Forward op{bf16_boxes(g.a, g.m, g.k, g.lda, kRows), bf16_boxes(g.b, 2 * int64_t(f), g.k, g.ldb, kCols),
                   static_cast<bf16_t*>(g.c.ptr), static_cast<bf16_t*>(h.ptr), g.k, f};
  CUDA_CHECK(cudaFuncSetAttribute(gated_gemm_swiglu_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kForwardSmem));
  launch("gated_gemm_swiglu_kernel", gated_gemm_swiglu_kernel, (g.m / kRows) * (f / kCols), kThreads, kForwardSmem, s, op);
}

std::string swiglu_gradient_product_misfit(const Gemm& g, int f) {
  if (g.trans_a || g.trans_b || !plain(g)) return "a product not of linear_dx_gemm's form (dx = dy W, alpha 1, beta 0)";
  if (g.n != f || g.ldc != f || f % kCols)
    return "a product of " + std::to_string(g.m) + " x " + std::to_string(g.n) + " x " + std::to_string(g.k) +
           " (tokens and F multiples of 128, the hidden size of 64, dh contiguous)";
  return shape_misfit(g);
}

void swiglu_gradient_product(const Gemm& g, const Tensor& dgateup, const Tensor& gateup, int f, Stream s) {
  TT_CHECK(swiglu_gradient_product_misfit(g, f).empty(), "swiglu_gradient_product: " + swiglu_gradient_product_misfit(g, f));
  for (const Tensor* t : {&dgateup, &gateup})
    TT_CHECK(t->dtype == DType::BF16 && t->numel == int64_t(g.m) * 2 * f && aligned16(t->ptr),
             "swiglu_gradient_product: gateup and dgateup are bf16 [n, 2F]");
  const Backward op{bf16_boxes(g.a, g.m, g.k, g.lda, kRows), bf16_boxes(g.b, g.k, f, g.ldb, 64),
                    bf16_boxes(gateup, g.m, 2 * int64_t(f), 2 * int64_t(f), kRows), static_cast<bf16_t*>(dgateup.ptr),
                    g.k, f};
  CUDA_CHECK(cudaFuncSetAttribute(down_gemm_swiglu_backward_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  kBackwardSmem));
  launch("down_gemm_swiglu_backward_kernel", down_gemm_swiglu_backward_kernel, (g.m / kRows) * (f / kCols), kThreads,
         kBackwardSmem, s, op);
}

}  // namespace tt::cuda
