// Version 6's open question, the MLP's second product Y = H W2^T ([1024, 2048] x [512, 2048]^T, 512
// output columns) with our tiles at cuBLAS's rate: tiles of 128 x kN (tile_sums of
// src/ops/tile_product.cuh, kN 128 or 64, kBuf buffers), the K sums split over the kSplit blocks of
// a cluster, each block K / kSplit of them, then the partial tiles added through distributed
// shared memory: each block stages its fp32 partial in its own shared memory, the cluster syncs,
// block r adds rows [r 128 / kSplit, ...) of all kSplit partials in rank order (a fixed order: the
// bits repeat) and stores them as bf16. kSplit 1 is the plain tile. The first argument is K
// (2048: the second product; 512: the shape of the output product).
// Against cublasGemmEx (no workspace, as v5 calls it) in the same program: a graph of R calls,
// the median of 7 replays; the largest difference from cuBLAS relative to its largest element;
// whether two runs give the same bits.
#include <cublas_v2.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "ops/tile_product.cuh"

namespace tt {
void fail(const std::string& what) {
  std::printf("%s\n", what.c_str());
  std::exit(1);
}
}  // namespace tt
namespace tt::cuda {
void throw_cuda(cudaError_t err, const char* call, const char* file, int line) {
  std::printf("CUDA error %s in %s at %s:%d\n", cudaGetErrorString(err), call, file, line);
  std::exit(1);
}
void throw_cublas(cublasStatus_t st, const char* call, const char* file, int line) {
  std::printf("cuBLAS error %d in %s at %s:%d\n", int(st), call, file, line);
  std::exit(1);
}
}  // namespace tt::cuda

using namespace tt;
using namespace tt::cuda;
using namespace tt::cuda::tile;

struct Op {
  CUtensorMap a, b;  // A [M, K] boxes of 64 x 128 rows; B [N, K] boxes of 64 x 128 rows
  bf16_t* y;         // [M, N]
  int n, k;
};

__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
__device__ __forceinline__ float4 load_peer(uint32_t local, uint32_t rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"(rank));
  float4 v;
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(remote)
               : "memory");
  return v;
}

template <int kBuf>
constexpr int smem_of() { return kBuf * (kABytes + kBPartBytes) + 8 * kBuf + kSmemAlign; }

template <int kSplit, int kBuf, int kN>
__global__ void __launch_bounds__(kThreads) cluster_splitk_kernel(Successor next, const __grid_constant__ Op op) {
  constexpr int kPitchF = kN * 4 + 16, kStage = kABytes + kN * 128;  // a staged fp32 row of the partial tile
  static_assert(kRows * kPitchF <= kBuf * kStage, "the partial fits in the buffers");
  unsigned char* smem = aligned_smem();
  const uint32_t bars = smem_addr(smem + kBuf * kStage);
  const int tile = int(blockIdx.x) / kSplit, tiles_n = op.n / kN;
  const int m0 = tile / tiles_n * kRows, n0 = tile % tiles_n * kN;
  const uint32_t rank = cluster_rank();
  const int chunks = op.k / kChunk / kSplit, c_first = int(rank) * chunks;
  mbar_init_all(bars, kBuf);
  __syncthreads();
  float acc[1][kN / 2];
  tile_sums<1, 0, kN, kBuf>(
      acc, smem, bars, chunks, next,
      [&](int c, uint32_t st, uint32_t bar) {
        mbar_expect(bar, kStage);
        tma_load_2d(st + kABytes, &op.b, (c_first + c) * kChunk, n0, bar);
      },
      [&](int c, uint32_t st, uint32_t bar) { tma_load_2d(st, &op.a, (c_first + c) * kChunk, m0, bar); });
  const Fragment fr;
#pragma unroll
  for (int n = 0; n < kN / 8; ++n)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int i = 4 * n + 2 * r;
      *reinterpret_cast<float2*>(smem + (fr.row0 + 8 * r) * kPitchF + (8 * n + 2 * fr.t) * 4) =
          make_float2(acc[0][i], acc[0][i + 1]);
    }
  cluster_sync();  // every block's partial staged
  constexpr int kRowsEach = kRows / kSplit, kPieces = kN / 8;  // pieces of 8 columns
  for (int i = threadIdx.x; i < kRowsEach * kPieces; i += kThreads) {
    const int r = int(rank) * kRowsEach + i / kPieces, col = i % kPieces * 8;
    const uint32_t at = smem_addr(smem + r * kPitchF + col * 4);
    float s[8] = {};
#pragma unroll
    for (int q = 0; q < kSplit; ++q) {
      const float4 lo = load_peer(at, q), hi = load_peer(at + 16, q);
      s[0] += lo.x, s[1] += lo.y, s[2] += lo.z, s[3] += lo.w, s[4] += hi.x, s[5] += hi.y, s[6] += hi.z, s[7] += hi.w;
    }
    uint4 out{pack_bf16(s[0], s[1]), pack_bf16(s[2], s[3]), pack_bf16(s[4], s[5]), pack_bf16(s[6], s[7])};
    *reinterpret_cast<uint4*>(op.y + int64_t(m0 + r) * op.n + n0 + col) = out;
  }
  cluster_sync();  // no block leaves while another reads its shared memory
}

