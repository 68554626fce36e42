// v6 prototype (an experiment, not project code): a layer's four weight-gradient products
// dW_p[out, in] = dy_p^T x_p (bf16 in, fp32 out, k = tokens) in ONE launch of our own tile
// kernel, every tile of every product a block, against four cublasGemmEx calls (as v4 runs them,
// no workspace). Both operands are read along the tokens, so both are MN-major for wgmma: the
// tensor memory accelerator copies [64 tokens] x [64 columns] boxes (128-byte swizzle) and wgmma
// reads them transposed (imm-trans-a = imm-trans-b = 1).
// A tile: 128 rows of dW (two warpgroups of 64) x TN columns; K in chunks of 64 through STAGES
// buffers, a chunk loaded STAGES - 2 ahead (the v6 prototype's pipeline, docs/data/2026-11-28-h200-v6-prototype).
#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1); } } while (0)
#define CB(x) do { cublasStatus_t s = (x); if (s != CUBLAS_STATUS_SUCCESS) { fprintf(stderr, "%s:%d cublas %d\n", __FILE__, __LINE__, int(s)); exit(1); } } while (0)
using bf16 = __nv_bfloat16;

#ifndef TN
#define TN 128
#endif
#ifndef STAGES
#define STAGES 4
#endif
constexpr int kRows = 128, kTN = TN, kK = 64, kStages = STAGES, kThreads = 256, kWarpgroup = 128;
constexpr int kBox = 64 * 64 * 2;                         // a [64 tokens][64 columns] box, 8 KB
constexpr int kStageBytes = (kRows / 64 + kTN / 64) * kBox;  // A's two boxes, B's TN / 64
constexpr int kMaxProblems = 4;

__device__ __forceinline__ uint32_t smem_addr(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }
// MN-major operand with the 128-byte swizzle: column blocks of 64 (lbo apart), 8-row groups 1024 B apart.
__device__ __forceinline__ uint64_t mn_desc(uint32_t addr, uint32_t lbo) {
  return uint64_t((addr & 0x3FFFF) >> 4) | uint64_t(lbo >> 4) << 16 | uint64_t(1024 >> 4) << 32 | uint64_t(1) << 62;
}
__device__ __forceinline__ void mbar_init(uint32_t bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect(uint32_t bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, unsigned parity) {
  asm volatile("{\n.reg .pred p;\nWAIT_%=:\nmbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n@!p bra WAIT_%=;\n}\n" ::"r"(bar), "r"(parity) : "memory");
}
__device__ __forceinline__ void tma_load(uint32_t dst, const CUtensorMap* map, int c0, int r0, uint32_t bar) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(dst),
               "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(r0), "r"(bar) : "memory");
}
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait(float (&d)[N]) {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(0) : "memory");
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
template <int N>
__device__ __forceinline__ void wgmma_wait1(float (&d)[N]) {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(1) : "memory");
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
#define A8(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])
#define R16 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
#define R32 R16 ", %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define R64 R32 ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
// d (64 x N) += A B, both from shared memory, both transposed (MN-major).
__device__ __forceinline__ void mma_tt(float (&d)[32], uint64_t a, uint64_t b) {
  asm volatile("wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {" R32 "}, %32, %33, 1, 1, 1, 1, 1;\n"
               : A8(0), A8(8), A8(16), A8(24) : "l"(a), "l"(b));
}
__device__ __forceinline__ void mma_tt(float (&d)[64], uint64_t a, uint64_t b) {
  asm volatile("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {" R64 "}, %64, %65, 1, 1, 1, 1, 1;\n"
               : A8(0), A8(8), A8(16), A8(24), A8(32), A8(40), A8(48), A8(56) : "l"(a), "l"(b));
}

struct Problem {
  CUtensorMap a, b;  // dy [T, out] and x [T, in], boxes of 64 x 64
  float* c;          // dW [out, in]
  int out, in, first_tile;
};
struct Problems {
  Problem p[kMaxProblems];
  int count, tiles, k;
};

