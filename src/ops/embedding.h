// Token embedding. The table wte[vocab, C] is also the output head (tied weights).
//   forward:  out[n, C] = wte[tokens[n], :]                      (out overwritten)
//   backward: dwte[tokens[n], :] += dout[n, :] for n in order    (parameter gradient accumulates)
// The backward sums in a fixed order, so the result does not change between runs.
#pragma once
#include <cstdint>

namespace tt::ref {

template <class T>
void embedding_forward(T* out, const int32_t* tokens, const T* wte, int64_t n, int c) {
  for (int64_t i = 0; i < n; ++i)
    for (int j = 0; j < c; ++j) out[i * c + j] = wte[int64_t(tokens[i]) * c + j];
}

template <class T>
void embedding_backward(T* dwte, const T* dout, const int32_t* tokens, int64_t n, int c) {
  for (int64_t i = 0; i < n; ++i)
    for (int j = 0; j < c; ++j) dwte[int64_t(tokens[i]) * c + j] += dout[i * c + j];
}

}  // namespace tt::ref
