// Does initcheck see what cuBLASLt writes to a D apart from C? D = A B + C (bf16, beta 1, no
// workspace), the v6 output product's shape at batch 2 x 128: 256 x 512 out of K 512; D never
// written before. Then a kernel reads every element of D. Prints the kernel cuBLASLt chose.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cstdio>
#define CK(x) do { auto e = (x); if (e != 0) { std::printf("%s: %d\n", #x, int(e)); return 1; } } while (0)
__global__ void fill(__nv_bfloat16* p, int n, float v) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) p[i] = __float2bfloat16(v); }
__global__ void sum(const __nv_bfloat16* p, int n, float* out) {
  float s = 0; for (int i = threadIdx.x; i < n; i += blockDim.x) s += __bfloat162float(p[i]);
  atomicAdd(out, s);
}
int main(int argc, char** argv) {
  const int M = argc > 1 ? atoi(argv[1]) : 256, N = 512, K = 512;  // M tokens, N outputs
  __nv_bfloat16 *a, *b, *c, *d; float* out;
  CK(cudaMalloc(&a, M * K * 2)); CK(cudaMalloc(&b, K * N * 2)); CK(cudaMalloc(&c, M * N * 2)); CK(cudaMalloc(&d, M * N * 2));
  CK(cudaMalloc(&out, 4));
  fill<<<(M * K + 255) / 256, 256>>>(a, M * K, 0.01f); fill<<<(K * N + 255) / 256, 256>>>(b, K * N, 0.01f);
  fill<<<(M * N + 255) / 256, 256>>>(c, M * N, 1.0f); CK(cudaMemset(out, 0, 4));
  cublasLtHandle_t h; CK(cublasLtCreate(&h));
  cublasLtMatmulDesc_t op; CK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t t = CUBLAS_OP_T, n = CUBLAS_OP_N;
  CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t));
  CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &n, sizeof n));
  cublasLtMatrixLayout_t la, lb, lc;  // column-major: D^T (N x M) = B^T (N x K) A^T (K x M)
  CK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, K, N, K)); CK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, K, M, K));
  CK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, N, M, N));
  cublasLtMatmulPreference_t pref; CK(cublasLtMatmulPreferenceCreate(&pref));
  size_t ws = 0; CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
  cublasLtMatmulHeuristicResult_t r; int found = 0;
  CK(cublasLtMatmulAlgoGetHeuristic(h, op, la, lb, lc, lc, pref, 1, &r, &found));
  if (!found) { std::printf("no algorithm\n"); return 1; }
  const float one = 1.0f;
  CK(cublasLtMatmul(h, op, &one, b, la, a, lb, &one, c, lc, d, lc, &r.algo, nullptr, 0, 0));
  sum<<<1, 256>>>(d, M * N, out);
  CK(cudaDeviceSynchronize());
  float s = 0; CK(cudaMemcpy(&s, out, 4, cudaMemcpyDeviceToHost));
  std::printf("sum %.1f, expected %.1f (D = A B + C, D apart from C)\n", s, double(M) * N * (1.0 + K * 1e-4));
  return 0;
}
