// Every cuBLASLt algorithm id for the default shape's bf16 products of 512 output columns and the
// others, each tile it offers with split-K 1, 2, 3, 4 (each reduction scheme it supports), timed
// against cublasGemmEx (a graph of 200 calls, median of 7); the best five per shape, whether
// their bits repeat.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA %s at %d\n", cudaGetErrorString(e), __LINE__); exit(1);} } while (0)
#define BK(x) do { cublasStatus_t e = (x); if (e != CUBLAS_STATUS_SUCCESS) { printf("cuBLAS %d at %d\n", int(e), __LINE__); exit(1);} } while (0)
__global__ void fill(__nv_bfloat16* p, size_t n, uint32_t seed, float amp) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed; h ^= h >> 13; h *= 0x5bd1e995; h ^= h >> 15;
    p[i] = __float2bfloat16((int(h % 2001) - 1000) / 1000.0f * amp);
  }
}
struct Shape { const char* name; cublasOperation_t ta, tb; int m, n, k; };
struct Found { double us; std::string what; bool repeat; };
int main() {
  const int T = 1024, C = 512, Q = 1024, F = 2048;
  const cublasOperation_t t = CUBLAS_OP_T, n = CUBLAS_OP_N;
  const std::vector<Shape> shapes = {{"o fwd", t, n, C, T, C},   {"down fwd", t, n, C, T, F},   {"qkv dx", n, n, C, T, Q},
                                     {"o dx", n, n, C, T, C},    {"gateup dx", n, n, C, T, 2 * F}};
  cublasLtHandle_t lt; BK(cublasLtCreate(&lt));
  cublasHandle_t blas; BK(cublasCreate(&blas));
  cudaStream_t st; CK(cudaStreamCreate(&st));
  BK(cublasSetStream(blas, st)); BK(cublasSetWorkspace(blas, nullptr, 0));
  const size_t big = size_t(8192) * 1024, ws_bytes = 32u << 20;
  __nv_bfloat16 *A, *B, *D; void* ws;
  CK(cudaMalloc(&A, big * 2)); CK(cudaMalloc(&B, big * 2)); CK(cudaMalloc(&D, big * 2)); CK(cudaMalloc(&ws, ws_bytes));
  fill<<<1024, 256>>>(A, big, 1, 1.0f); fill<<<1024, 256>>>(B, big, 2, 0.05f);
  cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
  for (const Shape& s : shapes) {
    const int lda = s.ta == CUBLAS_OP_N ? s.m : s.k, ldb = s.tb == CUBLAS_OP_N ? s.k : s.n;
    const size_t count = size_t(s.m) * s.n;
    const float alpha = 1, beta = 0;
    const int R = 100;
    auto time_it = [&](auto call) {
      cudaGraph_t g; cudaGraphExec_t ge;
      CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
      for (int r = 0; r < R; ++r) call();
      CK(cudaStreamEndCapture(st, &g)); CK(cudaGraphInstantiate(&ge, g, 0));
      CK(cudaGraphLaunch(ge, st)); CK(cudaGraphLaunch(ge, st));
      std::vector<float> v;
      for (int rep = 0; rep < 5; ++rep) {
        CK(cudaEventRecord(e0, st)); CK(cudaGraphLaunch(ge, st)); CK(cudaEventRecord(e1, st)); CK(cudaEventSynchronize(e1));
        float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); v.push_back(ms * 1000 / R);
      }
      std::sort(v.begin(), v.end());
      CK(cudaGraphExecDestroy(ge)); CK(cudaGraphDestroy(g));
      return double(v[2]);
    };
    auto gemmex = [&] {
      return cublasGemmEx(blas, s.ta, s.tb, s.m, s.n, s.k, &alpha, A, CUDA_R_16BF, lda, B, CUDA_R_16BF, ldb, &beta, D,
                          CUDA_R_16BF, s.m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    };
    BK(gemmex()); CK(cudaStreamSynchronize(st));
    const double ex_us = time_it(gemmex);
    cublasLtMatmulDesc_t op; BK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    BK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &s.ta, sizeof s.ta));
    BK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &s.tb, sizeof s.tb));
    cublasLtMatrixLayout_t la, lb, lc;
    BK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, s.ta == CUBLAS_OP_N ? s.m : s.k, s.ta == CUBLAS_OP_N ? s.k : s.m, lda));
    BK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, s.tb == CUBLAS_OP_N ? s.k : s.n, s.tb == CUBLAS_OP_N ? s.n : s.k, ldb));
    BK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, s.m, s.n, s.m));
    int ids[256], nids = 0;
    BK(cublasLtMatmulAlgoGetIds(lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_16BF, CUDA_R_16BF, CUDA_R_16BF, CUDA_R_16BF, 256, ids, &nids));
    std::vector<Found> found;
    int tried = 0, split_tried = 0;
    std::vector<__nv_bfloat16> h1(count), h2(count);
    for (int a = 0; a < nids; ++a) {
      cublasLtMatmulAlgo_t algo;
      if (cublasLtMatmulAlgoInit(lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_16BF, CUDA_R_16BF, CUDA_R_16BF, CUDA_R_16BF, ids[a], &algo)) continue;
      size_t sz = 0; int32_t splitk_ok = 0; uint32_t red_mask = 0;
      cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_SPLITK_SUPPORT, &splitk_ok, sizeof splitk_ok, &sz);
      cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_REDUCTION_SCHEME_MASK, &red_mask, sizeof red_mask, &sz);
      cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_TILE_IDS, nullptr, 0, &sz);
      std::vector<int32_t> tiles(std::max<size_t>(1, sz / 4), 0);
      if (sz) cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_TILE_IDS, tiles.data(), sz, &sz);
      cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_STAGES_IDS, nullptr, 0, &sz);
      std::vector<int32_t> stages(std::max<size_t>(1, sz / 4), 0);
      if (sz) cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_STAGES_IDS, stages.data(), sz, &sz);
      printf("%-10s algo %3d: %zu tiles, %zu stages, split-K %s, reductions 0x%x\n", s.name, ids[a], tiles.size(), stages.size(),
             splitk_ok ? "yes" : "no", red_mask);
      for (int32_t tile : tiles)
        for (int32_t stage : {stages[0]})
          for (int split : {1, 2, 3, 4})
            for (uint32_t red : {0u, 1u, 2u, 4u}) {
              if ((split == 1) != (red == 0)) continue;
              if (split > 1 && (!splitk_ok || !(red_mask & red))) continue;
              cublasLtMatmulAlgo_t al = algo;
              cublasLtMatmulAlgoConfigSetAttribute(&al, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile);
              cublasLtMatmulAlgoConfigSetAttribute(&al, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stage, sizeof stage);
              cublasLtMatmulAlgoConfigSetAttribute(&al, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &split, sizeof split);
              cublasLtMatmulAlgoConfigSetAttribute(&al, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &red, sizeof red);
              cublasLtMatmulHeuristicResult_t chk;
              if (cublasLtMatmulAlgoCheck(lt, op, la, lb, lc, lc, &al, &chk) != CUBLAS_STATUS_SUCCESS) continue;
              if (chk.workspaceSize > ws_bytes) continue;
              auto call = [&] { return cublasLtMatmul(lt, op, &alpha, A, la, B, lb, &beta, D, lc, D, lc, &al, ws, ws_bytes, st); };
              if (call() != CUBLAS_STATUS_SUCCESS) { cudaGetLastError(); continue; }
              if (cudaStreamSynchronize(st) != cudaSuccess) { printf("error\n"); exit(1); }
              ++tried, split_tried += split > 1;
              const double us = time_it(call);
              char what[160];
              snprintf(what, sizeof what, "algo %d tile %d stages %d split %d red %u", ids[a], tile, stage, split, red);
              found.push_back({us, what, true});
            }
    }
    std::sort(found.begin(), found.end(), [](const Found& x, const Found& y) { return x.us < y.us; });
    printf("== %-10s %d x %d x %d: gemmex %.2f us; %d configurations (%d split), the best:\n", s.name, s.m, s.n, s.k, ex_us, tried, split_tried);
    for (size_t i = 0; i < found.size() && i < 6; ++i) printf("   %7.2f us  %s\n", found[i].us, found[i].what.c_str());
    double best_split = 1e9; std::string bs;
    for (auto& f : found) if (f.what.find("split 1 ") == std::string::npos && f.us < best_split) best_split = f.us, bs = f.what;
    if (best_split < 1e9) printf("   best split: %7.2f us  %s\n", best_split, bs.c_str());
    cublasLtMatrixLayoutDestroy(la); cublasLtMatrixLayoutDestroy(lb); cublasLtMatrixLayoutDestroy(lc); cublasLtMatmulDescDestroy(op);
  }
}
