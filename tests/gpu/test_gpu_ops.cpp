// Every CUDA operation, forward and backward, against the CPU reference computed in double,
// at awkward shapes, with fresh random inputs and poisoned outputs, in fp32 and bf16. Inputs
// are rounded to the tested type first, so the error measured is the kernel's own.
#include <algorithm>
#include <cmath>

#include "gpu_harness.h"
#include "ops/adamw.h"
#include "ops/attention.h"
#include "ops/attention_decode.h"
#include "ops/cross_entropy.h"
#include "ops/embedding.h"
#include "ops/residual.h"
#include "ops/rmsnorm.h"
#include "ops/rope.h"
#include "ops/swiglu.h"

namespace tt::test {
namespace {

class GpuOps : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override { REQUIRE_GPU(); }
  DType act() const { return GetParam(); }
  double tol() const { return act() == DType::F32 ? 1e-5 : 1e-2; }
  // Fresh random values, rounded to the tested type.
  std::vector<double> input(size_t n, double scale = 1.0) {
    std::vector<double> v = rnd.uniform(n, scale);
    for (double& x : v) x = act() == DType::BF16 ? bf16_to_float(float_to_bf16(float(x))) : float(x);
    return v;
  }
  Plan plan(int version = 1) const {
    Plan p = plan_for_version(version);
    p.amp = act() == DType::BF16;
    return p;
  }
  static ModelShape shape_for(int64_t n, int c, int f = 8) { return {1, int(n), c, 1, 1, 2, f, 2}; }
  Random rnd{uint64_t(::testing::UnitTest::GetInstance()->random_seed()) * 7919 + 17};
};

TEST_P(GpuOps, Linear) {
  for (auto [n, in, out] : {std::tuple{1, 32, 64}, {7, 64, 96}, {129, 512, 2048}, {33, 100, 7}}) {
    SCOPED_TRACE(testing::Message() << "n=" << n << " in=" << in << " out=" << out);
    GpuBackend be(plan(), shape_for(n, in));
    auto x = input(n * in), w = input(out * in), dy = input(n * out);
    // Forward into columns [3, 3 + out) of a wider matrix: the other columns must stay.
    const int ld = out + 5;
    std::vector<double> wide = input(size_t(n) * ld), y_ref = wide;
    ref::gemm(linear_gemm({}, ld, {}, in, {}, n, in, out), static_cast<double*>(nullptr), x.data(), w.data(),
              y_ref.data() + 3);
    DeviceBuffer X(act(), x), W(act(), w), DY(act(), dy), Y(act(), wide), DX(act(), int64_t(n) * in);
    be->matmul(linear_gemm(Y.t().slice(3, Y.t().numel - 3), ld, X, in, W, n, in, out));
    EXPECT_MATCHES(Y.get(), y_ref, tol());
    // Backward: dx and dW (fp32, a parameter gradient) overwritten.
    std::vector<double> dx_ref(size_t(n) * in), dw_ref(size_t(out) * in);
    ref::gemm(linear_dx_gemm({}, in, {}, out, {}, n, in, out, 0.0f), static_cast<double*>(nullptr), dy.data(),
              w.data(), dx_ref.data());
    ref::gemm(linear_dw_gemm({}, {}, out, {}, in, n, in, out), static_cast<double*>(nullptr), dy.data(), x.data(),
              dw_ref.data());
    DeviceBuffer DW(DType::F32, int64_t(out) * in);
    DX.poison(), DW.poison();
    be->matmul(linear_dx_gemm(DX, in, DY, out, W, n, in, out, 0.0f));
    be->matmul(linear_dw_gemm(DW, DY, out, X, in, n, in, out));
    EXPECT_MATCHES(DX.get(), dx_ref, tol());
    EXPECT_MATCHES(DW.get(), dw_ref, tol());
  }
}

// c = 300 takes the backward's scalar instantiation in two passes over the row. Tokens repeat
// (drawn from half the vocabulary), and a third of them are one token, so that one block adds
// a long run of rows. The backward adds to dwte in a fixed order: a second run from the same
// dwte gives the same bits.
TEST_P(GpuOps, Embedding) {
  for (auto [n, c, vocab] : {std::tuple{1, 32, 13}, {7, 64, 13}, {33, 300, 50}, {129, 512, 1000},
                             {2048, 512, 1000}, {4096, 768, 50257}, {16384, 768, 50304}}) {
    SCOPED_TRACE(testing::Message() << "n=" << n << " c=" << c << " vocab=" << vocab);
    GpuBackend be(plan(), shape_for(n, c));
    CounterRng r(rnd.next++, kStreamTest);
    std::vector<double> tok(n);
    std::vector<int32_t> tok_i(n);
    for (int i = 0; i < n; ++i) tok[i] = tok_i[i] = i % 3 == 1 ? vocab - 1 : int32_t(r.below(i, vocab / 2 + 1));
    auto wte = input(size_t(vocab) * c), dout = input(size_t(n) * c);
    std::vector<double> dwte0 = rnd.uniform(size_t(vocab) * c), out_ref(size_t(n) * c), dwte_ref = dwte0;
    ref::embedding_forward(out_ref.data(), tok_i.data(), wte.data(), n, c);
    ref::embedding_backward(dwte_ref.data(), dout.data(), tok_i.data(), n, c);
    DeviceBuffer TOK(DType::I32, tok), WTE(act(), wte), DOUT(act(), dout), OUT(act(), int64_t(n) * c),
        DWTE(DType::F32, dwte0);
    OUT.poison();
    be->embedding_forward(OUT, TOK, WTE, n, c);
    be->embedding_backward(DWTE, DOUT, TOK, n, c, vocab);
    EXPECT_MATCHES(OUT.get(), out_ref, tol());
    const std::vector<double> first = DWTE.get();
    EXPECT_MATCHES(first, dwte_ref, tol());
    DWTE.set(dwte0);
    be->embedding_backward(DWTE, DOUT, TOK, n, c, vocab);
    EXPECT_TRUE(DWTE.get() == first) << "two runs of the backward differ";
  }
}

// v1: the eager kernels; v2 runs them too; v3: one kernel each way (custom-rmsnorm), with
// 16-byte accesses where c allows (c = 1000 in bf16 takes the scalar instantiation), and a
// weight gradient that repeats bit for bit: computed by column blocks of the same kernel up to
// 1536 rows, and from 1537 rows as partial sums of row chunks added by a second kernel (with
// fewer warps per block for c = 2048).
TEST_P(GpuOps, RmsNorm) {
  for (int version : {1, 2, 3})
    for (auto [n, c] : {std::pair{1, 32}, {7, 64}, {129, 512}, {1000, 1000}, {33, 2048}, {1536, 512}, {1537, 512},
                        {2000, 1000}, {1600, 2048}}) {
      SCOPED_TRACE(testing::Message() << "v" << version << " n=" << n << " c=" << c);
      GpuBackend be(plan(version), shape_for(n, c));
      auto x = input(size_t(n) * c, 2.0), w = input(c), dout = input(size_t(n) * c);
      std::vector<double> out_ref(size_t(n) * c), rstd_ref(n), dx_ref(size_t(n) * c), dw_ref(c);
      ref::rmsnorm_forward(out_ref.data(), rstd_ref.data(), x.data(), w.data(), n, c, 1e-5);
      ref::rmsnorm_backward(dx_ref.data(), dw_ref.data(), dout.data(), x.data(), w.data(), rstd_ref.data(), n, c, false,
                            false);
      DeviceBuffer X(act(), x), W(act(), w), DOUT(act(), dout), OUT(act(), int64_t(n) * c), RSTD(DType::F32, n),
          DX(act(), int64_t(n) * c), DW(DType::F32, c), DW2(DType::F32, c);
      OUT.poison(), RSTD.poison(), DX.poison(), DW.poison(), DW2.poison();
      be->rmsnorm_forward(OUT, RSTD, X, W, n, c, 1e-5);
      EXPECT_MATCHES(OUT.get(), out_ref, tol());
      EXPECT_MATCHES(RSTD.get(), rstd_ref, act() == DType::F32 ? 1e-6 : 1e-5);
      be->rmsnorm_backward(DX, DW, DOUT, X, W, RSTD, n, c, false);
      EXPECT_MATCHES(DX.get(), dx_ref, tol());
      EXPECT_MATCHES(DW.get(), dw_ref, tol());
      be->rmsnorm_backward(DX, DW2, DOUT, X, W, RSTD, n, c, false);
      EXPECT_EQ(DW.get(), DW2.get()) << "the weight gradient differs between two identical runs";
      // Gradient accumulation: added to what dw holds, in fp32.
      be->rmsnorm_backward(DX, DW2, DOUT, X, W, RSTD, n, c, true);
      const std::vector<double> once = DW.get(), twice = DW2.get();
      for (int j = 0; j < c; ++j) ASSERT_EQ(twice[j], double(float(once[j]) + float(once[j]))) << j;
    }
}

// fused-residual-norm: the residual add and the norm in one kernel each way, against the double
// reference, and bit for bit against the unfused add and version 3's norm (so the fused and
// unfused models compute the same bits). Widths from 32 to 2048, the scalar path at 1000 in
// bf16, rows beyond 1536 where the weight gradient takes two stages.
TEST_P(GpuOps, ResidualRmsNorm) {
  for (auto [n, c] : {std::pair{1, 32}, {7, 64}, {129, 512}, {1000, 1000}, {33, 2048}, {1537, 768}, {7, 1024}}) {
    SCOPED_TRACE(testing::Message() << "n=" << n << " c=" << c);
    Plan p = plan(3);
    p.fused_residual_norm = true;
    GpuBackend be(p, shape_for(n, c));
    auto a = input(size_t(n) * c, 2.0), b = input(size_t(n) * c, 2.0), w = input(c), dout = input(size_t(n) * c),
         dres = input(size_t(n) * c);
    // The sum is rounded to the tested type, as the contract says (the residual stream is stored).
    std::vector<double> sum_ref(size_t(n) * c), out_ref(size_t(n) * c), rstd_ref(n), dres_ref = dres, dw_ref(c);
    for (size_t i = 0; i < sum_ref.size(); ++i) {
      const float v = float(a[i] + b[i]);
      sum_ref[i] = act() == DType::BF16 ? bf16_to_float(float_to_bf16(v)) : v;
    }
    ref::rmsnorm_forward(out_ref.data(), rstd_ref.data(), sum_ref.data(), w.data(), n, c, 1e-5);
    ref::rmsnorm_backward(dres_ref.data(), dw_ref.data(), dout.data(), sum_ref.data(), w.data(), rstd_ref.data(), n, c,
                          true, false);
    DeviceBuffer A(act(), a), B(act(), b), W(act(), w), DOUT(act(), dout), SUM(act(), int64_t(n) * c),
        OUT(act(), int64_t(n) * c), RSTD(DType::F32, n), DRES(act(), dres), DW(DType::F32, c);
    SUM.poison(), OUT.poison(), RSTD.poison(), DW.poison();
    be->add_rmsnorm_forward(SUM, OUT, RSTD, A, B, W, n, c, 1e-5);
    EXPECT_MATCHES(SUM.get(), sum_ref, act() == DType::F32 ? 1e-7 : 1e-6);
    EXPECT_MATCHES(OUT.get(), out_ref, tol());
    EXPECT_MATCHES(RSTD.get(), rstd_ref, act() == DType::F32 ? 1e-6 : 1e-5);
    be->rmsnorm_backward_add(DRES, DW, DOUT, SUM, W, RSTD, n, c, false);
    EXPECT_MATCHES(DRES.get(), dres_ref, tol());
    EXPECT_MATCHES(DW.get(), dw_ref, tol());
    // The unfused way, as version 3 runs it: add, norm; norm backward, add.
    DeviceBuffer SUM2(act(), int64_t(n) * c), OUT2(act(), int64_t(n) * c), RSTD2(DType::F32, n),
        DX(act(), int64_t(n) * c), DRES2(act(), dres), DW2(DType::F32, c);
    be->add(SUM2, A, B);
    be->rmsnorm_forward(OUT2, RSTD2, SUM2, W, n, c, 1e-5);
    be->rmsnorm_backward(DX, DW2, DOUT, SUM2, W, RSTD2, n, c, false);
    be->add(DRES2, DRES2, DX);
    EXPECT_TRUE(SUM.get() == SUM2.get() && OUT.get() == OUT2.get() && RSTD.get() == RSTD2.get())
        << "the fused forward differs from the add and the norm";
    EXPECT_TRUE(DRES.get() == DRES2.get() && DW.get() == DW2.get()) << "the fused backward differs from the norm and the add";
  }
}

// v1 and v2: one pair per thread, Q and K in two calls (as the model makes them); v3: 16 bytes
// per thread, or one pair where the heads are not 16-byte aligned (pad = 2).
TEST_P(GpuOps, Rope) {
  for (int version : {1, 2, 3})
    for (int T : {1, 7, 129})
      for (int D : {32, 64, 128})
        for (int pad : {0, 2}) {
          SCOPED_TRACE(testing::Message() << "v" << version << " T=" << T << " D=" << D << " pad=" << pad);
          const int B = 2, heads = 3, col = D + pad, ld = 5 * D + pad;  // rotate heads 1..3 of 5
          GpuBackend be(plan(version), shape_for(int64_t(B) * T, D));
          const std::vector<double> table = rope_table(T, D, 10000.0);
          const RopeShape s{int64_t(B) * T, T, heads, D, col, ld};
          auto x = input(size_t(B) * T * ld);
          std::vector<double> fwd_ref = x, bwd_ref = x, tab_f(table.begin(), table.end());
          for (double& v : tab_f) v = float(v);  // the GPU reads the table in fp32
          ref::rope(fwd_ref.data(), tab_f.data(), s, false);
          ref::rope(bwd_ref.data(), tab_f.data(), s, true);
          DeviceBuffer TAB(DType::F32, tab_f), X(act(), x), DX(act(), x);
          be->rope_forward(X, TAB, s);
          be->rope_backward(DX, TAB, s);
          EXPECT_MATCHES(X.get(), fwd_ref, tol());
          EXPECT_MATCHES(DX.get(), bwd_ref, tol());
        }
}

class GpuAttention : public GpuOps {};

// v1: materialized with a separate scale kernel; v2: fused scale+mask+softmax in fp32, cuDNN's
// flash attention in bf16 (materialized for a sequence of 1, which cuDNN does not take); v3: our
// flash attention with tensor cores in bf16, and in fp32 v2's way at these sizes, with our FMA
// flash attention called directly; our backwards must also repeat bit for bit.
// The batch-44 cases are grids large enough for two warpgroups per block in our bf16 kernels.
// Our bf16 backward splits long columns into chunks where the grid is too small for the GPU
// (ColumnSplit in flash_attention.cu; the choice depends on the SM count). On the H100 it splits
// in both kernels at T = 1000 (B = 2), with one-warpgroup dQ blocks, and in the batch-14 case
// with two-warpgroup dQ blocks.
TEST_P(GpuAttention, MatchesReference) {
  std::vector<AttnShape> shapes;
  for (int T : {1, 7, 129, 1000})
    for (int D : {32, 64, 128})
      for (int kv : {4, 2, 1}) shapes.push_back({2, T, 4, kv, D});
  for (int D : {32, 64, 128}) shapes.push_back({44, 300, 4, 2, D});
  shapes.push_back({14, 640, 4, 2, 64});
  for (int version : {1, 2, 3})
    for (const AttnShape& s : shapes) {
      const int T = s.T, D = s.D, kv = s.KVH;
      Plan p = plan(version);
      SCOPED_TRACE(testing::Message() << "v" << version << " B=" << s.B << " T=" << T << " D=" << D
                                      << " kv_heads=" << kv);
      const int64_t N = int64_t(s.B) * T;
      GpuBackend be(p, {s.B, T, s.H * D, s.H, kv, D, 8, 2});
      auto qkv = input(size_t(N * s.ld())), datt = input(size_t(N) * s.H * D);
      std::vector<double> att_ref(size_t(N) * s.H * D), probs(size_t(s.B) * s.H * T * T), dqkv_ref(qkv.size());
      ref::attention_forward(att_ref.data(), probs.data(), qkv.data(), s);
      ref::attention_backward(dqkv_ref.data(), datt.data(), qkv.data(), probs.data(), s);
      const TensorSpec saved = be->attention_saved(s);
      DeviceBuffer QKV(act(), qkv), DATT(act(), datt), ATT(act(), N * s.H * D), SAVED(saved.dtype, saved.numel),
          DQKV(act(), N * s.ld());
      ATT.poison(), SAVED.poison(), DQKV.poison();
      be->attention_forward(ATT, SAVED, QKV, s);
      be->attention_backward(DQKV, DATT, QKV, ATT, SAVED, s);
      if (version == 2 && p.amp && T > 1)
        EXPECT_NE(be->attention_kind().find("cuDNN"), std::string::npos) << be->attention_kind();
      if (version == 3 && p.amp)
        EXPECT_EQ(be->attention_kind().rfind("our flash attention (", 0), 0u) << be->attention_kind();
      EXPECT_MATCHES(ATT.get(), att_ref, tol());
      const std::vector<double> dqkv = DQKV.get();
      EXPECT_MATCHES(dqkv, dqkv_ref, act() == DType::F32 ? 1e-5 : 2e-2);
      if (version == 3 && p.amp) {
        DQKV.poison();
        be->attention_backward(DQKV, DATT, QKV, ATT, SAVED, s);
        EXPECT_TRUE(DQKV.get() == dqkv) << "a second backward differs from the first";
      }
      if (version != 3 || p.amp) continue;
      // In fp32 the backend keeps the materialized path at these sizes (it is faster there): our
      // FMA flash attention, called directly, against the same reference, twice.
      EXPECT_NE(be->attention_kind().find("materialized"), std::string::npos) << be->attention_kind();
      DeviceBuffer LSE(DType::F32, int64_t(s.B) * s.H * T),
          SCRATCH(DType::F32, cuda::flash_attention_scratch_numel(s, DType::F32));
      ATT.poison(), LSE.poison(), DQKV.poison();
      cuda::flash_attention_forward(ATT, LSE, QKV, s, nullptr, Stream{});
      cuda::flash_attention_backward(DQKV, DATT, QKV, ATT, LSE, s, nullptr, SCRATCH, Stream{});
      EXPECT_MATCHES(ATT.get(), att_ref, tol());
      const std::vector<double> flash_dqkv = DQKV.get();
      EXPECT_MATCHES(flash_dqkv, dqkv_ref, 1e-5);
      DQKV.poison();
      cuda::flash_attention_backward(DQKV, DATT, QKV, ATT, LSE, s, nullptr, SCRATCH, Stream{});
      EXPECT_TRUE(DQKV.get() == flash_dqkv) << "a second backward differs from the first";
    }
}

// rope-in-attention: our bf16 flash attention rotating Q and K as it loads them, and turning dQ
// and dK back, against RoPE then attention in double (shapes whose backward splits columns too).
TEST_P(GpuAttention, RopeInsideMatchesRopeThenAttention) {
  if (act() != DType::BF16) GTEST_SKIP() << "rope-in-attention is in the bf16 kernels";
  for (const AttnShape& s : {AttnShape{2, 7, 4, 4, 32}, AttnShape{2, 129, 4, 2, 64}, AttnShape{2, 1000, 4, 1, 128},
                             AttnShape{14, 640, 4, 2, 64}, AttnShape{44, 300, 4, 2, 32}}) {
    SCOPED_TRACE(testing::Message() << "B=" << s.B << " T=" << s.T << " D=" << s.D << " kv_heads=" << s.KVH);
    const int64_t N = int64_t(s.B) * s.T, ld = s.ld();
    const std::vector<double> table = rope_table(s.T, s.D, 10000.0);
    const std::vector<RopeShape> qk = {{N, s.T, s.H, s.D, 0, ld}, {N, s.T, s.KVH, s.D, s.k_col(), ld}};
    auto qkv = input(size_t(N * ld)), datt = input(size_t(N) * s.H * s.D);
    std::vector<double> rotated = qkv, att_ref(size_t(N) * s.H * s.D), probs(size_t(s.B) * s.H * s.T * s.T),
                        dqkv_ref(qkv.size());
    for (const RopeShape& r : qk) ref::rope(rotated.data(), table.data(), r, false);
    ref::attention_forward(att_ref.data(), probs.data(), rotated.data(), s);
    ref::attention_backward(dqkv_ref.data(), datt.data(), rotated.data(), probs.data(), s);
    for (const RopeShape& r : qk) ref::rope(dqkv_ref.data(), table.data(), r, true);  // back to unrotated q, k
    DeviceBuffer QKV(act(), qkv), DATT(act(), datt), ATT(act(), N * s.H * s.D), DQKV(act(), N * ld),
        LSE(DType::F32, int64_t(s.B) * s.H * s.T), ROPE(DType::F32, table),
        SCRATCH(DType::F32, cuda::flash_attention_scratch_numel(s, DType::BF16));
    ATT.poison(), DQKV.poison();
    cuda::flash_attention_forward(ATT, LSE, QKV, s, ROPE.t().data<float>(), Stream{});
    cuda::flash_attention_backward(DQKV, DATT, QKV, ATT, LSE, s, ROPE.t().data<float>(), SCRATCH, Stream{});
    EXPECT_MATCHES(ATT.get(), att_ref, tol());
    EXPECT_MATCHES(DQKV.get(), dqkv_ref, 2e-2);
  }
}

// v1: unfused; gate-up-fusion: one scalar kernel each way; custom-swiglu alone and v3: the
// vectorized kernels (f = 100 in bf16 and f = 98 take their scalar instantiation).
TEST_P(GpuOps, SwiGlu) {
  Plan gate_up = plan(1), custom = plan(1);
  gate_up.gate_up_fusion = true;
  custom.custom_swiglu = true;
  const std::pair<const char*, Plan> plans[] = {
      {"v1", plan(1)}, {"gate-up-fusion", gate_up}, {"custom-swiglu", custom}, {"v2", plan(2)}, {"v3", plan(3)}};
  for (const auto& [name, p] : plans)
    for (auto [n, f] : {std::pair{1, 8}, {7, 100}, {5, 98}, {33, 1408}, {129, 2048}}) {
      SCOPED_TRACE(testing::Message() << name << " n=" << n << " f=" << f);
      GpuBackend be(p, shape_for(n, 8, f));
      auto gu = input(size_t(n) * 2 * f, 4.0), dh = input(size_t(n) * f);
      std::vector<double> h_ref(size_t(n) * f), dgu_ref(gu.size());
      ref::swiglu_forward(h_ref.data(), gu.data(), n, f);
      ref::swiglu_backward(dgu_ref.data(), dh.data(), gu.data(), n, f);
      DeviceBuffer GU(act(), gu), DH(act(), dh), H(act(), int64_t(n) * f), DGU(act(), int64_t(gu.size()));
      H.poison(), DGU.poison();
      be->swiglu_forward(H, GU, n, f);
      be->swiglu_backward(DGU, DH, GU, n, f);
      EXPECT_MATCHES(H.get(), h_ref, tol());
      EXPECT_MATCHES(DGU.get(), dgu_ref, tol());
    }
}

// Generation's attention over key/value caches: 3 sequences, grouped heads, a cache filled to
// several lengths of its capacity (the positions after len hold poison-free garbage it must not read).
TEST_P(GpuOps, AttentionDecode) {
  for (auto [len, cap, d] : {std::tuple{1, 5, 32}, {37, 50, 64}, {300, 300, 128}}) {
    SCOPED_TRACE(testing::Message() << "len=" << len << " cap=" << cap << " d=" << d);
    const AttnShape s{3, cap, 4, 2, d};
    const int64_t kv = int64_t(s.KVH) * d, hd = int64_t(s.H) * d;
    GpuBackend be(plan(1), shape_for(8, 8));
    auto q = input(size_t(s.B * hd)), k = input(size_t(s.B * cap * kv)), v = input(size_t(s.B * cap * kv));
    std::vector<double> out_ref(size_t(s.B * hd));
    ref::attention_decode(out_ref.data(), q.data(), k.data(), v.data(), len, kv, s);
    DeviceBuffer Q(act(), q), K(act(), k), V(act(), v), O(act(), s.B * hd);
    O.poison();
    be->attention_decode(O, Q, K, V, len, kv, s);
    EXPECT_MATCHES(O.get(), out_ref, tol());
  }
}

// n = 1 << 20 takes the 16-byte instantiation, the odd sizes the scalar one.
TEST_P(GpuOps, ResidualAdd) {
  for (int n : {1, 7, 129, 1 << 20}) {
    GpuBackend be(plan(), shape_for(1, 8));
    auto a = input(n), b = input(n);
    std::vector<double> ref(n);
    ref::add(ref.data(), a.data(), b.data(), n);
    DeviceBuffer A(act(), a), B(act(), b), OUT(act(), n);
    OUT.poison();
    be->add(OUT, A, B);
    be->add(A, A, B);  // in place
    EXPECT_MATCHES(OUT.get(), ref, tol());
    EXPECT_MATCHES(A.get(), ref, tol());
  }
}

// The loss and the logits' gradient three ways: the forward and backward kernels of versions 1
// to 3 (the backward in place, as the model runs it) and the fused classifier's one kernel, at
// the vocabularies of the workshop, LLaMA and GPT-2, in rows padded to a multiple of 128 as
// the model lays them out (and unpadded, v = 7, for the scalar path). The padding columns hold
// huge values that must take no part, and must come back zero.
TEST_P(GpuOps, CrossEntropy) {
  for (int v : {7, 1000, 32000, 50257})
    for (int n : {1, 7, 129, 4096})
      for (int64_t ld : {int64_t(v), (int64_t(v) + 127) / 128 * 128}) {
        if (ld == v && v % 128 == 0 && v != 7) continue;  // the same layout twice
        SCOPED_TRACE(testing::Message() << "n=" << n << " v=" << v << " ld=" << ld);
        GpuBackend be(plan(), shape_for(n, 8));
        std::vector<double> logits = input(size_t(n) * ld, 5.0);
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = v; j < ld; ++j) logits[size_t(i * ld + j)] = 1e4;
        CounterRng r(rnd.next++, kStreamTest);
        std::vector<double> tgt(n);
        std::vector<int32_t> tgt_i(n);
        for (int i = 0; i < n; ++i) tgt[i] = tgt_i[i] = int32_t(r.below(i, v));
        std::vector<double> loss_ref(n), d_ref(logits.size());
        ref::cross_entropy_forward(loss_ref.data(), logits.data(), tgt_i.data(), n, v, ld);
        ref::cross_entropy_backward(d_ref.data(), logits.data(), tgt_i.data(), n, v, ld, 1.0 / n);
        double max_logit = 0;
        for (int64_t i = 0; i < n; ++i)
          for (int j = 0; j < v; ++j) max_logit = std::max(max_logit, std::fabs(logits[size_t(i * ld + j)]));
        // loss = logsumexp - logit[target] cancels when the target dominates, so bound the
        // error by fp32's resolution at the logits' magnitude rather than relative to the loss.
        auto check_loss = [&](const std::vector<double>& loss) {
          for (int i = 0; i < n; ++i) ASSERT_NEAR(loss[i], loss_ref[i], 1e-6 * (1 + max_logit)) << "row " << i;
        };
        // The gradient (softmax - onehot) / n cancels at the target the same way: p - 1 is off by
        // up to fp32's resolution near 1 (2^-24) / n however small the gradient is (n = 1, v = 2,
        // a dominant target: a gradient of 1e-5 with relative error 6e-5). Hence a floor of twice
        // that per row under the relative bound. The padding columns must be exactly zero.
        auto check_grad = [&](const std::vector<double>& d) {
          ASSERT_TRUE(all_finite(d)) << "the logits' gradient has unwritten (NaN) elements";
          double err = 0, norm = 0;
          for (size_t i = 0; i < d.size(); ++i) {
            if (int64_t(i % size_t(ld)) >= v) ASSERT_EQ(d[i], 0.0) << "padding element " << i;
            err += (d[i] - d_ref[i]) * (d[i] - d_ref[i]), norm += d_ref[i] * d_ref[i];
          }
          EXPECT_LE(std::sqrt(err), tol() * std::sqrt(norm) + std::sqrt(double(n)) * 0x1p-23 / n);
        };
        DeviceBuffer L(act(), logits), TGT(DType::I32, tgt), LOSS(DType::F32, n);
        LOSS.poison();
        be->cross_entropy_forward(LOSS, L, TGT, n, v, ld);
        be->cross_entropy_backward(L, L, TGT, n, v, ld, 1.0 / n);
        check_loss(LOSS.get());
        check_grad(L.get());
        L.set(logits);
        LOSS.poison();
        be->cross_entropy_fused(LOSS, L, TGT, n, v, ld, 1.0 / n);
        check_loss(LOSS.get());
        check_grad(L.get());
      }
}

