// Matrix products. Every linear layer, the tied output head and (in the materialized
// attention of v1) the score and value products go through one descriptor: row-major
//   C[m, n] = alpha * op(A)[m, k] @ op(B)[k, n] + beta * C
// where op(X) is X or its transpose and ld* are row strides in elements, so a product can
// read or write a column slice of a wider matrix (the fused QKV and gate/up buffers). With
// c_in set, the matrix beta scales is c_in (same shape and stride as C), not C itself:
//   C = alpha * op(A) @ op(B) + beta * c_in
// which is how a product adds the residual stream in its epilogue (gemm-epilogues).
// FP8 operands (version 5) carry their dequantizing factors: the product is
//   C = alpha * (a_scale * op(A)) @ (b_scale * op(B)) + beta * c_in
// with a_scale and b_scale device scalars (1/scale, see ops/quantize.h), and only in the form
// of linear_gemm (A as is, B transposed: both read along k), the one layout Hopper's FP8
// tensor cores take.
// CPU reference: OpenBLAS (cblas), fp32 or fp64.
#pragma once
#include <cblas.h>

#include "core/stream.h"

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "ops/quantize.h"

namespace tt {

struct Gemm {
  bool trans_a = false, trans_b = false;
  int m = 0, n = 0, k = 0;
  Tensor a;
  int64_t lda = 0;
  Tensor b;
  int64_t ldb = 0;
  Tensor c;
  int64_t ldc = 0;
  float alpha = 1.0f, beta = 0.0f;
  Tensor c_in;  // empty: C itself
  Tensor a_scale, b_scale;  // FP8 operands: one fp32 each, the factor that dequantizes them
  bool fast_accumulation = false;  // FP8: accumulate in the tensor cores' own precision (faster, rougher)
};

// Why our own product kernels refuse `g` when m, n or K is 0 or less ("an empty product of m x n x
// k"): no tiles to launch, or operands TMA cannot describe. Empty when all are positive.
inline std::string empty_product_misfit(const Gemm& g) {
  if (g.m > 0 && g.n > 0 && g.k > 0) return "";
  return "an empty product of " + std::to_string(g.m) + " x " + std::to_string(g.n) + " x " + std::to_string(g.k);
}

namespace ref {

inline void gemm(const Gemm& g, float*, const float* a, const float* b, float* c) {
  cblas_sgemm(CblasRowMajor, g.trans_a ? CblasTrans : CblasNoTrans,
              g.trans_b ? CblasTrans : CblasNoTrans, g.m, g.n, g.k, g.alpha, a, int(g.lda), b,
              int(g.ldb), g.beta, c, int(g.ldc));
}
inline void gemm(const Gemm& g, double*, const double* a, const double* b, double* c) {
  cblas_dgemm(CblasRowMajor, g.trans_a ? CblasTrans : CblasNoTrans,
              g.trans_b ? CblasTrans : CblasNoTrans, g.m, g.n, g.k, g.alpha, a, int(g.lda), b,
              int(g.ldb), g.beta, c, int(g.ldc));
}

}  // namespace ref

// Linear layer y = x W^T (PyTorch's convention, W is [out, in]) as a Gemm:
// out[rows, out_f] (row stride ld_out) = x[rows, in_f] (row stride ld_x) @ W[out_f, in_f]^T.
inline Gemm linear_gemm(Tensor out, int64_t ld_out, Tensor x, int64_t ld_x, Tensor w, int rows,
                        int in_f, int out_f) {
  Gemm g;
  g.trans_b = true;
  g.m = rows, g.n = out_f, g.k = in_f;
  g.a = x, g.lda = ld_x;
  g.b = w, g.ldb = in_f;
  g.c = out, g.ldc = ld_out;
  return g;
}
// dx[rows, in_f] = beta * dx + dout[rows, out_f] @ W[out_f, in_f]
inline Gemm linear_dx_gemm(Tensor dx, int64_t ld_dx, Tensor dout, int64_t ld_dout, Tensor w,
                           int rows, int in_f, int out_f, float beta) {
  Gemm g;
  g.m = rows, g.n = in_f, g.k = out_f;
  g.a = dout, g.lda = ld_dout;
  g.b = w, g.ldb = in_f;
  g.c = dx, g.ldc = ld_dx;
  g.beta = beta;
  return g;
}
// dW[out_f, in_f] = dout[rows, out_f]^T @ x[rows, in_f]   (overwritten, beta 0: each weight's
// gradient comes from one product; the model sets beta 1 to add a later micro-batch's, or a later
// chunk's of the fused classifier)
inline Gemm linear_dw_gemm(Tensor dw, Tensor dout, int64_t ld_dout, Tensor x, int64_t ld_x,
                           int rows, int in_f, int out_f) {
  Gemm g;
  g.trans_a = true;
  g.m = out_f, g.n = in_f, g.k = rows;
  g.a = dout, g.lda = ld_dout;
  g.b = x, g.ldb = ld_x;
  g.c = dw, g.ldc = in_f;
  return g;
}

// The same three products with FP8 operands (version 5), each read along k as Hopper's FP8
// products take them: the forward reads x and W as rows; the input gradient dout as rows and W
// as columns (W^T's rows); the weight gradient dout and x as columns.
inline Gemm fp8_linear_gemm(Tensor out, int64_t ld_out, const Fp8Matrix& x, const Fp8Matrix& w, int rows, int in_f,
                            int out_f) {
  Gemm g;
  g.trans_b = true;
  g.m = rows, g.n = out_f, g.k = in_f;
  g.a = x.rows, g.lda = x.ld, g.a_scale = x.inverse_scale();
  g.b = w.rows, g.ldb = w.ld, g.b_scale = w.inverse_scale();
  g.c = out, g.ldc = ld_out;
  g.fast_accumulation = true;  // the forward's short sums (k = in_f), as Transformer Engine's recipe
  return g;
}
inline Gemm fp8_linear_dx_gemm(Tensor dx, int64_t ld_dx, const Fp8Matrix& dout, const Fp8Matrix& w, int rows,
                               int in_f, int out_f, float beta) {
  Gemm g;
  g.trans_b = true;
  g.m = rows, g.n = in_f, g.k = out_f;
  g.a = dout.rows, g.lda = dout.ld, g.a_scale = dout.inverse_scale();
  g.b = w.cols, g.ldb = w.ld_t, g.b_scale = w.inverse_scale();
  g.c = dx, g.ldc = ld_dx;
  g.beta = beta;
  return g;
}
inline Gemm fp8_linear_dw_gemm(Tensor dw, const Fp8Matrix& dout, const Fp8Matrix& x, int rows, int in_f, int out_f) {
  Gemm g;
  g.trans_b = true;
  g.m = out_f, g.n = in_f, g.k = rows;
  g.a = dout.cols, g.lda = dout.ld_t, g.a_scale = dout.inverse_scale();
  g.b = x.cols, g.ldb = x.ld_t, g.b_scale = x.inverse_scale();
  g.c = dw, g.ldc = in_f;
  return g;
}

}  // namespace tt

