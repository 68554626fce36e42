// Causal self-attention with grouped key/value heads (GQA).
//
// Inputs come from the fused projection buffer qkv[B*T, (H + 2*KVH) * D]: per token, the H
// query heads, then the KVH key heads, then the KVH value heads, each D wide. Query head h
// attends with key/value head h / (H / KVH). The output is att[B*T, H*D] (heads side by
// side, ready for the output projection).
//   forward:  att = softmax(q k^T / sqrt(D) + causal mask) v, and what the backward needs
//             (the reference keeps the probabilities P[B, H, T, T]; flash kernels keep the
//             log-sum-exp per row instead).
//   backward: dqkv (overwritten, same layout as qkv) from datt, with
//             dP = datt v^T, dS = P * (dP - rowsum(P * dP)), dq = dS k / sqrt(D),
//             dk = dS^T q / sqrt(D) summed over the query heads of the group, dv = P^T datt.
#pragma once
#include "core/stream.h"
#include "core/tensor.h"
#include "ops/gemm.h"
#include "ops/quantize.h"
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace tt {

struct AttnShape {
  int B, T, H, KVH, D;
  int64_t ld() const { return int64_t(H + 2 * KVH) * D; }  // row stride of qkv / dqkv
  int64_t k_col() const { return int64_t(H) * D; }
  int64_t v_col() const { return int64_t(H + KVH) * D; }
  int group() const { return H / KVH; }
  double scale() const { return 1.0 / std::sqrt(double(D)); }
};

namespace ref {

template <class T>
void attention_forward(T* att, T* probs, const T* qkv, const AttnShape& s) {
  const int64_t ld = s.ld(), T_ = s.T, D = s.D;
  const T scale = T(s.scale());
#pragma omp parallel for collapse(2)
  for (int b = 0; b < s.B; ++b)
    for (int h = 0; h < s.H; ++h) {
      const int kvh = h / s.group();
      const T* q = qkv + b * T_ * ld + int64_t(h) * D;
      const T* k = qkv + b * T_ * ld + s.k_col() + int64_t(kvh) * D;
      const T* v = qkv + b * T_ * ld + s.v_col() + int64_t(kvh) * D;
      T* P = probs + (int64_t(b) * s.H + h) * T_ * T_;
      for (int64_t t = 0; t < T_; ++t) {
        T* row = P + t * T_;
        T mx = -std::numeric_limits<T>::infinity();
        for (int64_t u = 0; u <= t; ++u) {
          T dot = 0;
          for (int64_t d = 0; d < D; ++d) dot += q[t * ld + d] * k[u * ld + d];
          row[u] = dot * scale;
          mx = std::max(mx, row[u]);
        }
        T sum = 0;
        for (int64_t u = 0; u <= t; ++u) sum += (row[u] = std::exp(row[u] - mx));
        for (int64_t u = 0; u <= t; ++u) row[u] /= sum;
        for (int64_t u = t + 1; u < T_; ++u) row[u] = 0;
        T* o = att + (b * T_ + t) * int64_t(s.H) * D + int64_t(h) * D;
        for (int64_t d = 0; d < D; ++d) o[d] = 0;
        for (int64_t u = 0; u <= t; ++u)
          for (int64_t d = 0; d < D; ++d) o[d] += row[u] * v[u * ld + d];
      }
    }
}

template <class T>
void attention_backward(T* dqkv, const T* datt, const T* qkv, const T* probs,
                        const AttnShape& s) {
  const int64_t ld = s.ld(), T_ = s.T, D = s.D, HD = int64_t(s.H) * D;
  const T scale = T(s.scale());
  // One (batch, kv head) per iteration: it owns its dk and dv rows and the dq of its query
  // heads, and sums over those heads in a fixed order.
#pragma omp parallel for collapse(2)
  for (int b = 0; b < s.B; ++b)
    for (int kvh = 0; kvh < s.KVH; ++kvh) {
      const T* k = qkv + b * T_ * ld + s.k_col() + int64_t(kvh) * D;
      const T* v = qkv + b * T_ * ld + s.v_col() + int64_t(kvh) * D;
      T* dk = dqkv + b * T_ * ld + s.k_col() + int64_t(kvh) * D;
      T* dv = dqkv + b * T_ * ld + s.v_col() + int64_t(kvh) * D;
      for (int64_t u = 0; u < T_; ++u)
        for (int64_t d = 0; d < D; ++d) dk[u * ld + d] = dv[u * ld + d] = 0;
      std::vector<T> dS(T_);
      for (int r = 0; r < s.group(); ++r) {
        const int h = kvh * s.group() + r;
        const T* q = qkv + b * T_ * ld + int64_t(h) * D;
        T* dq = dqkv + b * T_ * ld + int64_t(h) * D;
        const T* P = probs + (int64_t(b) * s.H + h) * T_ * T_;
        for (int64_t t = 0; t < T_; ++t) {
          const T* g = datt + (b * T_ + t) * HD + int64_t(h) * D;
          const T* row = P + t * T_;
          T rowsum = 0;
          for (int64_t u = 0; u <= t; ++u) {
            T dp = 0;
            for (int64_t d = 0; d < D; ++d) dp += g[d] * v[u * ld + d];
            dS[u] = dp;
            rowsum += row[u] * dp;
          }
          for (int64_t d = 0; d < D; ++d) dq[t * ld + d] = 0;
          for (int64_t u = 0; u <= t; ++u) {
            const T ds = row[u] * (dS[u] - rowsum) * scale;
            for (int64_t d = 0; d < D; ++d) {
              dq[t * ld + d] += ds * k[u * ld + d];
              dk[u * ld + d] += ds * q[t * ld + d];
              dv[u * ld + d] += row[u] * g[d];
            }
          }
        }
      }
    }
}

}  // namespace ref
}  // namespace tt

