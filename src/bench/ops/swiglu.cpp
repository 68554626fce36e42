// The SwiGLU case (src/bench/op_case.h): h = silu(gate) * up from gate|up [n, 2F], and its
// backward: v1's unfused kernels, v2's one scalar kernel each way (gate-up-fusion), v3's
// vectorized ones (custom-swiglu), and v5's made straight in FP8, both layouts, with delayed
// scaling (fp8-fused-swiglu). Its extra checks: widths that take the scalar instantiations (100 in
// bf16, 98) and the switches alone (custom-swiglu without gate-up-fusion takes the vectorized kernels).
#include <fmt/format.h>

#include "bench/op_case.h"
#include "model/op_sequences.h"

namespace tt {

std::unique_ptr<OpCase> swiglu_case(const OpShape& shape);

namespace {

class SwiGluCase final : public OpCase {
 public:
  using OpCase::OpCase;
  const char* name() const override { return "swiglu"; }
  bool has_version(int version) const override { return version <= 3 || version == 5; }
  int base_version(int version) const override { return version == 5 ? 3 : 2; }
  std::vector<bool Plan::*> switches() const override { return {&Plan::custom_swiglu, &Plan::fp8}; }

  void layout(OpLayout& l) override {
    const int64_t n = shape_.tokens(), F = shape_.intermediate;
    gateup_ = l.act(n * 2 * F), h_ = l.act(n * F), dh_ = l.act(n * F), dgateup_ = l.act(n * 2 * F);
    const Plan& plan = l.backend().plan();
    fp8_ = swiglu_in_fp8(plan, plan.fp8);
    h8_ = dgateup8_ = {};
    if (fp8_)  // the scales of gate and up in [-1, 1], and of dh in [-1, 1]
      h8_ = l.fp8(n, F, 1.0), dgateup8_ = l.fp8(n, 2 * F, 1.0);
  }
  void fill(OpFill& f) override {
    f.uniform(gateup_, -1, 1, 6);
    f.uniform(dh_, -1, 1, 7);
  }
  void forward(Backend& be) override {
    ffn_swiglu_forward(be, h_, h8_, gateup_, shape_.tokens(), shape_.intermediate, Fp8Scaling::Delayed);
  }
  void backward(Backend& be) override {
    ffn_swiglu_backward(be, dgateup_, dgateup8_, dh_, gateup_, shape_.tokens(), shape_.intermediate,
                        Fp8Scaling::Delayed);
  }
  std::vector<OpOutput> outputs(bool backward) const override {
    if (fp8_ && backward) return {{"dgateup8 rows", dgateup8_.rows}, {"dgateup8 cols", dgateup8_.cols}};
    if (fp8_) return {{"h8 rows", h8_.rows}, {"h8 cols", h8_.cols}};
    if (backward) return {{"dgateup", dgateup_}};
    return {{"h", h_}};
  }
  std::vector<Tensor> written() const override {
    if (fp8_) return {h8_.rows, h8_.cols, dgateup8_.rows, dgateup8_.cols};
    return {h_, dgateup_};
  }
  OpWork work(double a) const override {
    const double n = double(shape_.tokens()), F = shape_.intermediate;
    // In FP8: each gate, up and dh read once at least, the outputs written in two layouts of a byte.
    if (fp8_) return {false, (2 * a + 2) * n * F, 3 * a * n * F + 4 * n * F};
    return {false, a * 3 * n * F, a * 5 * n * F};
  }
  // Made in FP8 (v5) from values the GPU computes in fp32 and the reference in double: where the
  // two round to neighbouring codes, an element is a code (1/8 to 1/16 of itself) apart.
  double fp32_bound(const Plan& plan) const override { return plan.fp8 ? 2e-3 : 1e-5; }

  void extra_checks(OpCheckLog& log, int version) const override {
    std::vector<std::pair<std::string, Plan>> plans;
    if (version <= 3) plans.emplace_back(fmt::format("v{}", version), op_plan(version, *this, log.bf16()));
    if (version == 1) {
      for (bool Plan::*alone : {&Plan::gate_up_fusion, &Plan::custom_swiglu}) {
        Plan p = plans[0].second;
        p.*alone = true;
        plans.emplace_back(alone == &Plan::gate_up_fusion ? "gate-up-fusion alone" : "custom-swiglu alone", p);
      }
    }
    for (const auto& [label, plan] : plans)
      for (auto [n, f] : {std::pair{1, 8}, {7, 100}, {5, 98}, {33, 1408}, {129, 2048}}) {
        OpShape shape = shape_;
        shape.B = 1, shape.T = n, shape.intermediate = f, shape.bf16_inputs = log.bf16();
        log.where(fmt::format("swiglu {} n={} f={}", label, n, f));
        if (const std::unique_ptr<OpRig> rig = log.gpu_rig(swiglu_case, shape, plan)) log.expect_reference(*rig);
      }
  }

 private:
  bool fp8_ = false;  // made straight in FP8
  Tensor gateup_, h_, dh_, dgateup_;
  Fp8Matrix h8_, dgateup8_;
};

}  // namespace

std::unique_ptr<OpCase> swiglu_case(const OpShape& shape) { return std::make_unique<SwiGluCase>(shape); }

}  // namespace tt
