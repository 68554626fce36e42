// The transformer blocks' backward case (src/bench/op_case.h): two layers of the model, their forward
// as Backend::block_forward makes it (the operations one by one; it writes what the backward reads),
// then their backward as Backend::block_backward makes it: by default the operations one by one
// (down's input gradient and SwiGLU's backward, gate/up's input gradient, the FFN norm's backward
// adding into the residual gradient, the output product's and the attention's with RoPE's, the QKV
// product's, the attention norm's, the four weight gradients), and v6's one persistent launch with
// blocks-backward-in-one-launch (src/ops/block_backward.cu; opt-in, so its row turns it on), against
// v5's kernels one by one. Its extra checks (bf16): one row block of a small model and the default
// shape, each against the reference and bit for bit against v6's kernels one by one.
#include <fmt/format.h>

#include "bench/op_case.h"
#include "bench/ops/blocks.h"
#include "ops/block_backward.h"

namespace tt {

std::unique_ptr<OpCase> block_backward_case(const OpShape& shape);

namespace {

class BlockBackwardCase final : public OpCase {
 public:
  using OpCase::OpCase;
  const char* name() const override { return "block_backward"; }
  bool has_version(int version) const override { return version == 5 || version == 6; }
  int base_version(int) const override { return 5; }
  // And those of the kernels it runs and whose bits it keeps (other cases' switches, else off here).
  std::vector<bool Plan::*> switches() const override {
    return {&Plan::blocks_backward_in_one_launch, &Plan::custom_attention,        &Plan::custom_rmsnorm,
            &Plan::custom_swiglu,                 &Plan::fused_residual_norm,     &Plan::rope_in_qkv_product,
            &Plan::swiglu_in_gate_up,             &Plan::swiglu_in_down_gradient, &Plan::attention_backward_in_one_block};
  }
  void adjust_plan(Plan& p) const override {
    p.custom_rope = true;  // the queries and keys in one call
    if (p.version >= 6) p.blocks_backward_in_one_launch = true;
  }

  // The forward's layers, then for each the backward's gradients; the first layer's attention norm
  // (its rstd and gain) an input, the second's the first's next norm.
  void layout(OpLayout& l) override {
    f_ = block_forward_layout(l, shape_);
    const AttnShape s = f_.attn;
    const int64_t n = shape_.tokens(), C = shape_.hidden, F = shape_.intermediate, Q = s.ld(), HD = s.H * s.D;
    b_ = BlockBackward{{}, f_.rope_table, f_.ropes, s, shape_.hidden, shape_.intermediate, false};
    Tensor rstd = l.acc(n), norm = l.act(C), d = l.act(n * C);
    for (const BlockLayer& f : f_.layers) {
      BlockBackwardLayer b;
      b.x = f.x, b.xn1 = f.xn1, b.rstd1 = rstd, b.qkv = f.qkv, b.att = f.att, b.saved = f.saved, b.x_mid = f.x_mid;
      b.xn2 = f.xn2, b.rstd2 = f.rstd2, b.gateup = f.gateup, b.h = f.h;
      b.wqkv = f.wqkv, b.wo = f.wo, b.wgateup = f.wgateup, b.wdown = f.wdown, b.attn_norm = norm, b.ffn_norm = f.ffn_norm;
      rstd = f.rstd_next, norm = f.next_norm;
      b.d_in = d;
      b.d_out = d = l.act(n * C);
      b.dh = l.act(n * F), b.dgateup = l.act(n * 2 * F), b.d_normed2 = l.act(n * C), b.d_mid = l.act(n * C);
      b.datt = l.act(n * HD), b.dqkv = l.act(n * Q), b.d_normed1 = l.act(n * C);
      b.g_wqkv = l.acc(Q * C), b.g_wo = l.acc(C * HD), b.g_wgateup = l.acc(2 * F * C), b.g_wdown = l.acc(C * F);
      b.g_attn_norm = l.acc(C), b.g_ffn_norm = l.acc(C);
      b_.layers.push_back(b);
    }
  }
  void fill(OpFill& f) override {
    block_forward_fill(f, f_, shape_);
    f.uniform(b_.layers[0].rstd1, 0.5, 1.5, 6);
    f.uniform(b_.layers[0].attn_norm, 0.5, 1.5, 7);
    f.uniform(b_.layers.back().d_out, -1, 1, 8);
  }
  void forward(Backend& be) override { be.block_forward(f_); }
  void backward(Backend& be) override { be.block_backward(b_); }
  std::vector<OpOutput> outputs(bool backward) const override {
    std::vector<OpOutput> out;
    for (int i = 0; i < kBlockLayers; ++i) {
      const std::string at = fmt::format("layer {} ", i);
      if (!backward) {
        const BlockLayer& f = f_.layers[size_t(i)];
        out.push_back({at + "x_next", f.x_next});
        continue;
      }
      const BlockBackwardLayer& b = b_.layers[size_t(i)];
      for (auto [name, t] : {std::pair{"dgateup", b.dgateup}, {"d_normed2", b.d_normed2}, {"d_mid", b.d_mid},
                             {"datt", b.datt}, {"dqkv", b.dqkv}, {"d_normed1", b.d_normed1}, {"d_in", b.d_in},
                             {"g_wqkv", b.g_wqkv}, {"g_wo", b.g_wo}, {"g_wgateup", b.g_wgateup},
                             {"g_wdown", b.g_wdown}, {"g_attn_norm", b.g_attn_norm}, {"g_ffn_norm", b.g_ffn_norm}})
        out.push_back({at + name, t});
    }
    return out;
  }
  std::vector<Tensor> written() const override {
    std::vector<Tensor> w = block_forward_written(f_);
    for (const BlockBackwardLayer& b : b_.layers)
      for (const Tensor& t : {b.dgateup, b.d_normed2, b.d_mid, b.datt, b.dqkv, b.d_normed1, b.d_in, b.g_wqkv, b.g_wo,
                              b.g_wgateup, b.g_wdown, b.g_attn_norm, b.g_ffn_norm})
        w.push_back(t);
    return w;
  }
  OpWork work(double) const override { return block_flops(shape_); }

  void extra_checks(OpCheckLog& log, int version) const override {
    if (version != 6 || !log.bf16()) return;  // the kernel is bf16's
    log.expect_blocks_in_one_launch(block_backward_case, *this, &Plan::blocks_backward_in_one_launch, [](OpRig& rig) {
      return rig.backend().block_backward_misfit(static_cast<BlockBackwardCase&>(rig.op()).b_);
    });
  }

 private:
  BlockForward f_;
  BlockBackward b_;
};

}  // namespace

std::unique_ptr<OpCase> block_backward_case(const OpShape& shape) { return std::make_unique<BlockBackwardCase>(shape); }

}  // namespace tt
