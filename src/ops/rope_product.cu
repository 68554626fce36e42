// RoPE in the epilogue of the QKV product (see rope_product.h for the contract).
//
// A tile of tile_product.cuh: 128 rows by kN columns of qkv, W's rows c0.. K-major, one wgmma of
// width kN a step. Each thread holds columns 8 n + 2 t and + 1 of its rows: a pair of one head (the
// head size even). The epilogue rounds the sums to bf16 as cuBLAS's product stores them, turns the
// pairs of the rotated heads by the table as the RoPE kernel does (rope.cuh) and stores the tile.
// A thread's kN / 8 (cos, sin) of a row are read before any is used: reads between stores would
// each wait for the store before them (flash_attention.cu's one-block kernel measured that).
#include "ops/rope_product.h"

#include "ops/rope.cuh"
#include "ops/tile_product.cuh"

namespace tt::cuda {
namespace {

using namespace tile;

// Tiles of 64 columns: 128 of them at 8 x 128 (QKV 1024 wide), one wave of 132 SMs. Eight buffers
// (192 KB): six of the eight chunks of a hidden size of 512 asked for at once. On an H200 at 8 x 128
// the kernel took 9.3 us with tiles of 128 columns, 8.3 with 64 and four buffers, 6.4 with eight
// (docs/data/2026-11-29-h200-v6-version); 6.6 with its first six chunks' weights asked for before
// its wait (docs/data/2026-11-29-h200-weights-before-the-wait), 6.3 with two, 6.4 with none
// (docs/data/2026-11-29-h200-qkv-early-chunks). Our guess, not measured: with six, 48 KB of weights
// arrived ahead of its first activation chunk.
constexpr int kN = 64, kBuffers = 8;
constexpr int kEarlyChunks = 2;  // chunks whose weights are asked for before the wait

struct RopeOp {
  CUtensorMap x, w;    // x [n, C] in boxes of 64 columns by 128 rows, W [Q, C] by kN rows
  bf16_t* qkv;         // [n, Q]
  const float* table;  // [T, D]: (cos, sin) of pair i at position p at (p D / 2 + i) 2
  int c, q, rotated, seq_len, head_dim;  // C, Q; the columns rotated (heads x D, from 0)
};
constexpr int kSmem = kBuffers * (kABytes + kN * 128) + 8 * kBuffers + kSmemAlign;

// "gemm" in its name books it to the profile's products (trace.cpp, kernel_family), as the gated
// products' kernels are.
__global__ void __launch_bounds__(kThreads) qkv_gemm_rope_kernel(Successor next, const __grid_constant__ RopeOp op) {
  unsigned char* smem = aligned_smem();
  const uint32_t bars = smem_addr(smem + kBuffers * (kABytes + kN * 128));
  const int tiles_n = op.q / kN;
  const int m0 = int(blockIdx.x) / tiles_n * kRows, c0 = int(blockIdx.x) % tiles_n * kN;
  mbar_init_all(bars, kBuffers);
  __syncthreads();
  float acc[1][kN / 2];
  tile_sums<1, 0, kN, kBuffers, kEarlyChunks>(
      acc, smem, bars, op.c / kChunk, next,
      [&](int c, uint32_t st, uint32_t bar) {
        mbar_expect(bar, kABytes + kN * 128);
        tma_load_2d(st + kABytes, &op.w, c * kChunk, c0, bar);
      },
      [&](int c, uint32_t st, uint32_t bar) { tma_load_2d(st, &op.x, c * kChunk, m0, bar); });
  constexpr int kPitch = kN * 2 + 16;  // a staged row
  const Fragment fr;
  const bool rotated = c0 < op.rotated;  // a tile's columns are all rotated or none (kN | heads x D)
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = fr.row0 + 8 * r, pos = (m0 + row) % op.seq_len;
    float2 cs[kN / 8];
#pragma unroll
    for (int n = 0; n < kN / 8; ++n) {
      const int pair = (c0 + 8 * n + 2 * fr.t) % op.head_dim / 2;
      cs[n] = rotated ? rope_cos_sin(op.table, op.head_dim, pos, pair) : float2{};
    }
#pragma unroll
    for (int n = 0; n < kN / 8; ++n) {
      const int i = 4 * n + 2 * r;
      __nv_bfloat162 v = __floats2bfloat162_rn(acc[0][i], acc[0][i + 1]);
      if (rotated) {
        const float2 x = rotate_pair(__low2float(v), __high2float(v), cs[n].x, cs[n].y);
        v = __floats2bfloat162_rn(x.x, x.y);
      }
      *reinterpret_cast<__nv_bfloat162*>(smem + row * kPitch + (8 * n + 2 * fr.t) * 2) = v;
    }
  }
  write_staged<1, kN>(smem, [&](int r, int) { return op.qkv + int64_t(m0 + r) * op.q + c0; });
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
