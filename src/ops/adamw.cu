// AdamW on the GPU (see adamw.h): each thread updates kN consecutive parameters, with 16-byte
// accesses when the tensors allow (kN = 4: four fp32 loads of p, g, m, v and three stores, a
// quarter of the blocks of one thread per parameter). When the backend computes in bf16 the
// kernel also writes the rounded copy the products read, so no separate pass is needed to
// refresh it.
#include "ops/adamw.h"
#include "ops/cuda_common.cuh"

namespace tt::cuda {
namespace {

template <int kN, class A>
__global__ void adamw_kernel(float* p, const float* g, float* m, float* v, A* p_act, int64_t n,
                             const AdamWScalars* scalars) {
  const int64_t i = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * kN;
  if (i >= n) return;
  using F = Vec<float, kN>;
  const AdamWScalars k = *scalars;
  const F gv = F::load(g + i);
  F mv = F::load(m + i), vv = F::load(v + i), pv = F::load(p + i);
  Vec<A, kN> act;
#pragma unroll
  for (int e = 0; e < kN; ++e) {
    const float gi = gv.v[e];
    mv.v[e] = k.b1 * mv.v[e] + k.c1 * gi;
    vv.v[e] = k.b2 * vv.v[e] + k.c2 * gi * gi;
    pv.v[e] = pv.v[e] * k.decay - k.step_size * mv.v[e] / (sqrtf(vv.v[e]) / k.bc2_sqrt + k.eps);
    act.v[e] = from_float<A>(pv.v[e]);
  }
  mv.store(m + i);
  vv.store(v + i);
  pv.store(p + i);
  if (p_act) act.store(p_act + i);
}

constexpr int kThreads = 256;

template <class A>
void launch(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v, A* p_act, const AdamWScalars* k,
            Stream s) {
  const bool wide = p.numel % kVec16<float> == 0 && aligned16(p.ptr) && aligned16(g.ptr) && aligned16(m.ptr) &&
                    aligned16(v.ptr) && reinterpret_cast<uintptr_t>(p_act) % (sizeof(A) * kVec16<float>) == 0;
  with_vec_width<float>(wide, [&](auto width) {
    constexpr int kN = decltype(width)::value;
    adamw_kernel<kN, A><<<blocks_for((p.numel + kN - 1) / kN, kThreads), kThreads, 0, s>>>(
        p.data<float>(), g.data<float>(), m.data<float>(), v.data<float>(), p_act, p.numel, k);
  });
  CUDA_CHECK_LAUNCH("adamw_kernel");
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
                       float(std::sqrt(st.bias_correction2()))};
}

void adamw(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v, const Tensor& p_act,
           const AdamWScalars* k, Stream s) {
  if (p_act.empty()) return launch<float>(p, g, m, v, nullptr, k, s);
  TT_CHECK(p_act.dtype == DType::BF16, "adamw: the act copy of the weights must be bf16");
  launch(p, g, m, v, static_cast<bf16_t*>(p_act.ptr), k, s);
}

}  // namespace tt::cuda
