// Residual connection: out = a + b, elementwise (out may alias a). The backward of a residual
// add is the identity on both branches, so the model only needs this one op: it also adds a
// branch's input gradient into the residual-stream gradient.
#pragma once
#include "core/stream.h"
#include "core/tensor.h"
#include <cstdint>

namespace tt::ref {

template <class T>
void add(T* out, const T* a, const T* b, int64_t n) {
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

}  // namespace tt::ref

// CUDA launcher (src/ops/residual.cu).
namespace tt::cuda {
void add(const Tensor& out, const Tensor& a, const Tensor& b, Stream s);
}  // namespace tt::cuda