// CUDA, materialized attention (src/ops/attention.cu), the shape of eager PyTorch: the heads
// are copied into head-major [B, heads, T, D] buffers, then per (batch, kv head) one batched
// product computes the scores of all the query heads of the group against their shared keys
// (they are consecutive rows of the head-major query buffer: no copy of K or V per query
// head), a kernel applies the causal mask and softmax (and the 1/sqrt(D) scale: a kernel of
// its own in version 1, fused into the softmax with the flash-attention switch in fp32), and a
// second batched product applies P to V. The probabilities P[B, H, T, T] are kept for the
// backward, where the products for dK and dV sum over the group's query heads inside the GEMM.
namespace tt::cuda {
struct AttentionScratch {
  Tensor qh, kh, vh, oh, dqh, dkh, dvh, ds;  // head-major copies, their gradients, dS
};
// Element counts of the scratch buffers above, in order.
std::vector<int64_t> attention_scratch_numel(const AttnShape& s);
void attention_forward(const Blas& blas, const Tensor& att, const Tensor& probs, const Tensor& qkv,
                       const AttnShape& s, bool fused_softmax, const AttentionScratch& w);
void attention_backward(const Blas& blas, const Tensor& dqkv, const Tensor& datt, const Tensor& qkv,
                        const Tensor& probs, const AttnShape& s, bool fused_softmax, const AttentionScratch& w);
}  // namespace tt::cuda

// CUDA, cuDNN's fused flash attention (src/ops/attention_cudnn.cpp), bf16 only: the scores
// never leave the chip; the forward keeps the softmax statistics (max + log of the sum of
// exponentials, per row: [B, H, T] fp32) for the backward, which recomputes the probabilities.
// Q, K, V are read in place from the qkv buffer and dQ, dK, dV written in place into dqkv
// (strided views). The operation graphs (matmul, scale, causal mask, softmax, matmul and the
// backward's) are built once per shape with cuDNN's backend API and their plans cached.
// cuDNN sums dQ with atomics: its backward is not bitwise reproducible from run to run.
struct cudnnContext;
namespace tt::cuda {
class CudnnAttention {
 public:
  explicit CudnnAttention(Stream stream);
  ~CudnnAttention();
  CudnnAttention(const CudnnAttention&) = delete;
  CudnnAttention& operator=(const CudnnAttention&) = delete;