TEST_P(GpuOps, AdamW) {
  const int n = 100003;
  GpuBackend be(plan(), shape_for(1, 8));
  auto p = rnd.uniform(n), g = rnd.uniform(n), m = rnd.uniform(n, 0.1), v = rnd.uniform(n, 0.01);
  for (double& x : v) x = std::fabs(x);
  AdamWStep s;
  s.lr = 1e-3, s.t = 7;
  // Plain, exempt from decay, and clipped (the norm of g is about 183: clipped to 1).
  for (const auto& [decay, clip] : {std::pair{true, false}, {false, false}, {true, true}}) {
    SCOPED_TRACE(testing::Message() << "decay " << decay << " clip " << clip);
    s.max_grad_norm = clip ? 1.0 : 0.0;
    std::vector<double> p_ref = p, m_ref = m, v_ref = v, sumsq_ref = {0.0};
    ref::sum_squares(sumsq_ref.data(), g.data(), n, false);
    ref::adamw(p_ref.data(), g.data(), m_ref.data(), v_ref.data(), n, s, decay, clip ? sumsq_ref.data() : nullptr);
    DeviceBuffer P(DType::F32, p), G(DType::F32, g), M(DType::F32, m), V(DType::F32, v), PA(DType::BF16, n),
        SUMSQ(DType::F32, 1);
    PA.poison(), SUMSQ.poison();
    be->set_adamw_step(s);
    if (clip) be->sum_squares(SUMSQ, G, false);
    be->adamw(P, G, M, V, act() == DType::BF16 ? PA.t() : Tensor{}, decay, clip ? SUMSQ.t() : Tensor{});
    EXPECT_MATCHES(P.get(), p_ref, 1e-6);
    EXPECT_MATCHES(M.get(), m_ref, 1e-6);
    EXPECT_MATCHES(V.get(), v_ref, 1e-6);
    if (act() == DType::BF16) {  // the bf16 copy is the new fp32 value, rounded
      const std::vector<double> pf = P.get(), pa = PA.get();
      for (int i = 0; i < n; ++i) ASSERT_EQ(pa[i], bf16_to_float(float_to_bf16(float(pf[i])))) << i;
    }
  }
}

