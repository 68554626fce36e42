// The RoPE case (src/bench/op_case.h): the queries and keys of qkv rotated in place, forward and
// backward, as the model rotates them (op_sequences.h: one call each in v1 and v2, one for both
// with v3's custom-rope, 16 bytes a thread). Its extra checks: three heads in the middle of five,
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
  bool has_version(int version) const override { return version <= 3; }
  int base_version(int) const override { return 2; }
  std::vector<bool Plan::*> switches() const override { return {&Plan::custom_rope}; }

  void layout(OpLayout& l) override {
    const AttnShape s = shape_.attn();
    if (heads_.empty()) calls_ = rope_shapes(l.backend(), s), ld_ = s.ld();
    else calls_ = heads_;
    qkv_ = l.act(shape_.tokens() * ld_), dqkv_ = l.act(shape_.tokens() * ld_);
    table_ = l.acc(int64_t(shape_.T) * shape_.head_dim);
  }
  void fill(OpFill& f) override {
    f.uniform(qkv_, -1, 1, 1);
    f.uniform(dqkv_, -1, 1, 2);
    f.table(table_, rope_table(shape_.T, shape_.head_dim, 10000.0));
  }
  void forward(Backend& be) override {
    for (const RopeShape& x : calls_) be.rope_forward(qkv_, table_, x);
  }
  void backward(Backend& be) override {
    for (const RopeShape& x : calls_) be.rope_backward(dqkv_, table_, x);
  }
  std::vector<OpOutput> outputs(bool backward) const override {  // rotated in place
    if (backward) return {{"dqkv", dqkv_}};
    return {{"qkv", qkv_}};
  }
  std::vector<Tensor> written() const override { return {}; }
  OpWork work(double a) const override {
    const AttnShape s = shape_.attn();
    const double n = double(shape_.tokens()), amount = 2 * a * n * (s.H + s.KVH) * s.D + 4.0 * s.T * s.D;
    return {false, amount, amount};
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
            log.expect_reference(*rig);
        }
  }

 private:
  std::vector<RopeShape> heads_;  // what to rotate, where not the model's queries and keys
  int64_t ld_ = 0;                // qkv's row stride
  std::vector<RopeShape> calls_;
  Tensor qkv_, dqkv_, table_;
};

}  // namespace

std::unique_ptr<OpCase> rope_case(const OpShape& shape) { return std::make_unique<RopeCase>(shape); }

}  // namespace tt
