// Shared pieces of the CUDA kernels: element-type conversions, warp and block reductions,
// and the dispatch from a tensor's dtype to the kernel instantiation for it.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/cuda_check.h"
#include "core/tensor.h"

namespace tt::cuda {

using bf16_t = __nv_bfloat16;

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(bf16_t x) { return __bfloat162float(x); }
template <class T> __device__ __forceinline__ T from_float(float x);
template <> __device__ __forceinline__ float from_float<float>(float x) { return x; }
template <> __device__ __forceinline__ bf16_t from_float<bf16_t>(float x) { return __float2bfloat16_rn(x); }

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over the block; every thread gets the result. `scratch` holds 32 floats. The order of
// the additions is fixed by the launch shape, so the result does not change between runs.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = (blockDim.x + 31) / 32;
  v = warp_sum(v);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : 0.0f;
  return warp_sum(v);
}
__device__ __forceinline__ float block_max(float v, float* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = (blockDim.x + 31) / 32;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : -INFINITY;
  return warp_max(v);
}

inline unsigned blocks_for(int64_t n, int threads) { return unsigned((n + threads - 1) / threads); }

}  // namespace tt::cuda

// Calls BODY with `T` bound to the element type of an activation tensor (fp32 or bf16).
#define TT_DISPATCH_ACT(dtype, ...)                                                   \
  do {                                                                                \
    if ((dtype) == ::tt::DType::F32) {                                                \
      using T = float;                                                                \
      __VA_ARGS__;                                                                    \
    } else if ((dtype) == ::tt::DType::BF16) {                                        \
      using T = ::tt::cuda::bf16_t;                                                   \
      __VA_ARGS__;                                                                    \
    } else {                                                                          \
      ::tt::fail(std::string("no CUDA kernel for dtype ") + ::tt::dtype_name(dtype)); \
    }                                                                                 \
  } while (0)
