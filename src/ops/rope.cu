// RoPE on the GPU (see rope.h), in place by the shared cos/sin table. The backward is the same
// kernel with the sine negated.
//   narrow (versions 1-2): one thread per (token, head, pair), scalar accesses.
//   wide (custom-rope): one thread per 16 bytes of a head, 4 pairs in bf16 or 2 in fp32, with
//     the matching cos/sin read as one 32- or 16-byte vector of the fp32 table; the model then
//     rotates the queries and the keys in one call. Bytes moved, either way: the rotated
//     columns read and written, 2 * tokens * heads * head_dim elements, plus the table
//     (seq_len * head_dim floats, read from cache for all but the first batch row).
// Version 5 (fp8-fused-rope): the backward made straight in FP8 by quantize.cuh's pass, which
// turns the rotated heads back as it reads the gradient (RopeGradient), so that neither the
// rotation in place nor a cast pass runs. One rotation with its roundings written out serves
// both: a contraction into a fused multiply-add in one and not in the other made their bits differ.
#include "ops/cuda_common.cuh"
#include "ops/quantize.cuh"
#include "ops/rope.cuh"
#include "ops/rope.h"

#include <climits>

namespace tt::cuda {
namespace {

constexpr int kThreads = 256;

// Thread i rotates kPairs consecutive pairs of one head of one token.
template <class T, int kPairs>
__global__ void rope_kernel(Successor next, T* x, const float* table, RopeShape s, float sign) {
  await_previous_kernel(next);
  using V = Vec<T, 2 * kPairs>;
  using CosSin = Vec<float, 2 * kPairs>;
  const int half = s.head_dim / 2, groups = half / kPairs;
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= s.tokens * s.heads * groups) return;
  const int pair = int(i % groups) * kPairs;
  const int head = int((i / groups) % s.heads);
  const int64_t token = i / (int64_t(groups) * s.heads);
  const CosSin cs = CosSin::load(table + (int64_t(token % s.seq_len) * half + pair) * 2);
  T* p = x + token * s.ld + s.col + int64_t(head) * s.head_dim + 2 * pair;
  V v;
  if constexpr (kPairs == 1)  // element by element: the narrow kernel assumes no alignment
    v.v[0] = p[0], v.v[1] = p[1];
  else
    v = V::load(p);
#pragma unroll
  for (int q = 0; q < kPairs; ++q) {
    const float2 r = rotate_pair(to_float(v.v[2 * q]), to_float(v.v[2 * q + 1]), cs.v[2 * q], sign * cs.v[2 * q + 1]);
    v.v[2 * q] = from_float<T>(r.x);
    v.v[2 * q + 1] = from_float<T>(r.y);
  }
  if constexpr (kPairs == 1)
    p[0] = v.v[0], p[1] = v.v[1];
  else
    v.store(p);
}

// quantize.cuh's source: the gradient x [s.tokens, s.ld] with s's heads rotated back, as the
// backward kernel above stores them, and its other columns as they are. A chunk of 8 lies in one
// head (the head size and s.col are multiples of 8). Its indices are 32-bit (rope_backward_fp8
// checks that they fit): with 64-bit ones the quantizing kernel spilled 30 bytes at its 32
// registers, and took 62.4 us a call at gpt2-small against 57.7 (H200, `tiny_llama kernels`).
template <class T>
struct RopeGradient {
  const T* x;
  const float* table;
  RopeShape s;
  __device__ __forceinline__ void load(int64_t row, int64_t col, float (&v)[kQuantizeChunk]) const {
    const Vec<T, kQuantizeChunk> d = Vec<T, kQuantizeChunk>::load(x + row * s.ld + col);
    const int c = int(col - s.col);
    if (c < 0 || c >= s.heads * s.head_dim) {
#pragma unroll
      for (int k = 0; k < kQuantizeChunk; ++k) v[k] = to_float(d.v[k]);
      return;
    }
    const int pair = c % s.head_dim / 2;
    const Vec<float, kQuantizeChunk> cs =
        Vec<float, kQuantizeChunk>::load(table + (int(row) % s.seq_len * (s.head_dim / 2) + pair) * 2);
#pragma unroll
    for (int q = 0; q < kQuantizeChunk / 2; ++q) {
      const float sn = -1.0f * cs.v[2 * q + 1];  // the backward's sign, as the kernel above applies it
      const float2 r = rotate_pair(to_float(d.v[2 * q]), to_float(d.v[2 * q + 1]), cs.v[2 * q], sn);
      v[2 * q] = to_float(from_float<T>(r.x));
      v[2 * q + 1] = to_float(from_float<T>(r.y));
    }
  }
};

}  // namespace

void rope_backward_fp8(const Fp8Matrix& dx8, const Tensor& dx, const Tensor& table, const RopeShape& shape,
                       Fp8Scaling scaling, const Tensor& partials, Stream s) {
  TT_CHECK(shape.ld % kQuantizeChunk == 0 && shape.col % kQuantizeChunk == 0 && shape.head_dim % kQuantizeChunk == 0 &&
               aligned16(dx.ptr) && aligned16(table.ptr),
           "rope_backward_fp8: rows, first column and head size multiples of 8, aligned tensors");
  TT_CHECK(shape.tokens <= INT_MAX && shape.ld <= INT_MAX && int64_t(shape.heads) * shape.head_dim <= INT_MAX,
           "rope_backward_fp8: more rows or columns than 32-bit indices hold");
  TT_DISPATCH_ACT(dx.dtype, {
    const RopeGradient<T> src{static_cast<const T*>(dx.ptr), table.data<float>(), shape};
    quantize_from(dx8, src, shape.tokens, shape.ld, scaling, partials, s);
  });
}

void rope(const Tensor& x, const Tensor& table, const RopeShape& shape, bool backward, bool wide, Stream s) {
  TT_DISPATCH_ACT(x.dtype, {
    constexpr int kVec = kVec16<T>;  // elements of one 16-byte access
    const bool vectorized = wide && shape.col % kVec == 0 && shape.ld % kVec == 0 &&
                            fits_vec16<T>(shape.head_dim, {x.ptr, table.ptr});
    with_vec_width<T>(vectorized, [&](auto vec) {
      constexpr int kPairs = decltype(vec)::value == 1 ? 1 : kVec / 2;
      const int64_t threads = shape.tokens * shape.heads * (shape.head_dim / 2 / kPairs);
      launch("rope_kernel", rope_kernel<T, kPairs>, blocks_for(threads, kThreads), kThreads, 0, s,
             static_cast<T*>(x.ptr), table.data<float>(), shape, backward ? -1.0f : 1.0f);
    });
  });
}

}  // namespace tt::cuda
