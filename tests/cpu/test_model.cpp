// The whole model: gradient check in double, the model-level plan switches, and the counts
// (parameters, FLOPs, memory) against hand counts.
#include <gtest/gtest.h>

#include <tuple>

#include <algorithm>
#include <cmath>

#include "gradcheck.h"
#include "model/llama.h"
#include "data/loader.h"

namespace tt::test {
namespace {

ModelConfig tiny_config() {
  ModelConfig c;
  c.vocab_size = 13;
  c.hidden = 8;
  c.layers = 2;
  c.heads = 4;
  c.kv_heads = 2;  // grouped: two query heads per key/value head
  c.intermediate = 12;
  return c;
}

void random_batch(int64_t n, int vocab, uint64_t seed, std::vector<int32_t>& tok, std::vector<int32_t>& tgt) {
  CounterRng rng(seed, kStreamTest);
  tok.resize(n);
  tgt.resize(n);
  for (int64_t i = 0; i < n; ++i) {
    tok[i] = int32_t(rng.below(2 * i, vocab));
    tgt[i] = int32_t(rng.below(2 * i + 1, vocab));
  }
}

// Puts larger random values into the parameters so that no gradient is negligibly small.
void randomize(Llama& m, uint64_t seed) {
  Random r(seed);
  const std::vector<double> v = r.uniform(size_t(m.params().numel), 0.5);
  double* p = m.params().data<double>();
  for (size_t i = 0; i < v.size(); ++i) p[i] = v[i];
}

// Version 1's sequence of operations, and version 4's (the residual adds fused into the norms,
// the head in chunks of 3 tokens with its backward inside the forward).
// Each version's plan, with the output head tied to the embedding and with one of its own.
class ModelGradcheck : public ::testing::TestWithParam<std::tuple<int, bool>> {};

TEST_P(ModelGradcheck, EveryParameterInDouble) {
  ModelConfig c = tiny_config();
  c.tie_embeddings = std::get<1>(GetParam());
  Plan plan = plan_for_version(std::get<0>(GetParam()));
  plan.classifier_chunk = 3;
  auto be = make_cpu_backend_f64(plan);
  Llama model(c, *be, 2, 5);
  randomize(model, 99);
  std::vector<int32_t> tok, tgt;
  random_batch(model.tokens(), c.vocab_size, 5, tok, tgt);
  model.set_batch(tok.data(), tgt.data());
  // Poisoned: the backward zeroes nothing, so each gradient must be written, not added to (in
  // the forward already, for the head's, with the fused classifier).
  std::fill_n(model.grads().data<double>(), model.grads().numel, std::nan(""));
  model.forward();
  model.backward();
  const std::vector<double> analytic = model.read(model.grads());

  double* p = model.params().data<double>();
  std::vector<double> params(p, p + model.params().numel);
  auto loss = [&] {
    std::copy(params.begin(), params.end(), p);
    model.forward();
    return model.mean_loss();
  };
  const std::vector<double> numeric = numeric_grad(params, loss, 1e-5);
  EXPECT_LT(rel_error(analytic, numeric), 1e-7);
  // Per tensor too, so that a wrong small tensor (a norm scale) cannot hide behind big ones.
  for (const ParamEntry& e : param_table(c)) {
    std::vector<double> a(analytic.begin() + e.offset, analytic.begin() + e.offset + e.numel);
    std::vector<double> n(numeric.begin() + e.offset, numeric.begin() + e.offset + e.numel);
    EXPECT_LT(rel_error(a, n), 1e-6) << e.name;
  }
}

INSTANTIATE_TEST_SUITE_P(Versions, ModelGradcheck, ::testing::Combine(::testing::Values(1, 4), ::testing::Bool()),
                         [](const auto& info) {
                           return "v" + std::to_string(std::get<0>(info.param)) +
                                  (std::get<1>(info.param) ? "_tied" : "_untied");
                         });

// The switches the model reads (fused products, one RoPE call, one AdamW call) change the
// sequence of operations, never the function: in double, all plans agree to rounding.
TEST(ModelPlans, EveryVersionComputesTheSameFunction) {
  const ModelConfig c = tiny_config();
  std::vector<int32_t> tok, tgt;
  random_batch(10, c.vocab_size, 6, tok, tgt);
  std::vector<double> ref_grads, ref_params;
  double ref_loss = 0;
  for (int v = 1; v <= 4; ++v) {
    auto be = make_cpu_backend_f64(plan_for_version(v));
    Llama model(c, *be, 2, 5);
    model.init_weights(7);
    randomize(model, 98);
    model.set_batch(tok.data(), tgt.data());
    model.forward();
    const double loss = model.mean_loss();
    model.backward();
    model.optimizer_step(AdamWStep{});
    const auto grads = model.read(model.grads());
    const auto params = model.read(model.params());
    if (v == 1) {
      ref_loss = loss, ref_grads = grads, ref_params = params;
      continue;
    }
    EXPECT_NEAR(loss, ref_loss, 1e-13) << "v" << v;
    EXPECT_LT(rel_error(grads, ref_grads), 1e-13) << "v" << v;
    EXPECT_LT(rel_error(params, ref_params), 1e-13) << "v" << v;
  }
}

// products-without-workspace takes cuBLAS's workspace away from bf16 products only: fp32's and
// tf32's split their sums along K through it (v4 fp32 slower than v3 without it).
TEST(ModelPlans, ProductsWithoutWorkspaceIsForBf16) {
  Plan p = plan_for_version(4);
  ASSERT_TRUE(p.products_without_workspace);
  EXPECT_EQ(products_without_workspace_misfit(p), "fp32 products split their sums along K through one");
  p.tf32 = true;
  EXPECT_EQ(products_without_workspace_misfit(p), "tf32 products split their sums along K through one");
  p.amp = true;
  EXPECT_EQ(products_without_workspace_misfit(p), "");
  p.amp = false, p.products_without_workspace = false;
  EXPECT_EQ(products_without_workspace_misfit(p), "");
}

TEST(ModelCounts, ParametersOfTheOriginalDefaults) {
  ModelConfig c;  // vocab 1000, hidden 512, 8 layers, 8 heads, 4 kv heads, ffn 2048
  EXPECT_EQ(c.param_count(), 31977984);  // ORIGINAL.md
  EXPECT_EQ(c.param_count() - c.matmul_param_count(), 8 * 2 * 512 + 512);
}

// FLOPs: the formula against the forward products counted one by one (2 m n k each), the
// causal attention products at half of T^2, and backward = twice forward.
TEST(ModelCounts, FlopFormulaMatchesHandCount) {
  ModelConfig c;
  for (int T : {1, 128, 256}) {
    const double B = 8, N = B * T, C = c.hidden, D = c.head_dim(), H = c.heads, KV = c.kv_heads,
                 F = c.intermediate, V = c.vocab_size;
    double fwd = 0;
    for (int l = 0; l < c.layers; ++l) {
      fwd += 2 * N * C * (H * D);       // q
      fwd += 2 * 2 * N * C * (KV * D);  // k, v
      fwd += 2 * N * (H * D) * C;       // o
      fwd += 2 * 2 * N * C * F;         // gate, up
      fwd += 2 * N * F * C;             // down
      fwd += 2 * (2 * B * H * double(T) * T * D) / 2;  // q k^T and P v, causal half
    }
    fwd += 2 * N * C * V;  // tied output head
    EXPECT_NEAR(training_flops(c, 8, T), 3 * fwd, 1e-6 * fwd);
  }
  // The default step at batch 8, sequence 128: about 0.20 TFLOP (ORIGINAL.md).
  EXPECT_NEAR(training_flops(c, 8, 128) / 1e12, 0.1996, 0.0001);
}

TEST(ModelCounts, ArenaMatchesAnalyticMemory) {
  ModelConfig c;
  c.layers = 2;
  const int B = 4, T = 16;
  auto be = make_backend(BackendOptions{DeviceKind::Cpu, plan_for_version(1)});
  Llama model(c, *be, B, T);
  const double P = double(c.param_count()), N = double(B) * T, C = c.hidden, F = c.intermediate;
  const double HD = c.heads * c.head_dim(), QKV = c.qkv_dim(), V = c.vocab_size, L = c.layers;
  const double per_layer = 4 * N * C + 2 * N + N * QKV + double(B) * c.heads * T * T + N * HD + 3 * N * F;
  const double activations = 4 * (L * per_layer + 2 * N * C + N + N * V + N) + 2 * 4 * N;
  const double slack = 256.0 * (L * 11 + 8);  // each tensor is aligned to 256 bytes
  const Arena& a = model.arena();
  EXPECT_NEAR(double(a.bytes(Category::Parameters)), 4 * P, 256);
  EXPECT_NEAR(double(a.bytes(Category::Gradients)), 4 * P, 256);
  EXPECT_NEAR(double(a.bytes(Category::OptimizerState)), 8 * P, 512);
  EXPECT_GE(double(a.bytes(Category::Activations)), activations);
  EXPECT_LE(double(a.bytes(Category::Activations)), activations + slack);
}

TEST(AdamW, MatchesTwoStepsComputedByHand) {
  // One parameter, lr 0.1, weight decay 0.01, betas (0.9, 0.999), eps 1e-8.
  // Step 1, g = 0.1:  p = 0.5 (1 - 0.001) = 0.4995; m = 0.01, v = 1e-5;
  //   update = (0.1 / 0.1) * 0.01 / (sqrt(1e-5) / sqrt(0.001) + 1e-8) = 0.01 / (0.1 + 1e-8)
  // Step 2, g = -0.2: p *= 0.999; m = 0.009 - 0.02 = -0.011; v = 0.999e-5 + 4e-5 = 4.999e-5;
  //   update = (0.1 / 0.19) * m / (sqrt(v) / sqrt(1 - 0.999^2) + 1e-8)
  const double p1 = 0.5 * 0.999 - 0.01 / (0.1 + 1e-8);
  const double v2 = 0.999e-5 + 1e-3 * 0.04;
  const double p2 = p1 * 0.999 - (0.1 / 0.19) * -0.011 / (std::sqrt(v2) / std::sqrt(1 - 0.999 * 0.999) + 1e-8);
  for (int precision : {64, 32}) {
    auto be = precision == 64 ? make_cpu_backend_f64() : make_backend({DeviceKind::Cpu, plan_for_version(1)});
    const DType dt = be->master_dtype();
    std::vector<double> d(4);
    std::vector<float> f(4);
    void* mem = dt == DType::F64 ? static_cast<void*>(d.data()) : static_cast<void*>(f.data());
    Tensor all{mem, dt, 4};
    auto set = [&](int i, double x) { dt == DType::F64 ? void(d[i] = x) : void(f[i] = float(x)); };
    auto get = [&](int i) { return dt == DType::F64 ? d[i] : double(f[i]); };
    set(0, 0.5), set(1, 0.1), set(2, 0), set(3, 0);  // p, g, m, v
    AdamWStep s;
    s.lr = 0.1, s.weight_decay = 0.01;
    s.t = 1;
    be->set_adamw_step(s);
    be->adamw(all.slice(0, 1), all.slice(1, 1), all.slice(2, 1), all.slice(3, 1), Tensor{}, true, Tensor{});
    EXPECT_NEAR(get(0), p1, precision == 64 ? 1e-15 : 1e-7);
    set(1, -0.2);
    s.t = 2;
    be->set_adamw_step(s);
    be->adamw(all.slice(0, 1), all.slice(1, 1), all.slice(2, 1), all.slice(3, 1), Tensor{}, true, Tensor{});
    EXPECT_NEAR(get(0), p2, precision == 64 ? 1e-15 : 1e-7);
  }
}

// Clipping and the decay exemption against a hand computation (torch's clip_grad_norm_ and
// AdamW with weight_decay 0): g = (3, 4) has norm 5; clipped to 1 it is (0.6, 0.8), and the
// first step of Adam moves each parameter by lr * sign(g) (to eps): the decayed one also by
// the factor 1 - lr * wd, the exempt one not.
TEST(AdamW, ClippingAndDecayExemptionByHand) {
  auto be = make_cpu_backend_f64();
  std::vector<double> p = {1.0, 1.0}, g = {3.0, 4.0}, m(2), v(2), sumsq = {-1.0};
  auto view = [](std::vector<double>& x) { return Tensor{x.data(), DType::F64, int64_t(x.size())}; };
  be->sum_squares(view(sumsq), view(g), false);
  EXPECT_EQ(sumsq[0], 25.0);
  be->sum_squares(view(sumsq), view(g), true);  // accumulate: another 25
  EXPECT_EQ(sumsq[0], 50.0);
  sumsq[0] = 25.0;
  AdamWStep s;
  s.lr = 0.1, s.weight_decay = 0.5, s.max_grad_norm = 1.0, s.t = 1;
  be->set_adamw_step(s);
  const double clip = 1.0 / (5.0 + 1e-6);
  be->adamw(view(p).slice(0, 1), view(g).slice(0, 1), view(m).slice(0, 1), view(v).slice(0, 1), Tensor{}, true,
            view(sumsq));
  be->adamw(view(p).slice(1, 1), view(g).slice(1, 1), view(m).slice(1, 1), view(v).slice(1, 1), Tensor{}, false,
            view(sumsq));
  EXPECT_NEAR(m[0], 0.1 * 3.0 * clip, 1e-15);
  EXPECT_NEAR(v[1], 0.001 * 16.0 * clip * clip, 1e-15);
  EXPECT_NEAR(p[0], 1.0 * (1 - 0.05) - 0.1 * (3 * clip) / (3 * clip + 1e-8), 1e-12);
  EXPECT_NEAR(p[1], 1.0 - 0.1 * (4 * clip) / (4 * clip + 1e-8), 1e-12);
  // Below the threshold the factor is 1: the gradient is used as it is.
  EXPECT_EQ(ref::clip_factor(0.25, 1.0), 1.0);
}

TEST(ModelInit, LossOnSyntheticDataIsLnVocab) {
  ModelConfig c;  // vocab 1000
  c.hidden = 128;
  c.layers = 2;
  c.heads = 4;
  c.kv_heads = 2;
  c.intermediate = 512;
  auto be = make_backend({DeviceKind::Cpu, plan_for_version(1)});
  Llama model(c, *be, 4, 64);
  model.init_weights(42);
  auto data = make_data_source("synthetic", c.vocab_size, 4, 64, 42);
  Batch b;
  data->next_batch(b);
  model.set_batch(b.tokens.data(), b.targets.data());
  model.forward();
  EXPECT_NEAR(model.mean_loss(), std::log(999.0), 0.05);
}

}  // namespace
}  // namespace tt::test

