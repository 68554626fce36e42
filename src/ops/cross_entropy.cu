// Softmax cross-entropy on the GPU (see cross_entropy.h): one block per row of logits. The
// forward finds the row's maximum and the sum of exponentials (fp32) and writes the loss;
// the backward recomputes both and writes dlogits, possibly over the logits themselves
// (every read of the row finishes before the first write).
#include "ops/cross_entropy.h"
#include "ops/cuda_common.cuh"

namespace tt::cuda {
namespace {

constexpr int kThreads = 256;

template <class T>
__device__ float row_logsumexp(const T* row, int v, float* scratch) {
  float mx = -INFINITY;
  for (int j = threadIdx.x; j < v; j += blockDim.x) mx = fmaxf(mx, to_float(row[j]));
  mx = block_max(mx, scratch);
  float sum = 0.0f;
  for (int j = threadIdx.x; j < v; j += blockDim.x) sum += expf(to_float(row[j]) - mx);
  sum = block_sum(sum, scratch);
  return mx + logf(sum);
}

template <class T>
__global__ void cross_entropy_forward_kernel(Successor next, float* losses, const T* logits, const int32_t* targets,
                                             int v) {
  await_previous_kernel(next);
  __shared__ float scratch[32];
  const T* row = logits + int64_t(blockIdx.x) * v;
  const float lse = row_logsumexp(row, v, scratch);
  if (threadIdx.x == 0) losses[blockIdx.x] = lse - to_float(row[targets[blockIdx.x]]);
}

template <class T>
__global__ void cross_entropy_backward_kernel(Successor next, T* dlogits, const T* logits, const int32_t* targets,
                                              int v, float scale) {
  await_previous_kernel(next);
  __shared__ float scratch[32];
  const T* row = logits + int64_t(blockIdx.x) * v;
  T* drow = dlogits + int64_t(blockIdx.x) * v;
  const float lse = row_logsumexp(row, v, scratch);
  __syncthreads();  // all reads of the row are done: drow may be row
  const int target = targets[blockIdx.x];
  for (int j = threadIdx.x; j < v; j += blockDim.x) {
    const float p = expf(to_float(row[j]) - lse);
    drow[j] = from_float<T>(scale * (p - (j == target ? 1.0f : 0.0f)));
  }
}

}  // namespace

void cross_entropy_forward(const Tensor& losses, const Tensor& logits, const Tensor& targets, int64_t n, int v,
                           Stream s) {
  TT_DISPATCH_ACT(logits.dtype, {
    launch("cross_entropy_forward_kernel", cross_entropy_forward_kernel<T>, unsigned(n), kThreads, 0, s,
           losses.data<float>(), static_cast<const T*>(logits.ptr), targets.data<int32_t>(), v);
  });
}

void cross_entropy_backward(const Tensor& dlogits, const Tensor& logits, const Tensor& targets, int64_t n, int v,
                            float scale, Stream s) {
  TT_DISPATCH_ACT(logits.dtype, {
    launch("cross_entropy_backward_kernel", cross_entropy_backward_kernel<T>, unsigned(n), kThreads, 0, s,
           static_cast<T*>(dlogits.ptr), static_cast<const T*>(logits.ptr), targets.data<int32_t>(), v, scale);
  });
}

}  // namespace tt::cuda
