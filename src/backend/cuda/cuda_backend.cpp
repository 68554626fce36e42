// The CUDA backend: every operation on one stream, each implemented the way the plan asks
// (src/plan/plan.h). Memory comes from the model's arena, one cudaMalloc at start; the
// backend adds its own scratch to it (cuBLAS workspace, the buffers of unfused kernels).
// A backend serves one model at a time: its scratch lives in that model's arena.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <nvtx3/nvToolsExt.h>

#include <algorithm>

#include "backend/backend.h"
#include "core/cuda_check.h"
#include "ops/adamw.h"
#include "ops/attention.h"
#include "ops/attention_decode.h"
#include "ops/block_backward.h"
#include "ops/block_forward.h"
#include "ops/convert.h"
#include "ops/cross_entropy.h"
#include "ops/embedding.h"
#include "ops/gated_product.h"
#include "ops/gemm.h"
#include "ops/quantize.h"
#include "ops/residual.h"
#include "ops/rmsnorm.h"
#include "ops/rope.h"
#include "ops/rope_product.h"
#include "ops/swiglu.h"
#include "ops/weight_gradients.h"
#include "trace/cupti_trace.h"

namespace tt {
namespace {

class DeviceMemory final : public MemoryResource {
 public:
  void* allocate(size_t bytes, const std::string& breakdown) override {
    void* p = nullptr;
    if (cudaMalloc(&p, bytes) != cudaSuccess) cuda::refuse_device_memory(bytes, breakdown);
    return p;
  }
  void deallocate(void* p) override { cudaFree(p); }
};

// The stream of every CUDA backend of the process: created with the first, never destroyed.
// Measured on an H100: in one process, backends on freshly created streams ran the v3 bf16 step
// (B8 T128) in 1.48 ms on the first three streams and in 1.58 ms from the fourth on (v2: 1.93
// and 2.08 ms), whatever CUDA_DEVICE_MAX_CONNECTIONS (1, 2, 32); on one stream, 1.48 ms every
// time. `bench` and `ablate` build a backend per point, so without this the points after the
// third were slower for no reason of their own. A backend serves one model at a time and the
// process drives them from one thread, so sharing the stream orders nothing that was not
// already in order.
// The three lanes behind the backward pass (Backend::Lane), the same way. The update lane, for the
// optimizer behind the backward (fused-adamw), has a lower priority than the main stream: when
// an SM frees up, the backward's next blocks are placed before more of AdamW's (in a CUDA graph
// too: it is instantiated to keep the streams' priorities), so that the update fills the gaps
// the backward leaves rather than delaying it. The weight-gradient lane sits between the two:
// below the backward, but its group, which the layer's update waits for, placed before more of
// AdamW's blocks (with the first layer's FFN update ahead of its attention's backward, v6 at 8 x 128
// 1.028-1.029 -> 1.025-1.026 ms, 8 x 256 1.513 -> 1.505-1.507 on an H200,
// docs/data/2026-11-30-h200-dw-tiles-beside). The communication lane, for NCCL's collectives, has
// the main stream's priority: its kernels take a few SMs, and at a lower priority they would wait
// for the backward to leave SMs free, piling up at the end of the step.
enum class Priority { Least, Between, Greatest };
cudaStream_t new_stream(Priority p) {
  int least = 0, greatest = 0;
  CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  const int value = p == Priority::Greatest ? greatest : p == Priority::Least ? least : (least + greatest) / 2;
  cudaStream_t s = nullptr;
  CUDA_CHECK(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, value));
  return s;
}
cudaStream_t process_stream() {
  static const cudaStream_t stream = new_stream(Priority::Greatest);
  return stream;
}
cudaStream_t process_update_stream() {
  static const cudaStream_t stream = new_stream(Priority::Least);
  return stream;
}
cudaStream_t process_weight_gradient_stream() {
  static const cudaStream_t stream = new_stream(Priority::Between);
  return stream;
}
cudaStream_t process_communication_stream() {
  static const cudaStream_t stream = new_stream(Priority::Greatest);
  return stream;
}

class CudaBackend final : public Backend {
 public:
  CudaBackend(const Plan& plan, bool nvtx, int gpu) : plan_(plan), nvtx_(nvtx) {
    // The device first: every handle, stream and buffer below belongs to the device that is
    // current when it is made (a cuBLASLt handle made on GPU 0 and used on GPU 1 fails its
    // products with CUBLAS_STATUS_EXECUTION_FAILED).
    CUDA_CHECK(cudaSetDevice(gpu));
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, gpu));
    device_name_ = prop.name;
    sms_ = prop.multiProcessorCount;
    stream_ = process_stream();
    CUBLAS_CHECK(cublasCreate(&cublas_));
    CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
    lt_ = std::make_unique<cuda::LtProducts>();
    for (cudaEvent_t& e : marks_) CUDA_CHECK(cudaEventCreate(&e));
    CUDA_CHECK(cudaMallocHost(&adamw_host_, sizeof(cuda::AdamWScalars)));
    CUDA_CHECK(cudaEventCreateWithFlags(&adamw_copied_, cudaEventDisableTiming));
    lanes_[int(Lane::Communication)] = process_communication_stream();
    lanes_[int(Lane::Update)] = process_update_stream();
    lanes_[int(Lane::WeightGradients)] = process_weight_gradient_stream();
    current_ = stream_;
    CUDA_CHECK(cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming));
  }
  ~CudaBackend() override {
    cudaStreamSynchronize(stream_);  // this backend's work is done before its resources go
    for (cudaStream_t lane : lanes_) cudaStreamSynchronize(lane);
    cudaEventDestroy(fork_);
    cudnn_.reset();
    graph_release();
    cudaFreeHost(adamw_host_);
    cudaEventDestroy(adamw_copied_);
    for (cudaEvent_t e : marks_) cudaEventDestroy(e);
    cublasDestroy(cublas_);
  }

  std::string name() const override {
    return "cuda " + describe(plan_) + " on " + device_name_;
  }
  bool is_cuda() const override { return true; }
  DType master_dtype() const override { return DType::F32; }
  DType act_dtype() const override { return plan_.amp ? DType::BF16 : DType::F32; }
  DType acc_dtype() const override { return DType::F32; }
  const Plan& plan() const override { return plan_; }
  MemoryResource& memory() override { return memory_; }

  void layout_workspace(Arena& a, const ModelShape& m) override {
    const DType act = act_dtype();
    const AttnShape attn{m.B, m.T, m.H, m.KVH, m.D};
    auto take = [&](DType d, int64_t n) { return a.take(Category::Workspace, d, n); };
    const bool without_workspace = plan_.products_without_workspace && products_without_workspace_misfit(plan_).empty();
    cublas_workspace_ = without_workspace ? Tensor{} : take(DType::F32, kCublasWorkspaceBytes / 4);
    adamw_device_ = take(DType::F32, sizeof(cuda::AdamWScalars) / 4);
    sum_squares_scratch_ = take(DType::F32, cuda::kSumSquaresBlocks);
    amax_partials_ = plan_.fp8 ? take(DType::F32, cuda::kAmaxBlocks) : Tensor{};
    shape_ = attn;
    use_custom_attention_ = uses_custom_attention(attn);
    use_cudnn_ = uses_cudnn(attn);
    if (use_custom_attention_) {
      flash_scratch_ = take(DType::F32, cuda::flash_attention_scratch_numel(attn, act, plan_.fused_attention_backward));
    } else if (use_cudnn_) {
      cudnn_workspace_ = take(DType::F32, cuda::CudnnAttention::workspace_bytes(attn) / 4);
      if (cudnn_workspace_.ptr) {  // the arena's real pass: build the plans now, before any capture
        if (!cudnn_) cudnn_ = std::make_unique<cuda::CudnnAttention>(kernel_stream());
        cudnn_->prepare(attn, cudnn_workspace_);
      }
    } else {
      const std::vector<int64_t> sizes = cuda::attention_scratch_numel(attn);
      Tensor* bufs[] = {&attn_.qh, &attn_.kh, &attn_.vh, &attn_.oh, &attn_.dqh, &attn_.dkh, &attn_.dvh, &attn_.ds};
      for (size_t i = 0; i < sizes.size(); ++i) *bufs[i] = take(act, sizes[i]);
    }
    const std::vector<int64_t> sort = cuda::embedding_scratch_numel(m.tokens() * m.lookup_ranks);
    embedding_ = {take(DType::I32, sort[0]), take(DType::I32, sort[1]), take(DType::I32, sort[2]),
                  take(DType::I32, sort[3])};
    if (embedding_.positions.ptr) cuda::embedding_prepare(embedding_, kernel_stream());  // the real pass
    if (plan_.fused_residual_norm && !cuda::residual_rmsnorm_fits(m.C))
      usage_fail("fused-residual-norm: its kernels take rows of up to 12288 elements (--hidden-dim " +
                 std::to_string(m.C) + "); turn it off with --disable-fused-residual-norm");
    // The norms without an add before them take the custom-rmsnorm switch's kernels; those with
    // one (fused-residual-norm) the one-kernel ones: scratch for both.
    rmsnorm_scratch_ = take(DType::F32, std::max(cuda::rmsnorm_scratch_numel(m.tokens(), m.C, plan_.custom_rmsnorm),
                                                 plan_.fused_residual_norm ? cuda::rmsnorm_scratch_numel(m.tokens(), m.C, true) : 0));
    if (plan_.blocks_forward_in_one_launch) {  // the block kernel's queue and counters, zero between its launches
      block_forward_sync_ = take(DType::I32, cuda::kBlockForwardSyncInts);
      if (block_forward_sync_.ptr) zero(block_forward_sync_);  // the arena's real pass
    }
    if (plan_.blocks_backward_in_one_launch) {  // likewise for the backward's
      block_backward_sync_ = take(DType::I32, cuda::kBlockBackwardSyncInts);
      if (block_backward_sync_.ptr) zero(block_backward_sync_);
    }
    swiglu_scratch_ = swiglu_kernels() == cuda::SwiGluKernels::Unfused ? take(act, m.tokens() * m.F) : Tensor{};
    if (cublas_workspace_.ptr)  // the arena's real pass: bind the workspace
      CUBLAS_CHECK(cublasSetWorkspace(cublas_, cublas_workspace_.ptr, kCublasWorkspaceBytes));
    else if (without_workspace)  // none (left unset, cuBLAS would allocate its own)
      CUBLAS_CHECK(cublasSetWorkspace(cublas_, nullptr, 0));
  }
  int vocab_padding_multiple() const override { return 128; }
  TensorSpec attention_saved(const AttnShape& s) const override {
    if (uses_custom_attention(s) || uses_cudnn(s))
      return {DType::F32, int64_t(s.B) * s.H * s.T};  // the softmax statistics
    return {act_dtype(), int64_t(s.B) * s.H * s.T * s.T};             // the probabilities
  }

  void upload(const Tensor& dst, const void* host) override {
    CUDA_CHECK(cudaMemcpyAsync(dst.ptr, host, dst.bytes(), cudaMemcpyHostToDevice, stream_));
    CUDA_CHECK(cudaStreamSynchronize(stream_));  // the host buffer may change right after
  }
  void download(void* host, const Tensor& src) override {
    CUDA_CHECK(cudaMemcpyAsync(host, src.ptr, src.bytes(), cudaMemcpyDeviceToHost, stream_));
    CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  void zero(const Tensor& t) override { CUDA_CHECK(cudaMemsetAsync(t.ptr, 0, t.bytes(), current_)); }
  void convert(const Tensor& dst, const Tensor& src) override { cuda::convert(dst, src, kernel_stream()); }
  void synchronize() override { CUDA_CHECK(cudaStreamSynchronize(stream_)); }

  void mark(int slot) override {  // inside a capture the record becomes a node of the graph
    CUDA_CHECK(cudaEventRecordWithFlags(marks_[slot], stream_, capturing_ ? cudaEventRecordExternal : 0));
  }
  double elapsed_ms(int from, int to) override {
    CUDA_CHECK(cudaEventSynchronize(marks_[to]));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, marks_[from], marks_[to]));
    return ms;
  }

  void range_push(const char* name) override {
    if (!nvtx_) return;
    nvtxRangePushA(name);
    trace_range_push(name);
  }
  void range_pop() override {
    if (!nvtx_) return;
    nvtxRangePop();
    trace_range_pop();
  }

  void matmul(const Gemm& g) override { cuda::gemm(blas(), g); }
  std::string matmul_group_misfit(const std::vector<Gemm>& products) const override {
    return plan_.grouped_weight_gradients ? cuda::weight_gradients_misfit(products, sms_) : "grouped-weight-gradients off";
  }
  void matmul_group(const std::vector<Gemm>& products) override {
    if (!matmul_group_misfit(products).empty()) return Backend::matmul_group(products);
    cuda::weight_gradients(products, kernel_stream(), current_ != stream_);  // beside: on a lane
  }
  std::string gate_up_swiglu_misfit(const Gemm& gate_up, int f) const override {
    return plan_.swiglu_in_gate_up ? cuda::gated_product_misfit(gate_up, f) : "swiglu-in-gate-up off";
  }
  void gate_up_swiglu(const Gemm& gate_up, const Tensor& h, int64_t n, int f) override {
    if (!gate_up_swiglu_misfit(gate_up, f).empty()) return Backend::gate_up_swiglu(gate_up, h, n, f);
    cuda::gated_product(gate_up, h, f, kernel_stream());
  }
  std::string down_swiglu_backward_misfit(const Gemm& down_dx, int f) const override {
    return plan_.swiglu_in_down_gradient ? cuda::swiglu_gradient_product_misfit(down_dx, f) : "swiglu-in-down-gradient off";
  }
  void down_swiglu_backward(const Gemm& down_dx, const Tensor& dgateup, const Tensor& gateup, int64_t n,
                            int f) override {
    if (!down_swiglu_backward_misfit(down_dx, f).empty())
      return Backend::down_swiglu_backward(down_dx, dgateup, gateup, n, f);
    cuda::swiglu_gradient_product(down_dx, dgateup, gateup, f, kernel_stream());
  }
  std::string qkv_rope_misfit(const Gemm& qkv, const std::vector<RopeShape>& ropes) const override {
    if (!plan_.rope_in_qkv_product) return "rope-in-qkv-product off";
    if (ropes.size() != 1) return "the queries and the keys rotated in two calls (without custom-rope)";
    return cuda::rope_product_misfit(qkv, ropes[0]);
  }
  void qkv_rope(const Gemm& qkv, const Tensor& table, const std::vector<RopeShape>& ropes) override {
    if (!qkv_rope_misfit(qkv, ropes).empty()) return Backend::qkv_rope(qkv, table, ropes);
    cuda::rope_product(qkv, table, ropes[0], kernel_stream());
  }
  std::string block_forward_misfit(const BlockForward& f) const override {
    std::string plan = block_kernel_plan_misfit(plan_.blocks_forward_in_one_launch, "blocks-forward-in-one-launch");
    return plan.empty() ? cuda::block_forward_misfit(f) : plan;
  }
  void block_forward(const BlockForward& f) override {
    if (!block_forward_misfit(f).empty()) return Backend::block_forward(f);
    cuda::block_forward(f, block_forward_sync_, sms_, kernel_stream());
  }
  std::string block_backward_misfit(const BlockBackward& b) const override {
    std::string plan = block_kernel_plan_misfit(plan_.blocks_backward_in_one_launch, "blocks-backward-in-one-launch");
    return plan.empty() ? cuda::block_backward_misfit(b) : plan;
  }
  void block_backward(const BlockBackward& b) override {
    if (!block_backward_misfit(b).empty()) return Backend::block_backward(b);
    cuda::block_backward(b, block_backward_sync_, sms_, kernel_stream());
  }
  void embedding_forward(const Tensor& out, const Tensor& tokens, const Tensor& wte, int64_t n, int c) override {
    cuda::embedding_forward(out, tokens, wte, n, c, kernel_stream());
  }
  void embedding_backward(const Tensor& dwte, const Tensor& dout, const Tensor& tokens, int64_t n, int c,
                          int vocab) override {
    cuda::embedding_backward(dwte, dout, tokens, n, c, vocab, embedding_, kernel_stream());
  }
  void rmsnorm_forward(const Tensor& out, const Tensor& rstd, const Tensor& x, const Tensor& w, int64_t n, int c,
                       double eps) override {
    cuda::rmsnorm_forward(out, rstd, x, w, n, c, float(eps), plan_.custom_rmsnorm, kernel_stream());
  }
  void fp8_rmsnorm_forward(const Fp8Matrix& out8, const Tensor& rstd, const Tensor& x, const Tensor& w, int64_t n,
                           int c, double eps) override {
    cuda::rmsnorm_forward_fp8(out8, rstd, x, w, n, c, float(eps), kernel_stream());
  }
  void rmsnorm_backward(const Tensor& dx, const Tensor& dw, const Tensor& dout, const Tensor& x, const Tensor& w,
                        const Tensor& rstd, int64_t n, int c, bool add_dw) override {
    cuda::rmsnorm_backward(dx, dw, dout, x, w, rstd, n, c, add_dw, plan_.custom_rmsnorm, rmsnorm_scratch_,
                           kernel_stream());
  }
  void add_rmsnorm_forward(const Tensor& sum, const Tensor& out, const Tensor& rstd, const Tensor& a, const Tensor& b,
                           const Tensor& w, int64_t n, int c, double eps) override {
    cuda::add_rmsnorm_forward(sum, out, rstd, a, b, w, n, c, float(eps), kernel_stream());
  }
  void rmsnorm_backward_add(const Tensor& dres, const Tensor& dres_in, const Tensor& dw, const Tensor& dout,
                            const Tensor& x, const Tensor& w, const Tensor& rstd, int64_t n, int c, bool add_dw) override {
    cuda::rmsnorm_backward_add(dres, dres_in, dw, dout, x, w, rstd, n, c, add_dw, rmsnorm_scratch_, kernel_stream());
  }
  void fp8_rmsnorm_backward(const Fp8Matrix& dx8, const Tensor& dx, const Tensor& dw, const Tensor& dout,
                            const Tensor& x, const Tensor& w, const Tensor& rstd, int64_t n, int c, bool add,
                            bool add_dw) override {
    if (plan_.custom_rmsnorm && cuda::rmsnorm_backward_fp8_fits(dx, dout, x, w, n, c))
      return cuda::rmsnorm_backward_fp8(dx8, dx, dw, dout, x, w, rstd, n, c, add, add_dw, rmsnorm_scratch_,
                                        kernel_stream());
    if (add) rmsnorm_backward_add(dx, dx, dw, dout, x, w, rstd, n, c, add_dw);
    else rmsnorm_backward(dx, dw, dout, x, w, rstd, n, c, add_dw);
    cuda::quantize_fp8(dx8, dx, n, c, Fp8Scaling::Delayed, amax_partials_, kernel_stream());  // delayed: no partials
  }
  bool attention_applies_rope() const override {
    return plan_.rope_in_attention && use_custom_attention_ && plan_.amp;
  }
  void set_attention_rope(const Tensor& table) override { rope_table_ = table; }
  const float* attention_rope() const { return attention_applies_rope() ? rope_table_.data<float>() : nullptr; }
  void rope_forward(const Tensor& x, const Tensor& table, const RopeShape& s) override {
    cuda::rope(x, table, s, false, plan_.custom_rope, kernel_stream());
  }
  void rope_backward(const Tensor& dx, const Tensor& table, const RopeShape& s) override {
    cuda::rope(dx, table, s, true, plan_.custom_rope, kernel_stream());
  }
  void fp8_rope_backward(const Fp8Matrix& dx8, const Tensor& dx, const Tensor& table, const RopeShape& s,
                         Fp8Scaling scaling) override {
    cuda::rope_backward_fp8(dx8, dx, table, s, scaling, amax_partials_, kernel_stream());
  }
  void attention_forward(const Tensor& att, const Tensor& saved, const Tensor& qkv, const AttnShape& s) override {
    if (use_custom_attention_)
      cuda::flash_attention_forward(att, saved, qkv, s, attention_rope(), kernel_stream());
    else if (use_cudnn_)
      cudnn_->forward(att, saved, qkv, s, cudnn_workspace_);
    else
      cuda::attention_forward(blas(), att, saved, qkv, s, plan_.flash_attention, attn_);
  }
  void fp8_attention_forward(const Fp8Matrix& att8, const Tensor& att, const Tensor& saved, const Tensor& qkv,
                             const AttnShape& s) override {
    if (use_custom_attention_ && qkv.dtype == DType::BF16)
      return cuda::flash_attention_forward(att, saved, qkv, s, attention_rope(), kernel_stream(), att8);
    attention_forward(att, saved, qkv, s);
    fp8_quantize(att8, att, int64_t(s.B) * s.T, int64_t(s.H) * s.D, Fp8Scaling::Delayed);
  }
  void attention_backward(const Tensor& dqkv, const Tensor& datt, const Tensor& qkv, const Tensor& att,
                          const Tensor& saved, const AttnShape& s) override {
    if (use_custom_attention_)
      cuda::flash_attention_backward(dqkv, datt, qkv, att, saved, s, attention_rope(), flash_scratch_,
                                     plan_.fused_attention_backward, plan_.attention_backward_in_one_block,
                                     kernel_stream());
    else if (use_cudnn_)
      cudnn_->backward(dqkv, datt, qkv, att, saved, s, cudnn_workspace_);
    else
      cuda::attention_backward(blas(), dqkv, datt, qkv, saved, s, plan_.flash_attention, attn_);
  }
  std::string attention_rope_backward_misfit(const AttnShape& s, const std::vector<RopeShape>& ropes) const override {
    if (ropes.empty()) return "no RoPE before the attention";
    return rope_backward_in_one_block(s) ? "" : "two launches";
  }
  void attention_rope_backward(const Tensor& dqkv, const Tensor& datt, const Tensor& qkv, const Tensor& att,
                               const Tensor& saved, const AttnShape& s, const Tensor& table,
                               const std::vector<RopeShape>& ropes) override {
    if (!attention_rope_backward_misfit(s, ropes).empty())
      return Backend::attention_rope_backward(dqkv, datt, qkv, att, saved, s, table, ropes);
    cuda::flash_attention_backward(dqkv, datt, qkv, att, saved, s, table.data<float>(), flash_scratch_,
                                   plan_.fused_attention_backward, true, kernel_stream(), true);
  }
  void attention_decode(const Tensor& out, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, int64_t len,
                        int64_t ld, const AttnShape& s) override {
    cuda::attention_decode(out, q, k_cache, v_cache, len, ld, s, kernel_stream());
  }
  void swiglu_forward(const Tensor& h, const Tensor& gateup, int64_t n, int f) override {
    cuda::swiglu_forward(h, gateup, n, f, swiglu_kernels(), swiglu_scratch_, kernel_stream());
  }
  void swiglu_backward(const Tensor& dgateup, const Tensor& dh, const Tensor& gateup, int64_t n, int f) override {
    cuda::swiglu_backward(dgateup, dh, gateup, n, f, swiglu_kernels(), swiglu_scratch_, kernel_stream());
  }
  void fp8_quantize(const Fp8Matrix& out, const Tensor& x, int64_t r, int64_t c, Fp8Scaling scaling) override {
    TT_CHECK(!amax_partials_.empty(), "fp8_quantize: the plan has no fp8 switch (no scratch for it)");
    cuda::quantize_fp8(out, x, r, c, scaling, amax_partials_, kernel_stream());
  }
  void fp8_quantize_all(const std::vector<Fp8Cast>& casts, Fp8Scaling scaling) override {
    if (scaling == Fp8Scaling::Delayed) return cuda::quantize_fp8_all(casts, kernel_stream());
    Backend::fp8_quantize_all(casts, scaling);  // current scaling: each with its amax pass
  }
  void fp8_update_scales(const Tensor& slots, int count) override {
    cuda::fp8_update_scales(slots, count, kernel_stream());
  }
  void fp8_swiglu_forward(const Fp8Matrix& h8, const Tensor& gateup, int64_t n, int f, Fp8Scaling scaling) override {
    cuda::swiglu_forward_fp8(h8, gateup, n, f, scaling, amax_partials_, kernel_stream());
  }
  void fp8_swiglu_backward(const Fp8Matrix& dgateup8, const Tensor& dh, const Tensor& gateup, int64_t n, int f,
                           Fp8Scaling scaling) override {
    cuda::swiglu_backward_fp8(dgateup8, dh, gateup, n, f, scaling, amax_partials_, kernel_stream());
  }
  void add(const Tensor& out, const Tensor& a, const Tensor& b) override { cuda::add(out, a, b, kernel_stream()); }
  void cross_entropy_forward(const Tensor& losses, const Tensor& logits, const Tensor& targets, int64_t n, int v,
                             int64_t ld) override {
    cuda::cross_entropy_forward(losses, logits, targets, n, v, ld, kernel_stream());
  }
  void cross_entropy_backward(const Tensor& dlogits, const Tensor& logits, const Tensor& targets, int64_t n, int v,
                              int64_t ld, double scale) override {
    cuda::cross_entropy_backward(dlogits, logits, targets, n, v, ld, float(scale), kernel_stream());
  }
  void cross_entropy_fused(const Tensor& losses, const Tensor& logits, const Tensor& targets, int64_t n, int v,
                           int64_t ld, double scale) override {
    cuda::cross_entropy_fused(losses, logits, targets, n, v, ld, float(scale), kernel_stream());
  }
  void fp8_cross_entropy_fused(const Fp8Matrix& dlogits8, const Tensor& lse, const Tensor& losses, const Tensor& logits,
                               const Tensor& targets, int64_t n, int v, int64_t ld, double scale) override {
    cuda::cross_entropy_fused_fp8(dlogits8, lse, losses, logits, targets, n, v, ld, float(scale), amax_partials_,
                                  kernel_stream());
  }
  void set_adamw_step(const AdamWStep& s) override {
    // Called outside any capture (the model uploads the scalars before each step). The copy
    // from pinned memory is asynchronous: the previous one must have read the buffer before
    // it is written again.
    CUDA_CHECK(cudaEventSynchronize(adamw_copied_));
    *adamw_host_ = cuda::adamw_scalars(s);
    CUDA_CHECK(cudaMemcpyAsync(adamw_device_.ptr, adamw_host_, sizeof(cuda::AdamWScalars), cudaMemcpyHostToDevice,
                               stream_));
    CUDA_CHECK(cudaEventRecord(adamw_copied_, stream_));
  }
  void adamw(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v, const Tensor& p_act, bool decay,
             const Tensor& grad_sumsq) override {
    cuda::adamw(p, g, m, v, p_act, decay, grad_sumsq, static_cast<const cuda::AdamWScalars*>(adamw_device_.ptr),
                kernel_stream());
  }
  void sum_squares(const Tensor& sumsq, const Tensor& g, bool accumulate) override {
    cuda::sum_squares(sumsq, g, accumulate, sum_squares_scratch_, kernel_stream());
  }

  // Each record is followed at once by its wait, so one event serves every edge. Inside a capture
  // the record and the wait become the graph's edges between the streams. A lane main has waited
  // for since its last work is not waited for again: the lane begun after main waits for it
  // already (and inside a capture, an event of a stream not in it could not be waited for).
  void begin_behind(Lane lane) override {
    current_ = lanes_[int(lane)];
    wait_for(stream_);
    behind_[int(lane)] = true;
  }
  void follow(Lane other) override {
    TT_CHECK(current_ != stream_, "follow: outside begin_behind/end_behind");
    if (behind_[int(other)]) wait_for(lanes_[int(other)]);
  }
  void end_behind() override { current_ = stream_; }
  void wait_behind() override {
    for (int lane = 0; lane < kLanes; ++lane) wait_lane(Lane(lane));
  }
  void wait_lane(Lane lane) override {
    TT_CHECK(current_ == stream_, "wait_lane: inside begin_behind/end_behind");
    if (behind_[int(lane)]) wait_for(lanes_[int(lane)]), behind_[int(lane)] = false;
  }
  // The current stream waits for all the work enqueued on `s` so far.
  void wait_for(cudaStream_t s) {
    CUDA_CHECK(cudaEventRecord(fork_, s));
    CUDA_CHECK(cudaStreamWaitEvent(current_, fork_, 0));
  }
  void* stream() override { return current_; }

  bool graph_capture_begin() override {
    CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    capturing_ = true;
    return true;
  }
  void graph_capture_end() override {
    cudaGraph_t graph = nullptr;
    capturing_ = false;
    CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
    if (graph_exec_) CUDA_CHECK(cudaGraphExecDestroy(graph_exec_));
    const cudaError_t err = cudaGraphInstantiate(&graph_exec_, graph, cudaGraphInstantiateFlagUseNodePriority);
    cudaGraphDestroy(graph);
    if (err != cudaSuccess) graph_exec_ = nullptr;
    CUDA_CHECK(err);
  }
  void graph_replay() override {
    TT_CHECK(graph_exec_, "graph_replay: no captured graph");
    CUDA_CHECK(cudaGraphLaunch(graph_exec_, stream_));
  }
  bool graph_ready() const override { return graph_exec_ != nullptr; }
  // Errors are not thrown here: this also runs while a failed run unwinds.
  void graph_release() override {
    if (!graph_exec_) return;
    cudaStreamSynchronize(stream_);
    for (cudaStream_t lane : lanes_) cudaStreamSynchronize(lane);
    cudaGraphExecDestroy(graph_exec_);
    graph_exec_ = nullptr;
  }

  std::string attention_kind() const override {
    if (use_custom_attention_) {
      if (!plan_.amp) return "our flash attention (fp32 FMA)";
      const bool fused = cuda::flash_attention_fused_backward(shape_, plan_.fused_attention_backward);
      if (plan_.attention_backward_in_one_block) {
        const std::string misfit = cuda::flash_attention_one_block_misfit(shape_);
        if (misfit.empty())
          return std::string("our flash attention (tensor cores, wgmma bf16; the backward one block a sequence and query "
                             "head") + (rope_backward_in_one_block(shape_) ? ", RoPE's backward in it)" : ")");
        if (!fused) return "our flash attention (tensor cores, wgmma bf16; the backward in two kernels: " + misfit + ")";
      }
      return fused ? "our flash attention (tensor cores, wgmma bf16; dQ made by the dK/dV kernel)"
                   : "our flash attention (tensor cores, wgmma bf16)";
    }
    if (plan_.custom_attention && !cuda::flash_attention_supports(shape_))
      return "our flash attention needs head size 32, 64 or 128: " + fallback_attention_kind();
    if (plan_.custom_attention)
      return fallback_attention_kind() + ", faster in fp32 than our FMA flash attention while a layer's scores take "
             "up to 1 GiB";
    return fallback_attention_kind();
  }
  // attention-backward-in-one-block's kernel turns dQ and dK back through a RoPE applied before
  // the attention (where RoPE is not inside it): RoPE's backward launches nothing.
  bool rope_backward_in_one_block(const AttnShape& s) const {
    return use_custom_attention_ && plan_.amp && plan_.attention_backward_in_one_block && !attention_applies_rope() &&
           cuda::flash_attention_one_block_misfit(s).empty();
  }
  std::string fallback_attention_kind() const {
    if (use_cudnn_) return "cuDNN " + cuda::CudnnAttention::version() + " fused flash attention (bf16)";
    if (plan_.flash_attention)
      return std::string("materialized scores, fused scale+mask+softmax kernel") +
             (plan_.amp ? " (cuDNN's flash attention needs a head size multiple of 8 and a sequence over 1)"
                        : " (cuDNN has no fp32 fused attention)");
    return "materialized scores, separate scale and mask+softmax kernels";
  }
  bool deterministic() const override { return !use_cudnn_; }

 private:
  static constexpr size_t kCublasWorkspaceBytes = size_t(32) << 20;
  cuda::Blas blas() const {
    return {cublas_, plan_.tf32, kernel_stream(), lt_.get(), cublas_workspace_, plan_.fp8_timed_products};
  }
  // The stream as our kernels' launchers take it: programmatic with the programmatic-launch switch.
  Stream kernel_stream() const { return {current_, plan_.programmatic_launch}; }
  // custom-swiglu alone also gets the vectorized kernels: the model lays out gate and up as
  // the two halves of each gateup row with or without gate-up-fusion.
  cuda::SwiGluKernels swiglu_kernels() const {
    if (plan_.custom_swiglu) return cuda::SwiGluKernels::Vectorized;
    return plan_.gate_up_fusion ? cuda::SwiGluKernels::Fused : cuda::SwiGluKernels::Unfused;
  }
  // Our flash attention (custom-attention) where it supports the head size; otherwise cuDNN's
  // fused attention, bf16 with the flash-attention switch, where cuDNN supports the shape.
  //
  // In fp32 our flash attention (FMA, no tensor cores) is the slower way wherever the
  // materialized scores fit: on an H100 at batch 8 the cuBLAS products with the fused softmax of
  // the flash-attention switch ran forward plus backward 1.8x faster at sequence 128 and 3.7x at
  // 1024 (docs/versions/v4.md). Its gain is memory, no T x T scores: so in fp32 it takes over
  // only where one layer's probabilities would exceed kFp32ScoresBytes.
  static constexpr int64_t kFp32ScoresBytes = int64_t(1) << 30;
  // What both block kernels need of the plan: their switch on, and our flash attention, RoPE before it.
  std::string block_kernel_plan_misfit(bool on, const std::string& flag) const {
    if (!on) return flag + " off";
    if (!use_custom_attention_ || attention_applies_rope()) return "not our flash attention, RoPE before it";
    return "";
  }
  bool uses_custom_attention(const AttnShape& s) const {
    if (!plan_.custom_attention || !cuda::flash_attention_supports(s)) return false;
    return plan_.amp || !plan_.flash_attention || int64_t(s.B) * s.H * s.T * s.T * 4 > kFp32ScoresBytes;
  }
  bool uses_cudnn(const AttnShape& s) const {
    return !uses_custom_attention(s) && plan_.flash_attention && plan_.amp && s.T > 1 && s.D % 8 == 0 && s.D <= 256;
  }

  Plan plan_;
  bool nvtx_;
  std::string device_name_;
  int sms_ = 0;  // the GPU's multiprocessors
  Tensor block_forward_sync_, block_backward_sync_;
  DeviceMemory memory_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  cudaEvent_t marks_[kMaxMarks] = {};
  Tensor cublas_workspace_, rmsnorm_scratch_, swiglu_scratch_, adamw_device_, sum_squares_scratch_;
  Tensor amax_partials_;  // fp8: current scaling's partial maxima
  cuda::AdamWScalars* adamw_host_ = nullptr;  // pinned
  cudaEvent_t adamw_copied_ = nullptr;         // recorded after each copy of adamw_host_
  static constexpr int kLanes = 3;
  cudaStream_t lanes_[kLanes] = {};            // the work behind the backward, by Lane
  cudaStream_t current_ = nullptr;             // stream_, or a lane between begin_behind and end_behind
  cudaEvent_t fork_ = nullptr;                 // the edges between the streams
  bool behind_[kLanes] = {};                   // work enqueued on a lane that main has not waited for
  cudaGraphExec_t graph_exec_ = nullptr;
  bool capturing_ = false;
  cuda::AttentionScratch attn_;
  bool use_cudnn_ = false, use_custom_attention_ = false;
  AttnShape shape_{};  // the attention's shape, from layout_workspace
  Tensor flash_scratch_;  // our flash attention's backward: rowsum(dO * O)
  Tensor rope_table_;     // rope-in-attention: the model's cos/sin table [T, D] (fp32)
  cuda::EmbeddingScratch embedding_;
  std::unique_ptr<cuda::CudnnAttention> cudnn_;
  std::unique_ptr<cuda::LtProducts> lt_;  // gemm-epilogues' products
  Tensor cudnn_workspace_;
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(const Plan& plan, bool nvtx, int gpu) {
  return std::make_unique<CudaBackend>(plan, nvtx, gpu);
}

}  // namespace tt
