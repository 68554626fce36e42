// The stream probe of README.md: the bandwidth a plain grid-stride kernel gets at footprints
// around the H100's 50 MB L2 cache, for the access pattern of the RMSNorm backward (read two
// tensors, write one: r2w1), a copy kernel (r1w1) and cudaMemcpyAsync. Not part of the build:
//   nvcc -O2 -arch=sm_90a -o stream_probe stream_probe.cu && ./stream_probe
#include <cuda_runtime.h>
#include <cstdio>
#include <vector>
#include <algorithm>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s\n", cudaGetErrorString(e)); return 1; } } while (0)
__global__ void r2w1(uint4* out, const uint4* a, const uint4* b, long n) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
    uint4 x = a[i], y = b[i];
    out[i] = make_uint4(x.x ^ y.x, x.y ^ y.y, x.z ^ y.z, x.w ^ y.w);
  }
}
__global__ void r1w1(uint4* out, const uint4* a, long n) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) out[i] = a[i];
}
int main() {
  int sms; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const long maxb = 256l << 20;
  char *a, *b, *c; CK(cudaMalloc(&a, maxb)); CK(cudaMalloc(&b, maxb)); CK(cudaMalloc(&c, maxb));
  cudaMemset(a, 1, maxb); cudaMemset(b, 2, maxb); cudaMemset(c, 3, maxb);
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  printf("per-tensor MB, footprint MB, r2w1 GB/s, r1w1 GB/s, memcpy GB/s\n");
  for (double mb : {4.0, 8.0, 12.0, 16.0, 20.0, 24.0, 32.0, 48.0, 64.0, 128.0, 256.0}) {
    const long bytes = long(mb * (1 << 20)), n = bytes / 16;
    double res[3];
    for (int kind = 0; kind < 3; ++kind) {
      const double moved = kind == 0 ? 3.0 * bytes : 2.0 * bytes;
      const int calls = std::max(1, int(1e-3 * 2.9e12 / moved));
      std::vector<float> ms;
      for (int rep = 0; rep < 13; ++rep) {
        cudaEventRecord(e0);
        for (int k = 0; k < calls; ++k) {
          if (kind == 0) r2w1<<<sms * 8, 256>>>((uint4*)c, (const uint4*)a, (const uint4*)b, n);
          else if (kind == 1) r1w1<<<sms * 8, 256>>>((uint4*)c, (const uint4*)a, n);
          else cudaMemcpyAsync(c, a, bytes, cudaMemcpyDeviceToDevice);
        }
        cudaEventRecord(e1); CK(cudaEventSynchronize(e1));
        float t; cudaEventElapsedTime(&t, e0, e1);
        if (rep >= 3) ms.push_back(t / calls);
      }
      std::sort(ms.begin(), ms.end());
      res[kind] = moved / (ms[ms.size() / 2] * 1e-3) / 1e9;
    }
    printf("%6.0f %6.0f %8.0f %8.0f %8.0f\n", mb, 3 * mb, res[0], res[1], res[2]);
  }
  return 0;
}
