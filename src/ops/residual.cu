// Residual add on the GPU (see residual.h): out = a + b, elementwise. Each thread adds kN
// consecutive elements with 16-byte accesses where the tensors allow (8 bf16 or 4 fp32), else
// one element.
#include "ops/cuda_common.cuh"
#include "ops/residual.h"

namespace tt::cuda {
namespace {

template <class T, int kN>
__global__ void add_kernel(Successor next, T* out, const T* a, const T* b, int64_t n) {
  await_previous_kernel(next);
  const int64_t i = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * kN;
  if (i >= n) return;
  using V = Vec<T, kN>;
  const V x = V::load(a + i), y = V::load(b + i);
  V z;
#pragma unroll
  for (int e = 0; e < kN; ++e) z.v[e] = from_float<T>(to_float(x.v[e]) + to_float(y.v[e]));
  z.store(out + i);
}

constexpr int kThreads = 256;

}  // namespace

void add(const Tensor& out, const Tensor& a, const Tensor& b, Stream s) {
  TT_CHECK(a.numel == out.numel && b.numel == out.numel, "add: sizes differ");
  TT_DISPATCH_ACT(out.dtype, {
    with_vec_width<T>(fits_vec16<T>(out.numel, {out.ptr, a.ptr, b.ptr}), [&](auto width) {
      constexpr int kN = decltype(width)::value;
      launch("add_kernel", add_kernel<T, kN>, blocks_for((out.numel + kN - 1) / kN, kThreads), kThreads, 0, s,
             static_cast<T*>(out.ptr), static_cast<const T*>(a.ptr), static_cast<const T*>(b.ptr), out.numel);
    });
  });
}

}  // namespace tt::cuda
