// The CUDA operations that are no op case of `tiny_llama kernels` (those are in
// test_gpu_op_cases.cpp): the embedding, generation's attention, the residual add alone, AdamW,
// the gradients' sum of squares, our flash attention with RoPE inside and its backward's other
// forms (dQ made by the dK/dV kernel, one block a sequence and query head), and a layer's weight
// gradients in one launch (against cuBLAS's bytes), called directly; each
// against the CPU reference computed in double, at awkward shapes, with fresh random inputs and
// poisoned outputs, in fp32 and bf16 (the attention's forms, bf16-only kernels, in bf16). Inputs
// are rounded to the tested type first, so the error measured is the kernel's own.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>

#include "gpu_harness.h"
#include "ops/adamw.h"
#include "ops/attention.h"
#include "ops/attention_decode.h"
#include "ops/embedding.h"
#include "ops/gated_product.h"
#include "ops/residual.h"
#include "ops/rope.h"
#include "ops/rope_product.h"
#include "ops/swiglu.h"
#include "ops/weight_gradients.h"

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
  Plan plan() const {
    Plan p = plan_for_version(1);
    p.amp = act() == DType::BF16;
    return p;
  }
  static ModelShape shape_for(int64_t n, int c) { return {1, int(n), c, 1, 1, 2, 8, 2}; }
  Random rnd{uint64_t(::testing::UnitTest::GetInstance()->random_seed()) * 7919 + 17};
};

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

// Our flash attention's bf16-only forms (RoPE inside, the fused and the one-block backward):
// instantiated for bf16 alone.
class GpuAttention : public GpuOps {
 protected:
  void expect_like_two_kernels(const AttnShape& s, bool fused, bool one_block, bool kv_bits);
};

// A backward that makes dQ its own way against the two kernels: dQ, summed in another order,
// within a bf16 rounding of theirs; dK and dV their bits where `kv_bits` (the dK/dV kernel's steps
// in its order, delta computed alike), else within a bf16 rounding; and a second run repeats every
// bit, whatever the order the blocks ran in.
void GpuAttention::expect_like_two_kernels(const AttnShape& s, bool fused, bool one_block, bool kv_bits) {
  const DType act = GpuOps::act();
  SCOPED_TRACE(testing::Message() << "B=" << s.B << " T=" << s.T << " H=" << s.H << " D=" << s.D
                                  << " kv_heads=" << s.KVH);
  const int64_t N = int64_t(s.B) * s.T, ld = s.ld();
  DeviceBuffer QKV(act, input(size_t(N * ld))), DATT(act, input(size_t(N) * s.H * s.D)), ATT(act, N * s.H * s.D),
      LSE(DType::F32, int64_t(s.B) * s.H * s.T), SCRATCH(DType::F32, cuda::flash_attention_scratch_numel(s, DType::BF16, true));
  cuda::flash_attention_forward(ATT, LSE, QKV, s, nullptr, Stream{});
  std::vector<std::vector<double>> runs;
  for (bool ours : {false, true, true}) {
    DeviceBuffer DQKV(act, N * ld);
    DQKV.poison();
    cuda::flash_attention_backward(DQKV, DATT, QKV, ATT, LSE, s, nullptr, SCRATCH, ours && fused, ours && one_block,
                                   Stream{});
    runs.push_back(DQKV.get());
  }
  std::vector<double> q_two, q_ours, kv_two, kv_ours;
  for (int64_t i = 0; i < N * ld; ++i) {
    const bool q = i % ld < int64_t(s.H) * s.D;
    (q ? q_two : kv_two).push_back(runs[0][size_t(i)]);
    (q ? q_ours : kv_ours).push_back(runs[1][size_t(i)]);
  }
  EXPECT_MATCHES(q_ours, q_two, 1e-2);
  if (kv_bits)
    EXPECT_TRUE(kv_ours == kv_two) << "dK and dV differ from the two kernels'";
  else
    EXPECT_MATCHES(kv_ours, kv_two, 1e-2);
  EXPECT_TRUE(runs[2] == runs[1]) << "a second backward differs from the first";
}

