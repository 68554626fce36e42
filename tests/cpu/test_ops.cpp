// Every operation's backward against finite differences of its forward, in double precision,
// through the CPU reference backend. Each check uses L = sum(R * out) for a random R, so the
// analytic gradient is the backward applied to dout = R.
#include <gtest/gtest.h>

#include "backend/backend.h"
#include "gradcheck.h"

namespace tt::test {
namespace {

constexpr double kTol = 1e-7;  // central differences with h = 1e-6 in double

class OpsGradcheck : public ::testing::Test {
 protected:
  std::unique_ptr<Backend> be = make_cpu_backend_f64();
  Random rnd{1234};
};

TEST_F(OpsGradcheck, Linear) {
  const int n = 5, in = 4, out = 3;
  auto x = rnd.uniform(n * in), w = rnd.uniform(out * in), R = rnd.uniform(n * out);
  std::vector<double> y(n * out);
  auto loss = [&] {
    be->matmul(linear_gemm(view(y), out, view(x), in, view(w), n, in, out));
    return dot(y, R);
  };
  std::vector<double> dx(n * in, 7.0), dw(out * in, 7.0);  // poisoned: both must be overwritten
  be->matmul(linear_dx_gemm(view(dx), in, view(R), out, view(w), n, in, out, 0.0f));
  be->matmul(linear_dw_gemm(view(dw), view(R), out, view(x), in, n, in, out));
  EXPECT_LT(rel_error(dx, numeric_grad(x, loss)), kTol);
  EXPECT_LT(rel_error(dw, numeric_grad(w, loss)), kTol);
}

TEST_F(OpsGradcheck, Embedding) {
  const int vocab = 6, c = 3, n = 7;
  std::vector<int32_t> tok = {0, 5, 2, 2, 3, 5, 1};
  Tensor tokens{tok.data(), DType::I32, n};
  auto wte = rnd.uniform(vocab * c), R = rnd.uniform(n * c);
  std::vector<double> out(n * c);
  auto loss = [&] {
    be->embedding_forward(view(out), tokens, view(wte), n, c);
    return dot(out, R);
  };
  std::vector<double> dwte(vocab * c, 0.0);
  be->embedding_backward(view(dwte), view(R), tokens, n, c, vocab);
  EXPECT_LT(rel_error(dwte, numeric_grad(wte, loss)), kTol);
}

TEST_F(OpsGradcheck, RmsNorm) {
  const int n = 4, c = 6;
  auto x = rnd.uniform(n * c), w = rnd.uniform(c), R = rnd.uniform(n * c);
  std::vector<double> out(n * c), rstd(n);
  const double eps = 1e-5;
  auto loss = [&] {
    be->rmsnorm_forward(view(out), view(rstd), view(x), view(w), n, c, eps);
    return dot(out, R);
  };
  loss();
  std::vector<double> dx(n * c, 7.0), dw(c, 7.0);  // poisoned: both must be overwritten
  be->rmsnorm_backward(view(dx), view(dw), view(R), view(x), view(w), view(rstd), n, c, false);
  EXPECT_LT(rel_error(dx, numeric_grad(x, loss)), kTol);
  EXPECT_LT(rel_error(dw, numeric_grad(w, loss)), kTol);
  // add_dw (gradient accumulation): dw is added to, dx still written.
  std::vector<double> dw_sum = dw;
  be->rmsnorm_backward(view(dx), view(dw_sum), view(R), view(x), view(w), view(rstd), n, c, true);
  for (int j = 0; j < c; ++j) EXPECT_EQ(dw_sum[j], dw[j] + dw[j]);
}

// The residual form's backward adds the norm's dx to the residual stream's gradient: in place, or
// out of place into a tensor apart (grouped-weight-gradients), leaving the gradient it read as it
// was; both the same values as the norm's backward and an add.
TEST_F(OpsGradcheck, RmsNormBackwardAddsInPlaceOrApart) {
  const int n = 4, c = 6;
  auto x = rnd.uniform(n * c), w = rnd.uniform(c), R = rnd.uniform(n * c), dres0 = rnd.uniform(n * c);
  std::vector<double> out(n * c), rstd(n), dx(n * c), dw(c);
  be->rmsnorm_forward(view(out), view(rstd), view(x), view(w), n, c, 1e-5);
  be->rmsnorm_backward(view(dx), view(dw), view(R), view(x), view(w), view(rstd), n, c, false);
  std::vector<double> in_place = dres0, apart(n * c, 7.0), kept = dres0, dw_in_place(c), dw_apart(c);
  be->rmsnorm_backward_add(view(in_place), view(in_place), view(dw_in_place), view(R), view(x), view(w), view(rstd), n,
                           c, false);
  be->rmsnorm_backward_add(view(apart), view(kept), view(dw_apart), view(R), view(x), view(w), view(rstd), n, c, false);
  for (int i = 0; i < n * c; ++i) {
    EXPECT_EQ(in_place[i], dres0[i] + dx[i]);
    EXPECT_EQ(apart[i], in_place[i]);
    EXPECT_EQ(kept[i], dres0[i]);
  }
  EXPECT_EQ(dw_in_place, dw);
  EXPECT_EQ(dw_apart, dw);
}

TEST_F(OpsGradcheck, Rope) {
  const int B = 2, T = 5, heads = 3, D = 4, ld = 16, col = 2;
  const std::vector<double> table = rope_table(T, D, 10000.0);
  Tensor tab{const_cast<double*>(table.data()), DType::F64, int64_t(table.size())};
  const RopeShape s{B * T, T, heads, D, col, ld};
  auto x = rnd.uniform(B * T * ld), R = rnd.uniform(B * T * ld);
  auto loss = [&] {
    std::vector<double> y = x;
    be->rope_forward(view(y), tab, s);
    return dot(y, R);
  };
  std::vector<double> dx = R;
  be->rope_backward(view(dx), tab, s);
  EXPECT_LT(rel_error(dx, numeric_grad(x, loss)), kTol);
  // Columns outside the rotated heads pass through untouched.
  std::vector<double> y = x;
  be->rope_forward(view(y), tab, s);
  EXPECT_EQ(y[0], x[0]);
  EXPECT_EQ(y[ld - 1], x[ld - 1]);
  // Position 0 is not rotated.
  EXPECT_EQ(y[col], x[col]);
}

class AttentionGradcheck : public OpsGradcheck, public ::testing::WithParamInterface<int> {};

TEST_P(AttentionGradcheck, GroupedHeads) {
  const int kv_heads = GetParam();
  const AttnShape s{2, 5, 4, kv_heads, 4};
  const int64_t N = int64_t(s.B) * s.T;
  auto qkv = rnd.uniform(N * s.ld()), R = rnd.uniform(N * s.H * s.D);
  std::vector<double> att(N * s.H * s.D), probs(size_t(s.B) * s.H * s.T * s.T);
  auto loss = [&] {
    be->attention_forward(view(att), view(probs), view(qkv), s);
    return dot(att, R);
  };
  loss();
  std::vector<double> dqkv(N * s.ld(), 7.0);
  be->attention_backward(view(dqkv), view(R), view(qkv), view(att), view(probs), s);
  EXPECT_LT(rel_error(dqkv, numeric_grad(qkv, loss)), kTol);
  // Causality: the first token's output is its own value vector.
  for (int d = 0; d < s.D; ++d) EXPECT_NEAR(att[d], qkv[s.v_col() + d], 1e-15);
}

INSTANTIATE_TEST_SUITE_P(KvHeads, AttentionGradcheck, ::testing::Values(1, 2, 4));

TEST_F(OpsGradcheck, SwiGlu) {
  const int n = 3, f = 5;
  auto gu = rnd.uniform(n * 2 * f, 3.0), R = rnd.uniform(n * f);
  std::vector<double> h(n * f);
  auto loss = [&] {
    be->swiglu_forward(view(h), view(gu), n, f);
    return dot(h, R);
  };
  std::vector<double> dgu(n * 2 * f, 7.0);
  be->swiglu_backward(view(dgu), view(R), view(gu), n, f);
  EXPECT_LT(rel_error(dgu, numeric_grad(gu, loss)), kTol);
}

TEST_F(OpsGradcheck, Residual) {
  auto a = rnd.uniform(10), b = rnd.uniform(10);
  std::vector<double> out(10);
  be->add(view(out), view(a), view(b));
  for (int i = 0; i < 10; ++i) EXPECT_EQ(out[i], a[i] + b[i]);
}

// Rows of ld = v + 3: the padding columns hold large values that must take no part in the
// softmax, and get a zero gradient.
TEST_F(OpsGradcheck, CrossEntropy) {
  const int n = 4, v = 7, ld = 10;
  std::vector<int32_t> tgt = {3, 0, 6, 3};
  Tensor targets{tgt.data(), DType::I32, n};
  auto logits = rnd.uniform(n * ld, 4.0);
  for (int i = 0; i < n; ++i)
    for (int j = v; j < ld; ++j) logits[i * ld + j] = 100.0;
  std::vector<double> losses(n);
  auto loss = [&] {
    be->cross_entropy_forward(view(losses), view(logits), targets, n, v, ld);
    double s = 0;
    for (double l : losses) s += l;
    return s / n;
  };
  const double loss0 = loss();
  EXPECT_LT(loss0, 10.0) << "the padding columns took part in the softmax";
  std::vector<double> dlogits(n * ld, 7.0);
  be->cross_entropy_backward(view(dlogits), view(logits), targets, n, v, ld, 1.0 / n);
  std::vector<double> numeric = numeric_grad(logits, loss);
  for (int i = 0; i < n; ++i)
    for (int j = v; j < ld; ++j) {
      EXPECT_EQ(dlogits[i * ld + j], 0.0) << "padding column " << j;
      numeric[i * ld + j] = 0.0;  // moving a padding logit changes nothing
    }
  EXPECT_LT(rel_error(dlogits, numeric), kTol);
  // In place (dlogits aliasing logits) gives the same gradient.
  std::vector<double> inplace = logits;
  be->cross_entropy_backward(view(inplace), view(inplace), targets, n, v, ld, 1.0 / n);
  EXPECT_EQ(inplace, dlogits);
  // The fused classifier: the same losses and gradient in one call, over the logits.
  std::vector<double> fused = logits, fused_losses(n);
  be->cross_entropy_fused(view(fused_losses), view(fused), targets, n, v, ld, 1.0 / n);
  EXPECT_EQ(fused, dlogits);
  loss();
  EXPECT_EQ(fused_losses, losses);
}

}  // namespace
}  // namespace tt::test
