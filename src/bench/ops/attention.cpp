// The attention case (src/bench/op_case.h): causal attention over qkv [B T, (H + 2 KVH) D] with
// grouped heads: v1 materialized scores, v2 cuDNN's flash attention in bf16 (the fused softmax in
// fp32), v3 our flash attention (tensor cores in bf16, FMA in fp32), v5 ours in bf16 with its
// output in FP8 too (fp8-fused-attention, as op_sequences.h's attention_forward makes
// it), v6 with the backward in one kernel where sequences are at most 128 tokens
// (attention-backward-in-one-block, against v5's two). Its extra checks: every head size and
// grouping at sequences of 1 to 1000, grids for two warpgroups a block (batch 44) and backwards
// that split their columns (batch 14, and T = 1000 on an H100), with the implementation each
// version must pick.
#include <fmt/format.h>

#include "bench/op_case.h"
#include "model/op_sequences.h"

namespace tt {

std::unique_ptr<OpCase> attention_case(const OpShape& shape);

namespace {

class AttentionCase final : public OpCase {
 public:
  using OpCase::OpCase;
  const char* name() const override { return "attention"; }
  bool has_version(int version) const override { return version <= 3 || version >= 5; }
  int base_version(int version) const override { return version == 6 ? 5 : version == 5 ? 3 : 2; }
  std::vector<bool Plan::*> switches() const override {
    return {&Plan::custom_attention, &Plan::fp8_fused_attention, &Plan::attention_backward_in_one_block};
  }
  // In fp32 the backend keeps v2's materialized attention where its scores fit (it is faster
  // there); the v3 row takes our FMA flash attention all the same.
  void adjust_plan(Plan& p) const override {
    if (p.version >= 3) p.flash_attention = false;
  }

  void layout(OpLayout& l) override {
    s_ = shape_.attn();
    const int64_t n = shape_.tokens(), hd = int64_t(s_.H) * s_.D;
    const TensorSpec saved = l.backend().attention_saved(s_);
    qkv_ = l.act(n * s_.ld()), att_ = l.act(n * hd), saved_ = l.take(saved.dtype, saved.numel);
    dqkv_ = l.act(n * s_.ld()), datt_ = l.act(n * hd);
    // bf16 runs (and their references): our flash attention's FP8 output.
    fp8_ = shape_.bf16_inputs && attention_in_fp8(l.backend().plan(), true, Fp8Scaling::Delayed);
    att8_ = fp8_ ? l.fp8(n, hd, 1.0) : Fp8Matrix{};  // |att| <= 1: a mean of values in [-1, 1]
  }
  void fill(OpFill& f) override {
    f.uniform(qkv_, -1, 1, 1);
    f.uniform(datt_, -1, 1, 3);
  }
  void forward(Backend& be) override { attention_forward(be, att_, saved_, qkv_, s_, att8_); }
  void backward(Backend& be) override { be.attention_backward(dqkv_, datt_, qkv_, att_, saved_, s_); }
  std::vector<OpOutput> outputs(bool backward) const override {
    if (backward) return {{"dqkv", dqkv_}};
    if (fp8_) return {{"att", att_}, {"att8 rows", att8_.rows}, {"att8 cols", att8_.cols}};
    return {{"att", att_}};
  }
  std::vector<Tensor> written() const override {
    if (fp8_) return {att_, saved_, dqkv_, att8_.rows, att8_.cols};
    return {att_, saved_, dqkv_};
  }
  OpWork work(double) const override {
    const double fwd = 4.0 * s_.B * s_.H * double(s_.T) * s_.T * s_.D / 2;  // causal: half the scores
    return {true, fwd, 2.5 * fwd};
  }

  void extra_checks(OpCheckLog& log, int version) const override {
    std::vector<AttnShape> shapes;
    for (int T : {1, 7, 129, 1000})
      for (int D : {32, 64, 128})
        for (int kv : {4, 2, 1}) shapes.push_back({2, T, 4, kv, D});
    for (int D : {32, 64, 128}) shapes.push_back({44, 300, 4, 2, D});
    shapes.push_back({14, 640, 4, 2, 64});
    const bool bf16 = log.bf16();
    for (const AttnShape& s : shapes) {
      OpShape shape = shape_;
      shape.B = s.B, shape.T = s.T, shape.heads = s.H, shape.kv_heads = s.KVH, shape.head_dim = s.D;
      shape.hidden = s.H * s.D, shape.bf16_inputs = bf16;
      log.where(fmt::format("attention v{} B{} T{} D{} kv_heads {}", version, s.B, s.T, s.D, s.KVH));
      const std::unique_ptr<OpRig> rig = log.gpu_rig(attention_case, shape, op_plan(version, *this, bf16));
      if (!rig) continue;
      const std::string kind = rig->backend().attention_kind();
      if (version == 2 && bf16 && s.T > 1) log.expect(kind.find("cuDNN") != std::string::npos, kind);
      if (version >= 3 && bf16) log.expect(kind.rfind("our flash attention (", 0) == 0, kind);
      if (bf16)  // v6's backward: one kernel where the sequences are at most 128 tokens (head size 64)
        log.expect((kind.find("one block") != std::string::npos) == (version == 6 && s.T <= 128 && s.D == 64), kind);
      const auto ours = log.expect_reference(
          *rig, {{"dqkv", bf16 ? 2e-2 : 1e-5}, {"att8 rows", 0x1p-3}, {"att8 cols", 0x1p-3}});  // one E4M3 step
      if (version >= 3)  // ours: the backward repeats its bits
        log.expect(output(rig->run(true).second, "dqkv") == output(ours.second, "dqkv"),
                   "a second backward differs from the first");
      if (version != 3 || bf16) continue;
      // The v3 row's is our FMA flash attention; in fp32 the preset keeps the materialized scores at
      // these sizes (faster there), which must hold the reference too.
      Plan preset = plan_for_version(3);
      preset.amp = false;
      const std::unique_ptr<OpRig> materialized = log.gpu_rig(attention_case, shape, preset);
      if (!materialized) continue;
      log.expect(materialized->backend().attention_kind().find("materialized") != std::string::npos,
                 materialized->backend().attention_kind());
      log.expect_reference(*materialized);
    }
  }

 private:
  AttnShape s_{};
  Tensor qkv_, att_, saved_, dqkv_, datt_;
  bool fp8_ = false;
  Fp8Matrix att8_;
};

}  // namespace

std::unique_ptr<OpCase> attention_case(const OpShape& shape) { return std::make_unique<AttentionCase>(shape); }

}  // namespace tt
