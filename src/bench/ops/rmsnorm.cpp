// The RMSNorm case (src/bench/op_case.h): out = x / rms(x) * w over rows of `hidden`, and its
// backward (dx, and the gain's gradient dw in fp32): the eager kernels of v1 and v2, v3's one kernel
// each way (custom-rmsnorm), v5's forward straight into FP8 in bf16 (fp8-fused-norm, as
// op_sequences.h's residual_norm makes it) and its backward writing dx in FP8 too
// (fp8-fused-norm-backward, as Llama's final norm makes it). Its extra checks: widths from 32 to 2048, rows beyond
// 1536 where the weight gradient takes two stages (fewer warps a block at 2048), a weight gradient
// that repeats its bits, and accumulation into dw (the micro-batches after the first of gradient
// accumulation) exactly in fp32.
#include <fmt/format.h>

#include "bench/op_case.h"
#include "model/op_sequences.h"

namespace tt {

std::unique_ptr<OpCase> rmsnorm_case(const OpShape& shape);

namespace {

class RmsNormCase final : public OpCase {
 public:
  using OpCase::OpCase;
  const char* name() const override { return "rmsnorm"; }
  bool has_version(int version) const override { return version <= 3 || version == 5; }
  int base_version(int version) const override { return version == 5 ? 3 : 2; }
  std::vector<bool Plan::*> switches() const override {
    return {&Plan::custom_rmsnorm, &Plan::fp8_fused_norm, &Plan::fp8_fused_norm_backward};
  }

  void layout(OpLayout& l) override {
    const int64_t n = shape_.tokens(), C = shape_.hidden;
    x_ = l.act(n * C), w_ = l.act(C), out_ = l.act(n * C), rstd_ = l.acc(n);
    dout_ = l.act(n * C), dx_ = l.act(n * C), dw_ = l.master(C);
    // bf16 runs (and their references): the FP8 norm's kernel takes bf16 rows.
    fp8_ = shape_.bf16_inputs && norm_in_fp8(l.backend().plan(), true, Fp8Scaling::Delayed, shape_.hidden);
    out8_ = fp8_ ? l.fp8(n, C, 4.0) : Fp8Matrix{};  // |out| < 4: x in [-1, 1], w below 1.5
    const Plan& plan = l.backend().plan();
    dx8_ = shape_.bf16_inputs && plan.fp8_fused_norm_backward && plan.custom_rmsnorm ? l.fp8(n, C, 8.0) : Fp8Matrix{};
  }
  void fill(OpFill& f) override {
    f.uniform(x_, -1, 1, 4);
    f.uniform(dout_, -1, 1, 5);
    f.uniform(w_, 0.5, 1.5, 13);
    f.backend().zero(dw_);
  }
  void forward(Backend& be) override {
    residual_norm(be, {x_, out_, rstd_, {}, {}, w_, shape_.tokens(), shape_.hidden, 1e-5}, out8_);
  }
  void backward(Backend& be) override {
    if (!dx8_.slot.empty())
      return be.fp8_rmsnorm_backward(dx8_, dx_, dw_, dout_, x_, w_, rstd_, shape_.tokens(), shape_.hidden, false,
                                     add_dw_);
    be.rmsnorm_backward(dx_, dw_, dout_, x_, w_, rstd_, shape_.tokens(), shape_.hidden, add_dw_);
  }
  std::vector<OpOutput> outputs(bool backward) const override {
    if (backward && !dx8_.slot.empty()) return {{"dx", dx_}, {"dw", dw_}, {"dx8 rows", dx8_.rows}, {"dx8 cols", dx8_.cols}};
    if (backward) return {{"dx", dx_}, {"dw", dw_}};
    if (fp8_) return {{"out8 rows", out8_.rows}, {"out8 cols", out8_.cols}, {"rstd", rstd_}};
    return {{"out", out_}, {"rstd", rstd_}};
  }
  std::vector<Tensor> written() const override {
    std::vector<Tensor> w = fp8_ ? std::vector<Tensor>{out8_.rows, out8_.cols, rstd_} : std::vector<Tensor>{out_, rstd_};
    for (const Tensor& t : {dx_, dw_, dx8_.rows, dx8_.cols})
      if (!t.empty()) w.push_back(t);
    return w;
  }
  // In FP8: x read, a byte an element written in each layout (forward), and dx's two bytes too
  // (backward).
  OpWork work(double a) const override {
    const double n = double(shape_.tokens()), C = shape_.hidden;
    return {false, (fp8_ ? (a + 2) * n * C + a * C : a * (2 * n * C + C)) + 4 * n,
            a * (3 * n * C + C) + (dx8_.slot.empty() ? 0 : 2 * n * C) + 4 * n + 8 * C};
  }

  void extra_checks(OpCheckLog& log, int version) const override {
    for (auto [n, c] : {std::pair{1, 32}, {7, 64}, {129, 512}, {1000, 1000}, {33, 2048}, {1536, 512}, {1537, 512},
                        {2000, 1000}, {1600, 2048}}) {
      OpShape shape = shape_;
      shape.B = 1, shape.T = n, shape.hidden = c, shape.bf16_inputs = log.bf16();
      log.where(fmt::format("rmsnorm v{} n={} c={}", version, n, c));
      const std::unique_ptr<OpRig> rig = log.gpu_rig(rmsnorm_case, shape, op_plan(version, *this, log.bf16()));
      if (!rig) continue;
      const auto ours = log.expect_reference(
          *rig, {{"rstd", log.bf16() ? 1e-5 : 1e-6},
                 {"out8 rows", 0x1p-3},
                 {"out8 cols", 0x1p-3},
                 {"dx8 rows", 0x1p-3},
                 {"dx8 cols", 0x1p-3}});  // one E4M3 step
      RmsNormCase& op = static_cast<RmsNormCase&>(rig->op());
      const std::vector<double>& once = output(ours.second, "dw");
      op.backward(rig->backend());
      log.expect(rig->values(op.dw_) == once, "the weight gradient differs between two identical runs");
      op.add_dw_ = true;  // added to what dw holds, in fp32
      op.backward(rig->backend());
      const std::vector<double> twice = rig->values(op.dw_);
      for (size_t j = 0; j < once.size(); ++j)
        if (twice[j] != double(float(once[j]) + float(once[j]))) {
          log.expect(false, fmt::format("dw[{}] accumulated to {}, not twice {}", j, twice[j], once[j]));
          break;
        }
    }
  }

 private:
  bool add_dw_ = false;  // the backward adds to dw
  bool fp8_ = false;     // the forward writes out8
  Tensor x_, w_, out_, rstd_, dout_, dx_, dw_;
  Fp8Matrix out8_, dx8_;  // dx8: the backward writes dx in FP8 too
};

}  // namespace

std::unique_ptr<OpCase> rmsnorm_case(const OpShape& shape) { return std::make_unique<RmsNormCase>(shape); }

}  // namespace tt
