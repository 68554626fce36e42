// The model's shape, its validation, and the counts derived from it (parameters, FLOPs).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace tt {

struct ModelConfig {
  int vocab_size = 1000;
  int hidden = 512;         // C
  int layers = 8;           // L
  int heads = 8;            // H
  int kv_heads = 4;         // KVH (grouped-query attention)
  int intermediate = 2048;  // F, the SwiGLU width
  double norm_eps = 1e-5;
  double rope_theta = 10000.0;
  // The output head is the embedding (tied, LLaMA's small models and GPT-2), or a matrix of its
  // own, lm_head (untied: most LLaMA checkpoints).
  bool tie_embeddings = true;

  int head_dim() const { return hidden / heads; }                   // D
  int qkv_dim() const { return (heads + 2 * kv_heads) * head_dim(); }  // fused projection width

  // Throws UsageError naming the flag and the rule that failed.
  void validate() const;

  int64_t param_count() const;
  // Weights that enter matrix products: the output head (the embedding when tied), not an untied
  // embedding (a lookup), nor the norm scales.
  int64_t matmul_param_count() const;

  nlohmann::json to_json() const;
  static ModelConfig from_json(const nlohmann::json& j);  // throws on missing fields
};

bool operator==(const ModelConfig& a, const ModelConfig& b);

// Named shapes a user can start from (--preset NAME): the model and the batch it is timed at.
// gpt2-small has GPT-2 124M's matrices (123.6 M parameters with the vocabulary of 50257);
// medium is a model of 190 M parameters at the workshop's vocabulary.
struct Preset {
  const char* name;
  ModelConfig model;
  int batch, seq_len;
};
const std::vector<Preset>& presets();
const Preset& find_preset(const std::string& name);  // UsageError naming --preset otherwise

// FLOPs of one training step, forward and backward, the one formula used everywhere:
//   6 * matmul_param_count * B*T          (each weight: one multiply-add forward, two backward)
// + 6 * layers * B * T^2 * heads * head_dim (q k^T and P v: 4 T^2 H D forward per sequence,
//                                           half of it under the causal mask, times 3 for
//                                           forward plus backward)
// Elementwise work, norms and softmax are not counted (they are memory-bound).
double training_flops(const ModelConfig& c, int64_t batch, int64_t seq_len);
double forward_flops(const ModelConfig& c, int64_t batch, int64_t seq_len);  // a third of it

}  // namespace tt
