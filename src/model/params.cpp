#include "model/params.h"

#include "core/rng.h"

namespace tt {

std::vector<ParamEntry> param_table(const ModelConfig& c) {
  const int64_t C = c.hidden, D = c.head_dim(), F = c.intermediate;
  std::vector<ParamEntry> t;
  int64_t offset = 0;
  auto add = [&](std::string name, std::vector<int64_t> shape, Init init, uint64_t index) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    t.push_back({std::move(name), std::move(shape), offset, n, init, kStreamParamBase + index});
    offset += n;
  };
  for (int l = 0; l < c.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const uint64_t first = 1 + 9 * uint64_t(l);
    add(p + "input_layernorm.weight", {C}, Init::Ones, first);
    add(p + "self_attn.q_proj.weight", {c.heads * D, C}, Init::Normal, first + 1);
    add(p + "self_attn.k_proj.weight", {c.kv_heads * D, C}, Init::Normal, first + 2);
    add(p + "self_attn.v_proj.weight", {c.kv_heads * D, C}, Init::Normal, first + 3);
    add(p + "self_attn.o_proj.weight", {C, c.heads * D}, Init::Normal, first + 4);
    add(p + "post_attention_layernorm.weight", {C}, Init::Ones, first + 5);
    add(p + "mlp.gate_proj.weight", {F, C}, Init::Normal, first + 6);
    add(p + "mlp.up_proj.weight", {F, C}, Init::Normal, first + 7);
    add(p + "mlp.down_proj.weight", {C, F}, Init::Normal, first + 8);
  }
  add("model.norm.weight", {C}, Init::Ones, 1 + 9 * uint64_t(c.layers));
  add("model.embed_tokens.weight", {c.vocab_size, C}, Init::Normal, 0);
  if (!c.tie_embeddings) add("lm_head.weight", {c.vocab_size, C}, Init::Normal, 2 + 9 * uint64_t(c.layers));
  return t;
}

int padded_vocab(int vocab_size, int multiple) { return (vocab_size + multiple - 1) / multiple * multiple; }

int64_t padded_param_numel(const ModelConfig& c, int padded_vocab) {
  return c.param_count() + int64_t(padded_vocab - c.vocab_size) * c.hidden;
}

Weights weight_views(const ModelConfig& c, const Tensor& flat, int padded_vocab) {
  const std::vector<ParamEntry> t = param_table(c);
  TT_CHECK(padded_vocab >= c.vocab_size && flat.numel == padded_param_numel(c, padded_vocab),
           "parameter buffer has the wrong size");
  auto view = [&](size_t first, size_t count) {  // entries [first, first + count) as one tensor
    int64_t n = 0;
    for (size_t i = first; i < first + count; ++i) n += t[i].numel;
    return flat.slice(t[first].offset, n);
  };
  Weights w;
  for (int l = 0; l < c.layers; ++l) {
    const size_t e = size_t(l) * 9;
    w.layers.push_back({view(e, 1), view(e + 1, 3), view(e + 4, 1), view(e + 5, 1),
                        view(e + 6, 2), view(e + 8, 1)});
  }
  const size_t embed = embedding_entry(c);
  w.final_norm = view(embed - 1, 1);
  w.head = flat.slice(t.back().offset, int64_t(padded_vocab) * c.hidden);  // the real rows, then the padding
  w.wte = c.tie_embeddings ? w.head : view(embed, 1);
  return w;
}

std::vector<float> initial_values(const ParamEntry& e, uint64_t seed, double std) {
  std::vector<float> values(size_t(e.numel), 1.0f);
  if (e.init == Init::Ones) return values;
  const CounterRng rng(seed, e.rng_stream);
#pragma omp parallel for
  for (int64_t j = 0; j < e.numel; ++j) values[size_t(j)] = float(std * rng.normal(uint64_t(j)));
  return values;
}

std::vector<float> initial_params(const ModelConfig& c, uint64_t seed, double std) {
  std::vector<float> values(size_t(c.param_count()));
  for (const ParamEntry& e : param_table(c)) {
    const std::vector<float> v = initial_values(e, seed, std);
    std::copy(v.begin(), v.end(), values.begin() + e.offset);
  }
  return values;
}

}  // namespace tt
