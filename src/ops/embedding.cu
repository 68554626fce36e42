// Token embedding on the GPU: a gather forward, and a deterministic backward (see embedding.h
// for the contract).
//
// The backward adds each position's row of dout to its token's row of dwte. Atomics would make
// the order of the additions, and so the rounding, change from run to run; scanning every
// token for every vocabulary row (our earlier kernel) costs vocab x tokens reads, 1.25 ms a
// step at vocabulary 50304 and 16384 tokens. Instead the (token, position) pairs are sorted
// by token with CUB's radix sort, which is stable, so each token's positions lie together in
// increasing order; the block at the first sorted index of a token owns that token's row and
// adds its rows of dout in that order. Every row of dwte has one owner and a fixed order of
// additions, and dout is read once.
#include <algorithm>

#include <cub/device/device_radix_sort.cuh>

#include "ops/cuda_common.cuh"
#include "ops/embedding.h"

namespace tt::cuda {
namespace {

template <class T>
__global__ void embedding_forward_kernel(Successor next, T* out, const int32_t* tokens, const T* wte, int64_t n,
                                         int c) {
  await_previous_kernel(next);
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n * c) return;
  const int64_t row = i / c;
  out[i] = wte[int64_t(tokens[row]) * c + (i - row * c)];
}

__global__ void iota_kernel(Successor next, int32_t* out, int64_t n) {
  await_previous_kernel(next);
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = int32_t(i);
}

// One block per sorted index; only the block at a token's first index works. Thread j owns kN
// consecutive columns of each pass over the row (one pass where c <= kN * blockDim.x) and adds
// the token's rows of dout in sorted order, kRowsAhead rows loaded before the first is added.
constexpr int kRowsAhead = 4;
template <class T, int kN>
__global__ void embedding_backward_kernel(Successor next, float* dwte, const T* dout, const int32_t* sorted_tokens,
                                          const int32_t* sorted_positions, int64_t n, int c) {
  await_previous_kernel(next);
  const int64_t first = blockIdx.x;
  const int32_t token = sorted_tokens[first];
  if (first > 0 && sorted_tokens[first - 1] == token) return;  // another block owns this token
  for (int col0 = 0; col0 < c; col0 += blockDim.x * kN) {      // uniform across the block
    const int col = col0 + threadIdx.x * kN;
    float acc[kN] = {};
    for (int64_t r = first; r < n && sorted_tokens[r] == token; r += kRowsAhead) {
      Vec<T, kN> x[kRowsAhead];
      bool mine[kRowsAhead];
#pragma unroll
      for (int u = 0; u < kRowsAhead; ++u) {
        mine[u] = r + u < n && sorted_tokens[r + u] == token && col < c;
        if (mine[u]) x[u] = Vec<T, kN>::load(dout + int64_t(sorted_positions[r + u]) * c + col);
      }
#pragma unroll
      for (int u = 0; u < kRowsAhead; ++u)
        if (mine[u])
#pragma unroll
          for (int k = 0; k < kN; ++k) acc[k] += to_float(x[u].v[k]);
    }
    if (col < c) {
      float* row = dwte + int64_t(token) * c + col;
      Vec<float, kN> w = Vec<float, kN>::load(row);
#pragma unroll
      for (int k = 0; k < kN; ++k) w.v[k] += acc[k];
      w.store(row);
    }
  }
}

constexpr int kThreads = 256;

// The radix sort reads only the bits a token of the vocabulary can have.
int token_bits(int vocab) {
  int bits = 1;
  while (bits < 31 && (int64_t(1) << bits) < vocab) ++bits;
  return bits;
}

}  // namespace

std::vector<int64_t> embedding_scratch_numel(int64_t tokens) {
  size_t temp = 0;
  CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp, static_cast<const uint32_t*>(nullptr),
                                             static_cast<uint32_t*>(nullptr), static_cast<const int32_t*>(nullptr),
                                             static_cast<int32_t*>(nullptr), tokens, 0, 32));
  return {tokens, tokens, tokens, int64_t((temp + 3) / 4)};
}

void embedding_prepare(const EmbeddingScratch& scratch, Stream s) {
  launch("iota_kernel", iota_kernel, blocks_for(scratch.positions.numel, kThreads), kThreads, 0, s,
         scratch.positions.data<int32_t>(), scratch.positions.numel);
}

void embedding_forward(const Tensor& out, const Tensor& tokens, const Tensor& wte, int64_t n, int c, Stream s) {
  TT_DISPATCH_ACT(out.dtype, {
    launch("embedding_forward_kernel", embedding_forward_kernel<T>, blocks_for(n * c, kThreads), kThreads, 0, s,
           static_cast<T*>(out.ptr), tokens.data<int32_t>(), static_cast<const T*>(wte.ptr), n, c);
  });
}

void embedding_backward(const Tensor& dwte, const Tensor& dout, const Tensor& tokens, int64_t n, int c, int vocab,
                        const EmbeddingScratch& scratch, Stream s) {
  TT_CHECK(n <= scratch.positions.numel, "embedding_backward: more tokens than its scratch was laid out for");
  if (n == 0) return;
  size_t temp = scratch.sort_temp.bytes();
  CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
      scratch.sort_temp.ptr, temp, static_cast<const uint32_t*>(tokens.ptr), static_cast<uint32_t*>(scratch.sorted_tokens.ptr),
      scratch.positions.data<int32_t>(), scratch.sorted_positions.data<int32_t>(), n, 0, token_bits(vocab), s.handle));
  TT_DISPATCH_ACT(dout.dtype, {
    with_vec_width<T>(fits_vec16<T>(c, {dout.ptr, dwte.ptr}), [&](auto width) {
      constexpr int kN = decltype(width)::value;
      // Enough warps for one pass over the row, at most kThreads.
      const int threads = std::min(kThreads, std::max(32, (c / kN + 31) / 32 * 32));
      launch("embedding_backward_kernel", embedding_backward_kernel<T, kN>, unsigned(n), threads, 0, s,
             dwte.data<float>(), static_cast<const T*>(dout.ptr), scratch.sorted_tokens.data<int32_t>(),
             scratch.sorted_positions.data<int32_t>(), n, c);
    });
  });
}

}  // namespace tt::cuda