namespace tt::test {
namespace {

// The arena's use over a step: activations grow through the forward, peak at the loss, and
// are released layer by layer in the backward; everything else stays reserved.
TEST(ModelMemory, TimelineOverOneStep) {
  ModelConfig c;
  c.layers = 3;
  auto be = make_backend({DeviceKind::Cpu, plan_for_version(1)});
  Llama model(c, *be, 2, 16);
  const std::vector<Llama::MemoryPoint> t = model.memory_timeline();
  ASSERT_EQ(t.size(), size_t(3 + 2 + 2 + 3 + 1));
  const size_t act = size_t(Category::Activations);
  size_t peak = 0, peak_at = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i].live[act] > peak) peak = t[i].live[act], peak_at = i;
    EXPECT_EQ(t[i].live[size_t(Category::Parameters)], model.arena().bytes(Category::Parameters));
  }
  EXPECT_EQ(t[peak_at].region, "forward/head_loss");
  EXPECT_EQ(peak, model.arena().bytes(Category::Activations));  // at the peak every activation is live
  for (size_t i = 1; i < 5; ++i) EXPECT_GT(t[i].live[act], t[i - 1].live[act]) << t[i].region;
  for (size_t i = 6; i < t.size() - 1; ++i) EXPECT_LT(t[i].live[act], t[i - 1].live[act]) << t[i].region;
  EXPECT_EQ(t.back().region, "optimizer");
  EXPECT_EQ(t.back().live[act], t[t.size() - 2].live[act]);  // only the inputs remain
}

}  // namespace
}  // namespace tt::test
