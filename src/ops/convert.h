// Element-type conversion, dst = src in dst's type: the bf16 copy of the fp32 master weights
// (CUDA, round to nearest even), and fp32 <-> fp64 on the CPU for the tests.
#pragma once
#include <cstdint>

#include "core/stream.h"
#include "core/tensor.h"

namespace tt::ref {

template <class D, class S>
void convert(D* dst, const S* src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = D(src[i]);
}

}  // namespace tt::ref

// CUDA launcher (src/ops/convert.cu).
namespace tt::cuda {
void convert(const Tensor& dst, const Tensor& src, Stream s);
}  // namespace tt::cuda
