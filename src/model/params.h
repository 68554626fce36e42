// The parameters: one flat buffer per kind (values, gradients, Adam moments, the act-typed
// copy), all with the same layout, described by one table. The table gives each tensor its
// checkpoint name (Hugging Face LLaMA naming), shape, offset and initialisation.
//
// Layout: embed_tokens, then per layer [input_layernorm, q, k, v, o, post_attention_layernorm,
// gate, up, down], then the final norm. q, k and v sit back to back, as do gate and up, so the
// fused products of version 2 read them as one matrix without any copy.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "model/config.h"

namespace tt {

enum class Init { Normal, Ones };  // N(0, std) for products and the embedding (std 0.02); 1 for norms

constexpr double kInitStd = 0.02;  // the standard deviation of Init::Normal

struct ParamEntry {
  std::string name;
  std::vector<int64_t> shape;
  int64_t offset = 0;  // in elements, into the flat buffer
  int64_t numel = 0;
  Init init = Init::Normal;
};

std::vector<ParamEntry> param_table(const ModelConfig& c);

struct LayerWeights {
  Tensor attn_norm;  // [C]
  Tensor wqkv;       // [(H + 2 KVH) D, C]: q rows, then k rows, then v rows
  Tensor wo;         // [C, H D]
  Tensor ffn_norm;   // [C]
  Tensor wgateup;    // [2F, C]: gate rows, then up rows
  Tensor wdown;      // [C, F]
};

struct Weights {
  Tensor wte;  // [V, C], also the output head
  std::vector<LayerWeights> layers;
  Tensor final_norm;  // [C]
};

// Views of the tensors of a flat buffer laid out by param_table.
Weights weight_views(const ModelConfig& c, const Tensor& flat);

// The initial values, in fp32, a pure function of (config, seed): entry i draws from
// CounterRng(seed, kStreamParamBase + i).
// `std` is that of the normal entries; another value than kInitStd only to show what a wrong
// initialisation does (tiny_llama train --init-std, tiny_llama debug init).
std::vector<float> initial_params(const ModelConfig& c, uint64_t seed, double std = kInitStd);

}  // namespace tt
