// Softmax cross-entropy on the GPU (see cross_entropy.h): one kernel, instantiated three ways.
// The forward writes the loss, the backward the logits' gradient, and the fused classifier
// both in one launch, the gradient over the logits, so that the logits are read from device
// memory once and their gradient written once.
//
// One block per row. A first pass reads the row once, with 16-byte loads where the row allows,
// and keeps a running maximum and the sum of exponentials below it together (the sum is scaled
// down whenever the maximum grows), in base 2: one multiply by log2(e) per element, then ex2.
// The block combines the threads' (maximum, sum) pairs; a second pass, for the gradient,
// re-reads the row, which the first pass has just brought into L2, and writes
// scale * (softmax - onehot), zero in the padding columns, with streaming stores that do not
// push the rows still waiting for their second pass out of L2. Every read of the first pass
// ends before the block's reduction, and the first write comes after it, so the gradient may
// overwrite the logits.
//
// Blocks of at most 512 threads, two or more per SM: a row per block, so that one row's
// reduction overlaps the other's loads. Measured on an H100 at vocabulary 50304 (bf16, rows of
// 100 KB; the device copy ran 2984 GB/s): the forward over 16384 rows 2242 GB/s with one block
// of 1024 threads per SM, 3000 GB/s with two of 512; the fused kernel over 8192 rows 2191 GB/s
// and 2576 GB/s (with the streaming stores; 2412 without). Smaller blocks, more of them, read
// the forward a little faster (3055 GB/s at four of 256) and slowed the fused kernel (1951 GB/s):
// the rows waiting for their second pass no longer fit in L2. So the passes without a gradient
// (the loss alone) take blocks of 256, four an SM, each thread holding two of the 512 lanes a
// row's sum is made in (kLanes): the same order of additions as the blocks of 512 that write the
// gradient, so the same bits. On an H200 at gpt2-small, v5's head (this loss pass over 16384
// rows, then the FP8 gradient pass) took 1.743 against 1.799 ms in blocks of 512 (64 registers,
// no spills; docs/experiments.md); Nsight Compute had the pass in blocks of 512 at 49% occupancy
// (62 registers) and 46% of DRAM's peak.
//
// Version 5's head in FP8 (fp8-head) needs the gradient in both layouts, and a row per block
// cannot write the transpose's tiles. So the loss pass keeps each row's log-sum-exp, and
// quantize.cuh's tiled pass computes the gradient from the logits again (SoftmaxGradient), element
// by element as the kernel here stores it, writing its FP8 rows and columns: one more read of the
// logits, and one byte written per layout instead of two.
#include "ops/cross_entropy.h"
#include "ops/cuda_common.cuh"
#include "ops/quantize.cuh"

namespace tt::cuda {
namespace {

constexpr int kUnroll = 4;  // vectors each thread loads before it uses the first

struct MaxSum {
  float m = -INFINITY;  // the largest x * log2(e) so far
  float s = 0.0f;       // the sum of 2^(x * log2(e) - m) so far
};
__device__ __forceinline__ MaxSum combine(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.m, b.m);
  if (m == -INFINITY) return a;  // both empty
  return {m, a.s * exp2f(a.m - m) + b.s * exp2f(b.m - m)};
}
__device__ __forceinline__ MaxSum warp_combine(MaxSum a) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    a = combine(a, MaxSum{__shfl_xor_sync(0xffffffffu, a.m, o), __shfl_xor_sync(0xffffffffu, a.s, o)});
  return a;
}
// Over the block's lanes, kLanes a thread (thread t holds lanes t, t + blockDim.x, ...; with more
// than one, blockDim.x is whole warps); every thread gets the result, combined in an order fixed
// by the number of lanes alone: lanes 32 w .. 32 w + 31 make the w-th sum, then those in order.
template <int kLanes>
__device__ __forceinline__ MaxSum block_combine(const MaxSum (&a)[kLanes], MaxSum* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = (blockDim.x + 31) / 32;
#pragma unroll
  for (int j = 0; j < kLanes; ++j) {
    const MaxSum w = warp_combine(a[j]);
    if (lane == 0) scratch[warp + j * warps] = w;
  }
  __syncthreads();
  return warp_combine(lane < warps * kLanes ? scratch[lane] : MaxSum{});
}

constexpr int kMaxThreads = 512, kLossThreads = 256;  // a block's most: with the gradient, and without

// 2^x here is fast_exp2 (subnormal results flushed), which changes no bit of what these kernels
// keep. A row's sum of 2^(y - m) holds a term of exactly 1 (its largest element) by the time any
// such tiny term could matter, and 1 + 2^-126 is 1 in fp32. A gradient element p below 2^-126
// times a scale of 1/tokens rounds to zero in bf16 from 256 tokens on (below, a bf16 subnormal may
// be zero instead), and to zero in FP8 below a scale of 2^109. The head's two passes at gpt2-small
// on an H200: 1.494 -> 1.427 ms against exp2f (docs/experiments.md).
// The loss pass below rounds the product x log2(e) on its own (__fmul_rn), as softmax_gradient
// does: written as a plain product, it left the compiler free to contract it into the exponent's
// subtraction (the PTX recomputed one element's product beside its subtraction), so the bits rested
// on the compiler's choice. Rounding it changed the losses in their last digits and, through the
// log-sum-exp, v4's bf16 gradients within their rounding (docs/experiments.md, 2026-11-29).