// CUDA: cuBLAS (src/ops/gemm.cu). Row-major products are handed to column-major cuBLAS as
// C^T = op(B)^T op(A)^T. fp32 runs true fp32 unless TF32 is allowed; bf16 inputs accumulate
// in fp32 and may write an fp32 C (the weight gradients). A product with its own c_in, and every
// FP8 product, goes through cuBLASLt, whose matrix multiply takes C and D apart and scales.
struct cublasContext;
struct cublasLtContext;
struct CUevent_st;
namespace tt::cuda {
// cuBLASLt's plans for the products with a separate c_in and the FP8 ones, one per shape, chosen once by its
// heuristic, or with `timed` among its first candidates by timing them (FP8 products; gemm.cu), and
// kept (the backend owns one). The handle belongs to the GPU that is current when it is made;
// run() refuses to use it on another.
class LtProducts {
 public:
  LtProducts();
  ~LtProducts();
  LtProducts(const LtProducts&) = delete;
  LtProducts& operator=(const LtProducts&) = delete;
  void run(const Gemm& g, bool tf32, bool timed, const Tensor& workspace, Stream s);
  // g with each algorithm a timed choice takes from, one after the other, after(i) called once
  // candidate i's output is in g.c; returns how many there were.
  int each_timed_candidate(const Gemm& g, const Tensor& workspace, Stream s, const std::function<void(int)>& after);

 private:
  struct Plan;
  Plan* plan_for(const Gemm& g, bool tf32, bool timed, const Tensor& workspace);
  cublasLtContext* handle_ = nullptr;
  CUevent_st *start_ = nullptr, *stop_ = nullptr;
  int device_ = -1;
  std::vector<std::pair<std::vector<int64_t>, Plan*>> plans_;
};

struct Blas {
  cublasContext* handle;
  bool tf32;
  Stream stream;
  LtProducts* lt = nullptr;  // for products with a separate c_in, and the FP8 ones
  Tensor workspace;          // cuBLASLt's
  bool timed_fp8 = false;    // FP8 products' algorithms chosen by timing (fp8-timed-products)
};
// A batch of products with the same shape, operands `stride_*` elements apart.
struct GemmBatch {
  int count = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
};
void gemm(const Blas& blas, const Gemm& g, const GemmBatch& batch = {});
}  // namespace tt::cuda