// rope-in-attention: our bf16 flash attention rotating Q and K as it loads them, and turning dQ
// and dK back, against RoPE then attention in double (shapes whose backward splits columns too).
// And where the one-block backward fits, RoPE applied before the attention (a rotated qkv) and its
// backward made by the attention's kernel: the same reference.
TEST_P(GpuAttention, RopeInsideMatchesRopeThenAttention) {
  for (const AttnShape& s : {AttnShape{2, 7, 4, 4, 32}, AttnShape{2, 129, 4, 2, 64}, AttnShape{2, 1000, 4, 1, 128},
                             AttnShape{14, 640, 4, 2, 64}, AttnShape{44, 300, 4, 2, 32}, AttnShape{96, 250, 4, 2, 64},
                             AttnShape{3, 100, 4, 2, 64}, AttnShape{8, 128, 8, 4, 64}}) {
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
        SCRATCH(DType::F32, cuda::flash_attention_scratch_numel(s, DType::BF16, true));
    ATT.poison();
    cuda::flash_attention_forward(ATT, LSE, QKV, s, ROPE.t().data<float>(), Stream{});
    EXPECT_MATCHES(ATT.get(), att_ref, tol());
    // The two kernels, dQ made by the dK/dV one, and one block a (sequence, query head), where the
    // shape allows each.
    for (int kind = 0; kind < 3; ++kind) {
      SCOPED_TRACE(kind == 0 ? "two kernels" : kind == 1 ? "fused backward" : "one block");
      DQKV.poison();
      cuda::flash_attention_backward(DQKV, DATT, QKV, ATT, LSE, s, ROPE.t().data<float>(), SCRATCH, kind == 1,
                                     kind == 2, Stream{});
      EXPECT_MATCHES(DQKV.get(), dqkv_ref, 2e-2);
    }
    if (!cuda::flash_attention_one_block_misfit(s).empty()) continue;
    SCOPED_TRACE("one block, RoPE applied before");
    DeviceBuffer ROTATED(act(), rotated);
    cuda::flash_attention_forward(ATT, LSE, ROTATED, s, nullptr, Stream{});
    std::vector<std::vector<double>> runs;
    for (int run = 0; run < 2; ++run) {
      DQKV.poison();
      cuda::flash_attention_backward(DQKV, DATT, ROTATED, ATT, LSE, s, ROPE.t().data<float>(), SCRATCH, false, true,
                                     Stream{}, true);
      runs.push_back(DQKV.get());
    }
    EXPECT_MATCHES(runs[0], dqkv_ref, 2e-2);
    EXPECT_TRUE(runs[1] == runs[0]) << "a second backward differs from the first";
  }
}

// fused-attention-backward, at shapes with no split column.
TEST_P(GpuAttention, FusedBackwardKeepsDkDvAndRepeatsItsBits) {
  for (const AttnShape& s : {AttnShape{96, 250, 4, 2, 32}, AttnShape{64, 512, 8, 2, 64}, AttnShape{16, 1024, 12, 12, 64}}) {
    ASSERT_TRUE(cuda::flash_attention_fused_backward(s, true));
    expect_like_two_kernels(s, true, false, true);
  }
}

// attention-backward-in-one-block: the default shape, a partial second key tile, one key tile,
// one token, and groups (clusters) of 1 to 8 query heads. dK and dV are summed over the group in
// another order than the dK/dV kernel's.
TEST_P(GpuAttention, OneBlockBackwardMatchesTheTwoKernelsAndRepeatsItsBits) {
  for (const AttnShape& s : {AttnShape{8, 128, 8, 4, 64}, AttnShape{5, 100, 8, 2, 64}, AttnShape{3, 64, 4, 1, 64},
                             AttnShape{2, 1, 4, 4, 64}, AttnShape{4, 33, 6, 1, 64}, AttnShape{2, 128, 8, 1, 64}}) {
    ASSERT_EQ(cuda::flash_attention_one_block_misfit(s), "");
    expect_like_two_kernels(s, false, true, false);
  }
  EXPECT_EQ(cuda::flash_attention_one_block_misfit(AttnShape{1, 129, 4, 2, 64}), "sequences of 129, more than 128");
  EXPECT_EQ(cuda::flash_attention_one_block_misfit(AttnShape{1, 128, 4, 2, 128}), "head size 128, not 64");
  EXPECT_EQ(cuda::flash_attention_one_block_misfit(AttnShape{1, 128, 16, 1, 64}),
            "16 query heads a kv head, more than 8");
}

