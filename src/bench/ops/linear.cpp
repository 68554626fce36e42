// The linear case (src/bench/op_case.h): the gate/up projection's three products, y = x W^T
// ([tokens, hidden] by [2 ffn, hidden]), dx = dy W and dW = dy^T x (fp32, a parameter gradient),
// as the model makes them (op_sequences.h): in bf16 in v4, from FP8 operands in v5 (E4M3, delayed
// scaling's slots). Its extra checks: odd shapes, the forward written into columns of a wider
// matrix (as the model's unfused Q, K and V) whose other columns must stay.
#include <fmt/format.h>

#include "bench/op_case.h"
#include "model/op_sequences.h"

namespace tt {

std::unique_ptr<OpCase> linear_case(const OpShape& shape);

namespace {

class LinearCase final : public OpCase {
 public:
  explicit LinearCase(const OpShape& s)
      : OpCase(s), n_(int(s.tokens())), in_(s.hidden), out_(2 * s.intermediate), ld_(2 * s.intermediate) {}
  const char* name() const override { return "linear"; }
  bool has_version(int version) const override { return version == 4 || version == 5; }
  int base_version(int) const override { return 4; }
  std::vector<bool Plan::*> switches() const override { return {&Plan::fp8}; }

  void layout(OpLayout& l) override {
    fp8_ = l.backend().plan().fp8;
    if (fp8_ && !fp8_dims_fit({n_, in_, out_}))
      usage_fail("linear: FP8 products need the tokens, the hidden size and twice the ffn size to be multiples of 16");
    x_ = l.act(int64_t(n_) * in_), w_ = l.act(int64_t(out_) * in_), dy_ = l.act(int64_t(n_) * out_);
    y_ = l.act(int64_t(n_) * ld_), dx_ = l.act(int64_t(n_) * in_), dw_ = l.master(int64_t(out_) * in_);
    f8_ = {}, dy8_ = {};
    if (fp8_) f8_ = {l.fp8(n_, in_, 1.0), l.fp8(out_, in_, 0.05)}, dy8_ = l.fp8(n_, out_, 1.0);  // as filled
  }
  void fill(OpFill& f) override {
    f.uniform(x_, -1, 1, 4);
    f.uniform(dy_, -1, 1, 10);
    f.uniform(w_, -0.05, 0.05, 11);
    f.uniform(y_, -1, 1, 14);  // the columns a product into a wider matrix leaves
    if (!fp8_) return;
    Backend& be = f.backend();
    be.fp8_quantize(f8_.x, x_, n_, in_, Fp8Scaling::Delayed);
    be.fp8_quantize(f8_.w, w_, out_, in_, Fp8Scaling::Delayed);
    be.fp8_quantize(dy8_, dy_, n_, out_, Fp8Scaling::Delayed);
  }
  void forward(Backend& be) override {
    be.matmul(linear_product(y_.slice(col_, y_.numel - col_), ld_, x_, w_, n_, in_, out_, f8_));
  }
  void backward(Backend& be) override {
    linear_backward(be, dx_, 0.0f, dw_, 0.0f, dy_, out_, x_, w_, n_, in_, out_, f8_, dy8_);
  }
  std::vector<OpOutput> outputs(bool backward) const override {
    if (backward) return {{"dx", dx_}, {"dW", dw_}};
    return {{"y", y_}};
  }
  std::vector<Tensor> written() const override {
    if (col_ > 0 || ld_ > out_) return {dx_, dw_};
    return {y_, dx_, dw_};
  }
  OpWork work(double) const override {
    const double fwd = 2.0 * n_ * in_ * out_;
    return {true, fwd, 2 * fwd};
  }
  // FP8 products (v5) accumulate in the tensor cores' own precision: 2.9e-4 measured against the
  // same FP8 operands in double, with an fp32 output.
  double fp32_bound(const Plan& plan) const override { return plan.fp8 ? 2e-3 : 1e-5; }

  void extra_checks(OpCheckLog& log, int version) const override {
    if (version != 4) return;  // v5's FP8 products: tests/gpu/test_gpu_fp8.cpp
    for (auto [n, in, out] : {std::tuple{1, 32, 64}, {7, 64, 96}, {129, 512, 2048}, {33, 100, 7}}) {
      OpShape shape = shape_;
      shape.bf16_inputs = log.bf16();
      const OpMaker make = [n = n, in = in, out = out](const OpShape& s) {
        auto c = std::make_unique<LinearCase>(s);
        c->n_ = n, c->in_ = in, c->out_ = out, c->col_ = 3, c->ld_ = out + 5;  // into columns [3, 3 + out)
        return c;
      };
      log.where(fmt::format("linear v4 n={} in={} out={}", n, in, out));
      if (const std::unique_ptr<OpRig> rig = log.gpu_rig(make, shape, op_plan(version, *this, log.bf16())))
        log.expect_reference(*rig);
    }
  }

 private:
  int n_, in_, out_;
  int64_t col_ = 0, ld_;  // y's columns [col, col + out) of rows ld apart
  bool fp8_ = false;
  Tensor x_, w_, dy_, y_, dx_, dw_;
  Fp8Operands f8_;  // the FP8 forms of x and W
  Fp8Matrix dy8_;
};

}  // namespace

std::unique_ptr<OpCase> linear_case(const OpShape& shape) { return std::make_unique<LinearCase>(shape); }

}  // namespace tt