// cuBLAS's tile for this product, ours: 64 x 64, the blocks in pairs along M that share B's tile
// (kShare: each asks for 32 of its 64 rows, multicast into both blocks' buffers; else each loads all
// 64), a producer warp and one consumer warpgroup, kBuf buffers each with a "full" barrier (its
// bytes) and an "empty" one that both blocks' consumers arrive on once they are done with it, so
// that neither producer overwrites a buffer the other block still reads.
__device__ __forceinline__ void tma_load_2d_multicast(uint32_t dst, const void* map, int c0, int r0, uint32_t bar,
                                                      uint16_t blocks) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%2, "
      "%3}], [%4], %5;\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(r0), "r"(bar), "h"(blocks)
      : "memory");
}
__device__ __forceinline__ void arrive_in(uint32_t bar, uint32_t rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(bar), "r"(rank));
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(remote) : "memory");
}
constexpr int kPairStage = 2 * 64 * 128;  // A's 64 rows and B's 64 rows of a chunk: 16 KB
template <int kBuf>
constexpr int pair_smem() { return kBuf * kPairStage + 16 * kBuf + kSmemAlign; }

template <int kBuf, int kShare, bool kMma = true, bool kLoadA = true, int kProducers = 1>  // kShare: 0 none, 1 B (pairs along M), 2 A (along N)
__global__ void __launch_bounds__(kWarpgroup + 32 * kProducers) pair_kernel(Successor, const __grid_constant__ Op op) {
  unsigned char* smem = aligned_smem();
  const uint32_t full = smem_addr(smem + kBuf * kPairStage), empty = full + 8 * kBuf;
  const uint32_t rank = cluster_rank();
  const int pair = int(blockIdx.x) / 2, tiles_n = op.n / 64;
  const int n0 = kShare == 2 ? (pair % (tiles_n / 2) * 2 + int(rank)) * 64 : pair % tiles_n * 64;
  const int m0 = kShare == 2 ? pair / (tiles_n / 2) * 64 : (pair / tiles_n * 2 + int(rank)) * 64;
  const int chunks = op.k / kChunk;
  if (threadIdx.x == 0) {
    for (int i = 0; i < kBuf; ++i) mbar_init(full + 8 * i, kProducers), mbar_init(empty + 8 * i, 2);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  cluster_sync();  // both blocks' barriers are made before a copy or an arrival reaches them
  if (threadIdx.x >= kWarpgroup) {
    // One producer thread asks for A and B; with kProducers 2, A from one warp and B from another.
    const int producer = (int(threadIdx.x) - kWarpgroup) / 32;
    if (threadIdx.x % 32 == 0)
      for (int c = 0; c < chunks; ++c) {
        const int s = c % kBuf;
        if (c >= kBuf) mbar_wait(empty + 8 * s, (c / kBuf - 1) & 1);
        const uint32_t st = smem_addr(smem + s * kPairStage);
        const bool ask_a = kProducers == 1 || producer == 0, ask_b = kProducers == 1 || producer == 1;
        mbar_expect(full + 8 * s, (ask_a && kLoadA ? kPairStage / 2 : 0) + (ask_b ? kPairStage / 2 : 0));
        if (ask_a && kShare == 2)
          tma_load_2d_multicast(st + rank * 4096, &op.a, c * kChunk, m0 + 32 * int(rank), full + 8 * s, 3);
        else if (ask_a && kLoadA)
          tma_load_2d(st, &op.a, c * kChunk, m0, full + 8 * s);
        if (ask_b && kShare == 1)
          tma_load_2d_multicast(st + kPairStage / 2 + rank * 4096, &op.b, c * kChunk, n0 + 32 * int(rank), full + 8 * s, 3);
        else if (ask_b)
          tma_load_2d(st + kPairStage / 2, &op.b, c * kChunk, n0, full + 8 * s);
      }
  } else {
    float acc[32];
#pragma unroll
    for (int i = 0; i < 32; ++i) acc[i] = 0.0f;
    for (int c = 0; c < chunks; ++c) {
      const int s = c % kBuf;
      mbar_wait(full + 8 * s, (c / kBuf) & 1);
      const uint32_t st = smem_addr(smem + s * kPairStage);
      const uint64_t da = k_major_sw128(st), db = k_major_sw128(st + kPairStage / 2);
      if (kMma) {
        wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < kChunk / 16; ++ks) Wgmma<64>::ss<0>(acc, da + 2 * ks, db + 2 * ks, 1);
        wgmma_commit();
        wgmma_wait<1>(acc);
      }  // chunk c - 1's products done: its buffer may be loaded again, in both blocks
      if (c > 0 && threadIdx.x == 0) arrive_in(empty + 8 * ((c - 1) % kBuf), 0), arrive_in(empty + 8 * ((c - 1) % kBuf), 1);
    }
    wgmma_wait<0>(acc);
    constexpr int kPitch = 64 * 2 + 16;
    const int w = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int r = 0; r < 2; ++r)
        *reinterpret_cast<uint32_t*>(smem + (16 * w + g + 8 * r) * kPitch + (8 * n + 2 * t) * 2) =
            pack_bf16(acc[4 * n + 2 * r], acc[4 * n + 2 * r + 1]);
    asm volatile("bar.sync 1, %0;" ::"n"(kWarpgroup) : "memory");
    for (int i = threadIdx.x; i < 64 * 8; i += kWarpgroup) {
      const int row = i / 8, piece = i % 8;
      *reinterpret_cast<uint4*>(op.y + int64_t(m0 + row) * op.n + n0 + piece * 8) =
          *reinterpret_cast<const uint4*>(smem + row * kPitch + piece * 16);
    }
  }
  cluster_sync();  // no block leaves while the other may still arrive on its barriers
}

