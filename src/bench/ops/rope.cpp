// The RoPE case (src/bench/op_case.h): the queries and keys of qkv rotated in place, forward and
// backward, as the model rotates them (op_sequences.h: one call each in v1 and v2, one for both
// with v3's custom-rope, 16 bytes a thread; v5's backward made straight in FP8, fp8-fused-rope). Its extra checks: three heads in the middle of five,
// at sequences of 1 to 129, head sizes 32 to 128, aligned or not to 16 bytes (one pair a thread).
#include <fmt/format.h>

#include "bench/op_case.h"
#include "model/op_sequences.h"

namespace tt {

std::unique_ptr<OpCase> rope_case(const OpShape& shape);

namespace {

class RopeCase final : public OpCase {
 public:
  using OpCase::OpCase;
  const char* name() const override { return "rope"; }
  bool has_version(int version) const override { return version <= 3 || version == 5; }
  int base_version(int version) const override { return version == 5 ? 3 : 2; }
  std::vector<bool Plan::*> switches() const override { return {&Plan::custom_rope, &Plan::fp8_fused_rope}; }
  double fp32_bound(const Plan& plan) const override { return plan.fp8_fused_rope ? 2e-3 : 1e-5; }

  void layout(OpLayout& l) override {
    const AttnShape s = shape_.attn();
    if (heads_.empty()) calls_ = rope_shapes(l.backend(), s), ld_ = s.ld();
    else calls_ = heads_;
    qkv_ = l.act(shape_.tokens() * ld_), dqkv_ = l.act(shape_.tokens() * ld_);
    table_ = l.acc(int64_t(shape_.T) * shape_.head_dim);
    const RopeShape& c = calls_.front();
    fp8_ = rope_backward_in_fp8(l.backend().plan(), true, calls_) && ld_ % 8 == 0 && c.col % 8 == 0 && c.head_dim % 8 == 0;
    dqkv8_ = fp8_ ? l.fp8(shape_.tokens(), ld_, 1.0) : Fp8Matrix{};  // the scale of values in [-1, 1]
  }
  void fill(OpFill& f) override {
    f.uniform(qkv_, -1, 1, 1);
    f.uniform(dqkv_, -1, 1, 2);
    f.table(table_, rope_table(shape_.T, shape_.head_dim, 10000.0));
  }
  void forward(Backend& be) override {
    for (const RopeShape& x : calls_) be.rope_forward(qkv_, table_, x);
  }
  void backward(Backend& be) override { qkv_rope_backward(be, dqkv_, dqkv8_, table_, calls_, Fp8Scaling::Delayed); }
  std::vector<OpOutput> outputs(bool backward) const override {  // rotated in place, or in FP8
    if (backward && fp8_) return {{"dqkv8 rows", dqkv8_.rows}, {"dqkv8 cols", dqkv8_.cols}};
    if (backward) return {{"dqkv", dqkv_}};
    return {{"qkv", qkv_}};
  }
  std::vector<Tensor> written() const override {
    if (fp8_) return {dqkv8_.rows, dqkv8_.cols};
    return {};
  }
  // In place: the rotated heads read and written. In FP8: every column read, a byte written in each
  // layout (what the cast it replaces would write).
  OpWork work(double a) const override {
    const AttnShape s = shape_.attn();
    const double n = double(shape_.tokens()), amount = 2 * a * n * (s.H + s.KVH) * s.D + 4.0 * s.T * s.D;
    return {false, amount, fp8_ ? (a + 2) * n * double(ld_) + 4.0 * s.T * s.D : amount};
  }

  void extra_checks(OpCheckLog& log, int version) const override {
    for (int T : {1, 7, 129})
      for (int D : {32, 64, 128})
        for (int pad : {0, 2}) {
          OpShape shape = shape_;
          shape.B = 2, shape.T = T, shape.head_dim = D, shape.bf16_inputs = log.bf16();
          const int64_t ld = 5 * D + pad;  // rotate heads 1..3 of 5
          const RopeShape heads{shape.tokens(), T, 3, D, D + pad, ld};
          const OpMaker make = [heads, ld](const OpShape& s) {
            auto c = std::make_unique<RopeCase>(s);
            c->heads_ = {heads}, c->ld_ = ld;
            return c;
          };
          log.where(fmt::format("rope v{} T={} D={} pad={}", version, T, D, pad));
          if (const std::unique_ptr<OpRig> rig = log.gpu_rig(make, shape, op_plan(version, *this, log.bf16())))
            log.expect_reference(*rig, {{"dqkv8 rows", 0x1p-3}, {"dqkv8 cols", 0x1p-3}});  // one E4M3 step
        }
  }

 private:
  std::vector<RopeShape> heads_;  // what to rotate, where not the model's queries and keys
  int64_t ld_ = 0;                // qkv's row stride
  std::vector<RopeShape> calls_;
  bool fp8_ = false;  // the backward made in FP8 (v5)
  Tensor qkv_, dqkv_, table_;
  Fp8Matrix dqkv8_;
};

}  // namespace

std::unique_ptr<OpCase> rope_case(const OpShape& shape) { return std::make_unique<RopeCase>(shape); }

}  // namespace tt
