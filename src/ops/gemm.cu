// Matrix products on the GPU through cuBLAS (see gemm.h for the row-major contract).
//
// An FP8 product's algorithm, with fp8-timed-products: cuBLASLt's heuristic ranks its candidates
// by a model of the GPU, and at gpt2-small its first choice for the forward products ran 5-13%
// slower than another of its first eight (H200, 2026-11-29: the gate/up projection 89.7 against
// 77.8 us, the head's 525.6 against 455.6; docs/data/2026-11-29-h200-fp8-algorithms). So the
// first call of a plan that may time, outside a graph capture, times each candidate that sums
// along k in one pass and keeps the fastest. Those candidates give the same bytes (each output is
// one sum along k in the same order; `Fp8Gemm.EveryTimedCandidateGivesTheSameBytes`), so the
// choice, which may differ from run to run, changes no bit of training.
#include <cublasLt.h>
#include <cublas_v2.h>

#include <cmath>
#include <functional>

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

// Whether an algorithm makes each output in one sum along k (no split sums added afterwards).
bool one_pass_along_k(const cublasLtMatmulAlgo_t& algo) {
  int32_t split = 1;
  uint32_t reduction = CUBLASLT_REDUCTION_SCHEME_NONE;
  size_t written = 0;
  CUBLAS_CHECK(cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &split, sizeof split,
                                                    &written));
  CUBLAS_CHECK(cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &reduction,
                                                    sizeof reduction, &written));
  return split <= 1 && reduction == CUBLASLT_REDUCTION_SCHEME_NONE;
}

constexpr int kTimedCandidates = 8, kTimedCalls = 3;

}  // namespace

struct LtProducts::Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  std::vector<cublasLtMatmulAlgo_t> timed;  // the candidates a timed choice takes from (one pass along k)
  bool untimed = false;                      // a timed choice is still to be made
  void call(cublasLtHandle_t handle, const cublasLtMatmulAlgo_t& with, const Gemm& g, const Tensor& workspace,
            Stream s) const {
    const Tensor& c_in = g.c_in.empty() ? g.c : g.c_in;
    if (is_fp8(g.a.dtype)) set_scales(op, g);
    const float alpha = g.alpha, beta = g.beta;
    CUBLAS_CHECK(cublasLtMatmul(handle, op, &alpha, g.b.ptr, a, g.a.ptr, b, &beta, c_in.ptr, c, g.c.ptr, c, &with,
                                workspace.ptr, workspace.bytes(), s.handle));
  }
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
  CUDA_CHECK(cudaEventCreate(&start_));
  CUDA_CHECK(cudaEventCreate(&stop_));
}
LtProducts::~LtProducts() {
  for (auto& [key, plan] : plans_) delete plan;
  cudaEventDestroy(start_);
  cudaEventDestroy(stop_);
  cublasLtDestroy(handle_);
}

// The same column-major view as gemm() below: cuBLASLt's A is our B, its B our A, its m our n.
// With `timed`, an FP8 product without a workspace (no candidate can split its sums through one)
// chooses its algorithm by timing (see the top of this file) on its plan's first call that
// overwrites C (beta 0, no separate c_in) outside a graph capture; until then, and otherwise,
// the heuristic's first.
void LtProducts::run(const Gemm& g, bool tf32, bool timed, const Tensor& workspace, Stream s) {
  Plan* plan = plan_for(g, tf32, timed, workspace);
  if (plan->untimed && g.beta == 0.0f && (g.c_in.empty() || g.c_in.ptr == g.c.ptr)) {
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    CUDA_CHECK(cudaStreamIsCapturing(s.handle, &capture));
    if (capture == cudaStreamCaptureStatusNone) {
      float best = INFINITY;
      for (const cublasLtMatmulAlgo_t& algo : plan->timed) {
        plan->call(handle_, algo, g, workspace, s);  // its first call, untimed
        CUDA_CHECK(cudaEventRecord(start_, s.handle));
        for (int i = 0; i < kTimedCalls; ++i) plan->call(handle_, algo, g, workspace, s);
        CUDA_CHECK(cudaEventRecord(stop_, s.handle));
        CUDA_CHECK(cudaEventSynchronize(stop_));
        float ms = 0;
        CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
        if (ms < best) best = ms, plan->algo = algo;
      }
      plan->untimed = false;
    }
  }
  plan->call(handle_, plan->algo, g, workspace, s);
}

