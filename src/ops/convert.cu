// Element-type conversion on the GPU (see convert.h).
#include "ops/convert.h"
#include "ops/cuda_common.cuh"

namespace tt::cuda {
namespace {

template <class D, class S>
__global__ void convert_kernel(Successor next, D* dst, const S* src, int64_t n) {
  await_previous_kernel(next);
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = from_float<D>(to_float(src[i]));
}

constexpr int kThreads = 256;

}  // namespace

void convert(const Tensor& dst, const Tensor& src, Stream s) {
  TT_CHECK(dst.numel == src.numel, "convert: sizes differ");
  if (dst.dtype == src.dtype) {  // a copy, of any element type
    CUDA_CHECK(cudaMemcpyAsync(dst.ptr, src.ptr, dst.bytes(), cudaMemcpyDeviceToDevice, s.handle));
    return;
  }
  TT_CHECK(src.dtype == DType::F32 || src.dtype == DType::BF16, "convert: unsupported source type");
  TT_DISPATCH_ACT(dst.dtype, {
    using D = T;
    TT_DISPATCH_ACT(src.dtype, {
      launch("convert_kernel", convert_kernel<D, T>, blocks_for(dst.numel, kThreads), kThreads, 0, s,
             static_cast<D*>(dst.ptr), static_cast<const T*>(src.ptr), dst.numel);
    });
  });
}

}  // namespace tt::cuda
