#include "model/params.h"

#include "core/rng.h"

namespace tt {

std::vector<ParamEntry> param_table(const ModelConfig& c) {
  const int64_t C = c.hidden, D = c.head_dim(), F = c.intermediate;
  std::vector<ParamEntry> t;
  int64_t offset = 0;
  auto add = [&](std::string name, std::vector<int64_t> shape, Init init) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    t.push_back({std::move(name), std::move(shape), offset, n, init});
    offset += n;
  };
  add("model.embed_tokens.weight", {c.vocab_size, C}, Init::Normal);
  for (int l = 0; l < c.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", {C}, Init::Ones);
    add(p + "self_attn.q_proj.weight", {c.heads * D, C}, Init::Normal);
    add(p + "self_attn.k_proj.weight", {c.kv_heads * D, C}, Init::Normal);
    add(p + "self_attn.v_proj.weight", {c.kv_heads * D, C}, Init::Normal);
    add(p + "self_attn.o_proj.weight", {C, c.heads * D}, Init::Normal);
    add(p + "post_attention_layernorm.weight", {C}, Init::Ones);
    add(p + "mlp.gate_proj.weight", {F, C}, Init::Normal);
    add(p + "mlp.up_proj.weight", {F, C}, Init::Normal);
    add(p + "mlp.down_proj.weight", {C, F}, Init::Normal);
  }
  add("model.norm.weight", {C}, Init::Ones);
  return t;
}

Weights weight_views(const ModelConfig& c, const Tensor& flat) {
  const std::vector<ParamEntry> t = param_table(c);
  TT_CHECK(flat.numel == c.param_count(), "parameter buffer has the wrong size");
  auto view = [&](size_t first, size_t count) {  // entries [first, first + count) as one tensor
    int64_t n = 0;
    for (size_t i = first; i < first + count; ++i) n += t[i].numel;
    return flat.slice(t[first].offset, n);
  };
  Weights w;
  w.wte = view(0, 1);
  for (int l = 0; l < c.layers; ++l) {
    const size_t e = 1 + size_t(l) * 9;
    w.layers.push_back({view(e, 1), view(e + 1, 3), view(e + 4, 1), view(e + 5, 1),
                        view(e + 6, 2), view(e + 8, 1)});
  }
  w.final_norm = view(t.size() - 1, 1);
  return w;
}

std::vector<float> initial_params(const ModelConfig& c, uint64_t seed, double std) {
  const std::vector<ParamEntry> table = param_table(c);
  std::vector<float> values(size_t(c.param_count()));
  for (size_t i = 0; i < table.size(); ++i) {
    const ParamEntry& e = table[i];
    float* out = values.data() + e.offset;
    if (e.init == Init::Ones) {
      std::fill(out, out + e.numel, 1.0f);
      continue;
    }
    const CounterRng rng(seed, kStreamParamBase + i);
#pragma omp parallel for
    for (int64_t j = 0; j < e.numel; ++j) out[j] = float(std * rng.normal(uint64_t(j)));
  }
  return values;
}

}  // namespace tt
