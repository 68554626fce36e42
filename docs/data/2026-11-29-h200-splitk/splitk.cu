// Split-K headroom for the default shape's bf16 products (1024 tokens): for each, cublasGemmEx (as
// v5 calls it, no workspace) against cuBLASLt's heuristic candidates and each with split-K forced
// to 2, 3, 4, 6, 8 (workspace 32 MB), timed (a graph of R calls, median of 7), with whether the
// bits repeat and the largest difference from gemmex relative to its largest element.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA %s at %d\n", cudaGetErrorString(e), __LINE__); exit(1);} } while (0)
#define BK(x) do { cublasStatus_t e = (x); if (e != CUBLAS_STATUS_SUCCESS) { printf("cuBLAS %d at %d\n", int(e), __LINE__); exit(1);} } while (0)

__global__ void fill(__nv_bfloat16* p, size_t n, uint32_t seed, float amp) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed; h ^= h >> 13; h *= 0x5bd1e995; h ^= h >> 15;
    p[i] = __float2bfloat16((int(h % 2001) - 1000) / 1000.0f * amp);
  }
}
struct Shape { const char* name; cublasOperation_t ta, tb; int m, n, k; int per_step; };

int main() {
  const int T = 1024, C = 512, Q = 1024, F = 2048;
  const cublasOperation_t t = CUBLAS_OP_T, n = CUBLAS_OP_N;
  const std::vector<Shape> shapes = {
      {"o fwd", t, n, C, T, C, 8},          {"down fwd", t, n, C, T, F, 8}, {"qkv dx", n, n, C, T, Q, 8},
      {"o dx", n, n, C, T, C, 8},           {"gateup dx", n, n, C, T, 2 * F, 8}, {"qkv fwd", t, n, Q, T, C, 8},
      {"gateup fwd", t, n, 2 * F, T, C, 8}, {"down dx", n, n, F, T, C, 8}};
  cublasLtHandle_t lt; BK(cublasLtCreate(&lt));
  cublasHandle_t blas; BK(cublasCreate(&blas));
  cudaStream_t st; CK(cudaStreamCreate(&st));
  BK(cublasSetStream(blas, st)); BK(cublasSetWorkspace(blas, nullptr, 0));
  const size_t big = size_t(8192) * 1024, ws_bytes = 32u << 20;
  __nv_bfloat16 *A, *B, *D, *D0; void* ws;
  CK(cudaMalloc(&A, big * 2)); CK(cudaMalloc(&B, big * 2)); CK(cudaMalloc(&D, big * 2)); CK(cudaMalloc(&D0, big * 2));
  CK(cudaMalloc(&ws, ws_bytes));
  fill<<<1024, 256>>>(A, big, 1, 1.0f); fill<<<1024, 256>>>(B, big, 2, 0.05f);
  cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
  double tot_ex = 0, tot_best = 0;
  for (const Shape& s : shapes) {
    const int lda = s.ta == CUBLAS_OP_N ? s.m : s.k, ldb = s.tb == CUBLAS_OP_N ? s.k : s.n;
    const size_t count = size_t(s.m) * s.n;
    const double flop = 2.0 * s.m * s.n * s.k;
    const float alpha = 1, beta = 0;
    const int R = 200;
    auto time_it = [&](auto call) {
      cudaGraph_t g; cudaGraphExec_t ge;
      CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
      for (int r = 0; r < R; ++r) call();
      CK(cudaStreamEndCapture(st, &g)); CK(cudaGraphInstantiate(&ge, g, 0));
      CK(cudaGraphLaunch(ge, st)); CK(cudaGraphLaunch(ge, st));
      std::vector<float> v;
      for (int rep = 0; rep < 7; ++rep) {
        CK(cudaEventRecord(e0, st)); CK(cudaGraphLaunch(ge, st)); CK(cudaEventRecord(e1, st)); CK(cudaEventSynchronize(e1));
        float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); v.push_back(ms * 1000 / R);
      }
      std::sort(v.begin(), v.end());
      CK(cudaGraphExecDestroy(ge)); CK(cudaGraphDestroy(g));
      return double(v[3]);
    };
    auto gemmex = [&] {
      return cublasGemmEx(blas, s.ta, s.tb, s.m, s.n, s.k, &alpha, A, CUDA_R_16BF, lda, B, CUDA_R_16BF, ldb, &beta, D,
                          CUDA_R_16BF, s.m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    };
    BK(gemmex()); CK(cudaStreamSynchronize(st));
    CK(cudaMemcpy(D0, D, count * 2, cudaMemcpyDeviceToDevice));
    std::vector<__nv_bfloat16> h0(count), h1(count), h2(count);
    CK(cudaMemcpy(h0.data(), D0, count * 2, cudaMemcpyDeviceToHost));
    double amax = 0;
    for (auto x : h0) amax = std::max(amax, std::fabs(double(__bfloat162float(x))));
    const double ex_us = time_it(gemmex);
    printf("%-10s %5d x %5d x %5d gemmex %7.2f us %6.1f TF/s\n", s.name, s.m, s.n, s.k, ex_us, flop / ex_us * 1e-6);
    cublasLtMatmulDesc_t op; BK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    BK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &s.ta, sizeof s.ta));
    BK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &s.tb, sizeof s.tb));
    cublasLtMatrixLayout_t la, lb, lc;
    BK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, s.ta == CUBLAS_OP_N ? s.m : s.k, s.ta == CUBLAS_OP_N ? s.k : s.m, lda));
    BK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, s.tb == CUBLAS_OP_N ? s.k : s.n, s.tb == CUBLAS_OP_N ? s.n : s.k, ldb));
    BK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, s.m, s.n, s.m));
    cublasLtMatmulPreference_t pref; BK(cublasLtMatmulPreferenceCreate(&pref));
    size_t wb = ws_bytes;
    BK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wb, sizeof wb));
    std::vector<cublasLtMatmulHeuristicResult_t> res(16); int found = 0;
    BK(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 16, res.data(), &found));
    double best = ex_us; char best_what[128] = "gemmex";
    for (int i = 0; i < std::min(found, 6); ++i)
      for (int split : {0, 2, 3, 4, 6, 8})
        for (uint32_t red : {1u, 2u}) {  // INPLACE, COMPUTE_TYPE
          if (split == 0 && red == 2) continue;
          cublasLtMatmulAlgo_t algo = res[i].algo;
          size_t sz; int32_t s0 = 1; uint32_t r0 = 0; int tile = -1;
          cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &s0, sizeof s0, &sz);
          cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &r0, sizeof r0, &sz);
          cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile, &sz);
          if (split) {
            if (cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &split, sizeof split) ||
                cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &red, sizeof red))
              continue;
            cublasLtMatmulHeuristicResult_t chk;
            if (cublasLtMatmulAlgoCheck(lt, op, la, lb, lc, lc, &algo, &chk) != CUBLAS_STATUS_SUCCESS) continue;
            if (chk.workspaceSize > ws_bytes) continue;
          }
          auto call = [&] { return cublasLtMatmul(lt, op, &alpha, A, la, B, lb, &beta, D, lc, D, lc, &algo, ws, ws_bytes, st); };
          CK(cudaMemset(D, 0xff, count * 2));
          if (call() != CUBLAS_STATUS_SUCCESS) continue;
          CK(cudaStreamSynchronize(st));
          CK(cudaMemcpy(h1.data(), D, count * 2, cudaMemcpyDeviceToHost));
          CK(cudaMemset(D, 0xff, count * 2));
          BK(call()); CK(cudaStreamSynchronize(st));
          CK(cudaMemcpy(h2.data(), D, count * 2, cudaMemcpyDeviceToHost));
          const bool repeat = memcmp(h1.data(), h2.data(), count * 2) == 0, same = memcmp(h0.data(), h1.data(), count * 2) == 0;
          double diff = 0;
          for (size_t j = 0; j < count; ++j)
            diff = std::max(diff, std::fabs(double(__bfloat162float(h1[j])) - double(__bfloat162float(h0[j]))));
          const double us = time_it(call);
          printf("%-10s   lt #%d tile %3d split %d (heuristic's %d, red %u) %7.2f us %6.1f TF/s %s %s diff %.1e\n", s.name, i,
                 tile, split ? split : s0, s0, split ? red : r0, us, flop / us * 1e-6, repeat ? "repeats" : "DOES NOT REPEAT",
                 same ? "gemmex's bits" : "other bits", diff / amax);
          if (repeat && us < best) best = us, snprintf(best_what, sizeof best_what, "lt #%d split %d red %u", i, split ? split : s0, red);
        }
    printf("== %-10s gemmex %.2f us, best %.2f (%s): %.1f%%\n", s.name, ex_us, best, best_what, 100 * (1 - best / ex_us));
    tot_ex += s.per_step * ex_us, tot_best += s.per_step * best;
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(la); cublasLtMatrixLayoutDestroy(lb); cublasLtMatrixLayoutDestroy(lc); cublasLtMatmulDescDestroy(op);
  }
  printf("the step's (8 layers): gemmex %.1f us, best %.1f us\n", tot_ex, tot_best);
}
