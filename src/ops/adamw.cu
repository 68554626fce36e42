// AdamW on the GPU (see adamw.h): one thread per parameter. When the backend computes in
// bf16 the kernel also writes the rounded copy the products read, so no separate pass is
// needed to refresh it; with clipping it scales each gradient as it reads it. And the
// gradients' sum of squares that clipping needs.
#include "ops/adamw.h"
#include "ops/cuda_common.cuh"

namespace tt::cuda {
namespace {

// The parameter and its moments are loaded before the wait for the kernel before this one:
// under programmatic launch that kernel is either the backward's last or the AdamW of another
// tensor, and no kernel of the step writes this tensor's p, m and v before its own AdamW. So
// the loads overlap the end of that kernel; the gradient, which it may be writing, is read
// after the wait. Nothing is written before it.
template <class A>
__global__ void adamw_kernel(Successor next, float* p, const float* g, float* m, float* v, A* p_act, int64_t n,
                             bool decay, const float* grad_sumsq, const AdamWScalars* scalars) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool in = i < n;
  const float p0 = in ? p[i] : 0.0f, m0 = in ? m[i] : 0.0f, v0 = in ? v[i] : 0.0f;
  await_previous_kernel(next);
  if (!in) return;
  const AdamWScalars k = *scalars;
  // Clipping: the factor of ref::clip_factor, rounded as torch rounds it in fp32.
  const float gi = grad_sumsq ? g[i] * fminf(1.0f, k.max_norm / (sqrtf(*grad_sumsq) + 1e-6f)) : g[i];
  const float mi = k.b1 * m0 + k.c1 * gi;
  const float vi = k.b2 * v0 + k.c2 * gi * gi;
  const float pi = (decay ? p0 * k.decay : p0) - k.step_size * mi / (sqrtf(vi) / k.bc2_sqrt + k.eps);
  m[i] = mi;
  v[i] = vi;
  p[i] = pi;
  if (p_act) p_act[i] = from_float<A>(pi);
}

constexpr int kThreads = 256;

// Block b adds the squares of elements b * kThreads + t, stepping by the grid, per thread in
// order, then over the block (block_sum's fixed tree): partial[b].
__global__ void sum_squares_partial_kernel(Successor next, float* partial, const float* g, int64_t n) {
  await_previous_kernel(next);
  __shared__ float scratch[32];
  float s = 0.0f;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    s += g[i] * g[i];
  s = block_sum(s, scratch);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

// One block: sumsq = (accumulate ? sumsq : 0) + the sum of the partial sums.
__global__ void sum_squares_total_kernel(Successor next, float* sumsq, const float* partial, int parts,
                                         bool accumulate) {
  await_previous_kernel(next);
  __shared__ float scratch[32];
  float s = 0.0f;
  for (int i = threadIdx.x; i < parts; i += blockDim.x) s += partial[i];
  s = block_sum(s, scratch);
  if (threadIdx.x == 0) *sumsq = accumulate ? *sumsq + s : s;
}

}  // namespace

AdamWScalars adamw_scalars(const AdamWStep& st) {
  return AdamWScalars{float(1.0 - st.lr * st.weight_decay),
                       float(st.beta1),
                       float(st.beta2),
                       float(1.0 - st.beta1),
                       float(1.0 - st.beta2),
                       float(st.eps),
                       float(st.lr / st.bias_correction1()),
                       float(std::sqrt(st.bias_correction2())),
                       float(st.max_grad_norm)};
}

void adamw(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v, const Tensor& p_act, bool decay,
           const Tensor& grad_sumsq, const AdamWScalars* k, Stream s) {
  const unsigned blocks = blocks_for(p.numel, kThreads);
  const float* sumsq = grad_sumsq.empty() ? nullptr : grad_sumsq.data<float>();
  if (p_act.empty()) {
    launch("adamw_kernel", adamw_kernel<float>, blocks, kThreads, 0, s, p.data<float>(), g.data<float>(),
           m.data<float>(), v.data<float>(), nullptr, p.numel, decay, sumsq, k);
  } else {
    TT_CHECK(p_act.dtype == DType::BF16, "adamw: the act copy of the weights must be bf16");
    launch("adamw_kernel", adamw_kernel<bf16_t>, blocks, kThreads, 0, s, p.data<float>(), g.data<float>(),
           m.data<float>(), v.data<float>(), static_cast<bf16_t*>(p_act.ptr), p.numel, decay, sumsq, k);
  }
}

void sum_squares(const Tensor& sumsq, const Tensor& g, bool accumulate, const Tensor& partial, Stream s) {
  TT_CHECK(partial.numel >= kSumSquaresBlocks && sumsq.numel >= 1, "sum_squares: scratch too small");
  const int blocks = int(std::min<int64_t>(kSumSquaresBlocks, std::max<unsigned>(1, blocks_for(g.numel, kThreads))));
  launch("sum_squares_partial_kernel", sum_squares_partial_kernel, blocks, kThreads, 0, s, partial.data<float>(),
         g.data<float>(), g.numel);
  launch("sum_squares_total_kernel", sum_squares_total_kernel, 1, 1024, 0, s, sumsq.data<float>(),
         static_cast<const float*>(partial.data<float>()), blocks, accumulate);
}

}  // namespace tt::cuda