  // Bytes of workspace the forward and backward of this shape need (an upper bound known
  // without building anything, so memory can be planned before the plans exist).
  static int64_t workspace_bytes(const AttnShape& s);
  // Builds (or finds) the plans of this shape and checks that they fit the workspace.
  void prepare(const AttnShape& s, const Tensor& workspace);
  void forward(const Tensor& att, const Tensor& stats, const Tensor& qkv, const AttnShape& s, const Tensor& workspace);
  void backward(const Tensor& dqkv, const Tensor& datt, const Tensor& qkv, const Tensor& att, const Tensor& stats,
                const AttnShape& s, const Tensor& workspace);
  static std::string version();  // "9.14.0"

 private:
  struct Plan;
  Plan& plan(const AttnShape& s, bool backward);
  cudnnContext* handle_ = nullptr;
  std::vector<std::unique_ptr<Plan>> plans_;
};
}  // namespace tt::cuda

// CUDA, our flash attention (src/ops/flash_attention.cu, the custom-attention switch): tensor
// cores in bf16, FMA in fp32 (src/ops/attention_fp32.cu), head sizes 32, 64 and 128, any sequence length. `lse` is the
// saved log-sum-exp per row, [B, H, T] fp32 (natural log, of the scaled scores). The backward
// needs flash_attention_scratch_numel fp32 elements of scratch (rowsum(dO * O) per row, and in
// bf16 at small batches and long sequences the partial dK/dV sums of split key columns; `fused`,
// the fused backward's fp32 dQ and its counters); it overwrites all of dqkv and is bitwise
// reproducible (the fused backward's adds take turns in a fixed order).
namespace tt::cuda {
bool flash_attention_supports(const AttnShape& s);
int64_t flash_attention_scratch_numel(const AttnShape& s, DType dtype, bool fused);
// `rope` (bf16 only; null: none): the [T, D] cos/sin table of src/ops/rope.h, applied to the
// queries and keys of an unrotated qkv as the kernels load them, and its inverse to dQ and dK
// (rope-in-attention).
// With att8's slot given (fp8-fused-attention, bf16): the output also into att8's FP8 forms with
// delayed scaling, the bytes and amax of quantize_fp8 on att (ops/quantize.h).
void flash_attention_forward(const Tensor& att, const Tensor& lse, const Tensor& qkv, const AttnShape& s,
                             const float* rope, Stream st, const Fp8Matrix& att8 = {});
// `fused` (fused-attention-backward): dQ made by the dK/dV kernel where the shape allows it
// (flash_attention_fused_backward; bf16), else the two kernels.
bool flash_attention_fused_backward(const AttnShape& s, bool asked);  // head size 32 or 64, no split column
// `one_block` (attention-backward-in-one-block, bf16): one block per (sequence, query head) makes
// dQ, dK and dV, a cluster a kv head's group, where the shape fits it (empty misfit: head size 64,
// sequences of at most 128, at most 8 query heads a kv head), before `fused` is asked.
// `rope_before`: RoPE (the table `rope`) was applied to Q and K before the attention, and the
// one-block kernel (which must fit) turns dQ and dK back as it writes them: RoPE's backward done.
std::string flash_attention_one_block_misfit(const AttnShape& s);
void flash_attention_backward(const Tensor& dqkv, const Tensor& datt, const Tensor& qkv, const Tensor& att,
                              const Tensor& lse, const AttnShape& s, const float* rope, const Tensor& scratch,
                              bool fused, bool one_block, Stream st, bool rope_before = false);
// The fp32 kernels the two above launch for fp32 tensors; `delta` is the scratch's first part.
void flash_attention_forward_fp32(const Tensor& att, const Tensor& lse, const Tensor& qkv, const AttnShape& s,
                                  float scale_log2, Stream st);
void flash_attention_backward_fp32(const Tensor& dqkv, float* delta, const Tensor& datt, const Tensor& qkv,
                                   const Tensor& att, const Tensor& lse, const AttnShape& s, float scale,
                                   float scale_log2, Stream st);
}  // namespace tt::cuda
