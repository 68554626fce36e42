// Does compute-sanitizer's initcheck see what cuBLAS's Hopper products write? C = A B (bf16, the
// v6 norm's shape: 1024 x 512 out of K 512, beta = 1 over a C the probe wrote first), then a kernel
// reads every element of C. Run: compute-sanitizer --tool initcheck ./probe
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cstdio>
#include <vector>
#define CK(x) do { auto e = (x); if (e != 0) { std::printf("%s: %d\n", #x, int(e)); return 1; } } while (0)
__global__ void fill(__nv_bfloat16* p, int n, float v) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) p[i] = __float2bfloat16(v); }
__global__ void sum(const __nv_bfloat16* p, int n, float* out) {
  float s = 0; for (int i = threadIdx.x; i < n; i += blockDim.x) s += __bfloat162float(p[i]);
  atomicAdd(out, s);
}
int main() {
  const int M = 1024, N = 512, K = 512;
  __nv_bfloat16 *a, *b, *c; float* out;
  CK(cudaMalloc(&a, M * K * 2)); CK(cudaMalloc(&b, K * N * 2)); CK(cudaMalloc(&c, M * N * 2)); CK(cudaMalloc(&out, 4));
  fill<<<(M * K + 255) / 256, 256>>>(a, M * K, 0.01f); fill<<<(K * N + 255) / 256, 256>>>(b, K * N, 0.01f);
  fill<<<(M * N + 255) / 256, 256>>>(c, M * N, 1.0f); CK(cudaMemset(out, 0, 4));
  cublasHandle_t h; CK(cublasCreate(&h));
  const float one = 1.0f;
  for (int beta = 0; beta < 2; ++beta) {
    const float bv = float(beta);
    CK(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &one, b, CUDA_R_16BF, K, a, CUDA_R_16BF, K, &bv, c, CUDA_R_16BF, N,
                    CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    sum<<<1, 256>>>(c, M * N, out);
    CK(cudaDeviceSynchronize());
  }
  float s = 0; CK(cudaMemcpy(&s, out, 4, cudaMemcpyDeviceToHost));
  std::printf("sum %.3f (beta 0 then 1)\n", s);
  return 0;
}
