// SwiGLU in the epilogues of the FFN's products (see gated_product.h for the contract).
//
// Both kernels share the tile's sums (tile_sums): 128 token rows (two warpgroups of 64) by 128
// columns a part, A K-major, through kStages buffers that TMA fills a chunk of 64 along K at a
// time (128-byte-swizzled boxes), as in weight_gradients.cu; and the store of the tile, staged in
// the free buffers, as 16-byte pieces of whole rows (write_staged).
//
// Forward: the B operand is W's 128 gate rows c0.. and 128 up rows F + c0.., both K-major, two
// wgmma of width 128 a step, so each thread holds a column's gate and up values in the same places
// of its two accumulators. The epilogue rounds gate and up to bf16 (gateup, which the backward
// reads) and makes h from those as the SwiGLU kernel does (swiglu.cuh). Tiles of 128 columns (one
// wave of 128 tiles at the default shape) took 11.6 us against 13.2 for tiles of 64 (two waves)
// and 13.3 for cuBLAS's product and the SwiGLU kernel (docs/data/2026-11-29-h200-swiglu-in-gate-up).
//
// Backward: one part of 128 columns of dh; B (W_down [C, F]) MN-major in boxes of 64 k by 64
// columns, read transposed by wgmma. The tile's gate and up come in by TMA at the start; the
// epilogue rounds dh to bf16 as the unfused path stores it and makes dgate and dup from it as the
// SwiGLU kernel does.
#include "ops/gated_product.h"

#include "ops/cuda_common.cuh"
#include "ops/hopper.cuh"
#include "ops/swiglu.cuh"

