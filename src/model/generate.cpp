#include "model/generate.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"

namespace tt {

Generator::Generator(Llama& model, int max_len)
    : m_(model),
      be_(model.backend()),
      c_(model.config()),
      max_len_(max_len),
      shape_{1, max_len, c_.heads, c_.kv_heads, c_.head_dim()},
      arena_(be_.memory()) {
  if (max_len < 1) usage_fail("generate: the context must hold at least one token");
  arena_.build([this](Arena& a) { layout(a); });
  const std::vector<double> table = rope_table(max_len_, c_.head_dim(), c_.rope_theta);
  if (rope_table_.dtype == DType::F64) {
    be_.upload(rope_table_, table.data());
  } else {
    const std::vector<float> f(table.begin(), table.end());
    be_.upload(rope_table_, f.data());
  }
}

void Generator::layout(Arena& a) {
  const DType A = be_.act_dtype(), S = be_.acc_dtype();
  const int64_t C = c_.hidden, KV = int64_t(c_.kv_heads) * c_.head_dim(), HD = int64_t(c_.heads) * c_.head_dim();
  auto act = [&](DType d, int64_t n) { return a.take(Category::Activations, d, n); };
  k_cache_.clear(), v_cache_.clear();
  for (int l = 0; l < c_.layers; ++l) {
    k_cache_.push_back(act(A, max_len_ * KV));
    v_cache_.push_back(act(A, max_len_ * KV));
  }
  token_ = act(DType::I32, 1);
  x_ = act(A, C), xn_ = act(A, C), rstd_ = act(S, 1), q_ = act(A, HD), att_ = act(A, HD);
  branch_ = act(A, C), x_mid_ = act(A, C), gateup_ = act(A, 2 * int64_t(c_.intermediate));
  h_ = act(A, c_.intermediate), logits_ = act(A, m_.padded_vocab());
  rope_table_ = act(S, int64_t(max_len_) * c_.head_dim());
}

std::vector<float> Generator::step(int32_t token) {
  if (pos_ >= max_len_) usage_fail("generate: the context of " + std::to_string(max_len_) + " tokens is full");
  if (token < 0 || token >= c_.vocab_size) usage_fail("generate: token " + std::to_string(token) + " is outside the vocabulary");
  const Weights& w = m_.weights();
  const int C = c_.hidden, D = c_.head_dim(), H = c_.heads, KVH = c_.kv_heads, F = c_.intermediate;
  const int64_t KV = int64_t(KVH) * D, HD = int64_t(H) * D;
  auto linear = [&](const Tensor& out, const Tensor& x, const Tensor& weight, int in_f, int out_f) {
    be_.matmul(linear_gemm(out, out_f, x, in_f, weight, 1, in_f, out_f));
  };
  const Tensor table = rope_table_.slice(int64_t(pos_) * D, D);  // this position's cos and sin
  be_.upload(token_, &token);
  be_.embedding_forward(x_, token_, w.wte, 1, C);
  for (int l = 0; l < c_.layers; ++l) {
    const LayerWeights& lw = w.layers[size_t(l)];
    const Tensor k = k_cache_[size_t(l)].slice(pos_ * KV, KV), v = v_cache_[size_t(l)].slice(pos_ * KV, KV);
    be_.rmsnorm_forward(xn_, rstd_, x_, lw.attn_norm, 1, C, c_.norm_eps);
    // Q, K and V as three products: K and V straight into this position's row of the cache.
    linear(q_, xn_, lw.wqkv.slice(0, HD * C), C, int(HD));
    linear(k, xn_, lw.wqkv.slice(HD * C, KV * C), C, int(KV));
    linear(v, xn_, lw.wqkv.slice((HD + KV) * C, KV * C), C, int(KV));
    be_.rope_forward(q_, table, RopeShape{1, 1, H, D, 0, HD});
    be_.rope_forward(k, table, RopeShape{1, 1, KVH, D, 0, KV});
    be_.attention_decode(att_, q_, k_cache_[size_t(l)], v_cache_[size_t(l)], pos_ + 1, KV, shape_);
    linear(branch_, att_, lw.wo, int(HD), C);
    be_.add(x_mid_, x_, branch_);
    be_.rmsnorm_forward(xn_, rstd_, x_mid_, lw.ffn_norm, 1, C, c_.norm_eps);
    linear(gateup_, xn_, lw.wgateup, C, 2 * F);
    be_.swiglu_forward(h_, gateup_, 1, F);
    linear(branch_, h_, lw.wdown, F, C);
    be_.add(x_, x_mid_, branch_);
  }
  be_.rmsnorm_forward(xn_, rstd_, x_, w.final_norm, 1, C, c_.norm_eps);
  linear(logits_, xn_, w.wte, C, m_.padded_vocab());
  ++pos_;
  std::vector<float> out(size_t(c_.vocab_size));
  if (logits_.dtype == DType::F32) {
    std::vector<float> all(size_t(logits_.numel));
    be_.download(all.data(), logits_);
    std::copy_n(all.begin(), out.size(), out.begin());
  } else if (logits_.dtype == DType::F64) {
    std::vector<double> all(size_t(logits_.numel));
    be_.download(all.data(), logits_);
    std::transform(all.begin(), all.begin() + int64_t(out.size()), out.begin(), [](double x) { return float(x); });
  } else {
    std::vector<bf16> all(size_t(logits_.numel));
    be_.download(all.data(), logits_);
    std::transform(all.begin(), all.begin() + int64_t(out.size()), out.begin(), bf16_to_float);
  }
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

}  // namespace tt
