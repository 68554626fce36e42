// RoPE in the epilogue of the QKV product (see rope_product.h for the contract): the tile of
// rope_product.cuh, a block each.
#include "ops/rope_product.h"

#include "ops/rope_product.cuh"

namespace tt::cuda {
namespace {

using namespace rope_tile;

constexpr int kSmem = kBuffersBytes + 8 * kBuffers + kSmemAlign;

// "gemm" in its name books it to the profile's products (trace.cpp, kernel_family), as the gated
// products' kernels are.
__global__ void __launch_bounds__(kThreads) qkv_gemm_rope_kernel(Successor next, const __grid_constant__ RopeOp op) {
  unsigned char* smem = aligned_smem();
  const uint32_t bars = smem_addr(smem + kBuffersBytes);
  const int tiles_n = op.q / kN;
  mbar_init_all(bars, kBuffers);
  __syncthreads();
  qkv_rope_tile(op, smem, bars, int(blockIdx.x) / tiles_n * kRows, int(blockIdx.x) % tiles_n * kN,
                [&] { await_previous_kernel(next); });
}

}  // namespace

std::string rope_product_misfit(const Gemm& g, const RopeShape& rope) {
  if (g.trans_a || !g.trans_b || !plain(g)) return "a product not of linear_gemm's form (y = x W^T, alpha 1, beta 0)";
  if (g.n % kN || g.ldc != g.n)
    return "a product of " + std::to_string(g.m) + " x " + std::to_string(g.n) + " x " + std::to_string(g.k) +
           " (tokens multiples of 128, the QKV width of " + std::to_string(kN) +
           ", the hidden size of 64, qkv contiguous)";
  const int64_t rotated = int64_t(rope.heads) * rope.head_dim;
  if (rope.col != 0 || rope.ld != g.n || rope.tokens != g.m || rope.head_dim % 2 || rotated > g.n || rotated % kN)
    return std::to_string(rotated) + " columns rotated from column " + std::to_string(rope.col) +
           " (heads from column 0, of an even size, whole tiles of " + std::to_string(kN) + " columns)";
  return shape_misfit(g);
}

void rope_product(const Gemm& g, const Tensor& table, const RopeShape& rope, Stream s) {
  TT_CHECK(rope_product_misfit(g, rope).empty(), "rope_product: " + rope_product_misfit(g, rope));
  TT_CHECK(table.dtype == DType::F32 && table.numel >= int64_t(rope.seq_len) * rope.head_dim,
           "rope_product: the table is fp32 [T, D]");
  const RopeOp op{bf16_boxes(g.a, g.m, g.k, g.lda, kRows), bf16_boxes(g.b, g.n, g.k, g.ldb, kN),
                  static_cast<bf16_t*>(g.c.ptr), table.data<float>(), g.k, g.n, rope.heads * rope.head_dim,
                  rope.seq_len, rope.head_dim};
  CUDA_CHECK(cudaFuncSetAttribute(qkv_gemm_rope_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  launch("qkv_gemm_rope_kernel", qkv_gemm_rope_kernel, (g.m / kRows) * (g.n / kN), kThreads, kSmem, s, op);
}

}  // namespace tt::cuda