namespace tt::cuda {
namespace {

constexpr int kRows = 128, kCols = 128, kChunk = 64, kStages = 4, kThreads = 2 * kWarpgroup;
constexpr int kABytes = kRows * 128, kBPartBytes = kCols * 128;  // a chunk of A's rows, of one part of B
constexpr int kBox = 64 * kRows * 2;  // a [128 rows][64 columns] box of bf16 (the 128-byte swizzle): 16 KB

// The sums of a tile of 128 rows (a warpgroup's 64 in each thread's acc) over C / 64 chunks of K:
// kParts wgmma of 128 columns a step, acc[p] from part p of B (128 rows of a K-major B, or 128
// columns of an MN-major one with kTransB). The chunks run through kStages buffers at `smem`
// (tma_ring of hopper.cuh); `load(c, buffer, bar)` issues chunk c's copies (A at the buffer, B's
// parts after it) and the barrier's expected bytes.
template <int kParts, int kTransB, class Load>
__device__ __forceinline__ void tile_sums(float (&acc)[kParts][64], unsigned char* smem, uint32_t bars, int chunks,
                                          Load&& load) {
  constexpr int kStageBytes = kABytes + kParts * kBPartBytes;
  const int wg = threadIdx.x / kWarpgroup;
#pragma unroll
  for (int p = 0; p < kParts; ++p)
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[p][i] = 0.0f;
  tma_ring<kStages>(smem, kStageBytes, bars, chunks, load, [&](uint32_t st) {
    const uint64_t da = k_major_sw128(st + wg * 64 * 128);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < kChunk / 16; ++ks)
#pragma unroll
      for (int p = 0; p < kParts; ++p) {
        const uint32_t b = st + kABytes + p * kBPartBytes;
        const uint64_t db = kTransB ? mn_major_sw128(b) + ks * (2048 >> 4) : k_major_sw128(b) + 2 * ks;
        Wgmma<128>::ss<kTransB>(acc[p], da + 2 * ks, db, 1);
      }
    wgmma_commit();
    if constexpr (kParts == 1) wgmma_wait<1>(acc[0]);  // chunk c - 1's products done
    else wgmma_wait<1>(acc[0], acc[1]);
  });
  if constexpr (kParts == 1) wgmma_wait<0>(acc[0]);
  else wgmma_wait<0>(acc[0], acc[1]);
  __syncthreads();  // both warpgroups done reading the buffers: free for the epilogue
}

// Thread (warp w of its warpgroup, g = lane / 4, t = lane % 4) holds rows 16 w + g and + 8 of its
// warpgroup's 64, columns 8 n + 2 t and + 1 of each 128 (hopper.cuh).
struct Fragment {
  int row0, t;
  __device__ Fragment()
      : row0(64 * int(threadIdx.x / kWarpgroup) + 16 * int(threadIdx.x % kWarpgroup / 32) + int(threadIdx.x % 32 / 4)),
        t(int(threadIdx.x % 4)) {}
};

// The staged rows (kParts pieces of 128 bf16 each, 16 bytes apart against bank conflicts) written
// as 16-byte pieces of whole rows: piece p of row r to out(r, p) .. + 128.
template <int kParts, class Out>
__device__ __forceinline__ void write_staged(const unsigned char* staged, Out out) {
  constexpr int kPitch = kParts * kCols * 2 + 16, kPartPieces = kCols * 2 / 16, kPieces = kParts * kPartPieces;
  __syncthreads();
  for (int i = threadIdx.x; i < kRows * kPieces; i += kThreads) {
    const int r = i / kPieces, piece = i % kPieces;
    reinterpret_cast<int4*>(out(r, piece / kPartPieces))[piece % kPartPieces] =
        *reinterpret_cast<const int4*>(staged + r * kPitch + piece * 16);
  }
}

struct Forward {
  CUtensorMap x, w;  // x [n, C] and W [2F, C], in boxes of 64 columns by 128 rows
  bf16_t* gateup;    // [n, 2F]
  bf16_t* h;         // [n, F]
  int c, f;
};
constexpr int kForwardSmem = kStages * (kABytes + 2 * kBPartBytes) + 8 * kStages + kSmemAlign;

// Forward: gate and up of 128 columns (W's rows c0.. and F + c0..: acc[0] and acc[1]), then h.
__global__ void __launch_bounds__(kThreads) gated_gemm_swiglu_kernel(Successor next, const __grid_constant__ Forward op) {
  unsigned char* smem = aligned_smem();
  const uint32_t bars = smem_addr(smem + kStages * (kABytes + 2 * kBPartBytes));
  const int tiles_n = op.f / kCols;
  const int m0 = int(blockIdx.x) / tiles_n * kRows, c0 = int(blockIdx.x) % tiles_n * kCols;
  mbar_init_all(bars, kStages);
  __syncthreads();
  await_previous_kernel(next);
  float acc[2][64];
  tile_sums<2, 0>(acc, smem, bars, op.c / kChunk, [&](int c, uint32_t st, uint32_t bar) {
    mbar_expect(bar, kABytes + 2 * kBPartBytes);
    tma_load_2d(st, &op.x, c * kChunk, m0, bar);
    tma_load_2d(st + kABytes, &op.w, c * kChunk, c0, bar);
    tma_load_2d(st + kABytes + kBPartBytes, &op.w, c * kChunk, op.f + c0, bar);
  });
  constexpr int kPitch = 3 * kCols * 2 + 16;  // a staged row: gate, up, h
  const Fragment fr;
#pragma unroll
  for (int n = 0; n < kCols / 8; ++n)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int i = 4 * n + 2 * r;
      const __nv_bfloat162 gate = __floats2bfloat162_rn(acc[0][i], acc[0][i + 1]),
                           up = __floats2bfloat162_rn(acc[1][i], acc[1][i + 1]);
      const __nv_bfloat162 h = __floats2bfloat162_rn(swiglu_value(__low2float(gate), __low2float(up)),
                                                     swiglu_value(__high2float(gate), __high2float(up)));
      unsigned char* at = smem + (fr.row0 + 8 * r) * kPitch + (8 * n + 2 * fr.t) * 2;
      *reinterpret_cast<__nv_bfloat162*>(at) = gate;
      *reinterpret_cast<__nv_bfloat162*>(at + kCols * 2) = up;
      *reinterpret_cast<__nv_bfloat162*>(at + 2 * kCols * 2) = h;
    }
  write_staged<3>(smem, [&](int r, int part) {  // gate, up, h
    const int64_t row = m0 + r;
    return part == 2 ? op.h + row * op.f + c0 : op.gateup + row * 2 * op.f + part * op.f + c0;
  });
}

struct Backward {
  CUtensorMap dy, w, gateup;  // dy [n, C] (boxes of 64 x 128 rows), W [C, F] (64 x 64), gateup [n, 2F] (64 x 128)
  bf16_t* dgateup;            // [n, 2F]
  int c, f;
};
constexpr int kBackwardStages = kStages * (kABytes + kBPartBytes);  // then gate's and up's tile, 4 boxes
constexpr int kBackwardSmem = kBackwardStages + 4 * kBox + 8 * (kStages + 1) + kSmemAlign;

