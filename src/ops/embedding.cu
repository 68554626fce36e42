// Token embedding on the GPU: a gather forward, and a deterministic scatter-add backward
// (see embedding.h for the contract).
#include "ops/cuda_common.cuh"
#include "ops/embedding.h"

namespace tt::cuda {
namespace {

template <class T>
__global__ void embedding_forward_kernel(T* out, const int32_t* tokens, const T* wte, int64_t n, int c) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n * c) return;
  const int64_t row = i / c;
  out[i] = wte[int64_t(tokens[row]) * c + (i - row * c)];
}

// One block per vocabulary row v. Every warp scans all tokens, 32 at a time: a ballot marks
// the positions holding v, and the warp adds those rows of dout in increasing position. Each
// thread owns one column per pass over the columns. No atomics: the sum's order is fixed.
template <class T>
__global__ void embedding_backward_kernel(float* dwte, const T* dout, const int32_t* tokens, int64_t n, int c) {
  const int v = blockIdx.x;
  const int lane = threadIdx.x % 32;
  for (int col0 = 0; col0 < c; col0 += blockDim.x) {  // uniform across the block
    const int col = col0 + threadIdx.x;
    float acc = 0.0f;
    for (int64_t base = 0; base < n; base += 32) {
      const int64_t i = base + lane;
      unsigned hits = __ballot_sync(0xffffffffu, i < n && tokens[i] == v);
      while (hits) {
        const int j = __ffs(hits) - 1;
        hits &= hits - 1;
        if (col < c) acc += to_float(dout[(base + j) * c + col]);
      }
    }
    if (col < c) dwte[int64_t(v) * c + col] += acc;
  }
}

constexpr int kThreads = 256;

}  // namespace

void embedding_forward(const Tensor& out, const Tensor& tokens, const Tensor& wte, int64_t n, int c, Stream s) {
  TT_DISPATCH_ACT(out.dtype, {
    embedding_forward_kernel<T><<<blocks_for(n * c, kThreads), kThreads, 0, s>>>(
        static_cast<T*>(out.ptr), tokens.data<int32_t>(), static_cast<const T*>(wte.ptr), n, c);
  });
  CUDA_CHECK_LAUNCH("embedding_forward_kernel");
}

void embedding_backward(const Tensor& dwte, const Tensor& dout, const Tensor& tokens, int64_t n, int c, int vocab,
                        Stream s) {
  TT_DISPATCH_ACT(dout.dtype, {
    embedding_backward_kernel<T><<<vocab, kThreads, 0, s>>>(dwte.data<float>(), static_cast<const T*>(dout.ptr),
                                                            tokens.data<int32_t>(), n, c);
  });
  CUDA_CHECK_LAUNCH("embedding_backward_kernel");
}

}  // namespace tt::cuda
