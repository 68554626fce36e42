// The model's sequences of backend calls where the plan chooses between them, written once: Llama
// (llama.cpp) makes its layers with them, and the op cases of `tiny_llama kernels` (src/bench/ops/)
// time and check the same calls, so that what is measured cannot drift from what the model runs.
#pragma once
#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "model/fp8_state.h"

namespace tt {

// The residual add and the RMSNorm after it: sum = a + b, the residual stream's next value, and
// out, rstd = rmsnorm(sum) with the gain w. With fused-residual-norm one kernel makes all three;
// without, the add, then the norm (which the model makes where the next block begins). b empty:
// the product before added it in its epilogue (gemm-epilogues), sum is made.
struct ResidualNorm {
  Tensor sum, out, rstd, a, b, w;
  int64_t n;
  int c;
  double eps;
};
void residual_add(Backend& be, const ResidualNorm& r);   // the add alone: none with the switch or without b
// The norm (with the switch and b, the add too), or with out8 given (norm_in_fp8), straight into
// the next product's FP8 input instead of r.out.
void residual_norm(Backend& be, const ResidualNorm& r, const Fp8Matrix& out8 = {});
// Whether a norm whose output feeds an FP8 product writes it straight in FP8 (fp8-fused-norm): with
// delayed scaling, the one-kernel norm (custom-rmsnorm), its input formed before it (no add inside
// it: gemm-epilogues made the sum, or fused-residual-norm is off), bf16 rows of a multiple of 8
// elements up to 6144 (ops/rmsnorm.h; the kernel also refuses tensors off 16-byte boundaries,
// which the arena's never are).
bool norm_in_fp8(const Plan& plan, bool fp8_products, Fp8Scaling scaling, int c);
// Whether the attention writes its output in FP8 too for the output product (fp8-fused-attention):
// with delayed scaling and our flash attention (custom-attention; at a shape where the backend
// runs another, the backend casts after it). Then attention_forward takes the output's FP8 forms.
bool attention_in_fp8(const Plan& plan, bool fp8_products, Fp8Scaling scaling);
void attention_forward(Backend& be, const Tensor& att, const Tensor& saved, const Tensor& qkv, const AttnShape& s,
                       const Fp8Matrix& att8 = {});
// Its backward: dres = dres_in + the norm's input gradient for dout (the gradient of out), in one
// kernel with the switch, else the norm's backward into the scratch dx, then the add; dres_in is
// dres itself (in place) or a tensor apart. dw is written, or added to with add_dw. With dres8
// given (norm_backward_in_fp8, in place only), dres's new value in FP8 too.
void residual_norm_backward(Backend& be, const Tensor& dres, const Tensor& dres_in, const Tensor& dx, const Tensor& dw,
                            const Tensor& dout, const Tensor& sum, const Tensor& w, const Tensor& rstd, int64_t n,
                            int c, bool add_dw, const Fp8Matrix& dres8 = {});
// Whether a norm's backward writes the residual stream's gradient in FP8 too, where a product
// takes it next (fp8-fused-norm-backward): with delayed scaling, the one-kernel norm
// (custom-rmsnorm) with the add inside it (fused-residual-norm).
bool norm_backward_in_fp8(const Plan& plan, bool fp8_products, Fp8Scaling scaling);

// The loss of n rows of logits [n, ld] against their targets and the logits' gradient, scaled by
// `scale` and written over the logits: with fused-classifier, in training, one pass makes both;
// else this makes the loss and cross_entropy_gradient the gradient, in the backward pass. Returns
// whether the gradient is made.
bool cross_entropy_loss(Backend& be, bool training, const Tensor& losses, const Tensor& logits, const Tensor& targets,
                        int64_t n, int v, int64_t ld, double scale);
void cross_entropy_gradient(Backend& be, const Tensor& logits, const Tensor& targets, int64_t n, int v, int64_t ld,
                            double scale);

// What RoPE rotates in qkv [B T, (H + 2 KVH) D]: the queries and keys in one call with custom-rope
// (they are adjacent heads), else one call each; none where the attention rotates them itself
// (rope-in-attention).
std::vector<RopeShape> rope_shapes(const Backend& be, const AttnShape& s);

// Whether RoPE's backward writes the QKV product's gradient straight in FP8 (fp8-fused-rope) where
// that product takes FP8 and one call rotates the queries and keys (custom-rope); and RoPE's
// backward so: into dqkv8 when it does, else in place.
bool rope_backward_in_fp8(const Plan& plan, bool fp8_products, const std::vector<RopeShape>& ropes);
void qkv_rope_backward(Backend& be, const Tensor& dqkv, const Fp8Matrix& dqkv8, const Tensor& table,
                       const std::vector<RopeShape>& ropes, Fp8Scaling scaling);

// Whether SwiGLU writes its output and its input gradient straight in FP8 (fp8-fused-swiglu) where
// the products around it take FP8; and SwiGLU so: into h8 (or dgateup8) when it does, else into h.
bool swiglu_in_fp8(const Plan& plan, bool fp8_products);
void ffn_swiglu_forward(Backend& be, const Tensor& h, const Fp8Matrix& h8, const Tensor& gateup, int64_t n, int f,
                        Fp8Scaling scaling);
void ffn_swiglu_backward(Backend& be, const Tensor& dgateup, const Fp8Matrix& dgateup8, const Tensor& dh,
                         const Tensor& gateup, int64_t n, int f, Fp8Scaling scaling);

// A layer's product out = x w^T, x [n, in] by w [out, in], out's rows ld_out apart: in FP8 from
// f8's forms, or in the act type where f8 is empty.
Gemm linear_product(const Tensor& out, int64_t ld_out, const Tensor& x, const Tensor& w, int n, int in_f, int out_f,
                    const Fp8Operands& f8);
// Its backward: dx = dout w (beta_dx 0 writes, 1 adds), then dw = dout^T x (beta_dw likewise); in
// FP8 with f8 and dout's FP8 form dout8. Each half alone where the two are apart.
void linear_input_gradient(Backend& be, const Tensor& dx, float beta_dx, const Tensor& dout, int64_t ld_dout,
                           const Tensor& w, int n, int in_f, int out_f, const Fp8Operands& f8 = {},
                           const Fp8Matrix& dout8 = {});
void linear_weight_gradient(Backend& be, const Tensor& dw, float beta_dw, const Tensor& dout, int64_t ld_dout,
                            const Tensor& x, int n, int in_f, int out_f, const Fp8Operands& f8 = {},
                            const Fp8Matrix& dout8 = {});
void linear_backward(Backend& be, const Tensor& dx, float beta_dx, const Tensor& dw, float beta_dw, const Tensor& dout,
                     int64_t ld_dout, const Tensor& x, const Tensor& w, int n, int in_f, int out_f,
                     const Fp8Operands& f8 = {}, const Fp8Matrix& dout8 = {});

}  // namespace tt
