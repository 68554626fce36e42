// The parameters: one flat buffer per kind (values, gradients, Adam moments, the act-typed
// copy), all with the same layout, described by one table. The table gives each tensor its
// checkpoint name (Hugging Face LLaMA naming), shape, offset and initialisation.
//
// Layout: per layer [input_layernorm, q, k, v, o, post_attention_layernorm, gate, up, down],
// then the final norm, then embed_tokens. q, k and v sit back to back, as do gate and up, so
// the fused products of version 2 read them as one matrix without any copy.
//
// The embedding comes last (or, untied, the output head lm_head after it), so that a backend can
// extend it with zero rows: the output head is a product with `padded_vocab` rows (a multiple of 128 on the GPU), which keeps every
// product with it on the aligned tensor-core kernels. The padding rows follow the real
// parameters in the values, gradients and act-typed buffers (never in the Adam moments): they
// stay zero, take no part in the softmax, get a zero gradient, and are in no count, checkpoint
// or export. With padded_vocab == vocab_size (the CPU reference) there is no padding.
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
  uint64_t rng_stream = 0;  // initial values draw from CounterRng(seed, rng_stream)
};

std::vector<ParamEntry> param_table(const ModelConfig& c);
// The embedding's entry in the table: after each layer's nine and the final norm (an untied
// lm_head follows it).
inline size_t embedding_entry(const ModelConfig& c) { return size_t(c.layers) * 9 + 1; }

// Elements [offset, offset + numel) of the flat buffers.
struct ParamRange {
  int64_t offset = 0, numel = 0;
};

// The vocabulary rounded up to `multiple` rows, and the elements of a flat buffer that holds
// the real parameters and the padding rows after them.
int padded_vocab(int vocab_size, int multiple);
int64_t padded_param_numel(const ModelConfig& c, int padded_vocab);

struct LayerWeights {
  Tensor attn_norm;  // [C]
  Tensor wqkv;       // [(H + 2 KVH) D, C]: q rows, then k rows, then v rows
  Tensor wo;         // [C, H D]
  Tensor ffn_norm;   // [C]
  Tensor wgateup;    // [2F, C]: gate rows, then up rows
  Tensor wdown;      // [C, F]
};

struct Weights {
  Tensor wte;   // the embedding: [padded_vocab, C] when it is the head too, else [vocab_size, C]
  Tensor head;  // the output head, [padded_vocab, C] (rows from vocab_size on are padding): wte when tied
  std::vector<LayerWeights> layers;
  Tensor final_norm;  // [C]
};

// Views of the tensors of a flat buffer laid out by param_table, of padded_param_numel elements.
Weights weight_views(const ModelConfig& c, const Tensor& flat, int padded_vocab);

// The initial values, in fp32, a pure function of (config, seed): the entries of the table
// draw from their own streams, kStreamParamBase + i for the i-th tensor in the order
// embed_tokens, then each layer's nine, then the final norm (the order the PyTorch reference
// script enumerates them in), then an untied lm_head.
// `std` is that of the normal entries; another value than kInitStd only to show what a wrong
// initialisation does (tiny_llama train --init-std, tiny_llama debug broken).
std::vector<float> initial_params(const ModelConfig& c, uint64_t seed, double std = kInitStd);
// One tensor's part of it: a model initializes tensor by tensor, so that the host never holds a
// copy of all the weights (the largest tensor at most, beside the arena).
std::vector<float> initial_values(const ParamEntry& e, uint64_t seed, double std = kInitStd);

}  // namespace tt
