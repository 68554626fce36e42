// Matrix products on the GPU through cuBLAS (see gemm.h for the row-major contract).
#include <cublasLt.h>
#include <cublas_v2.h>

#include "ops/cuda_common.cuh"
#include "ops/gemm.h"

namespace tt::cuda {
namespace {

cudaDataType_t cuda_type(DType d) {
  switch (d) {
    case DType::F32: return CUDA_R_32F;
    case DType::BF16: return CUDA_R_16BF;
    case DType::F8E4M3: return CUDA_R_8F_E4M3;
    case DType::F8E5M2: return CUDA_R_8F_E5M2;
    default: fail(std::string("cuBLAS products take fp32, bf16 or FP8, not ") + dtype_name(d));
  }
}

cublasComputeType_t compute_type(const Gemm& g, bool tf32) {
  return g.a.dtype == DType::F32 && tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
}

// An FP8 product's dequantizing factors, set on its descriptor before each call (the pointers
// differ between the products that share a plan). Their A is our B: its factor too.
void set_scales(cublasLtMatmulDesc_t op, const Gemm& g) {
  const void *scale_a = g.b_scale.ptr, *scale_b = g.a_scale.ptr;
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &scale_a, sizeof scale_a));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &scale_b, sizeof scale_b));
}

}  // namespace

struct LtProducts::Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  ~Plan() {
    cublasLtMatrixLayoutDestroy(a);
    cublasLtMatrixLayoutDestroy(b);
    cublasLtMatrixLayoutDestroy(c);
    cublasLtMatmulDescDestroy(op);
  }
};

LtProducts::LtProducts() {
  CUDA_CHECK(cudaGetDevice(&device_));
  CUBLAS_CHECK(cublasLtCreate(&handle_));
}
LtProducts::~LtProducts() {
  for (auto& [key, plan] : plans_) delete plan;
  cublasLtDestroy(handle_);
}

// The same column-major view as gemm() below: cuBLASLt's A is our B, its B our A, its m our n.
void LtProducts::run(const Gemm& g, bool tf32, const Tensor& workspace, Stream s) {
  const Tensor& c_in = g.c_in.empty() ? g.c : g.c_in;
  TT_CHECK(c_in.dtype == g.c.dtype, "gemm: c_in must have C's type");
  const bool fp8 = is_fp8(g.a.dtype);
  int device = -1;
  CUDA_CHECK(cudaGetDevice(&device));
  TT_CHECK(device == device_, "cuBLASLt: a handle made on GPU " + std::to_string(device_) + " used on GPU " +
                                  std::to_string(device) + " (make the backend's handles after cudaSetDevice)");
  const std::vector<int64_t> key = {g.trans_a, g.trans_b, g.m, g.n, g.k, g.lda, g.ldb, g.ldc, int64_t(g.a.dtype),
                                    int64_t(g.c.dtype), tf32, int64_t(workspace.bytes()), int64_t(g.b.dtype),
                                    g.fast_accumulation};
  Plan* plan = nullptr;
  for (auto& [k, p] : plans_)
    if (k == key) plan = p;
  if (!plan) {
    plan = new Plan;
    plans_.emplace_back(key, plan);
    const cublasOperation_t op_a = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan->op, compute_type(g, tf32), CUDA_R_32F));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof op_a));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof op_b));
    if (fp8) {
      const int8_t fast = g.fast_accumulation;
      CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast));
    }
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->a, cuda_type(g.b.dtype), g.trans_b ? g.k : g.n,
                                            g.trans_b ? g.n : g.k, g.ldb));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->b, cuda_type(g.a.dtype), g.trans_a ? g.m : g.k,
                                            g.trans_a ? g.k : g.m, g.lda));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->c, cuda_type(g.c.dtype), g.n, g.m, g.ldc));
    cublasLtMatmulPreference_t pref = nullptr;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const size_t bytes = workspace.bytes();
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &bytes,
                                                      sizeof bytes));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(handle_, plan->op, plan->a, plan->b, plan->c, plan->c,
                                                             pref, 1, &result, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    CUBLAS_CHECK(st);
    if (found == 0)
      fail(fp8 ? "cuBLASLt has no algorithm for an FP8 product of this shape (m, n, k and the row strides must be "
                 "multiples of 16)"
               : "cuBLASLt has no algorithm for a product with a separate C (gemm-epilogues)");
    plan->algo = result.algo;
  }
  if (fp8) set_scales(plan->op, g);
  const float alpha = g.alpha, beta = g.beta;
  CUBLAS_CHECK(cublasLtMatmul(handle_, plan->op, &alpha, g.b.ptr, plan->a, g.a.ptr, plan->b, &beta, c_in.ptr,
                              plan->c, g.c.ptr, plan->c, &plan->algo, workspace.ptr, workspace.bytes(), s.handle));
}

void gemm(const Blas& blas, const Gemm& g, const GemmBatch& batch) {
  if (is_fp8(g.a.dtype) || is_fp8(g.b.dtype)) {
    TT_CHECK(is_fp8(g.a.dtype) && is_fp8(g.b.dtype) && !(g.a.dtype == DType::F8E5M2 && g.b.dtype == DType::F8E5M2),
             "gemm: FP8 products take two FP8 operands, at most one of them E5M2");
    TT_CHECK(!g.trans_a && g.trans_b, "gemm: FP8 products take A as is and B transposed (linear_gemm's form)");
    TT_CHECK(aligned16(g.a_scale.ptr) && aligned16(g.b_scale.ptr),
             "gemm: FP8 operands need their scales, each on a 16-byte boundary (cuBLASLt's rule)");
    TT_CHECK(blas.lt && batch.count == 1, "gemm: FP8 products go through cuBLASLt, one at a time");
    return blas.lt->run(g, false, blas.workspace, blas.stream);
  }
  TT_CHECK(g.a.dtype == g.b.dtype, "gemm: A and B must have the same type");
  if (!g.c_in.empty() && g.c_in.ptr != g.c.ptr) {
    TT_CHECK(blas.lt && batch.count == 1, "gemm: a product with a separate c_in needs cuBLASLt");
    return blas.lt->run(g, blas.tf32, blas.workspace, blas.stream);
  }
  const cublasComputeType_t compute = compute_type(g, blas.tf32);
  const float alpha = g.alpha, beta = g.beta;
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands.
  const cublasOperation_t op_b = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_a = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (batch.count == 1) {
    CUBLAS_CHECK(cublasGemmEx(blas.handle, op_b, op_a, g.n, g.m, g.k, &alpha, g.b.ptr, cuda_type(g.b.dtype),
                              int(g.ldb), g.a.ptr, cuda_type(g.a.dtype), int(g.lda), &beta, g.c.ptr,
                              cuda_type(g.c.dtype), int(g.ldc), compute, CUBLAS_GEMM_DEFAULT));
  } else {
    CUBLAS_CHECK(cublasGemmStridedBatchedEx(
        blas.handle, op_b, op_a, g.n, g.m, g.k, &alpha, g.b.ptr, cuda_type(g.b.dtype), int(g.ldb), batch.stride_b,
        g.a.ptr, cuda_type(g.a.dtype), int(g.lda), batch.stride_a, &beta, g.c.ptr, cuda_type(g.c.dtype),
        int(g.ldc), batch.stride_c, batch.count, compute, CUBLAS_GEMM_DEFAULT));
  }
}

}  // namespace tt::cuda
