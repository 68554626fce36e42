// Token embedding on the GPU: a gather forward, and a deterministic scatter-add backward
// (see embedding.h for the contract).
#include <algorithm>

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

// One block per vocabulary row v. Thread j owns kN consecutive columns of each pass over the row
// (one pass where c <= kN * blockDim.x). Every warp scans all tokens, 32 per ballot, with the
// tokens of kScanAhead ballots loaded at once so that their loads overlap rather than wait in
// turn; a ballot marks the positions holding v, and the thread adds those rows of dout in
// increasing position. No atomics: the order of the sum is fixed. (One element per thread, 256
// threads, two passes and one ballot at a time took 87 us at B1 T4096, C 512.)
constexpr int kScanAhead = 4;
template <class T, int kN>
__global__ void embedding_backward_kernel(Successor next, float* dwte, const T* dout, const int32_t* tokens, int64_t n,
                                          int c) {
  await_previous_kernel(next);
  const int v = blockIdx.x, lane = threadIdx.x % 32;
  for (int col0 = 0; col0 < c; col0 += blockDim.x * kN) {  // uniform across the block
    const int col = col0 + threadIdx.x * kN;
    float acc[kN] = {};
    for (int64_t base = 0; base < n; base += 32 * kScanAhead) {
      int32_t tok[kScanAhead];
#pragma unroll
      for (int u = 0; u < kScanAhead; ++u) {
        const int64_t i = base + 32 * u + lane;
        tok[u] = i < n ? tokens[i] : -1;
      }
#pragma unroll
      for (int u = 0; u < kScanAhead; ++u) {
        unsigned hits = __ballot_sync(0xffffffffu, tok[u] == v);
        while (hits) {
          const int j = __ffs(hits) - 1;
          hits &= hits - 1;
          if (col < c) {
            const Vec<T, kN> x = Vec<T, kN>::load(dout + (base + 32 * u + j) * c + col);
#pragma unroll
            for (int k = 0; k < kN; ++k) acc[k] += to_float(x.v[k]);
          }
        }
      }
    }
    if (col < c) {
      float* row = dwte + int64_t(v) * c + col;
      Vec<float, kN> w = Vec<float, kN>::load(row);
#pragma unroll
      for (int k = 0; k < kN; ++k) w.v[k] += acc[k];
      w.store(row);
    }
  }
}

constexpr int kThreads = 256;

}  // namespace

void embedding_forward(const Tensor& out, const Tensor& tokens, const Tensor& wte, int64_t n, int c, Stream s) {
  TT_DISPATCH_ACT(out.dtype, {
    launch("embedding_forward_kernel", embedding_forward_kernel<T>, blocks_for(n * c, kThreads), kThreads, 0, s,
           static_cast<T*>(out.ptr), tokens.data<int32_t>(), static_cast<const T*>(wte.ptr), n, c);
  });
}

void embedding_backward(const Tensor& dwte, const Tensor& dout, const Tensor& tokens, int64_t n, int c, int vocab,
                        Stream s) {
  TT_DISPATCH_ACT(dout.dtype, {
    with_vec_width<T>(fits_vec16<T>(c, {dout.ptr, dwte.ptr}), [&](auto width) {
      constexpr int kN = decltype(width)::value;
      // Enough warps for one pass over the row, at most kThreads.
      const int threads = std::min(kThreads, std::max(32, (c / kN + 31) / 32 * 32));
      launch("embedding_backward_kernel", embedding_backward_kernel<T, kN>, vocab, threads, 0, s, dwte.data<float>(),
             static_cast<const T*>(dout.ptr), tokens.data<int32_t>(), n, c);
    });
  });
}

}  // namespace tt::cuda
