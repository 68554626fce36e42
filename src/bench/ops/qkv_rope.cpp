// The QKV product case (src/bench/op_case.h): qkv = x W_qkv^T with the queries and keys rotated by
// RoPE after it, as the model makes them (Backend::qkv_rope): v5's cuBLAS product then the RoPE
// kernel, v6's one kernel with RoPE in the product's epilogue (rope-in-qkv-product,
// src/ops/rope_product.cu). A forward alone: the backward of both is v5's (RoPE's backward inside
// the attention's is the attention case's v6 row). Its extra checks (bf16): the shapes at the
// kernel's edges (one tile, rotated columns ending at an odd multiple of 64, heads of 96 across the
// tiles) and past them (where the backend falls back to the two launches), each against the
// reference and bit for bit against v5's two launches.
#include <fmt/format.h>

#include <tuple>

#include "bench/op_case.h"
#include "model/op_sequences.h"
#include "ops/gemm.h"
#include "ops/rope.h"

namespace tt {

std::unique_ptr<OpCase> qkv_rope_case(const OpShape& shape);

namespace {

class QkvRopeCase final : public OpCase {
 public:
  using OpCase::OpCase;
  const char* name() const override { return "qkv_rope"; }
  bool has_version(int version) const override { return version == 5 || version == 6; }
  int base_version(int) const override { return 5; }
  std::vector<bool Plan::*> switches() const override { return {&Plan::rope_in_qkv_product}; }
  void adjust_plan(Plan& p) const override { p.custom_rope = true; }  // the queries and keys in one call

  void layout(OpLayout& l) override {
    const AttnShape s = shape_.attn();
    ropes_ = rope_shapes(l.backend(), s);
    x_ = l.act(shape_.tokens() * shape_.hidden), w_ = l.act(s.ld() * shape_.hidden);
    qkv_ = l.act(shape_.tokens() * s.ld()), table_ = l.acc(int64_t(shape_.T) * shape_.head_dim);
  }
  void fill(OpFill& f) override {
    f.uniform(x_, -1, 1, 4);
    f.uniform(w_, -0.05, 0.05, 11);
    f.table(table_, rope_table(shape_.T, shape_.head_dim, 10000.0));
  }
  void forward(Backend& be) override {
    const int n = int(shape_.tokens()), C = shape_.hidden, Q = int(shape_.attn().ld());
    be.qkv_rope(linear_gemm(qkv_, Q, x_, C, w_, n, C, Q), table_, ropes_);
  }
  bool has_backward() const override { return false; }
  void backward(Backend&) override {}
  std::vector<OpOutput> outputs(bool backward) const override {
    if (backward) return {};
    return {{"qkv", qkv_}};
  }
  std::vector<Tensor> written() const override { return {qkv_}; }
  OpWork work(double) const override {
    return {true, 2 * double(shape_.tokens()) * shape_.hidden * double(shape_.attn().ld()), 0};
  }

  void extra_checks(OpCheckLog& log, int version) const override {
    if (version != 6 || !log.bf16()) return;  // the kernel is bf16's; v5 is cuBLAS's and the RoPE case's
    // (B, T, hidden, heads, kv heads, head size): one tile; the default model; rotated columns
    // ending at 320 of 384; heads of 96; past the cap of 1024 tokens and rows not a multiple of 128
    // (the two launches).
    for (auto [B, T, C, H, KVH, D] : {std::tuple{1, 128, 64, 2, 1, 64}, {8, 128, 512, 8, 4, 64},
                                      {4, 64, 128, 4, 1, 64}, {2, 128, 128, 2, 2, 96}, {8, 256, 128, 4, 2, 32},
                                      {2, 100, 128, 4, 2, 32}}) {
      OpShape shape = shape_;
      shape.B = B, shape.T = T, shape.hidden = C, shape.heads = H, shape.kv_heads = KVH, shape.head_dim = D;
      shape.bf16_inputs = true;
      log.where(fmt::format("qkv_rope v6 B={} T={} C={} H={} KVH={} D={}", B, T, C, H, KVH, D));
      log.expect_reference_and_bits(qkv_rope_case, shape, op_plan(6, *this, true), op_plan(5, *this, true),
                                    "v5's product and RoPE kernel");
    }
  }

 private:
  std::vector<RopeShape> ropes_;
  Tensor x_, w_, qkv_, table_;
};

}  // namespace

std::unique_ptr<OpCase> qkv_rope_case(const OpShape& shape) { return std::make_unique<QkvRopeCase>(shape); }

}  // namespace tt
