// RoPE's rotation of one pair on the GPU, as every kernel that rotates makes it (rope.cu, and the
// QKV product's epilogue in rope_product.cu): the same roundings, so the same bits. And where a
// pair's (cos, sin) sits in the table (rope.cu's wide kernels read several pairs at once).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace tt::cuda {

// (cos, sin) of pair `pair` at position pos, from rope.h's table [T, head_dim].
__device__ __forceinline__ float2 rope_cos_sin(const float* table, int head_dim, int pos, int pair) {
  return *reinterpret_cast<const float2*>(table + int64_t(pos) * head_dim + 2 * pair);
}

// (x0 c - x1 sn, x0 sn + x1 c), each product and sum rounded as written.
__device__ __forceinline__ float2 rotate_pair(float x0, float x1, float c, float sn) {
  return make_float2(__fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, sn)), __fadd_rn(__fmul_rn(x0, sn), __fmul_rn(x1, c)));
}

}  // namespace tt::cuda
