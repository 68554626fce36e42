#include "model/generate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "core/error.h"

namespace tt {

Generator::Generator(Llama& model, int max_len, int batch, int positions)
    : m_(model),
      be_(model.backend()),
      c_(model.config()),
      max_len_(max_len),
      batch_(batch),
      positions_(std::max(positions, max_len)),
      shape_{batch, max_len, c_.heads, c_.kv_heads, c_.head_dim()},
      arena_(be_.memory()) {
  if (max_len < 1) usage_fail("generate: the context must hold at least one token");
  if (batch < 1) usage_fail("generate: at least one sequence");
  arena_.build([this](Arena& a) { layout(a); });
}

void Generator::fill_rope_table(int first) {
  const std::vector<double> table = rope_table(max_len_, c_.head_dim(), c_.rope_theta, first);
  if (rope_table_.dtype == DType::F64) {
    be_.upload(rope_table_, table.data());
  } else {
    const std::vector<float> f(table.begin(), table.end());
    be_.upload(rope_table_, f.data());
  }
}

void Generator::layout(Arena& a) {
  const DType A = be_.act_dtype(), S = be_.acc_dtype();
  const int64_t B = batch_, C = c_.hidden, KV = int64_t(c_.kv_heads) * c_.head_dim(),
                HD = int64_t(c_.heads) * c_.head_dim();
  auto act = [&](DType d, int64_t n) { return a.take(Category::Activations, d, n); };
  k_cache_.clear(), v_cache_.clear();
  for (int l = 0; l < c_.layers; ++l) {
    k_cache_.push_back(act(A, B * max_len_ * KV));
    v_cache_.push_back(act(A, B * max_len_ * KV));
  }
  token_ = act(DType::I32, B);
  x_ = act(A, B * C), xn_ = act(A, B * C), rstd_ = act(S, B), q_ = act(A, B * HD), att_ = act(A, B * HD);
  branch_ = act(A, B * C), x_mid_ = act(A, B * C), gateup_ = act(A, B * 2 * int64_t(c_.intermediate));
  h_ = act(A, B * c_.intermediate), logits_ = act(A, B * m_.padded_vocab());
  rope_table_ = act(S, int64_t(max_len_) * c_.head_dim());
}

std::vector<std::vector<float>> Generator::step(const std::vector<int32_t>& tokens) {
  if (pos_ >= positions_) usage_fail("generate: the " + std::to_string(positions_) + " positions asked for are used");
  TT_CHECK(int(tokens.size()) == batch_, "Generator::step: one token per sequence");
  for (int32_t token : tokens)
    if (token < 0 || token >= c_.vocab_size) usage_fail("generate: token " + std::to_string(token) + " is outside the vocabulary");
  const Weights& w = m_.weights();
  const int B = batch_, C = c_.hidden, D = c_.head_dim(), H = c_.heads, KVH = c_.kv_heads, F = c_.intermediate;
  const int64_t KV = int64_t(KVH) * D, HD = int64_t(H) * D, cache_ld = int64_t(max_len_) * KV;
  auto linear = [&](const Tensor& out, int64_t ld_out, const Tensor& x, const Tensor& weight, int in_f, int out_f) {
    be_.matmul(linear_gemm(out, ld_out, x, in_f, weight, B, in_f, out_f));
  };
  if (pos_ % max_len_ == 0) fill_rope_table(pos_);  // the next max_len positions' rows
  const Tensor table = rope_table_.slice(int64_t(pos_ % max_len_) * D, D);  // this position's cos and sin
  be_.upload(token_, tokens.data());
  be_.embedding_forward(x_, token_, w.wte, B, C);
  for (int l = 0; l < c_.layers; ++l) {
    const LayerWeights& lw = w.layers[size_t(l)];
    // This position's rows of the sequences' caches, max_len rows apart (the oldest's, past max_len).
    const int64_t rows = (B - 1) * cache_ld + KV, row = pos_ % max_len_;
    const Tensor k = k_cache_[size_t(l)].slice(row * KV, rows), v = v_cache_[size_t(l)].slice(row * KV, rows);
    be_.rmsnorm_forward(xn_, rstd_, x_, lw.attn_norm, B, C, c_.norm_eps);
    // Q, K and V as three products: K and V straight into this position's rows of the cache.
    linear(q_, HD, xn_, lw.wqkv.slice(0, HD * C), C, int(HD));
    linear(k, cache_ld, xn_, lw.wqkv.slice(HD * C, KV * C), C, int(KV));
    linear(v, cache_ld, xn_, lw.wqkv.slice((HD + KV) * C, KV * C), C, int(KV));
    be_.rope_forward(q_, table, RopeShape{B, 1, H, D, 0, HD});
    be_.rope_forward(k, table, RopeShape{B, 1, KVH, D, 0, cache_ld});
    be_.attention_decode(att_, q_, k_cache_[size_t(l)], v_cache_[size_t(l)], std::min(pos_ + 1, max_len_), KV, shape_);
    linear(branch_, C, att_, lw.wo, int(HD), C);
    be_.add(x_mid_, x_, branch_);
    be_.rmsnorm_forward(xn_, rstd_, x_mid_, lw.ffn_norm, B, C, c_.norm_eps);
    linear(gateup_, 2 * F, xn_, lw.wgateup, C, 2 * F);
    be_.swiglu_forward(h_, gateup_, B, F);
    linear(branch_, C, h_, lw.wdown, F, C);
    be_.add(x_, x_mid_, branch_);
  }
  be_.rmsnorm_forward(xn_, rstd_, x_, w.final_norm, B, C, c_.norm_eps);
  linear(logits_, m_.padded_vocab(), xn_, w.head, C, m_.padded_vocab());
  ++pos_;
  // One copy of every sequence's row (the padding columns too), then each row's real columns.
  const std::vector<float> all = m_.read_f32(logits_);
  std::vector<std::vector<float>> out;
  for (int b = 0; b < B; ++b) {
    const auto row = all.begin() + int64_t(b) * m_.padded_vocab();
    out.emplace_back(row, row + c_.vocab_size);
  }
  return out;
}

WindowGenerator::WindowGenerator(Llama& model)
    : m_(model), window_(size_t(model.tokens()), 0), targets_(size_t(model.tokens()), 0) {}

std::vector<std::vector<float>> WindowGenerator::step(const std::vector<int32_t>& tokens) {
  const int B = m_.batch(), T = m_.seq_len();
  TT_CHECK(int(tokens.size()) == B, "WindowGenerator::step: one token per sequence");
  const int at = std::min(pos_, T - 1);  // past T, each window moves a token to the left
  for (int b = 0; b < B; ++b) {
    const auto row = window_.begin() + int64_t(b) * T;
    if (pos_ >= T) std::rotate(row, row + 1, row + T);
    row[at] = tokens[size_t(b)];
  }
  m_.set_batch(window_.data(), targets_.data());
  m_.forward(Llama::Pass::Eval);
  std::vector<std::vector<float>> out;
  for (int b = 0; b < B; ++b)
    out.push_back(m_.read_f32(m_.logits().slice((int64_t(b) * T + at) * m_.padded_vocab(), m_.config().vocab_size)));
  ++pos_;
  return out;
}

int32_t choose_token(const std::vector<float>& logits, const SamplingOptions& o, const CounterRng& rng, uint64_t draw) {
  const int V = int(logits.size());
  if (o.temperature <= 0) return int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
  // Candidates by decreasing logit (ties by index), cut to top-k, then to the nucleus of top-p.
  std::vector<int32_t> order(static_cast<size_t>(V));
  std::iota(order.begin(), order.end(), 0);
  const int k = o.top_k > 0 ? std::min(o.top_k, V) : V;
  auto before = [&](int32_t a, int32_t b) { return logits[size_t(a)] > logits[size_t(b)] || (logits[size_t(a)] == logits[size_t(b)] && a < b); };
  std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
  order.resize(size_t(k));
  std::vector<double> p(order.size());
  const double top = logits[size_t(order[0])];
  double sum = 0;
  for (size_t i = 0; i < order.size(); ++i) sum += (p[i] = std::exp((double(logits[size_t(order[i])]) - top) / o.temperature));
  size_t keep = order.size();
  double mass = 0;
  for (size_t i = 0; i < order.size(); ++i)
    if ((mass += p[i] / sum) >= o.top_p) {
      keep = i + 1;
      break;
    }
  double kept = 0;
  for (size_t i = 0; i < keep; ++i) kept += p[i];
  double u = rng.uniform(draw) * kept;
  for (size_t i = 0; i < keep; ++i)
    if ((u -= p[i]) < 0) return order[i];
  return order[keep - 1];
}

Decoded decode(const StepFn& step, const std::vector<std::vector<int32_t>>& prompts, int max_new, int eos,
               const SamplingOptions& sampling, const CounterRng& rng,
               const std::function<void(int, const std::vector<int32_t>&)>& new_token) {
  using clock = std::chrono::steady_clock;
  const size_t B = prompts.size();
  Decoded d;
  d.tokens.resize(B);
  std::vector<bool> done(B, max_new <= 0);
  const auto start = clock::now();
  bool any_new = false;
  uint64_t draw = 0;
  std::vector<int32_t> tokens(B);
  for (size_t pos = 0; std::find(done.begin(), done.end(), false) != done.end(); ++pos) {
    for (size_t b = 0; b < B; ++b) {
      const std::vector<int32_t>& p = prompts[b];
      tokens[b] = pos < p.size() ? p[pos] : d.tokens[b].empty() ? p.back() : d.tokens[b].back();
    }
    const std::vector<std::vector<float>> logits = step(tokens);
    for (size_t b = 0; b < B; ++b) {
      if (done[b] || pos + 1 < prompts[b].size()) continue;
      const int32_t next = choose_token(logits[b], sampling, rng, draw++);
      if (!any_new) d.first_token_ms = std::chrono::duration<double, std::milli>(clock::now() - start).count(), any_new = true;
      if (next == eos) {
        done[b] = true;
        continue;
      }
      d.tokens[b].push_back(next);
      done[b] = int(d.tokens[b].size()) == max_new;
      new_token(int(b), d.tokens[b]);
    }
  }
  d.seconds = std::chrono::duration<double>(clock::now() - start).count();
  return d;
}

}  // namespace tt
