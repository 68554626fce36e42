#include "bench/op_table.h"

#include "model/fp8_state.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/dtype.h"
#include "core/rng.h"
#include "model/config.h"
#include "model/params.h"
#include "ops/rope.h"

namespace tt {

const std::vector<Op> kOps = {Op::Attention,    Op::RmsNorm,      Op::SwiGlu,   Op::Rope,
                              Op::ResidualNorm, Op::CrossEntropy, Op::Quantize, Op::Linear};

const char* op_name(Op op) {
  switch (op) {
    case Op::Attention: return "attention";
    case Op::RmsNorm: return "rmsnorm";
    case Op::SwiGlu: return "swiglu";
    case Op::Rope: return "rope";
    case Op::ResidualNorm: return "residual_norm";
    case Op::CrossEntropy: return "cross_entropy";
    case Op::Quantize: return "quantize";
    case Op::Linear: return "linear";
  }
  return "?";
}

namespace {
bool fused_in_v4(Op op) { return op == Op::ResidualNorm || op == Op::CrossEntropy; }
}  // namespace

int base_version(Op op, int version) {
  if (op == Op::Quantize) return 5;  // new in v5: measured against the copy alone
  if (op == Op::Linear) return 4;
  if (op == Op::SwiGlu && version == 5) return 3;
  return fused_in_v4(op) ? 3 : 2;
}
bool has_row(Op op, int version) {
  if (op == Op::Quantize) return version == 5;
  if (op == Op::Linear) return version >= 4;
  if (op == Op::SwiGlu) return version <= 3 || version == 5;
  return fused_in_v4(op) ? version == 3 || version == 4 : version <= 3;
}

// Launched the plain way: a kernel timed on its own, like its v2 counterpart and the copy it is
// measured against (programmatic launch would overlap each repetition with the end of the one
// before).
Plan op_plan(int version, Op op, bool amp) {
  Plan p = plan_for_version(version);
  p.amp = amp;
  p.tf32 = false;
  p.programmatic_launch = false;
  if (op != Op::Attention) p.custom_attention = false;
  // In fp32 the backend keeps v2's materialized attention where its scores fit (it is faster
  // there); the v3 row takes our FMA flash attention all the same.
  if (op == Op::Attention && version >= 3) p.flash_attention = false;
  if (op != Op::RmsNorm && op != Op::ResidualNorm) p.custom_rmsnorm = false;  // v3's norm: the residual's base
  if (op != Op::SwiGlu) p.custom_swiglu = false;
  if (op != Op::Rope) p.custom_rope = false;
  if (op != Op::ResidualNorm) p.fused_residual_norm = false;
  if (op != Op::CrossEntropy) p.fused_classifier = false;
  p.fused_adamw = p.gemm_epilogues = false;  // not operations of this table
  if (op != Op::Quantize && op != Op::Linear && op != Op::SwiGlu) p.fp8 = false;
  return p;
}

std::string OpShape::label() const { return fmt::format("B{} T{}", B, T); }

OpRig::OpRig(std::unique_ptr<Backend> backend, const OpShape& s, bool logits, uint64_t seed)
    : be_(std::move(backend)), shape_(s), seed_(seed) {
  Backend& be = *be_;
  attn = {s.B, s.T, s.heads, s.kv_heads, s.head_dim};
  n = int64_t(s.B) * s.T;
  ce_rows = logits ? std::min(n, kMaxClassifierRows) : 0;
  padded_vocab = tt::padded_vocab(s.vocab, std::max(be.vocab_padding_multiple(), s.vocab_multiple));
  const int64_t C = s.hidden, F = s.intermediate, HD = int64_t(s.heads) * s.head_dim;
  const DType A = be.act_dtype(), S = be.acc_dtype(), M = be.master_dtype();
  const TensorSpec saved = be.attention_saved(attn);
  const ModelShape model{s.B, s.T, s.hidden, s.heads, s.kv_heads, s.head_dim, s.intermediate, ModelConfig().vocab_size};
  arena_ = std::make_unique<Arena>(be.memory());
  Buffers& b = buf;
  arena_->build([&](Arena& a) {
    be.layout_workspace(a, model);
    auto take = [&](DType d, int64_t numel) { return a.take(Category::Activations, d, numel); };
    b.qkv = take(A, n * attn.ld()), b.att = take(A, n * HD), b.saved = take(saved.dtype, saved.numel);
    b.dqkv = take(A, n * attn.ld()), b.datt = take(A, n * HD);
    b.x = take(A, n * C), b.w = take(A, C), b.out = take(A, n * C), b.rstd = take(S, n);
    b.dout = take(A, n * C), b.dx = take(A, n * C), b.dw = take(M, C);
    b.gateup = take(A, n * 2 * F), b.h = take(A, n * F), b.dh = take(A, n * F), b.dgateup = take(A, n * 2 * F);
    b.table = take(S, int64_t(s.T) * s.head_dim);
    b.b = take(A, n * C), b.sum = take(A, n * C), b.dres = take(A, n * C);
    b.logits = take(A, ce_rows * padded_vocab), b.targets = take(DType::I32, ce_rows);
    b.losses = take(S, ce_rows);
    b.lw = take(A, 2 * F * C), b.ly = take(A, n * 2 * F), b.ldy = take(A, n * 2 * F), b.ldx = take(A, n * C);
    b.ldw = take(M, 2 * F * C);
    if (be.plan().fp8) {
      b.slots = take(DType::F32, 5 * kFp8SlotFloats);
      auto fp8 = [&](int64_t r, int64_t c, int slot) {
        return Fp8Matrix{take(DType::F8E4M3, r * c), take(DType::F8E4M3, r * c), c, r,
                         b.slots.slice(int64_t(slot) * kFp8SlotFloats, kFp8SlotFloats)};
      };
      b.x8 = fp8(n, C, 0), b.w8 = fp8(2 * F, C, 1), b.dy8 = fp8(n, 2 * F, 2);
      b.h8 = fp8(n, F, 3), b.dgateup8 = fp8(n, 2 * F, 4);
    }
  });
  fill();
}

namespace {

// `values` rounded to the check's input type (fp32, or bf16 for the activations of a bf16 run),
// then uploaded in the tensor's type.
void upload_values(Backend& be, const Tensor& t, std::vector<double> values, bool round_bf16) {
  for (double& v : values) v = round_bf16 ? bf16_to_float(float_to_bf16(float(v))) : double(float(v));
  if (t.dtype == DType::F64) return be.upload(t, values.data());
  if (t.dtype == DType::F32) {
    const std::vector<float> f(values.begin(), values.end());
    return be.upload(t, f.data());
  }
  if (is_fp8(t.dtype)) {  // the codes of the values, unscaled (NaN for a poison)
    std::vector<uint8_t> q(values.size());
    for (size_t i = 0; i < q.size(); ++i) q[i] = float_to_fp8(float(values[i]), fp8_format(t.dtype));
    return be.upload(t, q.data());
  }
  TT_CHECK(t.dtype == DType::BF16, std::string("op table: cannot fill ") + dtype_name(t.dtype));
  std::vector<bf16> h(values.size());
  for (size_t i = 0; i < h.size(); ++i) h[i] = float_to_bf16(float(values[i]));
  be.upload(t, h.data());
}

}  // namespace

void fill_uniform(Backend& be, const Tensor& t, double lo, double hi, uint64_t seed, uint64_t stream, bool round_bf16) {
  const CounterRng rng(seed, kStreamTest + stream);
  std::vector<double> v(size_t(t.numel));
#pragma omp parallel for
  for (int64_t i = 0; i < t.numel; ++i) v[size_t(i)] = lo + (hi - lo) * rng.uniform(uint64_t(i));
  upload_values(be, t, std::move(v), round_bf16);
}

void poison_values(Backend& be, const Tensor& t) {
  upload_values(be, t, std::vector<double>(size_t(t.numel), std::nan("")), false);
}

std::vector<double> download_values(Backend& be, const Tensor& t) {
  std::vector<double> out(size_t(t.numel));
  if (t.dtype == DType::F64) {
    be.download(out.data(), t);
  } else if (t.dtype == DType::F32) {
    std::vector<float> f(out.size());
    be.download(f.data(), t);
    std::copy(f.begin(), f.end(), out.begin());
  } else if (is_fp8(t.dtype)) {  // the codes' values, unscaled
    std::vector<uint8_t> q(out.size());
    be.download(q.data(), t);
    for (size_t i = 0; i < q.size(); ++i) out[i] = fp8_to_float(q[i], fp8_format(t.dtype));
  } else {
    TT_CHECK(t.dtype == DType::BF16, std::string("op table: cannot read ") + dtype_name(t.dtype));
    std::vector<bf16> h(out.size());
    be.download(h.data(), t);
    for (size_t i = 0; i < h.size(); ++i) out[i] = bf16_to_float(h[i]);
  }
  return out;
}

void OpRig::fill() {
  Backend& be = *be_;
  uint64_t stream = 0;  // each tensor its own stream of the seed: the same values on any backend
  auto uniform = [&](const Tensor& t, double lo, double hi) {
    fill_uniform(be, t, lo, hi, seed_, ++stream, shape_.bf16_inputs);
  };
  for (const Tensor* t : {&buf.qkv, &buf.dqkv, &buf.datt, &buf.x, &buf.dout, &buf.gateup, &buf.dh, &buf.b, &buf.dres,
                          &buf.ldy})
    uniform(*t, -1, 1);
  uniform(buf.lw, -0.05, 0.05);
  uniform(buf.logits, -4, 4);
  uniform(buf.w, 0.5, 1.5);
  be.zero(buf.dw);
  std::vector<int32_t> targets(static_cast<size_t>(ce_rows));
  const CounterRng rng(seed_, kStreamTest);
  for (size_t i = 0; i < targets.size(); ++i) targets[i] = int32_t(rng.below(i, uint32_t(shape_.vocab)));
  be.upload(buf.targets, targets.data());
  upload_values(be, buf.table, rope_table(shape_.T, shape_.head_dim, 10000.0), false);  // the GPU's table is fp32
  if (!be.plan().fp8) return;
  // Delayed scaling's slots as a history would leave them: each tensor's scale from its range
  // (x and dy in [-1, 1], W in [-0.05, 0.05]); then the FP8 forms the products read.
  std::vector<float> slots(5 * kFp8SlotFloats, 0.0f);
  for (int i = 0; i < 5; ++i) {  // SwiGLU's h and dgateup: of gate and up in [-1, 1], dh in [-1, 1]
    const float scale = fp8_scale(i == 1 ? 0.05f : 1.0f, Fp8Format::E4M3);
    slots[size_t(i) * kFp8SlotFloats] = 1.0f / scale, slots[size_t(i) * kFp8SlotFloats + 1] = scale;
    slots[size_t(i) * kFp8SlotFloats + 3] = float(fp8_spec(Fp8Format::E4M3).max_finite);
  }
  be.upload(buf.slots, slots.data());
  const int64_t C = shape_.hidden, F2 = 2 * int64_t(shape_.intermediate);
  be.fp8_quantize(buf.x8, buf.x, n, C, Fp8Scaling::Delayed);
  be.fp8_quantize(buf.w8, buf.lw, F2, C, Fp8Scaling::Delayed);
  be.fp8_quantize(buf.dy8, buf.ldy, n, F2, Fp8Scaling::Delayed);
}

OpCalls bind_op(OpRig& r, Op op) {
  Backend& be = r.backend();
  const OpRig::Buffers& b = r.buf;
  const AttnShape& s = r.attn;
  const OpShape& o = r.shape();
  const double a = double(dtype_size(be.act_dtype())), n = double(r.n), C = o.hidden, F = o.intermediate;
  OpCalls c;
  switch (op) {
    case Op::Attention:
      c.fwd = [&be, &b, &s] { be.attention_forward(b.att, b.saved, b.qkv, s); };
      c.bwd = [&be, &b, &s] { be.attention_backward(b.dqkv, b.datt, b.qkv, b.att, b.saved, s); };
      c.flops = true;
      c.fwd_amount = 4.0 * s.B * s.H * double(s.T) * s.T * s.D / 2;  // causal: half the scores
      c.bwd_amount = 2.5 * c.fwd_amount;
      c.fwd_outputs = {{"att", b.att}}, c.bwd_outputs = {{"dqkv", b.dqkv}};
      c.written = {b.att, b.saved, b.dqkv};
      break;
    case Op::RmsNorm:
      c.fwd = [&be, &b, &r, &o] { be.rmsnorm_forward(b.out, b.rstd, b.x, b.w, r.n, o.hidden, 1e-5); };
      c.bwd = [&be, &b, &r, &o] { be.rmsnorm_backward(b.dx, b.dw, b.dout, b.x, b.w, b.rstd, r.n, o.hidden, false); };
      c.fwd_amount = a * (2 * n * C + C) + 4 * n;
      c.bwd_amount = a * (3 * n * C + C) + 4 * n + 8 * C;
      c.fwd_outputs = {{"out", b.out}, {"rstd", b.rstd}}, c.bwd_outputs = {{"dx", b.dx}, {"dw", b.dw}};
      c.written = {b.out, b.rstd, b.dx, b.dw};
      break;
    case Op::SwiGlu:
      if (be.plan().fp8 && be.plan().fp8_fused_swiglu) {  // v5: made in FP8, both layouts (delayed scaling)
        c.fwd = [&be, &b, &r, &o] { be.fp8_swiglu_forward(b.h8, b.gateup, r.n, o.intermediate, Fp8Scaling::Delayed); };
        c.bwd = [&be, &b, &r, &o] {
          be.fp8_swiglu_backward(b.dgateup8, b.dh, b.gateup, r.n, o.intermediate, Fp8Scaling::Delayed);
        };
        c.fwd_amount = (2 * a + 2) * n * F;
        c.bwd_amount = 3 * a * n * F + 4 * n * F;  // each gate, up and dh read once at least
        c.fwd_outputs = {{"h8 rows", b.h8.rows}, {"h8 cols", b.h8.cols}};
        c.bwd_outputs = {{"dgateup8 rows", b.dgateup8.rows}, {"dgateup8 cols", b.dgateup8.cols}};
        c.written = {b.h8.rows, b.h8.cols, b.dgateup8.rows, b.dgateup8.cols};
        break;
      }
      c.fwd = [&be, &b, &r, &o] { be.swiglu_forward(b.h, b.gateup, r.n, o.intermediate); };
      c.bwd = [&be, &b, &r, &o] { be.swiglu_backward(b.dgateup, b.dh, b.gateup, r.n, o.intermediate); };
      c.fwd_amount = a * 3 * n * F;
      c.bwd_amount = a * 5 * n * F;
      c.fwd_outputs = {{"h", b.h}}, c.bwd_outputs = {{"dgateup", b.dgateup}};
      c.written = {b.h, b.dgateup};
      break;
    case Op::ResidualNorm:  // as the model makes it: one kernel each way with the switch, else the add apart
      if (be.plan().fused_residual_norm) {
        c.fwd = [&be, &b, &r, &o] { be.add_rmsnorm_forward(b.sum, b.out, b.rstd, b.x, b.b, b.w, r.n, o.hidden, 1e-5); };
        c.bwd = [&be, &b, &r, &o] {
          be.rmsnorm_backward_add(b.dres, b.dw, b.dout, b.sum, b.w, b.rstd, r.n, o.hidden, false);
        };
      } else {
        c.fwd = [&be, &b, &r, &o] {
          be.add(b.sum, b.x, b.b);
          be.rmsnorm_forward(b.out, b.rstd, b.sum, b.w, r.n, o.hidden, 1e-5);
        };
        c.bwd = [&be, &b, &r, &o] {
          be.rmsnorm_backward(b.dx, b.dw, b.dout, b.sum, b.w, b.rstd, r.n, o.hidden, false);
          be.add(b.dres, b.dres, b.dx);
        };
      }
      c.fwd_amount = a * (4 * n * C + C) + 4 * n;
      c.bwd_amount = a * (4 * n * C + C) + 4 * n + 8 * C;
      c.fwd_outputs = {{"sum", b.sum}, {"out", b.out}, {"rstd", b.rstd}}, c.bwd_outputs = {{"dres", b.dres}, {"dw", b.dw}};
      c.written = {b.sum, b.out, b.rstd, b.dx, b.dw};
      break;
    case Op::CrossEntropy: {  // one call, fwd+bwd: the loss and the gradient, over the logits
      const double scale = 1.0 / double(r.ce_rows);
      if (be.plan().fused_classifier)
        c.bwd = [&be, &b, &r, &o, scale] {
          be.cross_entropy_fused(b.losses, b.logits, b.targets, r.ce_rows, o.vocab, r.padded_vocab, scale);
        };
      else
        c.bwd = [&be, &b, &r, &o, scale] {
          be.cross_entropy_forward(b.losses, b.logits, b.targets, r.ce_rows, o.vocab, r.padded_vocab);
          be.cross_entropy_backward(b.logits, b.logits, b.targets, r.ce_rows, o.vocab, r.padded_vocab, scale);
        };
      c.bwd_amount = a * 2 * double(r.ce_rows) * r.padded_vocab + 8.0 * double(r.ce_rows);
      c.bwd_outputs = {{"losses", b.losses}, {"dlogits", b.logits}};
      c.written = {b.losses};
      break;
    }
    case Op::Quantize: {  // delayed scaling, v5's way: one pass, both layouts
      const int64_t F2 = 2 * int64_t(o.intermediate);
      c.fwd = [&be, &b, &r, &o] { be.fp8_quantize(b.x8, b.x, r.n, o.hidden, Fp8Scaling::Delayed); };
      c.bwd = [&be, &b, &r, F2] { be.fp8_quantize(b.dy8, b.ldy, r.n, F2, Fp8Scaling::Delayed); };
      c.fwd_amount = (a + 2) * n * C;  // read once, written in two layouts of a byte
      c.bwd_amount = (a + 2) * n * double(F2);
      c.fwd_outputs = {{"x8 rows", b.x8.rows}, {"x8 cols", b.x8.cols}};
      c.bwd_outputs = {{"dy8 rows", b.dy8.rows}, {"dy8 cols", b.dy8.cols}};
      c.written = {b.x8.rows, b.x8.cols, b.dy8.rows, b.dy8.cols};
      break;
    }
    case Op::Linear: {  // y = x W^T; dx = dy W and dW = dy^T x: bf16 (v4) or FP8 (v5)
      const int N = int(r.n), in = o.hidden, out = 2 * o.intermediate;
      if (be.plan().fp8 && !fp8_dims_fit({N, in, out}))
        usage_fail("linear: FP8 products need the tokens, the hidden size and twice the ffn size to be multiples of 16");
      if (be.plan().fp8) {
        c.fwd = [&be, &b, N, in, out] { be.matmul(fp8_linear_gemm(b.ly, out, b.x8, b.w8, N, in, out)); };
        c.bwd = [&be, &b, N, in, out] {
          be.matmul(fp8_linear_dx_gemm(b.ldx, in, b.dy8, b.w8, N, in, out, 0.0f));
          be.matmul(fp8_linear_dw_gemm(b.ldw, b.dy8, b.x8, N, in, out));
        };
      } else {
        c.fwd = [&be, &b, N, in, out] { be.matmul(linear_gemm(b.ly, out, b.x, in, b.lw, N, in, out)); };
        c.bwd = [&be, &b, N, in, out] {
          be.matmul(linear_dx_gemm(b.ldx, in, b.ldy, out, b.lw, N, in, out, 0.0f));
          be.matmul(linear_dw_gemm(b.ldw, b.ldy, out, b.x, in, N, in, out));
        };
      }
      c.flops = true;
      c.fwd_amount = 2.0 * n * C * 2 * F;
      c.bwd_amount = 2 * c.fwd_amount;
      c.fwd_outputs = {{"y", b.ly}}, c.bwd_outputs = {{"dx", b.ldx}, {"dW", b.ldw}};
      c.written = {b.ly, b.ldx, b.ldw};
      break;
    }
    case Op::Rope: {  // as the model rotates: queries and keys in one call with custom-rope, else one call each
      std::vector<RopeShape> calls = {{r.n, s.T, s.H, s.D, 0, s.ld()}, {r.n, s.T, s.KVH, s.D, s.k_col(), s.ld()}};
      if (be.plan().custom_rope) calls = {{r.n, s.T, s.H + s.KVH, s.D, 0, s.ld()}};
      c.fwd = [&be, &b, calls] { for (const RopeShape& x : calls) be.rope_forward(b.qkv, b.table, x); };
      c.bwd = [&be, &b, calls] { for (const RopeShape& x : calls) be.rope_backward(b.dqkv, b.table, x); };
      c.fwd_amount = c.bwd_amount = 2 * a * n * (s.H + s.KVH) * s.D + 4.0 * s.T * s.D;
      c.fwd_outputs = {{"qkv", b.qkv}}, c.bwd_outputs = {{"dqkv", b.dqkv}};  // rotated in place
      break;
    }
  }
  return c;
}

}  // namespace tt
