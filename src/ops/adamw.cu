// AdamW on the GPU (see adamw.h): one thread per parameter. When the backend computes in
// bf16 the kernel also writes the rounded copy the products read, so no separate pass is
// needed to refresh it.
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
                             const AdamWScalars* scalars) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool in = i < n;
  const float p0 = in ? p[i] : 0.0f, m0 = in ? m[i] : 0.0f, v0 = in ? v[i] : 0.0f;
  await_previous_kernel(next);
  if (!in) return;
  const AdamWScalars k = *scalars;
  const float gi = g[i];
  const float mi = k.b1 * m0 + k.c1 * gi;
  const float vi = k.b2 * v0 + k.c2 * gi * gi;
  const float pi = p0 * k.decay - k.step_size * mi / (sqrtf(vi) / k.bc2_sqrt + k.eps);
  m[i] = mi;
  v[i] = vi;
  p[i] = pi;
  if (p_act) p_act[i] = from_float<A>(pi);
}

constexpr int kThreads = 256;

}  // namespace

AdamWScalars adamw_scalars(const AdamWStep& st) {
  return AdamWScalars{float(1.0 - st.lr * st.weight_decay),
                       float(st.beta1),
                       float(st.beta2),
                       float(1.0 - st.beta1),
                       float(1.0 - st.beta2),
                       float(st.eps),
                       float(st.lr / st.bias_correction1()),
                       float(std::sqrt(st.bias_correction2()))};
}

void adamw(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v, const Tensor& p_act,
           const AdamWScalars* k, Stream s) {
  const unsigned blocks = blocks_for(p.numel, kThreads);
  if (p_act.empty()) {
    launch("adamw_kernel", adamw_kernel<float>, blocks, kThreads, 0, s, p.data<float>(), g.data<float>(),
           m.data<float>(), v.data<float>(), nullptr, p.numel, k);
  } else {
    TT_CHECK(p_act.dtype == DType::BF16, "adamw: the act copy of the weights must be bf16");
    launch("adamw_kernel", adamw_kernel<bf16_t>, blocks, kThreads, 0, s, p.data<float>(), g.data<float>(),
           m.data<float>(), v.data<float>(), static_cast<bf16_t*>(p_act.ptr), p.numel, k);
  }
}

}  // namespace tt::cuda
