// RoPE on the GPU (see rope.h): one thread per (token, head, pair), rotating in place by the
// shared cos/sin table. The backward is the same kernel with the sine negated.
#include "ops/cuda_common.cuh"
#include "ops/rope.h"

namespace tt::cuda {
namespace {

template <class T>
__global__ void rope_kernel(T* x, const float* table, RopeShape s, float sign) {
  const int half = s.head_dim / 2;
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= s.tokens * s.heads * half) return;
  const int pair = int(i % half);
  const int head = int((i / half) % s.heads);
  const int64_t token = i / (int64_t(half) * s.heads);
  const float* cs = table + (int64_t(token % s.seq_len) * half + pair) * 2;
  T* v = x + token * s.ld + s.col + int64_t(head) * s.head_dim + 2 * pair;
  const float c = cs[0], sn = sign * cs[1];
  const float x0 = to_float(v[0]), x1 = to_float(v[1]);
  v[0] = from_float<T>(x0 * c - x1 * sn);
  v[1] = from_float<T>(x0 * sn + x1 * c);
}

constexpr int kThreads = 256;

}  // namespace

void rope(const Tensor& x, const Tensor& table, const RopeShape& shape, bool backward, Stream s) {
  const int64_t pairs = shape.tokens * shape.heads * (shape.head_dim / 2);
  TT_DISPATCH_ACT(x.dtype, {
    rope_kernel<T><<<blocks_for(pairs, kThreads), kThreads, 0, s>>>(static_cast<T*>(x.ptr), table.data<float>(),
                                                                   shape, backward ? -1.0f : 1.0f);
  });
  CUDA_CHECK_LAUNCH("rope_kernel");
}

}  // namespace tt::cuda
