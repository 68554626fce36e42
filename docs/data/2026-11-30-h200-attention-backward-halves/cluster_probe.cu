// How many clusters of 2 and 4 blocks fit at once when each block takes a whole SM (here by
// shared memory, in the one-block attention backward by its 227-244 registers a thread).
#include <cstdio>
__global__ void k(int* p) { extern __shared__ int s[]; s[threadIdx.x] = threadIdx.x; if (p) p[blockIdx.x] = s[threadIdx.x]; }
int main() {
  const size_t smem = 150 * 1024;
  cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
  cudaFuncSetAttribute(k, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  for (int c : {1, 2, 4, 8}) {
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute a[1];
    a[0].id = cudaLaunchAttributeClusterDimension;
    a[0].val.clusterDim.x = c, a[0].val.clusterDim.y = 1, a[0].val.clusterDim.z = 1;
    cfg.gridDim = dim3(128 * c), cfg.blockDim = dim3(256), cfg.dynamicSmemBytes = smem, cfg.attrs = a, cfg.numAttrs = 1;
    int n = 0;
    cudaError_t e = cudaOccupancyMaxActiveClusters(&n, k, &cfg);
    std::printf("clusters of %d blocks, one block an SM: %d at once (%d blocks) %s\n", c, n, n * c, cudaGetErrorString(e));
  }
  return 0;
}
