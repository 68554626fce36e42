// Hopper's primitives, shared by the kernels that use them (our flash attention, the grouped
// weight gradients, the gated product): cp.async copies from global to shared memory and the wait
// that hands them to the tensor cores, the tensor memory accelerator's copies (TMA), the tensor
// maps they read (made on the host) and the shared-memory barriers that count their bytes, the
// 1024-byte-aligned dynamic shared memory the swizzled layouts need, and wgmma, the warpgroup's
// asynchronous matrix product (bf16 in, fp32 accumulators) with its fence, commit and wait. Each
// is one or a few PTX instructions; the kernels keep their own tile layouts. Last, the main loop
// the TMA-fed products share (tma_ring): their buffers, barriers and who waits for what.
#pragma once
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>

#include <cstdint>
#include <string>

#include "core/cuda_check.h"
#include "core/error.h"
#include "core/tensor.h"

namespace tt::cuda {

constexpr int kWarpgroup = 128;  // the threads of one wgmma: 4 warps, 16 of its 64 rows each

// ---- cp.async ---------------------------------------------------------------------------

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
// Copies 16 bytes global -> shared without stopping the thread; bytes past `valid` are zeroed.
__device__ __forceinline__ void cp_async_16(void* dst, const void* src, int valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(valid));
}
__device__ __forceinline__ void cp_async_4(void* dst, const void* src, int valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(valid));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
// Waits for this thread's copies, makes them visible to wgmma (which reads shared memory
// through the async proxy), then waits for the whole block's.
// `then` runs once this thread's own copies have landed, before the barrier: it may rewrite the
// chunks the thread copied (rope-in-attention rotates them), and the fence makes what it wrote
// visible to the tensor cores' reads.
template <class F>
__device__ __forceinline__ void tiles_landed(F&& then) {
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
  then();
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  __syncthreads();
}
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// Dynamic shared memory, aligned to the 1024 bytes over which the swizzle pattern repeats
// (each launch asks for kSmemAlign bytes more than its tiles).
constexpr int kSmemAlign = 1024;
__device__ __forceinline__ unsigned char* aligned_smem() {
  extern __shared__ unsigned char smem[];
  return smem + (kSmemAlign - smem_addr(smem) % kSmemAlign) % kSmemAlign;
}

// ---- TMA and shared-memory barriers ----------------------------------------------------------
// A barrier in shared memory (8 bytes at `bar`) that completes a phase once `count` threads have
// arrived and the bytes it expects have landed; a phase's waiters name its parity (0, 1, 0, ...).
__device__ __forceinline__ void mbar_init(uint32_t bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
// Arrives on the barrier and tells it to expect `bytes` more (from copies that name it).
__device__ __forceinline__ void mbar_expect(uint32_t bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, unsigned parity) {
  asm volatile("{\n.reg .pred p;\nWAIT_%=:\nmbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n@!p bra WAIT_%=;\n}\n" ::"r"(
                   bar),
               "r"(parity)
               : "memory");
}
// The box of a 2-D tensor map at (c0 along its inner dimension, r0 along its outer one) copied
// into shared memory at dst by the tensor memory accelerator; the barrier counts its bytes.
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const void* map, int c0, int r0, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(r0), "r"(bar)
      : "memory");
}

// Thread 0 makes `count` barriers at bars, bars + 8, ..., each completing on one arrival and
// its bytes; the caller's __syncthreads then shows them to the block.
__device__ __forceinline__ void mbar_init_all(uint32_t bars, int count) {
  if (threadIdx.x != 0) return;
  for (int i = 0; i < count; ++i) mbar_init(bars + 8 * i, 1);
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// Thread 0 ends `count` barriers at rest (every phase waited for, no copy in flight), so that the
// memory may hold new ones: a persistent kernel's next task inits them again (mbarrier.init on a
// live barrier is undefined).
__device__ __forceinline__ void mbar_inval_all(uint32_t bars, int count) {
  if (threadIdx.x != 0) return;
  for (int i = 0; i < count; ++i) asm volatile("mbarrier.inval.shared::cta.b64 [%0];\n" ::"r"(bars + 8 * i) : "memory");
}

// A [rows, cols] bf16 matrix (row stride ld elements) as a tensor map of boxes of 64 columns (128
// bytes, the 128-byte swizzle) by box_rows rows. cuTensorMapEncodeTiled comes from the driver
// through the runtime (no link to libcuda).
inline CUtensorMap bf16_boxes(const Tensor& t, int64_t rows, int64_t cols, int64_t ld, int box_rows) {
  static const PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult found{};
    CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &found));
    TT_CHECK(found == cudaDriverEntryPointSuccess && f, "the CUDA driver has no cuTensorMapEncodeTiled (TMA)");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  }();
  CUtensorMap map;
  const cuuint64_t dims[2] = {cuuint64_t(cols), cuuint64_t(rows)}, strides[1] = {cuuint64_t(ld) * 2};
  const cuuint32_t box[2] = {64, cuuint32_t(box_rows)}, element_strides[2] = {1, 1};
  const CUresult r = encode(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, t.ptr, dims, strides, box, element_strides,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  TT_CHECK(r == CUDA_SUCCESS, "cuTensorMapEncodeTiled failed (" + std::to_string(int(r)) + ") for a product's operand");
  return map;
}

