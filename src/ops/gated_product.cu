// The FFN's first product with SwiGLU in its epilogue (see gated_product.h for the contract).
//
// Block b takes a tile of 128 token rows (two warpgroups of 64) by 128 of the F columns, of gate
// and of up together: its B operand is W's 128 gate rows c0.. and 128 up rows F + c0.., two wgmma
// of width 128 a step, so each thread holds a column's gate and up values in the same places of
// its two accumulators. Both operands are K-major (x's and W's rows run along the hidden
// dimension): each chunk of 64 of it arrives by TMA as 128-byte-swizzled boxes, x's 128 rows and
// // W's two 128-row boxes, through kStages buffers as in weight_gradients.cu. The epilogue rounds
// gate and up to bf16 (gateup, which the backward reads), makes h from those as the SwiGLU kernel
// does (swiglu.cuh), stages the three 128-column pieces of each row in shared memory (the free
// buffers) and writes them as 16-byte pieces of whole rows. Tiles of 128 columns (one wave of 128
// tiles at the default shape) took 11.6 us against 13.2 for tiles of 64 (two waves) and 13.3 for
// cuBLAS's product and the SwiGLU kernel (docs/data/2026-11-29-h200-swiglu-in-gate-up).
#include "ops/gated_product.h"

#include "ops/cuda_common.cuh"
#include "ops/hopper.cuh"
#include "ops/swiglu.cuh"

