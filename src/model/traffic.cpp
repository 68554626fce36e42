// The least a step's memory-bound kernels must move, by the profile's kernel families
// (trace/trace.h, kernel_family): each input read once and each output written once, as this
// plan's kernels take and make them. The profile divides these bytes by the family's kernel time
// and sets the rate against the copy rates measured in the same run (train/ceilings.h). A lower
// bound: a kernel that reads a tensor twice moves more than its row says, never less, so a row
// above the L2 cache's copy rate is an error of the profile, not a fast kernel.
#include <map>
#include <string>

#include "model/llama.h"
#include "model/op_sequences.h"

namespace tt {

std::map<std::string, double> Llama::family_bytes() const {
  const Plan& plan = be_.plan();
  const double a = double(dtype_size(be_.act_dtype())), master = double(dtype_size(be_.master_dtype()));
  const double N = double(tokens()), L = cfg_.layers, C = cfg_.hidden, F = cfg_.intermediate;
  const double HD = double(cfg_.heads) * cfg_.head_dim(), QKV = cfg_.qkv_dim(), Vp = Vp_;
  const bool fp8 = fp8_.on(), delayed = fp8_.scaling() == Fp8Scaling::Delayed;
  const bool norm8 = norm_in_fp8(plan, fp8, fp8_.scaling(), cfg_.hidden);
  const bool dres8 = norm_backward_in_fp8(plan, fp8, fp8_.scaling());
  const bool att8 = attention_in_fp8(plan, fp8, fp8_.scaling()), swiglu8 = swiglu_in_fp8(plan, fp8);
  const std::vector<RopeShape> ropes = rope_shapes(be_, attn_);
  const bool dqkv8 = rope_backward_in_fp8(plan, fp8, ropes);
  std::map<std::string, double> per_micro;  // a micro-batch's forward and backward

  // RMSNorm: 2L + 1 norms. Forward: x read, the output written (in FP8, a byte in each layout,
  // where the next product takes it); the adds of the residual stream inside the kernel (read
  // the branch, write the sum) with fused-residual-norm and no epilogue adds. Backward: the
  // output's gradient and x read, the input's gradient written; the add into the residual
  // stream's gradient inside the kernel (read it too) with fused-residual-norm. The residual
  // gradient's FP8 forms (fp8-fused-norm-backward) are counted nowhere: the backend makes them in
  // the norm's kernel where its tile fits, else in a quantizing pass, and a lower bound holds either way.
  const double norms = 2 * L + 1, fed = 2 * L;  // fed: the norms whose output a layer's product takes
  const bool adds_inside = plan.fused_residual_norm && !plan.gemm_epilogues;
  per_micro["RMSNorm"] = norms * 2 * a * N * C + (norm8 ? fed * (2 - a) * N * C : 0) + (adds_inside ? fed * 2 * a * N * C : 0) +
                         norms * 3 * a * N * C + (plan.fused_residual_norm ? fed * a * N * C : 0);
  // RoPE: the rotated heads read and written in the forward; in the backward, the same in place,
  // or (fp8-fused-rope) one pass that reads the whole QKV gradient and writes it a byte in each
  // layout, turning the rotated heads back as it goes. None where the QKV product rotates them
  // (rope-in-qkv-product) or the attention's backward turns them back (its one-block kernel).
  double rotated = 0;
  for (const RopeShape& s : ropes) rotated += double(s.tokens) * s.heads * s.head_dim;
  const double rope_forward = rope_in_qkv_misfit_.empty() ? 0 : 2 * a * rotated;
  const double rope_backward = be_.attention_rope_backward_misfit(attn_, ropes).empty() ? 0 : 2 * a * rotated;
  per_micro["RoPE"] = L * (rope_forward + (dqkv8 ? (a + 2) * N * QKV : rope_backward));
  // SwiGLU: gate and up read, h written; its backward reads gate, up and dh and writes both
  // gradients. In FP8 the outputs are a byte in each layout and not kept in bf16. With
  // swiglu-in-gate-up the forward's h is made by the gate/up product, with swiglu-in-down-gradient
  // the backward's dgateup by down's input gradient (the products' family).
  const double swiglu_forward = swiglu_in_gate_up_misfit_.empty() ? 0 : 3 * a * N * F;
  const double swiglu_backward = swiglu_in_down_gradient_misfit_.empty() ? 0 : 5 * a * N * F;
  per_micro["SwiGLU"] = L * (swiglu8 ? (2 * a + 2) * N * F + (3 * a + 4) * N * F : swiglu_forward + swiglu_backward);
  // Cross-entropy: the logits read and their gradient written (with the fused classifier in one
  // pass; in FP8 too with the head in FP8); without it the forward reads them once more.
  per_micro["cross-entropy"] =
      (plan.fused_classifier ? (fp8_.head_on() ? 2 * a + 2 : 2 * a) : 3 * a) * N * Vp + 8 * N;
  // The quantizing passes: each input and gradient of an FP8 product that its producer did not
  // write in FP8, read once (twice with current scaling: its amax pass, booked to the same
  // family) and written a byte in each layout.
  const double cast = (delayed ? a : 2 * a) + 2;  // a cast's bytes an element
  if (fp8) {
    double elements = (norm8 ? 0 : fed * N * C) + (att8 ? 0 : L * N * HD) + (swiglu8 ? 0 : L * N * F) +
                      (dres8 ? 0 : 2 * L * N * C) + (swiglu8 ? 0 : 2 * L * N * F) + (dqkv8 ? 0 : L * N * QKV);
    if (fp8_.head_on()) elements += N * C;
    per_micro["quantizing passes"] = cast * elements;
  }

  std::map<std::string, double> step;
  for (const auto& [family, bytes] : per_micro) step[family] = bytes * step_.micro_batches;
  // Once a step: the weights' FP8 forms (their act-typed copy read), and AdamW over this rank's
  // part: the master, its gradient and both moments read, the master and moments written, and
  // the act-typed copy written in bf16 runs.
  if (fp8) {
    const double weights = L * (QKV * C + C * HD + 2 * F * C + C * F) + (fp8_.head_on() ? Vp * C : 0);
    step["quantizing passes"] += cast * weights;
  }
  const double updated = double(state_.adam_m().numel);
  step["AdamW"] = updated * (7 * master + (be_.act_dtype() != be_.master_dtype() ? a : 0));
  return step;
}

}  // namespace tt
