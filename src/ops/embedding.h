// Token embedding. The table wte[vocab, C] is also the output head (tied weights).
//   forward:  out[n, C] = wte[tokens[n], :]                      (out overwritten)
//   backward: dwte[tokens[n], :] += dout[n, :] for n in order    (parameter gradient accumulates)
// The backward sums in a fixed order, so the result does not change between runs.
#pragma once
#include "core/stream.h"
#include "core/tensor.h"
#include <cstdint>
#include <vector>

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

// CUDA launchers (src/ops/embedding.cu). The backward sorts the positions by token first (CUB's
// stable radix sort), then one block owns each distinct token's row of dwte and adds that
// token's rows of dout in position order: no atomics, and the same bits on every run.
namespace tt::cuda {
// The backward's scratch for batches of up to `tokens` positions, all I32.
struct EmbeddingScratch {
  Tensor positions;         // [tokens]: 0, 1, 2, ... (written once, by embedding_prepare)
  Tensor sorted_tokens;     // [tokens]
  Tensor sorted_positions;  // [tokens]
  Tensor sort_temp;         // the sort's own scratch
};
// The elements of each of the four, in that order.
std::vector<int64_t> embedding_scratch_numel(int64_t tokens);
void embedding_prepare(const EmbeddingScratch& scratch, Stream s);

void embedding_forward(const Tensor& out, const Tensor& tokens, const Tensor& wte, int64_t n, int c, Stream s);
void embedding_backward(const Tensor& dwte, const Tensor& dout, const Tensor& tokens, int64_t n, int c, int vocab,
                        const EmbeddingScratch& scratch, Stream s);
}  // namespace tt::cuda
