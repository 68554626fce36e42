// Matrix products on the GPU through cuBLAS (see gemm.h for the row-major contract).
#include <cublas_v2.h>

#include "ops/cuda_common.cuh"
#include "ops/gemm.h"

namespace tt::cuda {
namespace {

cudaDataType_t cuda_type(DType d) {
  switch (d) {
    case DType::F32: return CUDA_R_32F;
    case DType::BF16: return CUDA_R_16BF;
    default: fail(std::string("cuBLAS products take fp32 or bf16, not ") + dtype_name(d));
  }
}

}  // namespace

void gemm(const Blas& blas, const Gemm& g, const GemmBatch& batch) {
  TT_CHECK(g.a.dtype == g.b.dtype, "gemm: A and B must have the same type");
  const cublasComputeType_t compute =
      g.a.dtype == DType::F32 && blas.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
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
