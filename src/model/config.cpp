#include "model/config.h"

#include <climits>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"

namespace tt {

static void require_positive(int value, const char* flag) {
  if (value <= 0) usage_fail(std::string(flag) + ": must be a positive integer (got " +
                             std::to_string(value) + ")");
}

void ModelConfig::validate() const {
  require_positive(vocab_size, "--vocab-size");
  require_positive(hidden, "--hidden-dim");
  require_positive(layers, "--num-layers");
  require_positive(heads, "--num-heads");
  require_positive(kv_heads, "--num-kv-heads");
  require_positive(intermediate, "--intermediate-size");
  if (vocab_size < 2)
    usage_fail("--vocab-size: must be at least 2 (token 0 is reserved, data uses 1..vocab-1)");
  if (hidden % heads != 0)
    usage_fail("--num-heads: must divide --hidden-dim (" + std::to_string(hidden) + " % " +
               std::to_string(heads) + " != 0)");
  if (heads % kv_heads != 0)
    usage_fail("--num-kv-heads: must divide --num-heads (" + std::to_string(heads) + " % " +
               std::to_string(kv_heads) + " != 0)");
  if (head_dim() % 2 != 0)
    usage_fail("--hidden-dim / --num-heads: the head size must be even for RoPE's pairs (got " +
               std::to_string(head_dim()) + ")");
  if (!(std::isfinite(norm_eps) && norm_eps > 0))
    usage_fail("--norm-eps: must be a positive finite number");
  if (!(std::isfinite(rope_theta) && rope_theta > 1))
    usage_fail("--rope-theta: must be a finite number greater than 1");
  constexpr int kMaxDim = 1 << 20;
  if (hidden > kMaxDim || intermediate > kMaxDim || vocab_size > kMaxDim || layers > 4096)
    usage_fail("model too large: --hidden-dim, --intermediate-size and --vocab-size are limited "
               "to 1048576, --num-layers to 4096");
}

int64_t ModelConfig::matmul_param_count() const {
  const int64_t C = hidden, D = head_dim(), F = intermediate;
  const int64_t per_layer = C * qkv_dim() + int64_t(heads) * D * C + 3 * C * F;
  return layers * per_layer + int64_t(vocab_size) * C;
}

int64_t ModelConfig::param_count() const {
  // matmul weights (the tied head counted once, as the embedding) + two norms per layer + final,
  // and an untied embedding
  return matmul_param_count() + int64_t(layers) * 2 * hidden + hidden +
         (tie_embeddings ? 0 : int64_t(vocab_size) * hidden);
}

double training_flops(const ModelConfig& c, int64_t batch, int64_t seq_len) {
  const double tokens = double(batch) * double(seq_len);
  return 6.0 * double(c.matmul_param_count()) * tokens +
         6.0 * c.layers * double(batch) * double(seq_len) * double(seq_len) * c.heads *
             c.head_dim();
}

double forward_flops(const ModelConfig& c, int64_t batch, int64_t seq_len) {
  return training_flops(c, batch, seq_len) / 3.0;
}

nlohmann::json ModelConfig::to_json() const {  // tie_embeddings only when false: tied checkpoints read as before
  nlohmann::json j = {{"vocab_size", vocab_size}, {"hidden_dim", hidden},   {"num_layers", layers},
                      {"num_heads", heads},       {"num_kv_heads", kv_heads}, {"intermediate_size", intermediate},
                      {"norm_eps", norm_eps},     {"rope_theta", rope_theta}};
  if (!tie_embeddings) j["tie_embeddings"] = false;
  return j;
}

ModelConfig ModelConfig::from_json(const nlohmann::json& j) {
  // Every field of its JSON type and within its C++ type's range: nothing narrows silently.
  auto integer = [&](const char* key) {
    const nlohmann::json& v = j.at(key);
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX)
      throw nlohmann::json::type_error::create(302, std::string(key) + " must be an integer in [0, 2^31)", &j);
    return int(v.get<int64_t>());
  };
  auto number = [&](const char* key) {
    const nlohmann::json& v = j.at(key);
    if (!v.is_number()) throw nlohmann::json::type_error::create(302, std::string(key) + " must be a number", &j);
    return v.get<double>();
  };
  ModelConfig c;
  c.vocab_size = integer("vocab_size");
  c.hidden = integer("hidden_dim");
  c.layers = integer("num_layers");
  c.heads = integer("num_heads");
  c.kv_heads = integer("num_kv_heads");
  c.intermediate = integer("intermediate_size");
  c.norm_eps = number("norm_eps");
  c.rope_theta = number("rope_theta");
  if (j.contains("tie_embeddings")) {
    if (!j["tie_embeddings"].is_boolean()) throw nlohmann::json::type_error::create(302, "tie_embeddings must be a boolean", &j);
    c.tie_embeddings = j["tie_embeddings"].get<bool>();
  }
  return c;
}

bool operator==(const ModelConfig& a, const ModelConfig& b) { return a.to_json() == b.to_json(); }

const std::vector<Preset>& presets() {
  static const std::vector<Preset> all = [] {
    ModelConfig gpt2;
    gpt2.vocab_size = 50257, gpt2.hidden = 768, gpt2.layers = 12, gpt2.heads = 12, gpt2.kv_heads = 12;
    gpt2.intermediate = 2048;
    ModelConfig medium;
    medium.hidden = 1024, medium.layers = 12, medium.heads = 16, medium.kv_heads = 8, medium.intermediate = 4096;
    return std::vector<Preset>{{"gpt2-small", gpt2, 16, 1024}, {"medium", medium, 16, 512}};
  }();
  return all;
}

const Preset& find_preset(const std::string& name) {
  std::string names;
  for (const Preset& p : presets()) {
    if (name == p.name) return p;
    names += std::string(names.empty() ? "" : ", ") + p.name;
  }
  usage_fail("--preset: must be one of " + names + " (got '" + name + "')");
}

}  // namespace tt