// ---- wgmma --------------------------------------------------------------------------------
// wgmma's shared-memory matrix descriptor: the start address, the leading and stride byte
// offsets (each stored in 16-byte units) and the swizzle's code (1: 128 bytes, 2: 64).
__device__ __forceinline__ uint64_t wgmma_desc(uint32_t addr, uint32_t lbo, uint32_t sbo, uint64_t swizzle) {
  return uint64_t((addr & 0x3FFFF) >> 4) | uint64_t(lbo >> 4) << 16 | uint64_t(sbo >> 4) << 32 | swizzle << 62;
}
// The two layouts of bf16 tiles that TMA's 128-byte swizzle leaves (8-row groups 1024 bytes
// apart). K-major: rows of 64 k, + 2 moves the operand 16 k (32 bytes) on. MN-major: boxes of
// [64 k][64 columns] (8 KB) side by side along the columns, + (2048 >> 4) moves it 16 k on.
__device__ __forceinline__ uint64_t k_major_sw128(uint32_t addr) { return wgmma_desc(addr, 16, 1024, 1); }
__device__ __forceinline__ uint64_t mn_major_sw128(uint32_t addr) { return wgmma_desc(addr, 64 * 64 * 2, 1024, 1); }
// d (64 x N fp32, N / 2 per thread) = or += A B for one 16-wide slice of the reduction. A comes
// from shared memory (ss: a descriptor) or from registers (rs: the A fragments of the thread's
// warp, 16 rows x 16); B from shared memory, K-major, or MN-major when kTransB (ss's A likewise
// with kTransA). Thread (warp w, g = lane / 4, t = lane % 4) holds d at rows 16 w + g (d[4n],
// d[4n + 1]) and 16 w + g + 8 (d[4n + 2], d[4n + 3]), columns 8 n + 2 t and 8 n + 2 t + 1: per
// 8 columns, the layout of the 16x8 accumulator of mma.sync.
template <int N>
struct Wgmma;
// The accumulator operands of a wgmma, "+f" for each of d's floats, and their placeholders in the
// instruction (asm operand lists cannot be built by templates).
#define TT_ACC8(i)                                                                                            \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), \
      "+f"(d[i + 7])
#define TT_ACC16 TT_ACC8(0), TT_ACC8(8)
#define TT_ACC32 TT_ACC16, TT_ACC8(16), TT_ACC8(24)
#define TT_ACC64 TT_ACC32, TT_ACC8(32), TT_ACC8(40), TT_ACC8(48), TT_ACC8(56)
#define TT_REGS16 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
#define TT_REGS32 TT_REGS16 ", %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define TT_REGS64 TT_REGS32 ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
                            "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