// One element of the gradient, scale * (softmax - onehot), from its logit x and the row's
// log-sum-exp in base 2, rounded to T: one expression for the kernel below and the FP8 pass, with
// the roundings written out, so that no contraction into a fused multiply-add can tell them apart.
template <class T>
__device__ __forceinline__ T softmax_gradient(float x, float lse2, bool target, float scale) {
  const float p = fast_exp2(__fsub_rn(__fmul_rn(x, kLog2e), lse2));
  return from_float<T>(__fmul_rn(scale, target ? __fsub_rn(p, 1.0f) : p));
}

template <class T, int kN, bool kLoss, bool kGrad, int kLanes = 1>
__global__ void __launch_bounds__(kMaxThreads, 2)
    cross_entropy_kernel(Successor next, float* losses, float* lse2s, T* dlogits, const T* logits,
                         const int32_t* targets, int v, int64_t ld, float scale) {
  static_assert(kLanes == 1 || !kGrad, "the gradient pass takes a lane a thread");
  await_previous_kernel(next);
  __shared__ MaxSum scratch[32];
  const T* row = logits + int64_t(blockIdx.x) * ld;
  const int target = targets[blockIdx.x];
  const float target_logit = kLoss && threadIdx.x == 0 ? to_float(row[target]) : 0.0f;
  const int nvec = int(ld / kN), stride = int(blockDim.x), lanes = stride * kLanes;

  MaxSum acc[kLanes];
#pragma unroll
  for (int j = 0; j < kLanes; ++j) {
    for (int base = threadIdx.x + j * stride; base < nvec; base += lanes * kUnroll) {
      Vec<T, kN> x[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (base + u * lanes < nvec) x[u] = Vec<T, kN>::load(row + (base + u * lanes) * kN);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int col0 = (base + u * lanes) * kN;
        if (col0 >= v) break;  // the rest of this lane's vectors are padding or past the row
        // A whole vector of the vocabulary takes no compare (the last one of a row takes one
        // an element); the product rounded on its own either way (the note above softmax_gradient says why).
        float y[kN], local = -INFINITY;
        if (col0 + kN <= v) {
#pragma unroll
          for (int k = 0; k < kN; ++k) y[k] = __fmul_rn(to_float(x[u].v[k]), kLog2e);
        } else {
#pragma unroll
          for (int k = 0; k < kN; ++k) y[k] = col0 + k < v ? __fmul_rn(to_float(x[u].v[k]), kLog2e) : -INFINITY;
        }
#pragma unroll
        for (int k = 0; k < kN; ++k) local = fmaxf(local, y[k]);
        if (local > acc[j].m) acc[j].s *= fast_exp2(acc[j].m - local), acc[j].m = local;
#pragma unroll
        for (int k = 0; k < kN; ++k) acc[j].s += fast_exp2(y[k] - acc[j].m);
      }
    }
  }
  const MaxSum all = block_combine(acc, scratch);
  const float lse2 = all.m + log2f(all.s);  // log-sum-exp in base 2
  if (kLoss && threadIdx.x == 0) losses[blockIdx.x] = (lse2 - target_logit * kLog2e) * kLn2;
  if (lse2s && threadIdx.x == 0) lse2s[blockIdx.x] = lse2;
  if (!kGrad) return;

  T* drow = dlogits + int64_t(blockIdx.x) * ld;
  for (int base = threadIdx.x; base < nvec; base += stride * kUnroll) {
    Vec<T, kN> x[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (base + u * stride < nvec) x[u] = Vec<T, kN>::load(row + (base + u * stride) * kN);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int col0 = (base + u * stride) * kN;
      if (base + u * stride >= nvec) break;
      Vec<T, kN> d;
#pragma unroll
      for (int k = 0; k < kN; ++k) {
        const int col = col0 + k;
        d.v[k] = col < v ? softmax_gradient<T>(to_float(x[u].v[k]), lse2, col == target, scale) : from_float<T>(0.0f);
      }
      d.store_streaming(drow + col0);
    }
  }
}

// Enough threads for kUnroll vectors each, within one block of at most kMaxThreads.
int threads_for(int64_t nvec) {
  return int(std::min<int64_t>(kMaxThreads, std::max<int64_t>(32, (nvec / kUnroll + 31) / 32 * 32)));
}

