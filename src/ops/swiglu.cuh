// SwiGLU's element-wise math on the GPU, shared by the SwiGLU kernels (swiglu.cu) and the product
// that makes SwiGLU in its epilogue (gated_product.cu), so that both give the same bits.
#pragma once

namespace tt::cuda {

// 1 / (1 + e^-g) with the hardware's approximate exponential and reciprocal (__expf, __fdividef):
// a few instructions where expf and an IEEE division take about sixteen, which the FP8 passes
// (quantize.cuh), bound by instruction issue, pay for every element. CUDA bounds their errors at
// 2 + 1.17 |g| and 2 units in the last place of fp32: far below the bf16 rounding of what it feeds
// in bf16 runs, and at most about 1e-5 of the value in fp32 runs. Where e^-g overflows or the sum
// passes 2^126 (g below about -87), the quotient is 0, within 2^-126 of sigmoid.
__device__ __forceinline__ float sigmoid(float g) { return __fdividef(1.0f, 1.0f + __expf(-g)); }
// The element-wise math, shared by the stored and the FP8 ways.
__device__ __forceinline__ float swiglu_value(float g, float u) { return g * sigmoid(g) * u; }
__device__ __forceinline__ float swiglu_dgate(float g, float u, float d) {
  const float s = sigmoid(g);
  return d * u * s * (1.0f + g * (1.0f - s));
}
__device__ __forceinline__ float swiglu_dup(float g, float d) { return d * g * sigmoid(g); }

}  // namespace tt::cuda