// Block b: tile b of the problems' tiles in order, 128 rows (out) x kTN columns (in) of its dW.
__global__ void __launch_bounds__(kThreads) grouped_dw_kernel(const __grid_constant__ Problems ps) {
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = smem_raw + (1024 - smem_addr(smem_raw) % 1024) % 1024;
  const uint32_t bars = smem_addr(smem + kStages * kStageBytes);
  int pi = 0;
  while (pi + 1 < ps.count && int(blockIdx.x) >= ps.p[pi + 1].first_tile) ++pi;
  const Problem& pr = ps.p[pi];
  const int t = blockIdx.x - pr.first_tile, tiles_n = pr.in / kTN;
  const int m0 = t / tiles_n * kRows, n0 = t % tiles_n * kTN, chunks = ps.k / kK;
  if (threadIdx.x == 0) {
    for (int i = 0; i < kStages; ++i) mbar_init(bars + 8 * i, 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  auto load = [&](int c) {
    if (threadIdx.x == 0 && c < chunks) {
      const int i = c % kStages;
      const uint32_t st = smem_addr(smem + i * kStageBytes), bar = bars + 8 * i;
      mbar_expect(bar, kStageBytes);
      tma_load(st, &pr.a, m0, c * kK, bar);
      tma_load(st + kBox, &pr.a, m0 + 64, c * kK, bar);
#pragma unroll
      for (int j = 0; j < kTN / 64; ++j) tma_load(st + (2 + j) * kBox, &pr.b, n0 + 64 * j, c * kK, bar);
    }
  };
  const int wg = threadIdx.x / kWarpgroup;
  float acc[kTN / 2];
#pragma unroll
  for (int i = 0; i < kTN / 2; ++i) acc[i] = 0.0f;
  for (int c = 0; c < kStages - 2; ++c) load(c);
  for (int c = 0; c < chunks; ++c) {
    const int i = c % kStages;
    mbar_wait(bars + 8 * i, (c / kStages) & 1);
    __syncthreads();  // every warpgroup's wgmma of chunk c - 2 is done: its buffer may be loaded again
    load(c + kStages - 2);
    const uint32_t st = smem_addr(smem + i * kStageBytes);
    const uint64_t da = mn_desc(st + wg * kBox, kBox), db = mn_desc(st + 2 * kBox, kBox);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < kK / 16; ++ks) mma_tt(acc, da + ks * (2048 >> 4), db + ks * (2048 >> 4));
    wgmma_commit();
    wgmma_wait1(acc);
  }
  wgmma_wait(acc);
  const int lane = threadIdx.x % 32, g = lane / 4, q = lane % 4, row = m0 + 64 * wg + 16 * (threadIdx.x % kWarpgroup / 32) + g;
  float* c0 = pr.c + int64_t(row) * pr.in + n0 + 2 * q;
#pragma unroll
  for (int n = 0; n < kTN / 8; ++n) {
    *reinterpret_cast<float2*>(c0 + 8 * n) = make_float2(acc[4 * n], acc[4 * n + 1]);
    *reinterpret_cast<float2*>(c0 + int64_t(8) * pr.in + 8 * n) = make_float2(acc[4 * n + 2], acc[4 * n + 3]);
  }
}

__global__ void fill(bf16* p, size_t n, uint32_t seed, float amp) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed; h ^= h >> 13; h *= 0x5bd1e995; h ^= h >> 15;
    p[i] = __float2bfloat16((int(h % 2001) - 1000) / 1000.0f * amp);
  }
}

