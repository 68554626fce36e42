// The quantize case (src/bench/op_case.h): version 5's pass from bf16 into FP8, both layouts in
// one pass with delayed scaling, of an activation [tokens, hidden] forward and of a gradient
// [tokens, 2 ffn] backward; new in v5, its row is measured against the copy alone. Its extra check:
// the bytes of the CPU quantizer, every one.
#include "bench/op_case.h"

namespace tt {

std::unique_ptr<OpCase> quantize_case(const OpShape& shape);

namespace {

class QuantizeCase final : public OpCase {
 public:
  using OpCase::OpCase;
  const char* name() const override { return "quantize"; }
  bool has_version(int version) const override { return version == 5; }
  int base_version(int) const override { return 5; }
  std::vector<bool Plan::*> switches() const override { return {&Plan::fp8}; }

  void layout(OpLayout& l) override {
    const int64_t n = shape_.tokens(), C = shape_.hidden, F2 = 2 * int64_t(shape_.intermediate);
    x_ = l.act(n * C), dy_ = l.act(n * F2);
    x8_ = l.fp8(n, C, 1.0), dy8_ = l.fp8(n, F2, 1.0);  // the scales of values in [-1, 1]
  }
  void fill(OpFill& f) override {
    f.uniform(x_, -1, 1, 4);
    f.uniform(dy_, -1, 1, 10);
  }
  void forward(Backend& be) override { be.fp8_quantize(x8_, x_, shape_.tokens(), shape_.hidden, Fp8Scaling::Delayed); }
  void backward(Backend& be) override {
    be.fp8_quantize(dy8_, dy_, shape_.tokens(), 2 * int64_t(shape_.intermediate), Fp8Scaling::Delayed);
  }
  std::vector<OpOutput> outputs(bool backward) const override {
    if (backward) return {{"dy8 rows", dy8_.rows}, {"dy8 cols", dy8_.cols}};
    return {{"x8 rows", x8_.rows}, {"x8 cols", x8_.cols}};
  }
  std::vector<Tensor> written() const override { return {x8_.rows, x8_.cols, dy8_.rows, dy8_.cols}; }
  OpWork work(double a) const override {  // read once, written in two layouts of a byte
    const double n = double(shape_.tokens()), C = shape_.hidden, F2 = 2 * double(shape_.intermediate);
    return {false, (a + 2) * n * C, (a + 2) * n * F2};
  }

  void extra_checks(OpCheckLog& log, int version) const override {
    OpShape shape = shape_;
    shape.bf16_inputs = log.bf16();
    log.where("quantize v5 " + shape.label());
    if (const std::unique_ptr<OpRig> rig = log.gpu_rig(quantize_case, shape, op_plan(version, *this, log.bf16())))
      for (const OpCheck& c : check_against_reference(*rig))
        log.expect(c.error == 0, c.direction + ": not the CPU quantizer's bytes (error " + std::to_string(c.error) +
                                     ")");
  }

 private:
  Tensor x_, dy_;
  Fp8Matrix x8_, dy8_;
};

}  // namespace

std::unique_ptr<OpCase> quantize_case(const OpShape& shape) { return std::make_unique<QuantizeCase>(shape); }

}  // namespace tt
