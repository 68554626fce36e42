// RoPE on the GPU (see rope.h), in place by the shared cos/sin table. The backward is the same
// kernel with the sine negated.
//   narrow (versions 1-2): one thread per (token, head, pair), scalar accesses.
//   wide (custom-rope): one thread per 16 bytes of a head, 4 pairs in bf16 or 2 in fp32, with
//     the matching cos/sin read as one 32- or 16-byte vector of the fp32 table; the model then
//     rotates the queries and the keys in one call. Bytes moved, either way: the rotated
//     columns read and written, 2 * tokens * heads * head_dim elements, plus the table
//     (seq_len * head_dim floats, read from cache for all but the first batch row).
#include "ops/cuda_common.cuh"
#include "ops/rope.h"

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
    const float c = cs.v[2 * q], sn = sign * cs.v[2 * q + 1];
    const float x0 = to_float(v.v[2 * q]), x1 = to_float(v.v[2 * q + 1]);
    v.v[2 * q] = from_float<T>(x0 * c - x1 * sn);
    v.v[2 * q + 1] = from_float<T>(x0 * sn + x1 * c);
  }
  if constexpr (kPairs == 1)
    p[0] = v.v[0], p[1] = v.v[1];
  else
    v.store(p);
}

}  // namespace

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
