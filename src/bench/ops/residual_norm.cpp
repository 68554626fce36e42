// The residual norm case (src/bench/op_case.h): the residual add and the RMSNorm after it, sum =
// x + b, out = rmsnorm(sum), and the backward that adds the norm's input gradient to the residual
// stream's, as the model makes them (op_sequences.h): v3's add and norm apart, v4's one kernel each
// way (fused-residual-norm). Its extra checks: the fused kernels at widths from 32 to 2048 (the
// scalar path at 1000 in bf16, two stages of the weight gradient beyond 1536 rows) against the
// reference, and bit for bit against v3's add and norm, so that the fused and unfused models
// compute the same bits.
#include <fmt/format.h>

#include "bench/op_case.h"
#include "core/dtype.h"
#include "model/op_sequences.h"
#include "ops/rmsnorm.h"

namespace tt {

std::unique_ptr<OpCase> residual_norm_case(const OpShape& shape);

namespace {

class ResidualNormCase final : public OpCase {
 public:
  using OpCase::OpCase;
  const char* name() const override { return "residual_norm"; }
  bool has_version(int version) const override { return version == 3 || version == 4; }
  int base_version(int) const override { return 3; }
  std::vector<bool Plan::*> switches() const override { return {&Plan::custom_rmsnorm, &Plan::fused_residual_norm}; }

  void layout(OpLayout& l) override {
    const int64_t n = shape_.tokens(), C = shape_.hidden;
    x_ = l.act(n * C), b_ = l.act(n * C), w_ = l.act(C), sum_ = l.act(n * C), out_ = l.act(n * C), rstd_ = l.acc(n);
    dout_ = l.act(n * C), dres_ = l.act(n * C), dx_ = l.act(n * C), dw_ = l.master(C);
  }
  void fill(OpFill& f) override {
    f.uniform(x_, -1, 1, 4);
    f.uniform(dout_, -1, 1, 5);
    f.uniform(b_, -1, 1, 8);
    f.uniform(dres_, -1, 1, 9);
    f.uniform(w_, 0.5, 1.5, 13);
    f.backend().zero(dw_);
  }
  void forward(Backend& be) override {
    const ResidualNorm r{sum_, out_, rstd_, x_, b_, w_, shape_.tokens(), shape_.hidden, 1e-5};
    residual_add(be, r);
    residual_norm(be, r);
  }
  void backward(Backend& be) override {
    residual_norm_backward(be, dres_, dres_, dx_, dw_, dout_, sum_, w_, rstd_, shape_.tokens(), shape_.hidden, false);
  }
  std::vector<OpOutput> outputs(bool backward) const override {
    if (backward) return {{"dres", dres_}, {"dw", dw_}};
    return {{"sum", sum_}, {"out", out_}, {"rstd", rstd_}};
  }
  std::vector<Tensor> written() const override { return {sum_, out_, rstd_, dx_, dw_}; }
  OpWork work(double a) const override {
    const double n = double(shape_.tokens()), C = shape_.hidden;
    return {false, a * (4 * n * C + C) + 4 * n, a * (4 * n * C + C) + 4 * n + 8 * C};
  }

  void extra_checks(OpCheckLog& log, int version) const override {
    if (version != 4) return;  // v3's add and norm: the rmsnorm case's extra checks
    const bool bf16 = log.bf16();
    for (auto [n, c] : {std::pair{1, 32}, {7, 64}, {129, 512}, {1000, 1000}, {33, 2048}, {1537, 768}, {7, 1024}}) {
      OpShape shape = shape_;
      shape.B = 1, shape.T = n, shape.hidden = c, shape.bf16_inputs = bf16;
      log.where(fmt::format("residual_norm v4 n={} c={}", n, c));
      const std::unique_ptr<OpRig> fused = log.gpu_rig(residual_norm_case, shape, op_plan(4, *this, bf16));
      const std::unique_ptr<OpRig> apart = log.gpu_rig(residual_norm_case, shape, op_plan(3, *this, bf16));
      if (!fused || !apart) continue;
      // The reference from the inputs, the sum rounded to the act type as the contract says (the
      // residual stream is stored).
      const ResidualNormCase& op = static_cast<const ResidualNormCase&>(fused->op());
      const std::vector<double> a = fused->values(op.x_), b = fused->values(op.b_), w = fused->values(op.w_),
                                dout = fused->values(op.dout_);
      std::vector<double> sum(a.size()), out(a.size()), rstd(static_cast<size_t>(n)),
                          dres = fused->values(op.dres_), dw(static_cast<size_t>(c));
      for (size_t i = 0; i < sum.size(); ++i) {
        const float v = float(a[i] + b[i]);
        sum[i] = bf16 ? bf16_to_float(float_to_bf16(v)) : v;
      }
      ref::rmsnorm_forward(out.data(), rstd.data(), sum.data(), w.data(), n, c, 1e-5);
      ref::rmsnorm_backward(dres.data(), dw.data(), dout.data(), sum.data(), w.data(), rstd.data(), n, c, true, false);
      const auto ours = fused->run(true), unfused = apart->run(true);
      log.expect_match("sum", output(ours.first, "sum"), sum, bf16 ? 1e-6 : 1e-7);
      log.expect_match("out", output(ours.first, "out"), out, log.tol());
      log.expect_match("rstd", output(ours.first, "rstd"), rstd, bf16 ? 1e-5 : 1e-6);
      log.expect_match("dres", output(ours.second, "dres"), dres, log.tol());
      log.expect_match("dw", output(ours.second, "dw"), dw, log.tol());
      log.expect(ours.first == unfused.first, "the fused forward differs from the add and the norm");
      log.expect(ours.second == unfused.second, "the fused backward differs from the norm and the add");
    }
  }

 private:
  Tensor x_, b_, w_, sum_, out_, rstd_, dout_, dres_, dx_, dw_;
};

}  // namespace

std::unique_ptr<OpCase> residual_norm_case(const OpShape& shape) { return std::make_unique<ResidualNormCase>(shape); }

}  // namespace tt
