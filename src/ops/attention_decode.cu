// The attention of generation's new tokens over their key/value caches (see attention_decode.h).
// A block per (sequence, query head): a warp per cached position computes its score into shared
// memory, the block takes their maximum and the sum of the exponentials, then each thread owns
// output elements and walks the positions (reads of v coalesced across the threads). One token
// per sequence is little work: this is about not recomputing the whole sequence, not about speed.
#include "ops/attention_decode.h"
#include "ops/cuda_common.cuh"

namespace tt::cuda {

namespace {

constexpr int kThreads = 256;

template <class T>
__global__ void attention_decode_kernel(Successor next, T* out, const T* q, const T* k_cache, const T* v_cache,
                                        int64_t len, int64_t ld, int cap, int heads, int group, int d, float scale) {
  await_previous_kernel(next);
  extern __shared__ float smem[];
  float* qs = smem;           // [d]
  float* scores = smem + d;   // [len]
  __shared__ float scratch[32];
  const int h = blockIdx.x, b = blockIdx.y, g = h / group;
  const T* qh = q + (int64_t(b) * heads + h) * d;
  const T* k = k_cache + int64_t(b) * cap * ld + int64_t(g) * d;
  const T* v = v_cache + int64_t(b) * cap * ld + int64_t(g) * d;
  for (int i = threadIdx.x; i < d; i += blockDim.x) qs[i] = to_float(qh[i]);
  __syncthreads();
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  for (int64_t j = warp; j < len; j += warps) {
    float dot = 0;
    for (int i = lane; i < d; i += 32) dot += qs[i] * to_float(k[j * ld + i]);
    dot = warp_sum(dot);
    if (lane == 0) scores[j] = dot * scale;
  }
  __syncthreads();
  float mx = -INFINITY;
  for (int64_t j = threadIdx.x; j < len; j += blockDim.x) mx = fmaxf(mx, scores[j]);
  mx = block_max(mx, scratch);
  float sum = 0;
  for (int64_t j = threadIdx.x; j < len; j += blockDim.x) sum += (scores[j] = __expf(scores[j] - mx));
  sum = block_sum(sum, scratch);  // its barriers also make every exponential visible
  for (int i = threadIdx.x; i < d; i += blockDim.x) {
    float acc = 0;
    for (int64_t j = 0; j < len; ++j) acc += scores[j] * to_float(v[j * ld + i]);
    out[(int64_t(b) * heads + h) * d + i] = from_float<T>(acc / sum);
  }
}

}  // namespace

void attention_decode(const Tensor& out, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, int64_t len,
                      int64_t ld, const AttnShape& s, Stream stream) {
  TT_CHECK(len >= 1 && len <= s.T, "attention_decode: the cache holds 1 to its capacity of positions");
  if (len > kDecodeMaxLen)
    usage_fail("generate: the GPU's decoding kernel takes contexts of up to " + std::to_string(kDecodeMaxLen) + " tokens");
  const size_t smem = size_t(s.D + len) * sizeof(float);
  TT_DISPATCH_ACT(out.dtype, {
    auto kernel = attention_decode_kernel<T>;
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    launch("attention_decode_kernel", kernel, dim3(unsigned(s.H), unsigned(s.B)), kThreads, smem, stream,
           static_cast<T*>(out.ptr), static_cast<const T*>(q.ptr), static_cast<const T*>(k_cache.ptr),
           static_cast<const T*>(v_cache.ptr), len, ld, s.T, s.H, s.group(), s.D, float(s.scale()));
  });
}

}  // namespace tt::cuda