template <>
struct Wgmma<32> {
  template <int kTransB, int kTransA = 0>
  __device__ static void ss(float (&d)[16], uint64_t a, uint64_t b, int accumulate) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {" TT_REGS16 "}, "
                 "%16, %17, p, 1, 1, %20, %19;\n}\n"
                 : TT_ACC16
                 : "l"(a), "l"(b), "r"(accumulate), "n"(kTransB), "n"(kTransA));
  }
  template <int kTransB>
  __device__ static void rs(float (&d)[16], const uint32_t (&a)[4], uint64_t b, int accumulate) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {" TT_REGS16 "}, "
                 "{%16, %17, %18, %19}, %20, p, 1, 1, %22;\n}\n"
                 : TT_ACC16
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate), "n"(kTransB));
  }
};
template <>
struct Wgmma<64> {
  template <int kTransB, int kTransA = 0>
  __device__ static void ss(float (&d)[32], uint64_t a, uint64_t b, int accumulate) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {" TT_REGS32 "}, "
                 "%32, %33, p, 1, 1, %36, %35;\n}\n"
                 : TT_ACC32
                 : "l"(a), "l"(b), "r"(accumulate), "n"(kTransB), "n"(kTransA));
  }
  template <int kTransB>
  __device__ static void rs(float (&d)[32], const uint32_t (&a)[4], uint64_t b, int accumulate) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {" TT_REGS32 "}, "
                 "{%32, %33, %34, %35}, %36, p, 1, 1, %38;\n}\n"
                 : TT_ACC32
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate), "n"(kTransB));
  }
};
template <>
struct Wgmma<128> {
  template <int kTransB, int kTransA = 0>
  __device__ static void ss(float (&d)[64], uint64_t a, uint64_t b, int accumulate) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {" TT_REGS64 "}, "
                 "%64, %65, p, 1, 1, %68, %67;\n}\n"
                 : TT_ACC64
                 : "l"(a), "l"(b), "r"(accumulate), "n"(kTransB), "n"(kTransA));
  }
  template <int kTransB>
  __device__ static void rs(float (&d)[64], const uint32_t (&a)[4], uint64_t b, int accumulate) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {" TT_REGS64 "}, "
                 "{%64, %65, %66, %67}, %68, p, 1, 1, %70;\n}\n"
                 : TT_ACC64
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate), "n"(kTransB));
  }
};
#undef TT_ACC8
#undef TT_ACC16
#undef TT_ACC32
#undef TT_ACC64
#undef TT_REGS16
#undef TT_REGS32
#undef TT_REGS64

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// An empty asm that "changes" each accumulator: the compiler cannot move their uses across it.
template <int N>
__device__ __forceinline__ void fence_registers(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
// Waits until at most kPending of the warpgroup's committed product groups are still running
// (the oldest finish first); the accumulators given are then readable.
template <int kPending, int... N>
__device__ __forceinline__ void wgmma_wait(float (&... acc)[N]) {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
  (fence_registers(acc), ...);
}
// The same for a tile of P parts, each with its own accumulators.
template <int kPending, int P, int N>
__device__ __forceinline__ void wgmma_wait(float (&acc)[P][N]) {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
#pragma unroll
  for (int p = 0; p < P; ++p) fence_registers(acc[p]);
}

// ---- the main loop of a product fed by TMA ---------------------------------------------------
// Chunks 0 .. chunks - 1 of the reduction go through kStages buffers of stage_bytes at `buffers`,
// buffer i with the barrier at bars + 8 i (mbar_init_all), which counts its bytes. Thread 0 asks
// for chunk c + kStages - 2 once every warpgroup is done with chunk c - 2, so the copies run
// kStages - 2 chunks ahead of the products, and a buffer is loaded again only after the products
// that read it were waited for.
//   load(c, buffer, bar)  thread 0: chunk c's copies into the buffer, and the bytes bar expects
//                         (tile_product.cuh's tiles ask for the first chunks' weights before the
//                         ring, with their whole expected bytes, and load the rest of them here);
//   products(buffer)      every thread: issues chunk c's wgmma, commits them, and waits for
//                         chunk c - 1's (wgmma_wait<1>). The caller waits for the last.
template <int kStages, class Load, class Products>
__device__ __forceinline__ void tma_ring(unsigned char* buffers, int stage_bytes, uint32_t bars, int chunks, Load&& load,
                                         Products&& products) {
  static_assert(kStages >= 3, "a chunk loading, one in the tensor cores, one waited for");
  auto issue = [&](int c) {
    if (threadIdx.x == 0 && c < chunks) load(c, smem_addr(buffers + c % kStages * stage_bytes), bars + 8 * (c % kStages));
  };
  for (int c = 0; c < kStages - 2; ++c) issue(c);
  for (int c = 0; c < chunks; ++c) {
    const int i = c % kStages;
    mbar_wait(bars + 8 * i, (c / kStages) & 1);  // chunk c landed
    __syncthreads();  // every warpgroup's products of chunk c - 2 are done: its buffer may be loaded again
    issue(c + kStages - 2);
    products(smem_addr(buffers + i * stage_bytes));
  }
}

}  // namespace tt::cuda