// The gradients' sum of squares (clipping): against the double reference at sizes below one
// block, of one partial sum per block and beyond the grid, accumulated over two calls, and the
// same bits twice.
TEST_P(GpuOps, SumSquares) {
  GpuBackend be(plan(), shape_for(1, 8));
  for (int64_t n : {int64_t(1), int64_t(1000), int64_t(256 * 512), int64_t(3000017)}) {
    SCOPED_TRACE(testing::Message() << "n=" << n);
    auto g = rnd.uniform(size_t(n));
    std::vector<double> ref_sum = {0.0};
    ref::sum_squares(ref_sum.data(), g.data(), n, false);
    DeviceBuffer G(DType::F32, g), S(DType::F32, 1), S2(DType::F32, 1);
    S.poison(), S2.poison();
    be->sum_squares(S, G, false);
    EXPECT_NEAR(S.get()[0], ref_sum[0], 1e-6 * ref_sum[0]);
    be->sum_squares(S, G, true);
    EXPECT_NEAR(S.get()[0], 2 * ref_sum[0], 2e-6 * ref_sum[0]);
    be->sum_squares(S2, G, false);
    be->sum_squares(S2, G, true);
    EXPECT_EQ(S.get(), S2.get()) << "two identical sums differ";
  }
}

INSTANTIATE_TEST_SUITE_P(Types, GpuOps, ::testing::Values(DType::F32, DType::BF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });
INSTANTIATE_TEST_SUITE_P(Types, GpuAttention, ::testing::Values(DType::F32, DType::BF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace tt::test
