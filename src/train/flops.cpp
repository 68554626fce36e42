#include "train/flops.h"

namespace tt {

namespace {

// A step's forward FLOPs by where they are done: 2 per multiply-add of each product; the causal
// attention products count half of the T x T square (q k^T and P v: 2 * 2 * B * T^2 * H * D / 2).
// The backward does twice each.
struct ForwardParts {
  double attention_projections, attention, ffn, head;
};
ForwardParts forward_parts(const ModelConfig& c, int64_t batch, int64_t seq_len) {
  const double N = double(batch) * double(seq_len), L = c.layers, C = c.hidden, F = c.intermediate;
  const double HD = double(c.heads) * c.head_dim();
  return {L * 2 * N * (C * c.qkv_dim() + HD * C), L * 2.0 * double(batch) * double(seq_len) * double(seq_len) * HD,
          L * 2 * N * 3 * C * F, 2 * N * C * c.vocab_size};
}

}  // namespace

std::vector<ModuleFlops> module_flops(const ModelConfig& c, int64_t batch, int64_t seq_len) {
  const double L = c.layers, C = c.hidden, F = c.intermediate, V = c.vocab_size;
  const double HD = double(c.heads) * c.head_dim();
  const ForwardParts f = forward_parts(c, batch, seq_len);
  // A module's products do the forward's FLOPs once more for the input gradient and once for the
  // weight gradient (attention's own products have no weights).
  auto m = [](const char* name, double params, double fwd, double weight_products = 0) {
    return ModuleFlops{name, int64_t(params), fwd, 2 * fwd, 0, 0, weight_products};
  };
  return {
      m("embedding", V * C, 0),
      m("attention_norm", L * C, 0),
      m("attention", L * (C * c.qkv_dim() + HD * C), f.attention_projections + f.attention, f.attention_projections),
      m("ffn_norm", L * C, 0),
      m("ffn", L * 3 * C * F, f.ffn, f.ffn),
      m("final_norm", C, 0),
      m("head_loss", 0, f.head),  // the head is the embedding (tied): its parameters are counted there
      m("optimizer", 0, 0),
  };
}

StepWork step_work(const ModelConfig& c, int64_t batch, int64_t seq_len) {
  const ForwardParts f = forward_parts(c, batch, seq_len);
  StepWork w;
  w.layer_products = 3 * (f.attention_projections + f.ffn);
  w.head_products = 3 * f.head;
  w.attention = 3 * f.attention;
  return w;
}

void add_measured_times(std::vector<ModuleFlops>& modules, const TraceData& trace) {
  const double steps = trace.steps > 0 ? trace.steps : 1;
  double weight_flops = 0;
  for (const ModuleFlops& m : modules) weight_flops += m.weight_gradient_flops;
  for (const RegionRow& row : region_times(trace)) {
    const std::string& path = row.path;
    const std::string leaf = path.substr(path.rfind('/') == std::string::npos ? 0 : path.rfind('/') + 1);
    const bool backward = path.rfind("backward", 0) == 0;
    if (leaf == "weight_gradients" && weight_flops > 0) {
      for (ModuleFlops& m : modules) m.backward_us += row.gpu_us / steps * m.weight_gradient_flops / weight_flops;
      continue;
    }
    for (ModuleFlops& m : modules)
      if (m.module == leaf || (m.module == "optimizer" && path.rfind("optimizer", 0) == 0))
        (backward ? m.backward_us : m.forward_us) += row.gpu_us / steps;
  }
  for (ModuleFlops& m : modules)
    if (m.module == "head_loss" && m.forward_us > 0 && m.backward_us == 0)
      m.forward_flops += m.backward_flops, m.backward_flops = 0;
}

double peak_flops(const std::string& device_name, const std::string& precision) {
  // NVIDIA H100 SXM5 and H200 datasheets, dense (no sparsity).
  if (device_name.find("H100") != std::string::npos || device_name.find("H200") != std::string::npos) {
    if (precision == "fp8") return 1978.9e12;
    if (precision == "bf16") return 989.4e12;
    if (precision == "tf32") return 494.7e12;
    if (precision == "fp32") return 66.9e12;
  }
  return 0;
}

}  // namespace tt
