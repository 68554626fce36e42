// Token embedding. The table wte[vocab, C] is also the output head (tied weights).
//   forward:  out[n, C] = wte[tokens[n], :]                      (out overwritten)
//   backward: dwte[tokens[n], :] += dout[n, :] for n in order    (parameter gradient accumulates)
// The backward sums in a fixed order, so the result does not change between runs.
#pragma once
#include "core/stream.h"
#include "core/tensor.h"
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

// CUDA launchers (src/ops/embedding.cu). The backward runs one block per vocabulary row; each
// warp scans the tokens 32 at a time with a ballot and adds the matching rows in token order,
// so it needs no atomics and is deterministic.
namespace tt::cuda {
void embedding_forward(const Tensor& out, const Tensor& tokens, const Tensor& wte, int64_t n, int c, Stream s);
void embedding_backward(const Tensor& dwte, const Tensor& dout, const Tensor& tokens, int64_t n, int c, int vocab,
                        Stream s);
}  // namespace tt::cuda
