// The gated product case (src/bench/op_case.h): the FFN's gate/up product with SwiGLU after it,
// gateup = x W_gu^T and h = silu(gate) up, and the start of its backward, dh = dy W_down and
// dgateup from dh and gateup, as the model makes them (Backend::gate_up_swiglu and
// down_swiglu_backward): v4's cuBLAS product then the SwiGLU kernel, v5's one kernel each way
// with SwiGLU in the product's epilogue (swiglu-in-gate-up, swiglu-in-down-gradient; dh is never
// stored there). Its extra checks (bf16): the shapes at the kernels' edges and past them (where
// the backend falls back to the two launches), each against the reference and bit for bit against
// v4's two launches.
#include <fmt/format.h>

#include <tuple>

#include "bench/op_case.h"
#include "ops/gemm.h"

namespace tt {

std::unique_ptr<OpCase> gated_product_case(const OpShape& shape);

namespace {

class GatedProductCase final : public OpCase {
 public:
  using OpCase::OpCase;
  const char* name() const override { return "gated_product"; }
  bool has_version(int version) const override { return version == 4 || version == 5; }
  int base_version(int) const override { return 4; }
  std::vector<bool Plan::*> switches() const override {
    return {&Plan::swiglu_in_gate_up, &Plan::swiglu_in_down_gradient};
  }

  void layout(OpLayout& l) override {
    const int64_t n = shape_.tokens(), C = shape_.hidden, F = shape_.intermediate;
    x_ = l.act(n * C), w_gu_ = l.act(2 * F * C), gateup_ = l.act(n * 2 * F), h_ = l.act(n * F);
    dy_ = l.act(n * C), w_down_ = l.act(C * F), dh_ = l.act(n * F), dgateup_ = l.act(n * 2 * F);
  }
  void fill(OpFill& f) override {
    f.uniform(x_, -1, 1, 4);
    f.uniform(dy_, -1, 1, 10);
    f.uniform(w_gu_, -0.05, 0.05, 11);
    f.uniform(w_down_, -0.05, 0.05, 12);
  }
  void forward(Backend& be) override {
    const int n = int(shape_.tokens()), C = shape_.hidden, F = shape_.intermediate;
    be.gate_up_swiglu(linear_gemm(gateup_, 2 * F, x_, C, w_gu_, n, C, 2 * F), h_, n, F);
  }
  void backward(Backend& be) override {
    const int n = int(shape_.tokens()), C = shape_.hidden, F = shape_.intermediate;
    be.down_swiglu_backward(linear_dx_gemm(dh_, F, dy_, C, w_down_, n, F, C, 0.0f), dgateup_, gateup_, n, F);
  }
  std::vector<OpOutput> outputs(bool backward) const override {
    if (backward) return {{"dgateup", dgateup_}};
    return {{"gateup", gateup_}, {"h", h_}};
  }
  std::vector<Tensor> written() const override { return {gateup_, h_, dgateup_}; }
  OpWork work(double) const override {
    const double n = double(shape_.tokens()), C = shape_.hidden, F = shape_.intermediate;
    return {true, 2 * n * C * 2 * F, 2 * n * F * C};
  }

  void extra_checks(OpCheckLog& log, int version) const override {
    if (version != 5 || !log.bf16()) return;  // the kernels are bf16's; v4 is cuBLAS's and the SwiGLU case's
    // (tokens, hidden, F): one tile, the cap of 1024 tokens, GPT-2 small's widths; past the cap and
    // rows not a multiple of 128 (the two launches).
    for (auto [n, C, F] : {std::tuple{128, 64, 128}, {1024, 512, 2048}, {256, 768, 2048}, {1152, 512, 2048},
                           {200, 512, 1024}}) {
      OpShape shape = shape_;
      shape.B = 1, shape.T = n, shape.hidden = C, shape.intermediate = F, shape.bf16_inputs = true;
      log.where(fmt::format("gated_product v5 n={} C={} F={}", n, C, F));
      log.expect_reference_and_bits(gated_product_case, shape, op_plan(5, *this, true), op_plan(4, *this, true),
                                    "v4's product and SwiGLU kernel");
    }
  }

 private:
  Tensor x_, w_gu_, gateup_, h_, dy_, w_down_, dh_, dgateup_;
};

}  // namespace

std::unique_ptr<OpCase> gated_product_case(const OpShape& shape) { return std::make_unique<GatedProductCase>(shape); }

}  // namespace tt
