#include "plan/plan.h"

#include "core/error.h"

namespace tt {

const std::vector<PlanSwitch>& plan_switches() {
  static const std::vector<PlanSwitch> switches = {
      {"qkv-fusion", &Plan::qkv_fusion, 2, "one GEMM for the Q, K and V projections"},
      {"gate-up-fusion", &Plan::gate_up_fusion, 2,
       "one GEMM for the gate and up projections, SiLU and product in one kernel"},
      {"flash-attention", &Plan::flash_attention, 2,
       "cuDNN fused attention (bf16); one fused scale+mask+softmax kernel in fp32"},
      {"cuda-graph", &Plan::cuda_graph, 2, "the whole step captured once and replayed"},
      {"custom-attention", &Plan::custom_attention, 3, "our flash attention kernels"},
      {"custom-rmsnorm", &Plan::custom_rmsnorm, 3, "our one-kernel RMSNorm forward and backward"},
      {"custom-swiglu", &Plan::custom_swiglu, 3, "our SwiGLU forward and backward kernels"},
      {"custom-rope", &Plan::custom_rope, 3, "RoPE on queries and keys in one kernel"},
      {"programmatic-launch", &Plan::programmatic_launch, 3,
       "our kernels launched with Hopper's programmatic dependent launch"},
      {"fused-residual-norm", &Plan::fused_residual_norm, 4, "residual add fused into RMSNorm"},
      {"fused-classifier", &Plan::fused_classifier, 4,
       "the output head, softmax, loss and the logits' gradient in chunks of tokens, one pass over the logits"},
      {"fused-adamw", &Plan::fused_adamw, 4, "one AdamW kernel over all parameters"},
      {"gemm-epilogues", &Plan::gemm_epilogues, 4, "bias-free epilogues fused into the GEMMs"},
      {"products-without-workspace", &Plan::products_without_workspace, 4,
       "cuBLAS and cuBLASLt without a workspace for bf16 products: no split sums through it, so no 4-byte memset "
       "before a product"},
      // Measured slower than the RoPE kernel before the attention (docs/versions/v4.md): each key
      // tile is rotated again by every query block that reads it. Opt-in.
      {"rope-in-attention", &Plan::rope_in_attention, 4,
       "RoPE applied inside our bf16 flash attention as Q and K are loaded, its inverse on dQ and dK "
       "(opt-in: slower)",
       false},
      {"fp8", &Plan::fp8, 5,
       "the layers' matrix products in FP8 through cuBLASLt (E4M3 weights and activations), where the shape pays"},
      {"fp8-delayed-scaling", &Plan::fp8_delayed_scaling, 5,
       "FP8 scales from the last 16 steps' amax, recorded as each tensor is quantized (no amax pass)"},
      {"fp8-fused-swiglu", &Plan::fp8_fused_swiglu, 5,
       "SwiGLU writes its output and its input gradient straight in FP8: no bf16 copy, no cast pass"},
      {"fp8-fused-rope", &Plan::fp8_fused_rope, 5,
       "RoPE's backward writes the QKV product's gradient straight in FP8: no rotation in place, no cast pass"},
      {"fp8-fused-norm", &Plan::fp8_fused_norm, 5,
       "RMSNorm writes its output straight in FP8 where a product takes it (32 rows a block, both layouts): no bf16 "
       "copy, no cast pass"},
      // Measured slower than the backward and the cast pass after it (docs/versions/v5.md): the
      // kernel takes 62 us at gpt2-small where the two took 36 + about 19. Opt-in.
      {"fp8-fused-norm-backward", &Plan::fp8_fused_norm_backward, 5,
       "RMSNorm's backward writes the residual stream's gradient in FP8 too (both layouts), for the output and down "
       "products: no cast pass (opt-in: slower)",
       false},
      {"fp8-fused-attention", &Plan::fp8_fused_attention, 5,
       "our flash attention writes its output in FP8 too (both layouts, from a shared tile) for the output product: "
       "no cast pass"},
      {"fp8-head", &Plan::fp8_head, 5,
       "the output head's products in FP8 too: the cross-entropy pass writes the logits' gradient in FP8, both layouts"},
      {"fp8-timed-products", &Plan::fp8_timed_products, 5,
       "each FP8 product's cuBLASLt algorithm chosen on its first call by timing the heuristic's first 8 that sum along "
       "k in one pass (the same bytes), not taken from the heuristic's ranking"},
      // Measured slower than the two kernels (docs/versions/v5.md): the fp32 adds of dQ's parts
      // cost more than the two products they save. Opt-in.
      {"fused-attention-backward", &Plan::fused_attention_backward, 5,
       "our flash attention's backward in one kernel: dK/dV's blocks add dS K into dQ, taking turns in a fixed "
       "order (five tile products a step, not seven; opt-in: slower)",
       false},
      // Exact (cuBLAS's bytes, the same training bits); the default step 1.211 -> 1.151 ms on an
      // H200 once the residual stream's gradient had a second buffer instead of a copy
      // (docs/versions/v6.md). Where its rule refuses, the products go one by one as before.
      {"grouped-weight-gradients", &Plan::grouped_weight_gradients, 5,
       "a layer's four weight gradients (bf16) in one launch of our own tile kernel, the bytes of cuBLAS's, where "
       "their tiles are at most two waves and the tokens at most 2048 (any, for outputs of a multiple of 256 rows), "
       "on one GPU (the residual stream's gradient in a second buffer for them)"},
      // Exact (cuBLAS's and the SwiGLU kernel's bytes); the default step 1.161 -> 1.148 ms on an
      // H200 (docs/versions/v6.md). Where its rule refuses, the product and the kernel as before.
      {"swiglu-in-gate-up", &Plan::swiglu_in_gate_up, 5,
       "SwiGLU made in the epilogue of our own gate/up product (bf16, TMA and wgmma), the bytes of cuBLAS's product "
       "and the SwiGLU kernel, where it pays (at most 1024 tokens): gateup not read back, one launch less a layer"},
      // Exact likewise; the default step 1.136-1.138 -> 1.122-1.126 ms on an H200 (docs/versions/v6.md).
      {"swiglu-in-down-gradient", &Plan::swiglu_in_down_gradient, 5,
       "SwiGLU's backward made in the epilogue of our own product for down's input gradient (bf16, TMA and wgmma), "
       "the bytes of cuBLAS's product and the SwiGLU kernel, where it pays (at most 1024 tokens, 512 beside the weight "
       "gradients' lane): dh never stored"},
      // Measured no faster and less precise than E4M3 (docs/versions/v5.md). Opt-in.
      {"fp8-e5m2-gradients", &Plan::fp8_e5m2_gradients, 5,
       "the gradients entering the FP8 products in E5M2 (more range), not E4M3 (opt-in: less precise)", false},
      {"fp8-every-shape", &Plan::fp8_every_shape, 5, "FP8 products at every shape that allows them, paying or not (opt-in)",
       false},
      // Version 6's first piece: the default step 1.138-1.141 -> 1.108-1.111 ms on an H200
      // (docs/versions/v6.md). dQ, dK and dV are summed in other orders than the two kernels', so
      // it is not in v5, which keeps v4's bits where FP8 does not pay
      // (Fp8Model.WhereFp8DoesNotPayVersion5IsVersion4BitForBit); v6 tracks v5 within bf16's bounds.
      {"attention-backward-in-one-block", &Plan::attention_backward_in_one_block, 6,
       "our flash attention's backward (bf16) in one kernel where sequences are at most 128 tokens (head size 64): "
       "a block per sequence and query head makes dQ, dK and dV, dQ summed on chip, dK and dV over the group's blocks "
       "through distributed shared memory, dQ and dK turned back through RoPE as they are written"},
      // Exact (cuBLAS's and the RoPE kernel's bytes, the same training bits); at the default shape its
      // kernel 6.4 us a layer against cuBLAS's 4.9 and RoPE's 2.2, the v6 step 1.103-1.105 -> 1.093-1.094
      // ms on an H200 (docs/versions/v6.md). Where its rule refuses, the product and the kernel as before.
      {"rope-in-qkv-product", &Plan::rope_in_qkv_product, 6,
       "RoPE made in the epilogue of our own QKV product (bf16, TMA and wgmma, tiles of 64 columns), the bytes of "
       "cuBLAS's product and the RoPE kernel, at most 1024 tokens: the queries and keys written once, one launch "
       "less a layer"},
      // A layer's grouped weight gradients on a lane of their own, beside the layers below, instead
      // of between the layer's last product and its norm's backward. The same kernel and bits; the
      // default step 1.057 -> 1.037-1.039 ms on an H200, where its rule refuses (past 4096 tokens)
      // the group stays on the main stream (docs/versions/v6.md).
      {"weight-gradients-behind", &Plan::weight_gradients_behind, 6,
       "a layer's grouped weight gradients (grouped-weight-gradients) on a lane of their own, beside the layers below, "
       "up to 4096 tokens, where it pays (their inputs in buffers the layer below does not write: a second gate/up "
       "gradient, four of the residual stream's)"},
      // Version 6's block kernel: the forward's tasks in one persistent launch, waiting on counters
      // for the rows they read instead of kernel boundaries. Exact (v6's bits), and slower: the
      // default step 1.074-1.075 -> 1.122 ms on an H200, every stage one wave in step with the others
      // (docs/versions/v6.md). Opt-in.
      {"blocks-forward-in-one-launch", &Plan::blocks_forward_in_one_launch, 6,
       "every layer's forward in one persistent kernel of our own tiles (bf16, sequences of 128 tokens, at most "
       "1024 tokens): the QKV product with RoPE, the attention, the output product, the norm, gate/up with SwiGLU "
       "and down as tasks that wait on counters for the rows they read, not for whole kernels",
       false},
      // Its backward likewise: every task a block of a kernel v6 runs one by one (the input
      // gradients' products our tiles where v6 has cuBLAS's), waiting on counters instead of kernel
      // boundaries (docs/versions/v6.md). Opt-in: the model does not run it; `tiny_llama kernels`
      // measures it.
      {"blocks-backward-in-one-launch", &Plan::blocks_backward_in_one_launch, 6,
       "every layer's backward in one persistent kernel (bf16, sequences of 128 tokens, at most 1024 tokens): "
       "SwiGLU's backward in down's input gradient, the input gradients, the norms', the attention's with RoPE's and "
       "the weight gradients as tasks that wait on counters for the stages they read, not for whole kernels",
       false},
  };
  return switches;
}

// Without a workspace cuBLAS cannot split a product's sums along K, and fp32's weight gradients
// (1024 tokens deep, outputs of a few tiles) then run on a few SMs' FMA units: v4 fp32 at the
// default shape 6.28 -> 8.92 ms a step, slower than v3's 6.52 (H200, docs/versions/v4.md).
std::string products_without_workspace_misfit(const Plan& plan) {
  if (!plan.products_without_workspace || plan.amp) return "";
  return std::string(plan.tf32 ? "tf32" : "fp32") + " products split their sums along K through one";
}

std::vector<int> versions_from(int first) {
  std::vector<int> v;
  for (int level = first; level <= kLatestVersion; ++level) v.push_back(level);
  return v;
}

std::string version_list() {
  std::string s;
  for (int v : versions_from(1)) s += (s.empty() ? "v" : ", v") + std::to_string(v);
  return s;
}

int parse_version(const std::string& text, const std::string& flag) {
  for (int v : versions_from(1))
    if (text == "v" + std::to_string(v)) return v;
  usage_fail(flag + ": the optimization level is one of " + version_list() + " (got '" + text + "')");
}

Plan plan_for_version(int version) {
  if (version < 1 || version > kLatestVersion)
    usage_fail("--level: the optimization level is one of " + version_list() + " (got v" + std::to_string(version) + ")");
  Plan p;
  p.version = version;
  for (const PlanSwitch& s : plan_switches()) p.*s.field = s.preset && s.version <= version;
  return p;
}

void set_switch(Plan& plan, const std::string& name, bool on, const std::string& flag) {
  for (const PlanSwitch& s : plan_switches())
    if (name == s.name) {
      plan.*s.field = on;
      return;
    }
  usage_fail(flag + ": no plan switch named '" + name + "'");
}

std::string describe(const Plan& plan) {
  std::string s = "v" + std::to_string(plan.version);
  const Plan preset = plan_for_version(plan.version);
  std::string changes;
  for (const PlanSwitch& sw : plan_switches())
    if (plan.*sw.field != preset.*sw.field)
      changes += std::string(changes.empty() ? "" : ", ") + (plan.*sw.field ? "+" : "-") + sw.name;
  if (!changes.empty()) s += " (" + changes + ")";
  if (plan.fused_classifier && plan.classifier_chunk > 0)
    s += " classifier chunk " + std::to_string(plan.classifier_chunk);
  s += plan.amp ? " bf16" : (plan.tf32 ? " fp32/tf32" : " fp32");
  return s;
}

}  // namespace tt
