// Residual connection: out = a + b, elementwise (out may alias a). The backward of a residual
// add is the identity on both branches, so the model only needs this one op: it also adds a
// branch's input gradient into the residual-stream gradient.
#pragma once
#include <cstdint>

namespace tt::ref {

template <class T>
void add(T* out, const T* a, const T* b, int64_t n) {
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

}  // namespace tt::ref