// Backward: dh of 128 columns c0.. (down's input gradient, W MN-major), then dgate and dup from it
// and the tile's gate and up, which TMA brings in at the start (a barrier of their own).
__global__ void __launch_bounds__(kThreads) down_gemm_swiglu_backward_kernel(Successor next,
                                                                             const __grid_constant__ Backward op) {
  unsigned char* smem = aligned_smem();
  unsigned char* gu = smem + kBackwardStages;  // gate c0.., c0 + 64.., up c0.., c0 + 64..: [128 rows][64] each
  const uint32_t bars = smem_addr(gu + 4 * kBox), gu_bar = bars + 8 * kStages;
  const int tiles_n = op.f / kCols;
  const int m0 = int(blockIdx.x) / tiles_n * kRows, c0 = int(blockIdx.x) % tiles_n * kCols;
  mbar_init_all(bars, kStages + 1);
  __syncthreads();
  await_previous_kernel(next);
  if (threadIdx.x == 0) {
    mbar_expect(gu_bar, 4 * kBox);
    for (int b = 0; b < 4; ++b) tma_load_2d(smem_addr(gu + b * kBox), &op.gateup, (b / 2) * op.f + c0 + (b % 2) * 64, m0, gu_bar);
  }
  float acc[1][64];
  tile_sums<1, 1>(acc, smem, bars, op.c / kChunk, [&](int c, uint32_t st, uint32_t bar) {
    mbar_expect(bar, kABytes + kBPartBytes);
    tma_load_2d(st, &op.dy, c * kChunk, m0, bar);
    tma_load_2d(st + kABytes, &op.w, c0, c * kChunk, bar);
    tma_load_2d(st + kABytes + kBPartBytes / 2, &op.w, c0 + 64, c * kChunk, bar);
  });
  mbar_wait(gu_bar, 0);
  constexpr int kPitch = 2 * kCols * 2 + 16;  // a staged row: dgate, dup
  const Fragment fr;
#pragma unroll
  for (int n = 0; n < kCols / 8; ++n)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int i = 4 * n + 2 * r, row = fr.row0 + 8 * r;
      // Columns 8 n + 2 t, + 1 in box n / 8 of gate and of up: 16-byte chunk n % 8 of the row, swizzled.
      const int at = (n / 8) * kBox + row * 128 + (((n % 8) ^ (row % 8)) * 16) + 4 * fr.t;
      const __nv_bfloat162 g = *reinterpret_cast<const __nv_bfloat162*>(gu + at),
                           u = *reinterpret_cast<const __nv_bfloat162*>(gu + 2 * kBox + at),
                           d = __floats2bfloat162_rn(acc[0][i], acc[0][i + 1]);
      const float g0 = __low2float(g), g1 = __high2float(g), d0 = __low2float(d), d1 = __high2float(d);
      unsigned char* out = smem + row * kPitch + (8 * n + 2 * fr.t) * 2;
      *reinterpret_cast<__nv_bfloat162*>(out) = __floats2bfloat162_rn(swiglu_dgate(g0, __low2float(u), d0),
                                                                      swiglu_dgate(g1, __high2float(u), d1));
      *reinterpret_cast<__nv_bfloat162*>(out + kCols * 2) =
          __floats2bfloat162_rn(swiglu_dup(g0, d0), swiglu_dup(g1, d1));
    }
  write_staged<2>(smem, [&](int r, int part) { return op.dgateup + int64_t(m0 + r) * 2 * op.f + part * op.f + c0; });
}

// What both kernels take: bf16 operands, 16-byte rows and bases, tiles of 128 x 128 and chunks of
// 64, and where they pay, at most 1024 tokens.
std::string shape_misfit(const Gemm& g) {
  if (g.a.dtype != DType::BF16 || g.b.dtype != DType::BF16 || g.c.dtype != DType::BF16) return "operands not bf16";
  if (g.m % kRows || g.k % kChunk)
    return "a product of " + std::to_string(g.m) + " x " + std::to_string(g.n) + " x " + std::to_string(g.k) +
           " (tokens and F multiples of 128, the hidden size of 64)";
  if (g.lda % 8 || g.ldb % 8 || !aligned16(g.a.ptr) || !aligned16(g.b.ptr) || !aligned16(g.c.ptr))
    return "rows or bases not on 16-byte boundaries";
  if (g.m > 1024) return std::to_string(g.m) + " tokens, more than 1024";
  return "";
}
bool plain(const Gemm& g) {
  return g.alpha == 1.0f && g.beta == 0.0f && (g.c_in.empty() || g.c_in.ptr == g.c.ptr) && g.a_scale.empty() &&
         g.b_scale.empty();
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