// Generation's attention over key/value caches: 3 sequences, grouped heads, a cache filled to
// several lengths of its capacity (the positions after len hold poison-free garbage it must not read).
TEST_P(GpuOps, AttentionDecode) {
  for (auto [len, cap, d] : {std::tuple{1, 5, 32}, {37, 50, 64}, {300, 300, 128}}) {
    SCOPED_TRACE(testing::Message() << "len=" << len << " cap=" << cap << " d=" << d);
    const AttnShape s{3, cap, 4, 2, d};
    const int64_t kv = int64_t(s.KVH) * d, hd = int64_t(s.H) * d;
    GpuBackend be(plan(), shape_for(8, 8));
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

// grouped-weight-gradients: a layer's four weight gradients (linear_dw_gemm's form, bf16 into
// fp32) in one launch of our kernel give the bytes of cublasGemmEx (as v4 calls it, no
// workspace), written (beta 0) and added to (beta 1, a later micro-batch), at the default
// model's widths (1024 tokens, 2048: 8 x 256, and 4096: 8 x 512; tiles of 256 rows, and of 128
// from 2048 tokens beside a lane's other work) and at others the kernel takes (tiles of 128 rows
// where an output is not a multiple of 256); with the dout of
// each a column slice of a wider matrix where the model's are. Shapes it does not take are refused
// by weight_gradients_misfit, which says why: a width not a multiple of 128, more than 2048 tokens
// with tiles of 128 rows, more tiles than two waves, an fp32 operand.
TEST(GpuWeightGradients, OneLaunchGivesCublasBytes) {
  REQUIRE_GPU();
  Random rnd{uint64_t(::testing::UnitTest::GetInstance()->random_seed()) * 31 + 5};
  cublasHandle_t handle = nullptr;
  ASSERT_EQ(cublasCreate(&handle), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasSetWorkspace(handle, nullptr, 0), CUBLAS_STATUS_SUCCESS);
  const cuda::Blas cublas{handle, false, Stream{}};
  int sms = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
  struct Product {
    int in, out, ld_dout, col;  // dout: columns col .. col + out of a [T, ld_dout] matrix
  };
  struct Case {
    int tokens;
    std::vector<Product> products;
  };
  const Case cases[] = {
      {1024, {{2048, 512, 512, 0}, {512, 4096, 4096, 0}, {512, 512, 512, 0}, {512, 1024, 1024, 0}}},  // the default layer
      {2048, {{2048, 512, 512, 0}, {512, 4096, 4096, 0}, {512, 512, 512, 0}, {512, 1024, 1024, 0}}},  // at 8 x 256
      {4096, {{2048, 512, 512, 0}, {512, 4096, 4096, 0}, {512, 512, 512, 0}, {512, 1024, 1024, 0}}},  // at 8 x 512
      {512, {{256, 384, 640, 128}, {384, 128, 128, 0}}},
      {64, {{128, 128, 256, 128}}},
  };
  for (const Case& k : cases)
    for (float beta : {0.0f, 1.0f}) {
      SCOPED_TRACE(testing::Message() << k.tokens << " tokens, beta " << beta);
      std::vector<std::unique_ptr<DeviceBuffer>> bufs;
      std::vector<Gemm> gemms;
      std::vector<std::vector<double>> start;
      for (const Product& p : k.products) {
        // (pointers to the buffers themselves: bufs grows)
        DeviceBuffer* dout =
            bufs.emplace_back(new DeviceBuffer(DType::BF16, rnd.uniform(size_t(k.tokens) * p.ld_dout, 0.01))).get();
        DeviceBuffer* x = bufs.emplace_back(new DeviceBuffer(DType::BF16, rnd.uniform(size_t(k.tokens) * p.in))).get();
        start.push_back(rnd.uniform(size_t(p.out) * p.in));
        DeviceBuffer* dw = bufs.emplace_back(new DeviceBuffer(DType::F32, start.back())).get();
        Gemm g = linear_dw_gemm(*dw, dout->t().slice(p.col, dout->t().numel - p.col), p.ld_dout, *x, p.in, k.tokens,
                                p.in, p.out);
        g.beta = beta;
        gemms.push_back(g);
      }
      ASSERT_EQ(cuda::weight_gradients_misfit(gemms, sms), "");
      std::vector<std::vector<double>> expected;
      for (size_t i = 0; i < gemms.size(); ++i) {
        cuda::gemm(cublas, gemms[i]);
        expected.push_back(bufs[3 * i + 2]->get());
      }
      for (bool beside : {false, true}) {  // beside a lane's other work: other tiles from 2048 tokens
        for (size_t i = 0; i < gemms.size(); ++i) bufs[3 * i + 2]->set(start[i]);
        cuda::weight_gradients(gemms, Stream{}, beside);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        for (size_t i = 0; i < gemms.size(); ++i)
          EXPECT_TRUE(bufs[3 * i + 2]->get() == expected[i]) << "product " << i << (beside ? " beside" : "");
      }
    }
  auto refused = [&](int tokens, int in, int out, DType x_type) {
    DeviceBuffer dout(DType::BF16, int64_t(tokens) * out), x(x_type, int64_t(tokens) * in), dw(DType::F32, int64_t(out) * in);
    return cuda::weight_gradients_misfit({linear_dw_gemm(dw, dout, out, x, in, tokens, in, out)}, sms);
  };
  EXPECT_EQ(refused(1024, 512, 200, DType::BF16), "a product of 200 x 512 x 1024 (multiples of 128, 128 and 64, the same tokens for all)");
  EXPECT_EQ(refused(4096, 512, 384, DType::BF16), "4096 tokens, more than 2048 for outputs not a multiple of 256");
  EXPECT_EQ(refused(1024, 512, 512, DType::F32), "operands not bf16 into fp32");
  EXPECT_EQ(refused(1024, 4096, 4096, DType::BF16), "1024 tiles, more than two waves of " + std::to_string(sms) + " SMs");
  EXPECT_EQ(refused(0, 512, 512, DType::BF16), "an empty product of 512 x 512 x 0");
  cublasDestroy(handle);
}

// swiglu-in-gate-up and swiglu-in-down-gradient: our gate/up product with SwiGLU in its epilogue,
// and our product for down's input gradient with SwiGLU's backward in its, give the bytes of
// cublasGemmEx's product (as v4 calls it, no workspace) and of the SwiGLU kernel after it, at the
// default model's shape (1024 tokens) and a smaller one; shapes they do not take, or where they
// do not pay, are refused, saying why.
TEST(GpuGatedProduct, GivesCublasAndSwigluBytes) {
  REQUIRE_GPU();
  Random rnd{uint64_t(::testing::UnitTest::GetInstance()->random_seed()) * 41 + 3};
  cublasHandle_t handle = nullptr;
  ASSERT_EQ(cublasCreate(&handle), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasSetWorkspace(handle, nullptr, 0), CUBLAS_STATUS_SUCCESS);
  const cuda::Blas cublas{handle, false, Stream{}};
  const int shapes[][3] = {{1024, 512, 2048}, {256, 192, 384}};  // tokens, C, F
  for (const auto& [n, c, f] : shapes) {
    SCOPED_TRACE(testing::Message() << n << " tokens, C " << c << ", F " << f);
    DeviceBuffer x(DType::BF16, rnd.uniform(size_t(n) * c)), w(DType::BF16, rnd.uniform(size_t(2 * f) * c, 0.1));
    DeviceBuffer gateup(DType::BF16, size_t(n) * 2 * f), h(DType::BF16, size_t(n) * f);
    DeviceBuffer gateup2(DType::BF16, size_t(n) * 2 * f), h2(DType::BF16, size_t(n) * f);
    gateup2.poison(), h2.poison();
    cuda::gemm(cublas, linear_gemm(gateup, 2 * f, x, c, w, n, c, 2 * f));
    cuda::swiglu_forward(h, gateup, n, f, cuda::SwiGluKernels::Vectorized, Tensor{}, Stream{});
    const Gemm ours = linear_gemm(gateup2, 2 * f, x, c, w, n, c, 2 * f);
    ASSERT_EQ(cuda::gated_product_misfit(ours, f), "");
    cuda::gated_product(ours, h2, f, Stream{});
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<double> gu = gateup.get(), gu2 = gateup2.get(), hv = h.get(), hv2 = h2.get();
    size_t differ = 0;
    for (size_t i = 0; i < gu.size(); ++i) differ += gu[i] != gu2[i];
    EXPECT_EQ(differ, 0u) << "of " << gu.size() << " gateup elements; first: " << gu[0] << " against " << gu2[0];
    differ = 0;
    for (size_t i = 0; i < hv.size(); ++i) differ += hv[i] != hv2[i];
    EXPECT_EQ(differ, 0u) << "of " << hv.size() << " h elements";
    // The backward: dh = dy W_down, then dgateup, from the gateup above.
    DeviceBuffer dy(DType::BF16, rnd.uniform(size_t(n) * c, 0.01)), wd(DType::BF16, rnd.uniform(size_t(c) * f, 0.1));
    DeviceBuffer dh(DType::BF16, size_t(n) * f), dgu(DType::BF16, size_t(n) * 2 * f), dgu2(DType::BF16, size_t(n) * 2 * f);
    dgu2.poison();
    const Gemm down_dx = linear_dx_gemm(dh, f, dy, c, wd, n, f, c, 0.0f);
    cuda::gemm(cublas, down_dx);
    cuda::swiglu_backward(dgu, dh, gateup, n, f, cuda::SwiGluKernels::Vectorized, Tensor{}, Stream{});
    ASSERT_EQ(cuda::swiglu_gradient_product_misfit(down_dx, f), "");
    dh.poison();
    cuda::swiglu_gradient_product(down_dx, dgu2, gateup, f, Stream{});
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<double> d1 = dgu.get(), d2 = dgu2.get();
    differ = 0;
    for (size_t i = 0; i < d1.size(); ++i) differ += d1[i] != d2[i];
    EXPECT_EQ(differ, 0u) << "of " << d1.size() << " dgateup elements";
  }
  DeviceBuffer x(DType::BF16, 2048 * 128), w(DType::BF16, 256 * 128), gu(DType::BF16, 2048 * 256),
      x32(DType::F32, 128 * 128);
  EXPECT_EQ(cuda::gated_product_misfit(linear_gemm(gu, 256, x, 128, w, 100, 128, 256), 128),
            "a product of 100 x 256 x 128 (tokens and F multiples of 128, the hidden size of 64)");
  EXPECT_EQ(cuda::gated_product_misfit(linear_gemm(gu, 256, x32, 128, w, 128, 128, 256), 128), "operands not bf16");
  EXPECT_EQ(cuda::gated_product_misfit(linear_gemm(gu, 256, x, 128, w, 2048, 128, 256), 128),
            "2048 tokens, more than 1024");
  EXPECT_EQ(cuda::swiglu_gradient_product_misfit(linear_dx_gemm(gu, 128, x, 128, w, 2048, 128, 128, 0.0f), 128),
            "2048 tokens, more than 1024");
  EXPECT_EQ(cuda::swiglu_gradient_product_misfit(linear_dx_gemm(gu, 128, x, 128, w, 256, 128, 128, 1.0f), 128),
            "a product not of linear_dx_gemm's form (dx = dy W, alpha 1, beta 0)");
  // No chunks of K: refused with the reason, which the kernels' entry points throw (before, only
  // the tensor-map encoding failed, saying less).
  auto thrown = [](const std::function<void()>& call) {
    try {
      call();
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string("nothing thrown");
  };
  const Gemm no_k = linear_gemm(gu, 256, x, 0, w, 128, 0, 256);
  EXPECT_EQ(cuda::gated_product_misfit(no_k, 128), "an empty product of 128 x 256 x 0");
  EXPECT_NE(thrown([&] { cuda::gated_product(no_k, gu, 128, Stream{}); }).find("an empty product of 128 x 256 x 0"),
            std::string::npos);
  const Gemm no_k_dx = linear_dx_gemm(gu, 128, x, 0, w, 128, 128, 0, 0.0f);
  EXPECT_EQ(cuda::swiglu_gradient_product_misfit(no_k_dx, 128), "an empty product of 128 x 128 x 0");
  EXPECT_NE(thrown([&] { cuda::swiglu_gradient_product(no_k_dx, gu, gu, 128, Stream{}); })
                .find("an empty product of 128 x 128 x 0"),
            std::string::npos);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cublasDestroy(handle);
}

// rope-in-qkv-product: our QKV product with RoPE in its epilogue gives the bytes of cuBLAS's product
// and the RoPE kernel after it, at the default shape, and with other head sizes, widths and
// sequences (the positions from the row); and it says why where it does not take a product.
TEST(GpuRopeProduct, GivesCublasAndRopeBytes) {
  REQUIRE_GPU();
  Random rnd{uint64_t(::testing::UnitTest::GetInstance()->random_seed()) * 43 + 5};
  cublasHandle_t handle = nullptr;
  ASSERT_EQ(cublasCreate(&handle), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasSetWorkspace(handle, nullptr, 0), CUBLAS_STATUS_SUCCESS);
  const cuda::Blas cublas{handle, false, Stream{}};
  struct Shape {
    int n, c, seq_len;
    AttnShape a;
  };
  for (const Shape& sh : {Shape{1024, 512, 128, {8, 128, 8, 4, 64}}, Shape{256, 192, 64, {4, 64, 4, 2, 64}},
                          Shape{128, 64, 32, {4, 32, 2, 1, 128}}, Shape{512, 256, 100, {1, 512, 4, 4, 32}},
                          // the rotated columns ending at an odd multiple of 64 (320), and heads of 96
                          // that straddle the tiles
                          Shape{256, 128, 64, {4, 64, 4, 1, 64}}, Shape{256, 128, 128, {2, 128, 2, 2, 96}}}) {
    const int n = sh.n, c = sh.c, q = int(sh.a.ld());
    SCOPED_TRACE(testing::Message() << n << " tokens, C " << c << ", QKV " << q << ", D " << sh.a.D);
    const RopeShape rope{n, sh.seq_len, sh.a.H + sh.a.KVH, sh.a.D, 0, q};
    DeviceBuffer x(DType::BF16, rnd.uniform(size_t(n) * c)), w(DType::BF16, rnd.uniform(size_t(q) * c, 0.1));
    DeviceBuffer table(DType::F32, rope_table(sh.seq_len, sh.a.D, 10000.0));
    DeviceBuffer qkv(DType::BF16, size_t(n) * q), qkv2(DType::BF16, size_t(n) * q);
    qkv2.poison();
    cuda::gemm(cublas, linear_gemm(qkv, q, x, c, w, n, c, q));
    cuda::rope(qkv, table, rope, false, true, Stream{});
    const Gemm ours = linear_gemm(qkv2, q, x, c, w, n, c, q);
    ASSERT_EQ(cuda::rope_product_misfit(ours, rope), "");
    cuda::rope_product(ours, table, rope, Stream{});
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<double> a = qkv.get(), b = qkv2.get();
    size_t differ = 0;
    for (size_t i = 0; i < a.size(); ++i) differ += a[i] != b[i];
    EXPECT_EQ(differ, 0u) << "of " << a.size() << " qkv elements; first: " << a[0] << " against " << b[0];
  }
  DeviceBuffer x(DType::BF16, 2048 * 128), w(DType::BF16, 1024 * 128), qkv(DType::BF16, 2048 * 1024);
  const RopeShape rope{2048, 128, 12, 64, 0, 1024};
  EXPECT_EQ(cuda::rope_product_misfit(linear_gemm(qkv, 1024, x, 128, w, 2048, 128, 1024), rope),
            "2048 tokens, more than 1024");
  EXPECT_EQ(cuda::rope_product_misfit(linear_gemm(qkv, 1024, x, 128, w, 1024, 128, 1024), {1024, 128, 8, 64, 512, 1024}),
            "512 columns rotated from column 512 (heads from column 0, of an even size, whole tiles of 64 columns)");
  EXPECT_EQ(cuda::rope_product_misfit(linear_gemm(qkv, 1000, x, 128, w, 1024, 128, 1000), rope),
            "a product of 1024 x 1000 x 128 (tokens multiples of 128, the QKV width of 64, the hidden size of 64, qkv "
            "contiguous)");
  EXPECT_EQ(cuda::rope_product_misfit(linear_gemm(qkv, 1024, x, 0, w, 1024, 0, 1024), {1024, 128, 12, 64, 0, 1024}),
            "an empty product of 1024 x 1024 x 0");
  cublasDestroy(handle);
}

INSTANTIATE_TEST_SUITE_P(Types, GpuOps, ::testing::Values(DType::F32, DType::BF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });
INSTANTIATE_TEST_SUITE_P(Types, GpuAttention, ::testing::Values(DType::BF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace tt::test
