// Text generation: the trained model run one token at a time, each step's keys and values kept
// in a cache so that a new token attends over the cache instead of recomputing the sequence
// (O(n) a token instead of O(n^2)). The same operations as the training forward, through the
// same backend, on one row per sequence; the attention over the cache is
// src/ops/attention_decode.h. Several sequences go in step, one position a step. And the choice
// of the next token from the logits: greedy, or sampled with temperature, top-k, top-p.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "core/arena.h"
#include "core/rng.h"
#include "model/llama.h"

namespace tt {

class Generator {
 public:
  // Runs `model`'s weights (a checkpoint loaded into it) for `batch` sequences, each with a
  // cache of `max_len` positions, for up to `positions` positions (default: max_len). Past
  // max_len the cache is a sliding window: a position's keys and values replace those of the
  // position max_len before it, so a token attends over the last max_len, as they were computed
  // when each was new (RoPE's scores depend on the distance between positions alone: with one
  // layer this is the model over those tokens at positions 0..max_len-1).
  Generator(Llama& model, int max_len, int batch = 1, int positions = 0);

  // Puts tokens[b] at the next position of sequence b; returns each sequence's logits of the
  // token after it (vocab_size each).
  std::vector<std::vector<float>> step(const std::vector<int32_t>& tokens);
  std::vector<float> step(int32_t token) { return step(std::vector<int32_t>{token})[0]; }
  int position() const { return pos_; }
  int max_len() const { return max_len_; }
  void reset() { pos_ = 0; }

 private:
  void layout(Arena& a);
  // RoPE's rows for positions first .. first + max_len - 1: the table holds one window of them,
  // refilled as generation reaches the next, so that memory does not grow with the positions asked for.
  void fill_rope_table(int first);

  Llama& m_;
  Backend& be_;
  ModelConfig c_;
  int max_len_, batch_, positions_, pos_ = 0;
  AttnShape shape_;
  Arena arena_;
  std::vector<Tensor> k_cache_, v_cache_;  // per layer: [batch, max_len, KVH * D], position p in row p % max_len
  Tensor token_, x_, xn_, rstd_, q_, att_, branch_, x_mid_, gateup_, h_, logits_, rope_table_;
};

// The same logits without a cache: every step runs the training forward (Pass::Eval) of `model`
// (built for `batch` sequences of `max_len`) over the whole window, and reads the row of the
// newest position: the O(n^2) way the cache avoids, kept to measure what the cache saves. Each
// step costs the forward of max_len positions (the causal mask makes the rows after the newest
// irrelevant to it). Past max_len the window slides: the model over the last max_len tokens, at
// positions 0..max_len-1 (with more than one layer not the cache's window, whose keys also
// carry the tokens before it).
class WindowGenerator {
 public:
  explicit WindowGenerator(Llama& model);
  std::vector<std::vector<float>> step(const std::vector<int32_t>& tokens);
  void reset() { pos_ = 0; }

 private:
  Llama& m_;
  int pos_ = 0;
  std::vector<int32_t> window_, targets_;  // [batch, max_len]
};

struct SamplingOptions {
  double temperature = 0.8;  // 0: greedy (the most likely token)
  int top_k = 0;             // 0: all tokens
  double top_p = 1.0;        // the smallest set of tokens whose probability reaches it
};

// The next token: greedy at temperature 0, else a draw from the softmax of logits / temperature
// restricted by top-k and top-p. `draw` numbers the draws of a run: with the same seed and draw
// the same token, on any machine.
int32_t choose_token(const std::vector<float>& logits, const SamplingOptions& o, const CounterRng& rng, uint64_t draw);

// Decodes the prompts in step, one position a step, through `step` (a Generator's or a
// WindowGenerator's): sequence b reads prompts[b] (not empty), then its own tokens; its first
// new token comes from the logits of its prompt's last position. A sequence ends at `eos` (not
// kept; -1: none) or after max_new tokens. The draws are numbered in the order the tokens are
// chosen. new_token(b, tokens) is called after each token sequence b adds.
struct Decoded {
  std::vector<std::vector<int32_t>> tokens;  // each sequence's new tokens
  double first_token_ms = 0, seconds = 0;    // until the first new token; the whole decode
};
using StepFn = std::function<std::vector<std::vector<float>>(const std::vector<int32_t>&)>;
Decoded decode(const StepFn& step, const std::vector<std::vector<int32_t>>& prompts, int max_new, int eos,
               const SamplingOptions& sampling, const CounterRng& rng,
               const std::function<void(int, const std::vector<int32_t>&)>& new_token);

}  // namespace tt
