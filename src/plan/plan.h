// The optimization plan: named switches that choose how the CUDA backend computes each
// operation, and the versions of the workshop as presets. Reading the difference
// between two presets tells exactly what a version changes; flipping one switch of a preset
// is the ablation study.
//
// Who reads which switch: the model (src/model/llama.cpp) reads those that change the
// sequence of operations (how many products, which ops are fused into one call); the CUDA
// backend reads those that change how one operation is computed. The CPU backend computes
// every operation the plain way whatever the plan.
#pragma once
#include <string>
#include <vector>

namespace tt {

struct Plan {
  int version = 1;  // the preset this plan started from
  // Precision.
  bool amp = false;   // bf16 activations and products, fp32 master weights and optimizer
  bool tf32 = false;  // fp32 products on the tensor cores with TF32 inputs
  // Version 2: fusions through libraries and the runtime.
  bool qkv_fusion = false;       // one product for Q, K and V
  bool gate_up_fusion = false;   // one product for gate and up; SiLU and the product in one kernel
  bool flash_attention = false;  // cuDNN's fused attention (bf16); fused softmax kernel in fp32
  bool cuda_graph = false;       // the step captured once as a CUDA graph and replayed
  // Version 3: our own kernels, forward and backward.
  bool custom_attention = false;
  bool custom_rmsnorm = false;
  bool custom_swiglu = false;
  bool custom_rope = false;
  bool programmatic_launch = false;  // each of our kernels placed while the one before it drains
  // Version 4: fusion across operations.
  bool fused_residual_norm = false;
  bool fused_classifier = false;  // the head's products, loss and gradient in chunks of tokens
  // Tokens per chunk of the fused classifier (0: chosen from the vocabulary, see
  // Llama::classifier_chunk); the logits buffer holds one chunk.
  int classifier_chunk = 0;
  bool fused_adamw = false;
  bool gemm_epilogues = false;
  bool rope_in_attention = false;  // RoPE applied by our flash attention as it loads Q and K (opt-in)
  // cuBLAS and cuBLASLt given no workspace: no products that split their sums through it, and so
  // no 4-byte memset before each (a node of the graph between two kernels). bf16 products only
  // (products_without_workspace_misfit).
  bool products_without_workspace = false;
  // Version 5: the layers' matrix products in FP8 (bf16 activations only, --use-amp).
  bool fp8 = false;                 // where the shape pays (Llama::uses_fp8), else bf16 as v4
  bool fp8_delayed_scaling = false;  // scales from the amax history, not this step's amax
  bool fp8_fused_swiglu = false;     // SwiGLU writes h and its input gradient straight in FP8
  bool fp8_fused_rope = false;       // RoPE's backward writes the QKV product's gradient straight in FP8
  bool fp8_head = false;             // the output head's three products in FP8 too (fused classifier)
  bool fp8_timed_products = false;   // each FP8 product's cuBLASLt algorithm chosen by timing its candidates
  bool fp8_fused_norm = false;       // RMSNorm writes its output straight in FP8 where a product takes it
  bool fp8_fused_norm_backward = false;  // RMSNorm's backward writes the residual stream's gradient in FP8 too
  bool fp8_fused_attention = false;  // our flash attention writes its output in FP8 too, for the output product
  bool fused_attention_backward = false;  // our flash attention's dQ made by its dK/dV kernel (opt-in)
  bool grouped_weight_gradients = false;  // a layer's weight gradients in one launch of our own kernel, where it pays
  bool swiglu_in_gate_up = false;  // SwiGLU made in the epilogue of our own gate/up product
  bool swiglu_in_down_gradient = false;  // SwiGLU's backward in the epilogue of our own down input gradient
  bool fp8_e5m2_gradients = false;   // gradients in E5M2 (more range), not E4M3 (more precision)
  bool fp8_every_shape = false;      // FP8 wherever the products allow it, paying or not (opt-in)
  // Version 6: kernels that hold more of a transformer block (the short steps that wait on latency).
  bool attention_backward_in_one_block = false;  // our flash attention's backward, short sequences: a block makes all
  bool rope_in_qkv_product = false;  // RoPE made in the epilogue of our own QKV product
  bool weight_gradients_behind = false;  // a layer's grouped weight gradients on a lane beside the layers below
  bool blocks_forward_in_one_launch = false;  // every layer's forward, one persistent kernel (ops/block_forward.h)
  bool blocks_backward_in_one_launch = false;  // every layer's backward, one persistent kernel (ops/block_backward.h)
};

// A switch of the plan, by the name users type in --enable-NAME / --disable-NAME.
struct PlanSwitch {
  const char* name;
  bool Plan::*field;
  int version;  // the version that turns it on
  const char* what;
  bool preset = true;  // false: in no version's preset, only with --enable-NAME (measured slower)
};
const std::vector<PlanSwitch>& plan_switches();

// Version presets: 1 baseline, 2 fused, 3 custom kernels, 4 ultra-fused, 5 FP8, 6 block kernels
// (being built: a bf16 rounding from v5's bits allowed). Each turns on its own switches and those of
// the versions below it. Precision is chosen separately.
Plan plan_for_version(int version);
constexpr int kLatestVersion = 6;

// The levels, written once: every version from `first` to the latest (the defaults of bench,
// validate and kernels), "v1, v2, v3, v4, v5, v6" for messages, and the one parser of "vN", whose
// errors name `flag`.
std::vector<int> versions_from(int first = 1);
std::string version_list();
int parse_version(const std::string& text, const std::string& flag);

// Why products-without-workspace keeps cuBLAS's workspace for this plan's products (empty where it
// takes it away): fp32 and tf32 products split their sums along K through it.
std::string products_without_workspace_misfit(const Plan& plan);

// Turns the switch named `name` on or off; UsageError (naming `flag`) for an unknown name.
void set_switch(Plan& plan, const std::string& name, bool on, const std::string& flag);

// "v2 (qkv-fusion, gate-up-fusion, ...)" for logs and reports.
std::string describe(const Plan& plan);

}  // namespace tt