int main() {
  struct Prod { const char* name; int in, out; };
  struct Set { const char* name; int T; std::vector<Prod> p; };
  const Set sets[] = {
      {"default 8 x 128", 1024, {{"qkv", 512, 1024}, {"o", 512, 512}, {"gateup", 512, 4096}, {"down", 2048, 512}}},
      {"medium 16 x 512", 8192, {{"qkv", 1024, 2048}, {"o", 1024, 1024}, {"gateup", 1024, 8192}, {"down", 4096, 1024}}},
  };
  cublasHandle_t h; CB(cublasCreate(&h));
  cudaStream_t st; CK(cudaStreamCreate(&st)); CB(cublasSetStream(h, st)); CB(cublasSetWorkspace(h, nullptr, 0));
  cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
  const size_t smem = kStages * kStageBytes + 8 * kStages + 1024;
  CK(cudaFuncSetAttribute(grouped_dw_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  printf("tile %d x %d, %d stages, %zu bytes of shared memory a block\n", kRows, kTN, kStages, smem);
  for (const Set& set : sets) {
    const int n = int(set.p.size()), T = set.T;
    std::vector<bf16*> X(n), DY(n); std::vector<float*> C(n), C0(n);
    Problems all{}; all.count = n; all.k = T;
    auto map = [](const bf16* ptr, int rows, int cols) {
      CUtensorMap m;
      const cuuint64_t dims[2] = {cuuint64_t(cols), cuuint64_t(rows)}, strides[1] = {cuuint64_t(cols) * 2};
      const cuuint32_t box[2] = {64, 64}, estrides[2] = {1, 1};
      const CUresult r = cuTensorMapEncodeTiled(&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<bf16*>(ptr), dims, strides, box,
                                                estrides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                                CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
      if (r != CUDA_SUCCESS) { fprintf(stderr, "cuTensorMapEncodeTiled: %d\n", int(r)); exit(1); }
      return m;
    };
    double flop = 0;
    for (int i = 0; i < n; ++i) {
      const Prod& p = set.p[i];
      CK(cudaMalloc(&X[i], size_t(T) * p.in * 2)); CK(cudaMalloc(&DY[i], size_t(T) * p.out * 2));
      CK(cudaMalloc(&C[i], size_t(p.in) * p.out * 4)); CK(cudaMalloc(&C0[i], size_t(p.in) * p.out * 4));
      fill<<<512, 256>>>(X[i], size_t(T) * p.in, 11 + i, 1.0f); fill<<<512, 256>>>(DY[i], size_t(T) * p.out, 21 + i, 0.01f);
      all.p[i] = {map(DY[i], T, p.out), map(X[i], T, p.in), C[i], p.out, p.in, all.tiles};
      all.tiles += (p.out / kRows) * (p.in / kTN);
      flop += 2.0 * p.in * p.out * T;
    }
    const float one = 1.0f, zero = 0.0f;
    auto cublas4 = [&](std::vector<float*>& out) {
      for (int i = 0; i < n; ++i)
        CB(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_T, set.p[i].in, set.p[i].out, T, &one, X[i], CUDA_R_16BF, set.p[i].in,
                        DY[i], CUDA_R_16BF, set.p[i].out, &zero, out[i], CUDA_R_32F, set.p[i].in, CUBLAS_COMPUTE_32F,
                        CUBLAS_GEMM_DEFAULT));
    };
    auto ours = [&] { grouped_dw_kernel<<<all.tiles, kThreads, smem, st>>>(all); };
    cublas4(C0);
    for (int i = 0; i < n; ++i) CK(cudaMemsetAsync(C[i], 0xff, size_t(set.p[i].in) * set.p[i].out * 4, st));
    ours();
    CK(cudaStreamSynchronize(st)); CK(cudaGetLastError());
    for (int i = 0; i < n; ++i) {
      const size_t cnt = size_t(set.p[i].in) * set.p[i].out;
      std::vector<float> a(cnt), b(cnt);
      CK(cudaMemcpy(a.data(), C0[i], cnt * 4, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(b.data(), C[i], cnt * 4, cudaMemcpyDeviceToHost));
      double num = 0, den = 0; size_t differ = 0;
      for (size_t j = 0; j < cnt; ++j) {
        num += (double(b[j]) - a[j]) * (double(b[j]) - a[j]); den += double(a[j]) * a[j];
        differ += memcmp(&a[j], &b[j], 4) != 0;
      }
      printf("  %-7s dW [%d, %d]: ours against cuBLAS, relative error %.3e, %zu of %zu elements not the same bits\n",
             set.p[i].name, set.p[i].out, set.p[i].in, std::sqrt(num / std::max(den, 1e-300)), differ, cnt);
    }
    auto time_it = [&](auto body) {
      const int R = std::max(5, int(4e9 / flop));
      cudaGraph_t g; cudaGraphExec_t ge;
      CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
      for (int r = 0; r < R; ++r) body();
      CK(cudaStreamEndCapture(st, &g)); CK(cudaGraphInstantiate(&ge, g, 0));
      CK(cudaGraphLaunch(ge, st)); CK(cudaGraphLaunch(ge, st));
      std::vector<float> t;
      for (int rep = 0; rep < 7; ++rep) {
        CK(cudaEventRecord(e0, st)); CK(cudaGraphLaunch(ge, st)); CK(cudaEventRecord(e1, st)); CK(cudaEventSynchronize(e1));
        float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); t.push_back(ms * 1000 / R);
      }
      std::sort(t.begin(), t.end());
      CK(cudaGraphExecDestroy(ge)); CK(cudaGraphDestroy(g));
      return double(t[3]);
    };
    const double tc = time_it([&] { cublas4(C); }), to = time_it(ours);
    printf("%-18s %d tiles: cuBLAS x4 %8.2f us (%.0f TF/s), ours in one launch %8.2f us (%.0f TF/s): %.2fx\n", set.name,
           all.tiles, tc, flop / tc * 1e-6, to, flop / to * 1e-6, tc / to);
    for (int i = 0; i < n; ++i) { cudaFree(X[i]); cudaFree(DY[i]); cudaFree(C[i]); cudaFree(C0[i]); }
  }
}