namespace tt::cuda {
namespace {

constexpr int kRows = 128, kHalf = 128, kChunk = 64, kStages = 4, kThreads = 2 * kWarpgroup;
constexpr int kABytes = kRows * 128, kBBytes = 2 * kHalf * 128;  // a chunk: x's 128 rows, W's 2 x 128 rows
constexpr int kStageBytes = kABytes + kBBytes;
constexpr int kPitch = 3 * kHalf * 2 + 16;  // a staged row: gate, up, h (bf16), 16 bytes against bank conflicts
constexpr int kPartPieces = kHalf * 2 / 16, kPieces = 3 * kPartPieces;  // 16-byte pieces of a part, of a staged row
constexpr int kSmemBytes = kStages * kStageBytes + 8 * kStages + kSmemAlign;
static_assert(kRows * kPitch <= kStages * kStageBytes, "the staged tile fits in the buffers");

struct Operands {
  CUtensorMap x, w;  // x [n, C] and W [2F, C], in boxes of 64 columns by 128 rows
  bf16_t* gateup;    // [n, 2F]
  bf16_t* h;         // [n, F]
  int c, f;
};

// A K-major operand in 128-byte-swizzled rows (8-row groups 1024 bytes apart): + 2 moves it 16
// columns (32 bytes) on.
__device__ __forceinline__ uint64_t k_major(uint32_t addr) { return wgmma_desc(addr, 16, 1024, 1); }

__global__ void __launch_bounds__(kThreads) gated_gemm_swiglu_kernel(Successor next, const __grid_constant__ Operands op) {
  unsigned char* smem = aligned_smem();
  const uint32_t bars = smem_addr(smem + kStages * kStageBytes);
  const int tiles_n = op.f / kHalf, chunks = op.c / kChunk;
  const int m0 = int(blockIdx.x) / tiles_n * kRows, c0 = int(blockIdx.x) % tiles_n * kHalf;
  if (threadIdx.x == 0) {
    for (int i = 0; i < kStages; ++i) mbar_init(bars + 8 * i, 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  await_previous_kernel(next);
  auto load = [&](int c) {
    if (threadIdx.x != 0 || c >= chunks) return;
    const int i = c % kStages;
    const uint32_t st = smem_addr(smem + i * kStageBytes), bar = bars + 8 * i;
    mbar_expect(bar, kStageBytes);
    tma_load_2d(st, &op.x, c * kChunk, m0, bar);
    tma_load_2d(st + kABytes, &op.w, c * kChunk, c0, bar);
    tma_load_2d(st + kABytes + kHalf * 128, &op.w, c * kChunk, op.f + c0, bar);
  };
  // The sums, 128 columns a wgmma: acc[0] gate's, acc[1] up's.
  const int wg = threadIdx.x / kWarpgroup;
  float acc[2][64];
#pragma unroll
  for (int p = 0; p < 2; ++p)
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[p][i] = 0.0f;
  for (int c = 0; c < kStages - 2; ++c) load(c);
  for (int c = 0; c < chunks; ++c) {
    const int i = c % kStages;
    mbar_wait(bars + 8 * i, (c / kStages) & 1);  // chunk c landed
    __syncthreads();  // every warpgroup's product of chunk c - 2 is done: its buffer may be loaded again
    load(c + kStages - 2);
    const uint32_t st = smem_addr(smem + i * kStageBytes);
    const uint64_t da = k_major(st + wg * 64 * 128);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < kChunk / 16; ++ks)
#pragma unroll
      for (int p = 0; p < 2; ++p)
        Wgmma<128>::ss<0>(acc[p], da + 2 * ks, k_major(st + kABytes + p * 128 * 128) + 2 * ks, 1);
    wgmma_commit();
    wgmma_wait<1>(acc[0], acc[1]);  // chunk c - 1's products done
  }
  wgmma_wait<0>(acc[0], acc[1]);
  __syncthreads();  // both warpgroups done reading the buffers: they hold the staged tile now
  // Thread (warp w of its warpgroup, g = lane / 4, t = lane % 4) holds rows 16 w + g and + 8,
  // columns 8 n + 2 t and + 1 of each 128 (hopper.cuh): of gate in acc[0], of up in acc[1].
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int row0 = 64 * wg + 16 * (threadIdx.x % kWarpgroup / 32) + g;
#pragma unroll
  for (int n = 0; n < kHalf / 8; ++n)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int i = 4 * n + 2 * r;
      const __nv_bfloat162 gate = __floats2bfloat162_rn(acc[0][i], acc[0][i + 1]),
                           up = __floats2bfloat162_rn(acc[1][i], acc[1][i + 1]);
      const __nv_bfloat162 h = __floats2bfloat162_rn(swiglu_value(__low2float(gate), __low2float(up)),
                                                     swiglu_value(__high2float(gate), __high2float(up)));
      unsigned char* at = smem + (row0 + 8 * r) * kPitch + (8 * n + 2 * t) * 2;
      *reinterpret_cast<__nv_bfloat162*>(at) = gate;
      *reinterpret_cast<__nv_bfloat162*>(at + kHalf * 2) = up;
      *reinterpret_cast<__nv_bfloat162*>(at + 2 * kHalf * 2) = h;
    }
  __syncthreads();
  for (int i = threadIdx.x; i < kRows * kPieces; i += kThreads) {
    const int r = i / kPieces, piece = i % kPieces, part = piece / kPartPieces;  // part 0 gate, 1 up, 2 h
    const int64_t row = m0 + r;
    bf16_t* out = part == 2 ? op.h + row * op.f + c0 : op.gateup + row * 2 * op.f + part * op.f + c0;
    reinterpret_cast<int4*>(out)[piece % kPartPieces] = *reinterpret_cast<const int4*>(smem + r * kPitch + piece * 16);
  }
}

}  // namespace

std::string gated_product_misfit(const Gemm& g, int f) {
  if (g.trans_a || !g.trans_b || g.alpha != 1.0f || g.beta != 0.0f || (!g.c_in.empty() && g.c_in.ptr != g.c.ptr) ||
      !g.a_scale.empty() || !g.b_scale.empty())
    return "a product not of linear_gemm's form (y = x W^T, alpha 1, beta 0)";
  if (g.a.dtype != DType::BF16 || g.b.dtype != DType::BF16 || g.c.dtype != DType::BF16) return "operands not bf16";
  if (g.n != 2 * f || g.ldc != 2 * f || g.m % kRows || g.k % kChunk || f % kHalf)
    return "a product of " + std::to_string(g.m) + " x " + std::to_string(g.n) + " x " + std::to_string(g.k) +
           " (tokens and F multiples of 128, the hidden size of 64, gateup contiguous)";
  if (g.lda % 8 || g.ldb % 8 || !aligned16(g.a.ptr) || !aligned16(g.b.ptr) || !aligned16(g.c.ptr))
    return "rows or bases not on 16-byte boundaries";
  if (g.m > 1024) return std::to_string(g.m) + " tokens, more than 1024";
  return "";
}

void gated_product(const Gemm& g, const Tensor& h, int f, Stream s) {
  TT_CHECK(gated_product_misfit(g, f).empty(), "gated_product: " + gated_product_misfit(g, f));
  TT_CHECK(h.dtype == DType::BF16 && h.numel == int64_t(g.m) * f && aligned16(h.ptr), "gated_product: h is bf16 [n, F]");
  const Operands op{bf16_boxes(g.a, g.m, g.k, g.lda, kRows), bf16_boxes(g.b, 2 * int64_t(f), g.k, g.ldb, kHalf),
                    static_cast<bf16_t*>(g.c.ptr), static_cast<bf16_t*>(h.ptr), g.k, f};
  CUDA_CHECK(cudaFuncSetAttribute(gated_gemm_swiglu_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
  launch("gated_gemm_swiglu_kernel", gated_gemm_swiglu_kernel, (g.m / kRows) * (f / kHalf), kThreads, kSmemBytes, s, op);
}

}  // namespace tt::cuda
