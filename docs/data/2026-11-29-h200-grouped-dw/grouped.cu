// A layer's four weight-gradient products (dW = dy^T x, bf16 in, fp32 out, k = tokens), as v4
// calls them (cublasGemmEx each, no workspace), against one cublasGemmGroupedBatchedEx call of
// four groups of one: time (a graph of R repetitions, median of 7) and whether the bytes agree.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <algorithm>
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

int main(int argc, char** argv) {
  const bool bf16_out = argc > 1;  // C in bf16: what the grouped call supports?
  const cudaDataType_t ctype = bf16_out ? CUDA_R_16BF : CUDA_R_32F;
  const int csize = bf16_out ? 2 : 4;
  struct Prod { const char* name; int in, out; };
  struct Set { const char* name; int T; std::vector<Prod> p; };
  const Set sets[] = {
      {"default 8 x 128", 1024, {{"qkv", 512, 1024}, {"o", 512, 512}, {"gateup", 512, 4096}, {"down", 2048, 512}}},
      {"medium 16 x 512", 8192, {{"qkv", 1024, 2048}, {"o", 1024, 1024}, {"gateup", 1024, 8192}, {"down", 4096, 1024}}},
      {"gpt2-small 16 x 1024", 16384, {{"qkv", 768, 2304}, {"o", 768, 768}, {"gateup", 768, 4096}, {"down", 2048, 768}}},
  };
  cublasHandle_t h; BK(cublasCreate(&h));
  cudaStream_t st; CK(cudaStreamCreate(&st)); BK(cublasSetStream(h, st)); BK(cublasSetWorkspace(h, nullptr, 0));
  cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
  for (const Set& set : sets) {
    const int n = int(set.p.size()), T = set.T;
    std::vector<__nv_bfloat16*> X(n), DY(n); std::vector<float*> C(n), C0(n);
    for (int i = 0; i < n; ++i) {
      CK(cudaMalloc(&X[i], size_t(T) * set.p[i].in * 2)); CK(cudaMalloc(&DY[i], size_t(T) * set.p[i].out * 2));
      CK(cudaMalloc(&C[i], size_t(set.p[i].in) * set.p[i].out * csize)); CK(cudaMalloc(&C0[i], size_t(set.p[i].in) * set.p[i].out * csize));
      fill<<<512, 256>>>(X[i], size_t(T) * set.p[i].in, 11 + i, 1.0f); fill<<<512, 256>>>(DY[i], size_t(T) * set.p[i].out, 21 + i, 0.01f);
    }
    const float one = 1.0f, zero = 0.0f;
    double flop = 0;
    for (auto& p : set.p) flop += 2.0 * p.in * p.out * T;
    // dW[out, in] row-major = column-major [in, out]: m = in, n = out, k = T; A = x (col-major [in, T]), B = dy^T.
    auto separate = [&](std::vector<float*>& out) {
      for (int i = 0; i < n; ++i)
        BK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_T, set.p[i].in, set.p[i].out, T, &one, X[i], CUDA_R_16BF, set.p[i].in,
                        DY[i], CUDA_R_16BF, set.p[i].out, &zero, out[i], ctype, set.p[i].in, CUBLAS_COMPUTE_32F,
                        CUBLAS_GEMM_DEFAULT));
    };
    std::vector<cublasOperation_t> ta(n, CUBLAS_OP_N), tb(n, CUBLAS_OP_T);
    std::vector<int> m(n), nn(n), k(n, T), lda(n), ldb(n), ldc(n), gs(n, 1);
    std::vector<float> al(n, 1.0f), be(n, 0.0f);
    for (int i = 0; i < n; ++i) m[i] = set.p[i].in, nn[i] = set.p[i].out, lda[i] = set.p[i].in, ldb[i] = set.p[i].out, ldc[i] = set.p[i].in;
    void **dA, **dB, **dC;
    CK(cudaMalloc(&dA, n * sizeof(void*))); CK(cudaMalloc(&dB, n * sizeof(void*))); CK(cudaMalloc(&dC, n * sizeof(void*)));
    CK(cudaMemcpy(dA, X.data(), n * sizeof(void*), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dB, DY.data(), n * sizeof(void*), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dC, C.data(), n * sizeof(void*), cudaMemcpyHostToDevice));
    auto grouped = [&] {
      BK(cublasGemmGroupedBatchedEx(h, ta.data(), tb.data(), m.data(), nn.data(), k.data(), al.data(), (const void* const*)dA,
                                    CUDA_R_16BF, lda.data(), (const void* const*)dB, CUDA_R_16BF, ldb.data(), be.data(),
                                    (void* const*)dC, ctype, ldc.data(), n, gs.data(), CUBLAS_COMPUTE_32F));
    };
    separate(C0); CK(cudaStreamSynchronize(st));
    for (int i = 0; i < n; ++i) CK(cudaMemset(C[i], 0xff, size_t(set.p[i].in) * set.p[i].out * csize));
    grouped(); CK(cudaStreamSynchronize(st));
    bool same = true;
    for (int i = 0; i < n; ++i) {
      const size_t bytes = size_t(set.p[i].in) * set.p[i].out * csize;
      std::vector<char> a(bytes), b(bytes);
      CK(cudaMemcpy(a.data(), C0[i], bytes, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(b.data(), C[i], bytes, cudaMemcpyDeviceToHost));
      if (memcmp(a.data(), b.data(), bytes)) { same = false; printf("  %s: grouped bytes differ\n", set.p[i].name); }
    }
    auto time_it = [&](auto body, int R) {
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
      return t[3];
    };
    auto nodes = [&](auto body) {
      cudaGraph_t g;
      CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
      body();
      CK(cudaStreamEndCapture(st, &g));
      size_t count = 0;
      CK(cudaGraphGetNodes(g, nullptr, &count));
      CK(cudaGraphDestroy(g));
      return count;
    };
    printf("  graph nodes: separate %zu, grouped %zu\n", nodes([&] { separate(C); }), nodes(grouped));
    const int R = std::max(5, int(4e9 / flop));
    const double sep = time_it([&] { separate(C); }, R), grp = time_it(grouped, R);
    printf("%-22s four dW products: separate %8.2f us (%.0f TF/s), grouped %8.2f us (%.0f TF/s), %s\n", set.name, sep,
           flop / sep * 1e-6, grp, flop / grp * 1e-6, same ? "the same bytes" : "DIFFERENT bytes");
    for (int i = 0; i < n; ++i) {
      std::vector<float*> one_c = C;
      const double t1 = time_it([&] {
        BK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_T, set.p[i].in, set.p[i].out, T, &one, X[i], CUDA_R_16BF, set.p[i].in,
                        DY[i], CUDA_R_16BF, set.p[i].out, &zero, C[i], ctype, set.p[i].in, CUBLAS_COMPUTE_32F,
                        CUBLAS_GEMM_DEFAULT));
      }, R);
      printf("  %-8s %5d x %5d, k %5d: %7.2f us\n", set.p[i].name, set.p[i].out, set.p[i].in, T, t1);
    }
    for (int i = 0; i < n; ++i) { cudaFree(X[i]); cudaFree(DY[i]); cudaFree(C[i]); cudaFree(C0[i]); }
    cudaFree(dA); cudaFree(dB); cudaFree(dC);
  }
}
