// Does compute-sanitizer's initcheck see what cuBLAS's bf16 products write? C written by one
// cublasGemmEx (beta 0), then read by a kernel of ours; at a small and at the default layer's shape.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cstdio>
#include <tuple>
__global__ void read_all(const __nv_bfloat16* c, long n, float* out) {
  float s = 0;
  for (long i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) s += __bfloat162float(c[i]);
  atomicAdd(out, s);
}
int main() {
  cublasHandle_t h;
  cublasCreate(&h);
  for (auto [m, n, k] : {std::tuple{128, 128, 256}, std::tuple{512, 1024, 2048}}) {
    __nv_bfloat16 *a, *b, *c;
    float* out;
    cudaMalloc(&a, sizeof(*a) * m * k); cudaMalloc(&b, sizeof(*b) * k * n); cudaMalloc(&c, sizeof(*c) * m * n);
    cudaMalloc(&out, 4);
    cudaMemset(a, 0, sizeof(*a) * m * k); cudaMemset(b, 0, sizeof(*b) * k * n); cudaMemset(out, 0, 4);
    const float one = 1, zero = 0;
    cublasStatus_t st = cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, a, CUDA_R_16BF, k, b, CUDA_R_16BF, k,
                                     &zero, c, CUDA_R_16BF, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    read_all<<<64, 256>>>(c, long(m) * n, out);
    printf("m %d n %d k %d: gemm status %d, sync %s\n", m, n, k, int(st), cudaGetErrorString(cudaDeviceSynchronize()));
  }
  return 0;
}
