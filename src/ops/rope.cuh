// RoPE's rotation of one pair on the GPU, as every kernel that rotates makes it (rope.cu, and the
// QKV product's epilogue in rope_product.cu): the same roundings, so the same bits.
#pragma once
#include <cuda_runtime.h>

namespace tt::cuda {

// (x0 c - x1 sn, x0 sn + x1 c), each product and sum rounded as written.
__device__ __forceinline__ float2 rotate_pair(float x0, float x1, float c, float sn) {
  return make_float2(__fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, sn)), __fadd_rn(__fmul_rn(x0, sn), __fmul_rn(x1, c)));
}

}  // namespace tt::cuda