int LtProducts::each_timed_candidate(const Gemm& g, const Tensor& workspace, Stream s,
                                     const std::function<void(int)>& after) {
  Plan* plan = plan_for(g, false, true, workspace);
  for (size_t i = 0; i < plan->timed.size(); ++i) {
    plan->call(handle_, plan->timed[i], g, workspace, s);
    CUDA_CHECK(cudaStreamSynchronize(s.handle));
    after(int(i));
  }
  return int(plan->timed.size());
}

LtProducts::Plan* LtProducts::plan_for(const Gemm& g, bool tf32, bool timed, const Tensor& workspace) {
  const Tensor& c_in = g.c_in.empty() ? g.c : g.c_in;
  TT_CHECK(c_in.dtype == g.c.dtype, "gemm: c_in must have C's type");
  const bool fp8 = is_fp8(g.a.dtype);
  timed = timed && fp8 && workspace.empty();
  int device = -1;
  CUDA_CHECK(cudaGetDevice(&device));
  TT_CHECK(device == device_, "cuBLASLt: a handle made on GPU " + std::to_string(device_) + " used on GPU " +
                                  std::to_string(device) + " (make the backend's handles after cudaSetDevice)");
  const std::vector<int64_t> key = {g.trans_a, g.trans_b, g.m, g.n, g.k, g.lda, g.ldb, g.ldc, int64_t(g.a.dtype),
                                    int64_t(g.c.dtype), tf32, int64_t(workspace.bytes()), int64_t(g.b.dtype),
                                    g.fast_accumulation, timed};
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
    std::vector<cublasLtMatmulHeuristicResult_t> results(timed ? kTimedCandidates : 1);
    int found = 0;
    const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(handle_, plan->op, plan->a, plan->b, plan->c, plan->c,
                                                             pref, int(results.size()), results.data(), &found);
    cublasLtMatmulPreferenceDestroy(pref);
    CUBLAS_CHECK(st);
    if (found == 0)
      fail(fp8 ? "cuBLASLt has no algorithm for an FP8 product of this shape (m, n, k and the row strides must be "
                 "multiples of 16)"
               : "cuBLASLt has no algorithm for a product with a separate C (gemm-epilogues)");
    plan->algo = results[0].algo;
    for (int i = 0; i < found; ++i)
      if (results[i].state == CUBLAS_STATUS_SUCCESS && one_pass_along_k(results[i].algo))
        plan->timed.push_back(results[i].algo);
    plan->untimed = plan->timed.size() > 1;
  }
  return plan;
}

void gemm(const Blas& blas, const Gemm& g, const GemmBatch& batch) {
  if (is_fp8(g.a.dtype) || is_fp8(g.b.dtype)) {
    TT_CHECK(is_fp8(g.a.dtype) && is_fp8(g.b.dtype) && !(g.a.dtype == DType::F8E5M2 && g.b.dtype == DType::F8E5M2),
             "gemm: FP8 products take two FP8 operands, at most one of them E5M2");
    TT_CHECK(!g.trans_a && g.trans_b, "gemm: FP8 products take A as is and B transposed (linear_gemm's form)");
    TT_CHECK(aligned16(g.a_scale.ptr) && aligned16(g.b_scale.ptr),
             "gemm: FP8 operands need their scales, each on a 16-byte boundary (cuBLASLt's rule)");
    TT_CHECK(blas.lt && batch.count == 1, "gemm: FP8 products go through cuBLASLt, one at a time");
    return blas.lt->run(g, false, blas.timed_fp8, blas.workspace, blas.stream);
  }
  TT_CHECK(g.a.dtype == g.b.dtype, "gemm: A and B must have the same type");
  if (!g.c_in.empty() && g.c_in.ptr != g.c.ptr) {
    TT_CHECK(blas.lt && batch.count == 1, "gemm: a product with a separate c_in needs cuBLASLt");
    return blas.lt->run(g, blas.tf32, false, blas.workspace, blas.stream);
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