template <bool kLoss, bool kGrad>
void launch_cross_entropy(const char* name, const Tensor& losses, const Tensor& dlogits, const Tensor& logits,
                          const Tensor& targets, int64_t n, int v, int64_t ld, float scale, Stream s,
                          float* lse2s = nullptr) {
  TT_CHECK(v >= 1 && ld >= v, "cross_entropy: the row stride must hold the vocabulary");
  if (n == 0) return;
  TT_DISPATCH_ACT(logits.dtype, {
    with_vec_width<T>(fits_vec16<T>(ld, {logits.ptr, dlogits.ptr}), [&](auto width) {
      constexpr int kN = decltype(width)::value;
      const int lanes = threads_for(ld / kN);  // as the passes that write the gradient take them
      auto run = [&](auto kernel, int threads) {
        launch(name, kernel, unsigned(n), threads, 0, s, kLoss ? losses.data<float>() : nullptr, lse2s,
               static_cast<T*>(dlogits.ptr), static_cast<const T*>(logits.ptr), targets.data<int32_t>(), v, ld, scale);
      };
      if constexpr (!kGrad)
        if (lanes > kLossThreads && lanes % 64 == 0) return run(cross_entropy_kernel<T, kN, kLoss, kGrad, 2>, lanes / 2);
      run(cross_entropy_kernel<T, kN, kLoss, kGrad>, lanes);
    });
  });
}

// quantize.cuh's source: the gradient of rows of logits [n, ld] from their log-sum-exp, element by
// element as cross_entropy_kernel stores it (zero in the padding columns).
template <class T>
struct SoftmaxGradient {
  const T* logits;
  const float* lse2s;
  const int32_t* targets;
  int64_t ld;
  int v;
  float scale;
  __device__ __forceinline__ void prefetch(int64_t row, int64_t col) const { prefetch_l2(logits + row * ld + col); }
  __device__ __forceinline__ void load(int64_t row, int64_t col, float (&out)[kQuantizeChunk]) const {
    const Vec<T, kQuantizeChunk> x = Vec<T, kQuantizeChunk>::load(logits + row * ld + col);
    const float lse2 = lse2s[row];
    // Where the vocabulary ends and where the target is, in 32-bit offsets from the chunk (a row
    // is shorter than 2^31). Most chunks hold neither and take no compare an element, where each
    // element took two 64-bit compares: the head's two passes at gpt2-small on an H200 1.677 ->
    // 1.494 ms, 1.433 with fast_exp2 and the loss pass's rounded product (docs/experiments.md).
    const int end = v - int(col), at = targets[row] - int(col);
    if (end >= kQuantizeChunk && unsigned(at) >= unsigned(kQuantizeChunk)) {
#pragma unroll
      for (int k = 0; k < kQuantizeChunk; ++k) out[k] = to_float(softmax_gradient<T>(to_float(x.v[k]), lse2, false, scale));
      return;
    }
#pragma unroll
    for (int k = 0; k < kQuantizeChunk; ++k)
      out[k] = k < end ? to_float(softmax_gradient<T>(to_float(x.v[k]), lse2, k == at, scale)) : 0.0f;
  }
};

}  // namespace

void cross_entropy_forward(const Tensor& losses, const Tensor& logits, const Tensor& targets, int64_t n, int v,
                           int64_t ld, Stream s) {
  launch_cross_entropy<true, false>("cross_entropy_forward", losses, logits, logits, targets, n, v, ld, 0.0f, s);
}

void cross_entropy_backward(const Tensor& dlogits, const Tensor& logits, const Tensor& targets, int64_t n, int v,
                            int64_t ld, float scale, Stream s) {
  launch_cross_entropy<false, true>("cross_entropy_backward", Tensor{}, dlogits, logits, targets, n, v, ld, scale, s);
}

void cross_entropy_fused(const Tensor& losses, const Tensor& logits, const Tensor& targets, int64_t n, int v,
                         int64_t ld, float scale, Stream s) {
  launch_cross_entropy<true, true>("cross_entropy_fused", losses, logits, logits, targets, n, v, ld, scale, s);
}

void cross_entropy_fused_fp8(const Fp8Matrix& dlogits8, const Tensor& lse, const Tensor& losses, const Tensor& logits,
                             const Tensor& targets, int64_t n, int v, int64_t ld, float scale, const Tensor& partials,
                             Stream s) {
  TT_CHECK(ld % kQuantizeChunk == 0 && aligned16(logits.ptr),
           "cross_entropy_fused_fp8: rows of a multiple of 8, aligned");
  TT_CHECK(lse.dtype == DType::F32 && lse.numel >= n, "cross_entropy_fused_fp8: the scratch holds n fp32");
  if (n == 0) return;
  launch_cross_entropy<true, false>("cross_entropy_fused_fp8", losses, Tensor{}, logits, targets, n, v, ld, 0.0f, s,
                                    lse.data<float>());
  TT_DISPATCH_ACT(logits.dtype, {
    const SoftmaxGradient<T> src{static_cast<const T*>(logits.ptr), lse.data<float>(), targets.data<int32_t>(), ld, v,
                                 scale};
    quantize_from(dlogits8, src, n, ld, Fp8Scaling::Delayed, partials, s);
  });
}

}  // namespace tt::cuda
