// The model's sequences of calls that the plan chooses between (see op_sequences.h).
#include "model/op_sequences.h"

#include "ops/rmsnorm.h"

namespace tt {

void residual_add(Backend& be, const ResidualNorm& r) {
  if (!be.plan().fused_residual_norm && !r.b.empty()) be.add(r.sum, r.a, r.b);
}

bool norm_in_fp8(const Plan& plan, bool fp8_products, Fp8Scaling scaling, int c) {
  return fp8_products && plan.fp8_fused_norm && scaling == Fp8Scaling::Delayed && plan.custom_rmsnorm &&
         (plan.gemm_epilogues || !plan.fused_residual_norm) && fp8_norm_width_fits(c);
}

bool attention_in_fp8(const Plan& plan, bool fp8_products, Fp8Scaling scaling) {
  return fp8_products && plan.fp8_fused_attention && scaling == Fp8Scaling::Delayed && plan.custom_attention;
}

void attention_forward(Backend& be, const Tensor& att, const Tensor& saved, const Tensor& qkv, const AttnShape& s,
                       const Fp8Matrix& att8) {
  if (att8.slot.empty()) return be.attention_forward(att, saved, qkv, s);
  be.fp8_attention_forward(att8, att, saved, qkv, s);
}

void residual_norm(Backend& be, const ResidualNorm& r, const Fp8Matrix& out8) {
  if (!out8.slot.empty()) {
    TT_CHECK(!be.plan().fused_residual_norm || r.b.empty(), "residual_norm: the FP8 norm takes the sum made");
    return be.fp8_rmsnorm_forward(out8, r.rstd, r.sum, r.w, r.n, r.c, r.eps);
  }
  if (be.plan().fused_residual_norm && !r.b.empty())
    be.add_rmsnorm_forward(r.sum, r.out, r.rstd, r.a, r.b, r.w, r.n, r.c, r.eps);
  else
    be.rmsnorm_forward(r.out, r.rstd, r.sum, r.w, r.n, r.c, r.eps);
}

bool norm_backward_in_fp8(const Plan& plan, bool fp8_products, Fp8Scaling scaling) {
  return fp8_products && plan.fp8_fused_norm_backward && scaling == Fp8Scaling::Delayed && plan.custom_rmsnorm &&
         plan.fused_residual_norm;
}

void residual_norm_backward(Backend& be, const Tensor& dres, const Tensor& dres_in, const Tensor& dx, const Tensor& dw,
                            const Tensor& dout, const Tensor& sum, const Tensor& w, const Tensor& rstd, int64_t n,
                            int c, bool add_dw, const Fp8Matrix& dres8) {
  if (!dres8.slot.empty()) {
    TT_CHECK(be.plan().fused_residual_norm, "residual_norm_backward: the FP8 form is made with the add inside");
    TT_CHECK(dres_in.ptr == dres.ptr, "residual_norm_backward: the FP8 form adds in place");
    return be.fp8_rmsnorm_backward(dres8, dres, dw, dout, sum, w, rstd, n, c, true, add_dw);
  }
  if (be.plan().fused_residual_norm) return be.rmsnorm_backward_add(dres, dres_in, dw, dout, sum, w, rstd, n, c, add_dw);
  be.rmsnorm_backward(dx, dw, dout, sum, w, rstd, n, c, add_dw);
  be.add(dres, dres_in, dx);
}

bool cross_entropy_loss(Backend& be, bool training, const Tensor& losses, const Tensor& logits, const Tensor& targets,
                        int64_t n, int v, int64_t ld, double scale) {
  if (!be.plan().fused_classifier || !training) {
    be.cross_entropy_forward(losses, logits, targets, n, v, ld);
    return false;
  }
  be.cross_entropy_fused(losses, logits, targets, n, v, ld, scale);
  return true;
}

void cross_entropy_gradient(Backend& be, const Tensor& logits, const Tensor& targets, int64_t n, int v, int64_t ld,
                            double scale) {
  be.cross_entropy_backward(logits, logits, targets, n, v, ld, scale);
}

std::vector<RopeShape> rope_shapes(const Backend& be, const AttnShape& s) {
  const int64_t n = int64_t(s.B) * s.T, ld = s.ld();
  if (be.attention_applies_rope()) return {};
  if (be.plan().custom_rope) return {{n, s.T, s.H + s.KVH, s.D, 0, ld}};
  return {{n, s.T, s.H, s.D, 0, ld}, {n, s.T, s.KVH, s.D, s.k_col(), ld}};
}

bool rope_backward_in_fp8(const Plan& plan, bool fp8_products, const std::vector<RopeShape>& ropes) {
  return fp8_products && plan.fp8_fused_rope && ropes.size() == 1;
}

void qkv_rope_backward(Backend& be, const Tensor& dqkv, const Fp8Matrix& dqkv8, const Tensor& table,
                       const std::vector<RopeShape>& ropes, Fp8Scaling scaling) {
  if (!dqkv8.slot.empty()) return be.fp8_rope_backward(dqkv8, dqkv, table, ropes.at(0), scaling);
  for (const RopeShape& s : ropes) be.rope_backward(dqkv, table, s);
}

bool swiglu_in_fp8(const Plan& plan, bool fp8_products) { return fp8_products && plan.fp8_fused_swiglu; }

void ffn_swiglu_forward(Backend& be, const Tensor& h, const Fp8Matrix& h8, const Tensor& gateup, int64_t n, int f,
                        Fp8Scaling scaling) {
  if (h8.slot.empty()) return be.swiglu_forward(h, gateup, n, f);
  be.fp8_swiglu_forward(h8, gateup, n, f, scaling);
}

void ffn_swiglu_backward(Backend& be, const Tensor& dgateup, const Fp8Matrix& dgateup8, const Tensor& dh,
                         const Tensor& gateup, int64_t n, int f, Fp8Scaling scaling) {
  if (dgateup8.slot.empty()) return be.swiglu_backward(dgateup, dh, gateup, n, f);
  be.fp8_swiglu_backward(dgateup8, dh, gateup, n, f, scaling);
}

Gemm linear_product(const Tensor& out, int64_t ld_out, const Tensor& x, const Tensor& w, int n, int in_f, int out_f,
                    const Fp8Operands& f8) {
  if (!f8.empty()) return fp8_linear_gemm(out, ld_out, f8.x, f8.w, n, in_f, out_f);
  return linear_gemm(out, ld_out, x, in_f, w, n, in_f, out_f);
}

void linear_input_gradient(Backend& be, const Tensor& dx, float beta_dx, const Tensor& dout, int64_t ld_dout,
                           const Tensor& w, int n, int in_f, int out_f, const Fp8Operands& f8, const Fp8Matrix& dout8) {
  if (f8.empty()) return be.matmul(linear_dx_gemm(dx, in_f, dout, ld_dout, w, n, in_f, out_f, beta_dx));
  be.matmul(fp8_linear_dx_gemm(dx, in_f, dout8, f8.w, n, in_f, out_f, beta_dx));
}

void linear_weight_gradient(Backend& be, const Tensor& dw, float beta_dw, const Tensor& dout, int64_t ld_dout,
                            const Tensor& x, int n, int in_f, int out_f, const Fp8Operands& f8, const Fp8Matrix& dout8) {
  Gemm g = f8.empty() ? linear_dw_gemm(dw, dout, ld_dout, x, in_f, n, in_f, out_f)
                      : fp8_linear_dw_gemm(dw, dout8, f8.x, n, in_f, out_f);
  g.beta = beta_dw;
  be.matmul(g);
}

void linear_backward(Backend& be, const Tensor& dx, float beta_dx, const Tensor& dw, float beta_dw, const Tensor& dout,
                     int64_t ld_dout, const Tensor& x, const Tensor& w, int n, int in_f, int out_f,
                     const Fp8Operands& f8, const Fp8Matrix& dout8) {
  linear_input_gradient(be, dx, beta_dx, dout, ld_dout, w, n, in_f, out_f, f8, dout8);
  linear_weight_gradient(be, dw, beta_dw, dout, ld_dout, x, n, in_f, out_f, f8, dout8);
}

}  // namespace tt