__global__ void fill(bf16_t* p, size_t n, uint32_t seed, float amp) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 13, h *= 0x5bd1e995, h ^= h >> 15;
    p[i] = __float2bfloat16((int(h % 2001) - 1000) / 1000.0f * amp);
  }
}

int main(int argc, char** argv) {
  const int M = 1024, N = 512, K = argc > 1 ? std::atoi(argv[1]) : 2048, R = argc > 2 ? 2 : 100;  // a 2nd argument: a short run (sanitizers)
  bf16_t *A, *B, *Yc, *Y;
  CUDA_CHECK(cudaMalloc(&A, size_t(M) * K * 2));
  CUDA_CHECK(cudaMalloc(&B, size_t(N) * K * 2));
  CUDA_CHECK(cudaMalloc(&Yc, size_t(M) * N * 2));
  CUDA_CHECK(cudaMalloc(&Y, size_t(M) * N * 2));
  fill<<<512, 256>>>(A, size_t(M) * K, 1, 1.0f);
  fill<<<512, 256>>>(B, size_t(N) * K, 2, 0.05f);
  cudaStream_t st;
  CUDA_CHECK(cudaStreamCreate(&st));
  cublasHandle_t blas;
  CUBLAS_CHECK(cublasCreate(&blas));
  CUBLAS_CHECK(cublasSetStream(blas, st));
  CUBLAS_CHECK(cublasSetWorkspace(blas, nullptr, 0));
  const float one = 1, zero = 0;
  auto cublas = [&] {  // column-major: Y^T [N, M] = B [N, K] (as K x N transposed) x A^T
    CUBLAS_CHECK(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &one, B, CUDA_R_16BF, K, A, CUDA_R_16BF, K, &zero,
                              Yc, CUDA_R_16BF, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  };
  const Op op128{bf16_boxes(Tensor{A, DType::BF16, int64_t(M) * K}, M, K, K, kRows),
                 bf16_boxes(Tensor{B, DType::BF16, int64_t(N) * K}, N, K, K, 128), Y, N, K};
  const Op op64{op128.a, bf16_boxes(Tensor{B, DType::BF16, int64_t(N) * K}, N, K, K, 64), Y, N, K};
  const Op pair_shared{bf16_boxes(Tensor{A, DType::BF16, int64_t(M) * K}, M, K, K, 64),
                       bf16_boxes(Tensor{B, DType::BF16, int64_t(N) * K}, N, K, K, 32), Y, N, K};
  const Op pair_own{pair_shared.a, op64.b, Y, N, K};
  const Op pair_shared_a{bf16_boxes(Tensor{A, DType::BF16, int64_t(M) * K}, M, K, K, 32), op64.b, Y, N, K};
  auto ours = [&](auto kernel, int split, int smem, int kn) {
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    launch_kernel("cluster_splitk_kernel", kernel, (M / kRows) * (N / kn) * split, kThreads, smem, st, false, false,
                  unsigned(split), kn == 64 ? op64 : op128);
  };
  cudaEvent_t e0, e1;
  CUDA_CHECK(cudaEventCreate(&e0));
  CUDA_CHECK(cudaEventCreate(&e1));
  auto time_it = [&](auto call) {
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CUDA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    for (int r = 0; r < R; ++r) call();
    CUDA_CHECK(cudaStreamEndCapture(st, &g));
    CUDA_CHECK(cudaGraphInstantiate(&ge, g, 0));
    CUDA_CHECK(cudaGraphLaunch(ge, st));
    std::vector<float> v;
    for (int i = 0; i < 7; ++i) {
      CUDA_CHECK(cudaEventRecord(e0, st));
      CUDA_CHECK(cudaGraphLaunch(ge, st));
      CUDA_CHECK(cudaEventRecord(e1, st));
      CUDA_CHECK(cudaEventSynchronize(e1));
      float ms;
      CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
      v.push_back(ms * 1000 / R);
    }
    std::sort(v.begin(), v.end());
    CUDA_CHECK(cudaGraphExecDestroy(ge));
    CUDA_CHECK(cudaGraphDestroy(g));
    return v[3];
  };
  std::vector<uint16_t> ref(size_t(M) * N), got(size_t(M) * N), again(size_t(M) * N);
  cublas();
  CUDA_CHECK(cudaMemcpy(ref.data(), Yc, ref.size() * 2, cudaMemcpyDeviceToHost));
  auto to_f = [](uint16_t b) {
    uint32_t u = uint32_t(b) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  };
  double ref_max = 0;
  for (uint16_t b : ref) ref_max = std::max(ref_max, double(std::fabs(to_f(b))));
  std::printf("M %d N %d K %d: cublasGemmEx %.2f us\n", M, N, K, time_it(cublas));
  auto variant = [&](auto kernel, int split, int buffers, int kn) {
    const int smem = buffers * (kABytes + kn * 128) + 8 * buffers + kSmemAlign;
    ours(kernel, split, smem, kn);
    cudaLaunchConfig_t config{};
    cudaLaunchAttribute cluster{};
    cluster.id = cudaLaunchAttributeClusterDimension;
    cluster.val.clusterDim = {unsigned(split), 1, 1};
    config.gridDim = (M / kRows) * (N / kn) * split;
    config.blockDim = kThreads;
    config.dynamicSmemBytes = smem;
    config.attrs = &cluster;
    config.numAttrs = 1;
    int clusters = 0;
    CUDA_CHECK(cudaOccupancyMaxActiveClusters(&clusters, kernel, &config));
    CUDA_CHECK(cudaMemset(Y, 0, got.size() * 2));
    ours(kernel, split, smem, kn);
    CUDA_CHECK(cudaStreamSynchronize(st));
    CUDA_CHECK(cudaMemcpy(got.data(), Y, got.size() * 2, cudaMemcpyDeviceToHost));
    ours(kernel, split, smem, kn);
    CUDA_CHECK(cudaStreamSynchronize(st));
    CUDA_CHECK(cudaMemcpy(again.data(), Y, again.size() * 2, cudaMemcpyDeviceToHost));
    double worst = 0;
    for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, double(std::fabs(to_f(got[i]) - to_f(ref[i]))));
    const bool repeat = std::memcmp(got.data(), again.data(), got.size() * 2) == 0;
    const double us = time_it([&] { ours(kernel, split, smem, kn); });
    std::printf("128 x %d, split %d, %d buffers (%d blocks, clusters of %d, at most %d clusters at once): %.2f us; "
                "largest difference from cuBLAS %.2e of its largest %.3f; bits repeat: %s\n",
                kn, split, buffers, (M / kRows) * (N / kn) * split, split, clusters, us, worst / ref_max, ref_max,
                repeat ? "yes" : "NO");
  };
  variant(cluster_splitk_kernel<1, 4, 128>, 1, 4, 128);
  variant(cluster_splitk_kernel<2, 4, 128>, 2, 4, 128);
  variant(cluster_splitk_kernel<4, 4, 128>, 4, 4, 128);
  variant(cluster_splitk_kernel<2, 3, 128>, 2, 3, 128);
  variant(cluster_splitk_kernel<4, 3, 128>, 4, 3, 128);
  variant(cluster_splitk_kernel<8, 3, 128>, 8, 3, 128);
  variant(cluster_splitk_kernel<1, 4, 64>, 1, 4, 64);
  variant(cluster_splitk_kernel<1, 8, 64>, 1, 8, 64);
  variant(cluster_splitk_kernel<2, 4, 64>, 2, 4, 64);
  variant(cluster_splitk_kernel<2, 6, 64>, 2, 6, 64);
  variant(cluster_splitk_kernel<2, 8, 64>, 2, 8, 64);
  variant(cluster_splitk_kernel<4, 4, 64>, 4, 4, 64);
  auto pair_variant = [&](auto kernel, int smem, int share, int buffers, bool mma = true, int producers = 1) {
    const Op& o = share == 2 ? pair_shared_a : share == 1 ? pair_shared : pair_own;
    auto go = [&] {
      launch_kernel("pair_kernel", kernel, (M / 64) * (N / 64), kWarpgroup + 32 * producers, smem, st, false, false, 2u, o);
    };
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    CUDA_CHECK(cudaMemset(Y, 0, got.size() * 2));
    go();
    CUDA_CHECK(cudaStreamSynchronize(st));
    CUDA_CHECK(cudaMemcpy(got.data(), Y, got.size() * 2, cudaMemcpyDeviceToHost));
    go();
    CUDA_CHECK(cudaStreamSynchronize(st));
    CUDA_CHECK(cudaMemcpy(again.data(), Y, again.size() * 2, cudaMemcpyDeviceToHost));
    double worst = 0;
    for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, double(std::fabs(to_f(got[i]) - to_f(ref[i]))));
    const bool repeat = std::memcmp(got.data(), again.data(), got.size() * 2) == 0;
    std::printf("64 x 64 in pairs, B %s, %d buffers%s%s (%d blocks): %.2f us; largest difference from cuBLAS %.2e of its "
                "largest %.3f; bits repeat: %s\n",
                share == 2 ? "loaded by each, A shared (multicast, pairs along N)" : share == 1 ? "shared (multicast)" : "loaded by each", buffers, producers == 2 ? ", A and B asked for by two warps" : "", mma ? "" : ", loads only (no products)", (M / 64) * (N / 64), time_it(go),
                worst / ref_max, ref_max, repeat ? "yes" : "NO");
  };
  pair_variant(pair_kernel<8, 0>, pair_smem<8>(), 0, 8);
  pair_variant(pair_kernel<8, 1>, pair_smem<8>(), 1, 8);
  pair_variant(pair_kernel<12, 1>, pair_smem<12>(), 1, 12);
  pair_variant(pair_kernel<13, 1>, pair_smem<13>(), 1, 13);
  pair_variant(pair_kernel<4, 1>, pair_smem<4>(), 1, 4);
  pair_variant(pair_kernel<8, 0, false>, pair_smem<8>(), 0, 8, false);
  pair_variant(pair_kernel<8, 1, false>, pair_smem<8>(), 1, 8, false);
  pair_variant(pair_kernel<13, 1, false>, pair_smem<13>(), 1, 13, false);
  std::printf("(next: loads of B alone, A not asked for)\n");
  pair_variant(pair_kernel<8, 0, false, false>, pair_smem<8>(), 0, 8, false);
  pair_variant(pair_kernel<8, 2>, pair_smem<8>(), 2, 8);
  pair_variant(pair_kernel<13, 2>, pair_smem<13>(), 2, 13);
  pair_variant(pair_kernel<8, 2, false>, pair_smem<8>(), 2, 8, false);
  pair_variant(pair_kernel<13, 0>, pair_smem<13>(), 0, 13);
  pair_variant(pair_kernel<13, 0, false>, pair_smem<13>(), 0, 13, false);
  pair_variant(pair_kernel<8, 0, true, true, 2>, pair_smem<8>(), 0, 8, true, 2);
  pair_variant(pair_kernel<8, 0, false, true, 2>, pair_smem<8>(), 0, 8, false, 2);
  pair_variant(pair_kernel<8, 2, true, true, 2>, pair_smem<8>(), 2, 8, true, 2);
  pair_variant(pair_kernel<8, 2, false, true, 2>, pair_smem<8>(), 2, 8, false, 2);
  std::printf("cublasGemmEx again %.2f us\n", time_it(cublas));
  return 0;
}
