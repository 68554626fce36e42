// The transformer blocks' forward case (src/bench/op_case.h): two layers of the model's forward after
// the first attention norm, as Backend::block_forward makes them: by default the operations one by
// one (the QKV product and RoPE, the attention, the output product adding the residual, RMSNorm,
// gate/up and SwiGLU, down adding the residual, the next RMSNorm), and v6's one persistent launch
// with blocks-forward-in-one-launch (src/ops/block_forward.cu; opt-in, so its row turns it on),
// against v5's kernels one by one. A
// forward alone: the backward is the operations' own. Its extra checks (bf16): one row block of a
// small model and the default shape, each against the reference and bit for bit against v6's
// kernels one by one.
#include <fmt/format.h>

#include "bench/op_case.h"
#include "bench/ops/blocks.h"
#include "model/op_sequences.h"
#include "ops/block_forward.h"
#include "ops/rope.h"

namespace tt {

std::unique_ptr<OpCase> block_forward_case(const OpShape& shape);

namespace {

class BlockForwardCase final : public OpCase {
 public:
  using OpCase::OpCase;
  const char* name() const override { return "block_forward"; }
  bool has_version(int version) const override { return version == 5 || version == 6; }
  int base_version(int) const override { return 5; }
  // And those of the kernels it runs and whose bits it keeps (other cases' switches, else off here).
  std::vector<bool Plan::*> switches() const override {
    return {&Plan::blocks_forward_in_one_launch, &Plan::custom_attention, &Plan::custom_rmsnorm,
            &Plan::rope_in_qkv_product, &Plan::swiglu_in_gate_up};
  }
  void adjust_plan(Plan& p) const override {
    p.custom_rope = true;  // the queries and keys in one call
    if (p.version >= 6) p.blocks_forward_in_one_launch = true;
  }

  void layout(OpLayout& l) override { f_ = block_forward_layout(l, shape_); }
  void fill(OpFill& f) override { block_forward_fill(f, f_, shape_); }
  void forward(Backend& be) override { be.block_forward(f_); }
  bool has_backward() const override { return false; }
  void backward(Backend&) override {}
  std::vector<OpOutput> outputs(bool backward) const override {
    if (backward) return {};
    std::vector<OpOutput> out;
    for (int i = 0; i < kBlockLayers; ++i) {
      const BlockLayer& b = f_.layers[size_t(i)];
      const std::string at = fmt::format("layer {} ", i);
      for (auto [name, t] : {std::pair{"qkv", b.qkv}, {"att", b.att}, {"x_mid", b.x_mid}, {"xn2", b.xn2},
                             {"rstd2", b.rstd2}, {"gateup", b.gateup}, {"h", b.h}, {"x_next", b.x_next},
                             {"xn_next", b.xn_next}, {"rstd_next", b.rstd_next}})
        out.push_back({at + name, t});
    }
    return out;
  }
  std::vector<Tensor> written() const override { return block_forward_written(f_); }
  OpWork work(double) const override { return {true, block_flops(shape_).fwd, 0}; }

  void extra_checks(OpCheckLog& log, int version) const override {
    if (version != 6 || !log.bf16()) return;  // the kernel is bf16's
    log.expect_blocks_in_one_launch(block_forward_case, *this, &Plan::blocks_forward_in_one_launch, [](OpRig& rig) {
      return rig.backend().block_forward_misfit(static_cast<BlockForwardCase&>(rig.op()).f_);
    });
  }

 private:
  BlockForward f_;
};

}  // namespace

BlockForward block_forward_layout(OpLayout& l, const OpShape& shape) {
  const AttnShape s = shape.attn();
  const int64_t n = shape.tokens(), C = shape.hidden, F = shape.intermediate, Q = s.ld(), HD = s.H * s.D;
  const TensorSpec saved = l.backend().attention_saved(s);
  BlockForward f{{}, l.acc(int64_t(shape.T) * shape.head_dim), rope_shapes(l.backend(), s), s, shape.hidden,
                 shape.intermediate, 1e-5};
  Tensor x = l.act(n * C), xn = l.act(n * C);
  for (int i = 0; i < kBlockLayers; ++i) {
    BlockLayer b;
    b.xn1 = xn, b.x = x;
    b.qkv = l.act(n * Q), b.att = l.act(n * HD), b.saved = l.take(saved.dtype, saved.numel);
    b.x_mid = l.act(n * C), b.xn2 = l.act(n * C), b.rstd2 = l.acc(n);
    b.gateup = l.act(n * 2 * F), b.h = l.act(n * F);
    b.x_next = x = l.act(n * C), b.xn_next = xn = l.act(n * C), b.rstd_next = l.acc(n);
    b.wqkv = l.act(Q * C), b.wo = l.act(C * HD), b.ffn_norm = l.act(C), b.wgateup = l.act(2 * F * C);
    b.wdown = l.act(C * F), b.next_norm = l.act(C);
    f.layers.push_back(b);
  }
  return f;
}

void block_forward_fill(OpFill& f, const BlockForward& b, const OpShape& shape) {
  f.uniform(b.layers[0].x, -1, 1, 4);
  f.uniform(b.layers[0].xn1, -1, 1, 5);
  f.table(b.rope_table, rope_table(shape.T, shape.head_dim, 10000.0));
  uint64_t stream = 11;
  for (const BlockLayer& l : b.layers) {
    f.uniform(l.wqkv, -0.05, 0.05, stream++);
    f.uniform(l.wo, -0.05, 0.05, stream++);
    f.uniform(l.ffn_norm, 0.5, 1.5, stream++);
    f.uniform(l.wgateup, -0.05, 0.05, stream++);
    f.uniform(l.wdown, -0.05, 0.05, stream++);
    f.uniform(l.next_norm, 0.5, 1.5, stream++);
  }
}

std::vector<Tensor> block_forward_written(const BlockForward& b) {
  std::vector<Tensor> w;
  for (const BlockLayer& l : b.layers)
    for (const Tensor& t : {l.qkv, l.att, l.x_mid, l.xn2, l.rstd2, l.gateup, l.h, l.x_next, l.xn_next, l.rstd_next})
      w.push_back(t);
  return w;
}

OpWork block_flops(const OpShape& shape) {
  const AttnShape s = shape.attn();
  const double n = double(shape.tokens()), C = shape.hidden, F = shape.intermediate;
  const double products = 2 * n * C * (double(s.ld()) + 3 * F) + 2 * n * double(s.H) * s.D * C;
  const double attention = 2.0 * s.B * s.H * double(s.T) * s.T * s.D;  // causal: half of 4 B H T^2 D
  return {true, kBlockLayers * (products + attention), kBlockLayers * (2 * products + 2.5 * attention)};
}

std::unique_ptr<OpCase> block_forward_case(const OpShape& shape) { return std::make_unique<BlockForwardCase>(shape); }

}  // namespace tt
