// RMSNorm's arithmetic on the GPU, as the kernels that normalize a row in one pass of one warp make
// it (rmsnorm.cu's version 3 and FP8 kernels; a kernel that makes the norm inside another, as
// docs/versions/v6.md's norm in the QKV product's prologue did, takes the same): lane l adds the
// squares of its vectors l, l + 32, ... in that order, the warp's sum by warp_sum, rstd =
// rsqrt(sum / c + eps), and each element x r w rounded once. The same order and roundings, so the
// same rstd and the same bits.
#pragma once
#include "ops/cuda_common.cuh"

namespace tt::cuda {

// Element e of the kVec-wide vector v of a row is column v * kVec + e.
template <class T, int kVec>
__device__ __forceinline__ float sum_squares(const Vec<T, kVec>& x) {
  float s = 0.0f;
#pragma unroll
  for (int e = 0; e < kVec; ++e) s += to_float(x.v[e]) * to_float(x.v[e]);
  return s;
}

// A row's rstd from each lane's part of its sum of squares (every lane of the warp gets it).
__device__ __forceinline__ float row_rstd(float lane_squares, int c, float eps) {
  return rsqrtf(warp_sum(lane_squares) / c + eps);
}

template <class T, int kVec>
__device__ __forceinline__ Vec<T, kVec> scaled(const Vec<T, kVec>& x, float r, const Vec<T, kVec>& w) {
  Vec<T, kVec> out;
#pragma unroll
  for (int e = 0; e < kVec; ++e) out.v[e] = from_float<T>(to_float(x.v[e]) * r * to_float(w.v[e]));
  return out;
}

}  // namespace tt::cuda
