// The backend interface: every operation the model performs, and the memory it runs in.
//
// The model (src/model/llama.cpp) is written once as calls to these operations. The CPU
// backend is the exact reference; the CUDA backend implements each operation in several
// ways and picks one per the optimization plan it was built with. Shapes, layouts and the
// overwrite (=) or accumulate (+=) rule of each operation are documented in src/ops/<op>.h.
//
// Precision. Each backend names three element types:
//   master: parameters, their gradients and the optimizer state (fp32; fp64 in tests);
//   act:    activations, activation gradients and the copy of the weights used in products;
//   acc:    per-row statistics (RMSNorm's rstd, attention's log-sum-exp), RoPE's table and
//           the per-token losses.
// The CPU backend uses one type for all three. The CUDA backend in bf16 mode keeps master
// fp32, act bf16, acc fp32.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/arena.h"
#include "ops/adamw.h"
#include "ops/attention.h"
#include "ops/block_backward.h"
#include "ops/block_forward.h"
#include "ops/gemm.h"
#include "ops/rope.h"
#include "plan/plan.h"

namespace tt {

// What one layer's attention keeps for its backward pass.
struct TensorSpec {
  DType dtype;
  int64_t numel;
};

// The sizes a backend needs to reserve its own scratch memory.
struct ModelShape {
  int B, T, C, H, KVH, D, F, V;
  int lookup_ranks = 1;  // the embedding backward runs over this many ranks' tokens (Llama's gathered lookup)
  int64_t tokens() const { return int64_t(B) * T; }
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string name() const = 0;  // e.g. "cpu fp32", "cuda v1 fp32"
  virtual bool is_cuda() const = 0;
  virtual DType master_dtype() const = 0;
  virtual DType act_dtype() const = 0;
  virtual DType acc_dtype() const = 0;
  virtual const Plan& plan() const = 0;

  // Memory: where the arena's block comes from, and the backend's own scratch.
  virtual MemoryResource& memory() = 0;
  virtual void layout_workspace(Arena& arena, const ModelShape& shape) = 0;
  virtual TensorSpec attention_saved(const AttnShape& shape) const = 0;
  // The output head's rows are padded to a multiple of this (src/model/params.h): 128 on the
  // GPU, where a product with a row count like 50257 falls to cuBLAS's unaligned kernels; 1 on
  // the CPU reference.
  virtual int vocab_padding_multiple() const { return 1; }

  // Data movement between the host and the backend's memory (whole tensors, same dtype).
  virtual void upload(const Tensor& dst, const void* host) = 0;
  virtual void download(void* host, const Tensor& src) = 0;
  virtual void zero(const Tensor& t) = 0;
  // dst = src converted to dst's element type (same number of elements); of equal types, of any
  // type (int32 too), a copy.
  virtual void convert(const Tensor& dst, const Tensor& src) = 0;
  virtual void synchronize() = 0;

  // Timing: mark(i) records time point i on the backend's timeline (an event on the GPU
  // stream); elapsed_ms(a, b) waits for both and returns the time between them.
  static constexpr int kMaxMarks = 8;
  virtual void mark(int slot) = 0;
  virtual double elapsed_ms(int from, int to) = 0;

  // Named ranges around the model's regions (NVTX on the GPU: Nsight tools and --profile see
  // them). Nested; the model opens and closes them with ScopedRange.
  virtual void range_push(const char* name) {}
  virtual void range_pop() {}

  // Operations.
  virtual void matmul(const Gemm& g) = 0;
  // Products none of which reads another's output (a layer's weight gradients): why the backend
  // does not make them in one launch, empty where it does (the CUDA backend with
  // grouped-weight-gradients, where the shapes allow: ops/weight_gradients.h), and the products
  // themselves, by default one by one.
  virtual std::string matmul_group_misfit(const std::vector<Gemm>&) const { return "one product a launch"; }
  virtual void matmul_group(const std::vector<Gemm>& products) {
    for (const Gemm& g : products) matmul(g);
  }
  // The FFN's first product and SwiGLU after it: gateup = x W^T (`gate_up`), then h = silu(gate) up
  // [n, f]. Why the backend does not make them in one launch, empty where it does (the CUDA backend
  // with swiglu-in-gate-up, where the shape allows: ops/gated_product.h), and the two, by default
  // the product then swiglu_forward.
  virtual std::string gate_up_swiglu_misfit(const Gemm&, int) const { return "two launches"; }
  virtual void gate_up_swiglu(const Gemm& gate_up, const Tensor& h, int64_t n, int f) {
    matmul(gate_up);
    swiglu_forward(h, gate_up.c, n, f);
  }
  // Its backward's start: dh = dy W_down (`down_dx`), then dgateup from dh and gateup. Why the
  // backend does not make them in one launch (the CUDA backend with swiglu-in-down-gradient), and
  // the two, by default the product then swiglu_backward.
  virtual std::string down_swiglu_backward_misfit(const Gemm&, int) const { return "two launches"; }
  virtual void down_swiglu_backward(const Gemm& down_dx, const Tensor& dgateup, const Tensor& gateup, int64_t n, int f) {
    matmul(down_dx);
    swiglu_backward(dgateup, down_dx.c, gateup, n, f);
  }
  // The QKV product and RoPE after it (`ropes` over `table`, in place in qkv.c). Why the backend
  // does not make them in one launch, empty where it does (the CUDA backend with
  // rope-in-qkv-product, where the shape allows: ops/rope_product.h), and the two, by default the
  // product then rope_forward.
  virtual std::string qkv_rope_misfit(const Gemm&, const std::vector<RopeShape>&) const { return "two launches"; }
  virtual void qkv_rope(const Gemm& qkv, const Tensor& table, const std::vector<RopeShape>& ropes) {
    matmul(qkv);
    for (const RopeShape& r : ropes) rope_forward(qkv.c, table, r);
  }
  // Every layer's forward after the first attention norm (ops/block_forward.h). Why the backend does
  // not make it in one launch, empty where it does (the CUDA backend with
  // blocks-forward-in-one-launch, where the shape allows), and the forward, by default the
  // operations one by one (the model runs its own sequence where the backend refuses: FP8 too).
  virtual std::string block_forward_misfit(const BlockForward&) const { return "a kernel an operation"; }
  virtual void block_forward(const BlockForward& f) {
    const AttnShape& s = f.attn;
    const int n = int(f.tokens()), C = f.hidden, F = f.intermediate, Q = int(s.ld()), HD = s.H * s.D;
    for (const BlockLayer& l : f.layers) {
      qkv_rope(linear_gemm(l.qkv, Q, l.xn1, C, l.wqkv, n, C, Q), f.rope_table, f.ropes);
      attention_forward(l.att, l.saved, l.qkv, s);
      Gemm out = linear_gemm(l.x_mid, C, l.att, HD, l.wo, n, HD, C);  // x_mid = att Wo^T + x
      out.beta = 1.0f, out.c_in = l.x;
      matmul(out);
      rmsnorm_forward(l.xn2, l.rstd2, l.x_mid, l.ffn_norm, n, C, f.eps);
      gate_up_swiglu(linear_gemm(l.gateup, 2 * F, l.xn2, C, l.wgateup, n, C, 2 * F), l.h, n, F);
      Gemm down = linear_gemm(l.x_next, C, l.h, F, l.wdown, n, F, C);  // x_next = h Wdown^T + x_mid
      down.beta = 1.0f, down.c_in = l.x_mid;
      matmul(down);
      rmsnorm_forward(l.xn_next, l.rstd_next, l.x_next, l.next_norm, n, C, f.eps);
    }
  }
  // Every layer's backward (ops/block_backward.h). Why the backend does not make it in one launch,
  // empty where it does (the CUDA backend with blocks-backward-in-one-launch, where the shape
  // allows), and the backward, by default the operations one by one as v6 runs them.
  virtual std::string block_backward_misfit(const BlockBackward&) const { return "a kernel an operation"; }
  virtual void block_backward(const BlockBackward& b) {
    const AttnShape& s = b.attn;
    const int n = int(b.tokens()), C = b.hidden, F = b.intermediate, Q = int(s.ld()), HD = s.H * s.D;
    for (auto l = b.layers.rbegin(); l != b.layers.rend(); ++l) {
      down_swiglu_backward(linear_dx_gemm(l->dh, F, l->d_out, C, l->wdown, n, F, C, 0.0f), l->dgateup, l->gateup, n, F);
      matmul(linear_dx_gemm(l->d_normed2, C, l->dgateup, 2 * F, l->wgateup, n, C, 2 * F, 0.0f));
      rmsnorm_backward_add(l->d_mid, l->d_out, l->g_ffn_norm, l->d_normed2, l->x_mid, l->ffn_norm, l->rstd2, n, C, b.add);
      matmul(linear_dx_gemm(l->datt, HD, l->d_mid, C, l->wo, n, HD, C, 0.0f));
      attention_rope_backward(l->dqkv, l->datt, l->qkv, l->att, l->saved, s, b.rope_table, b.ropes);
      matmul(linear_dx_gemm(l->d_normed1, C, l->dqkv, Q, l->wqkv, n, C, Q, 0.0f));
      rmsnorm_backward_add(l->d_in, l->d_mid, l->g_attn_norm, l->d_normed1, l->x, l->attn_norm, l->rstd1, n, C, b.add);
      std::vector<Gemm> dw = {linear_dw_gemm(l->g_wdown, l->d_out, C, l->h, F, n, F, C),
                              linear_dw_gemm(l->g_wgateup, l->dgateup, 2 * F, l->xn2, C, n, C, 2 * F),
                              linear_dw_gemm(l->g_wo, l->d_mid, C, l->att, HD, n, HD, C),
                              linear_dw_gemm(l->g_wqkv, l->dqkv, Q, l->xn1, C, n, C, Q)};
      for (Gemm& g : dw) g.beta = b.add ? 1.0f : 0.0f;
      matmul_group(dw);
    }
  }
  virtual void embedding_forward(const Tensor& out, const Tensor& tokens, const Tensor& wte,
                                 int64_t n, int c) = 0;
  virtual void embedding_backward(const Tensor& dwte, const Tensor& dout, const Tensor& tokens,
                                  int64_t n, int c, int vocab) = 0;
  virtual void rmsnorm_forward(const Tensor& out, const Tensor& rstd, const Tensor& x,
                               const Tensor& w, int64_t n, int c, double eps) = 0;
  // dw is written, or added to with add_dw (the micro-batches after the first of gradient
  // accumulation), as a weight gradient's product does with beta 1.
  virtual void rmsnorm_backward(const Tensor& dx, const Tensor& dw, const Tensor& dout,
                                const Tensor& x, const Tensor& w, const Tensor& rstd, int64_t n,
                                int c, bool add_dw) = 0;
  // The residual add and the RMSNorm after it in one pass (fused-residual-norm): sum = a + b,
  // out = rmsnorm(sum); and the backward that adds its dx to the residual stream's gradient:
  // dres = dres_in + dx, in place where dres_in is dres, else into a tensor apart.
  virtual void add_rmsnorm_forward(const Tensor& sum, const Tensor& out, const Tensor& rstd, const Tensor& a,
                                   const Tensor& b, const Tensor& w, int64_t n, int c, double eps) = 0;
  virtual void rmsnorm_backward_add(const Tensor& dres, const Tensor& dres_in, const Tensor& dw, const Tensor& dout,
                                    const Tensor& x, const Tensor& w, const Tensor& rstd, int64_t n, int c,
                                    bool add_dw) = 0;
  virtual void rope_forward(const Tensor& x, const Tensor& table, const RopeShape& s) = 0;
  // Whether attention_forward and attention_backward rotate the queries and keys themselves
  // (rope-in-attention, where our bf16 flash attention runs) with the table given once by
  // set_attention_rope: the model then leaves qkv unrotated and skips rope_forward/backward.
  virtual bool attention_applies_rope() const { return false; }
  virtual void set_attention_rope(const Tensor& table) {}
  virtual void rope_backward(const Tensor& dx, const Tensor& table, const RopeShape& s) = 0;
  // Version 5 (fp8-fused-rope): the backward made straight in FP8, every column of dx
  // [s.tokens, s.ld] into dx8 (s's heads turned back), dx itself left as it is (ops/rope.h).
  virtual void fp8_rope_backward(const Fp8Matrix& dx8, const Tensor& dx, const Tensor& table, const RopeShape& s,
                                 Fp8Scaling scaling) = 0;
  virtual void attention_forward(const Tensor& att, const Tensor& saved, const Tensor& qkv,
                                 const AttnShape& s) = 0;
  virtual void attention_backward(const Tensor& dqkv, const Tensor& datt, const Tensor& qkv,
                                  const Tensor& att, const Tensor& saved, const AttnShape& s) = 0;
  // The attention's backward, then RoPE's (RoPE applied to Q and K before the attention by
  // rope_forward: `ropes` over `table`; none with rope-in-attention). Why the backend does not make
  // them in one launch, empty where it does (the CUDA backend with attention-backward-in-one-block,
  // where the shape allows: its kernel turns dQ and dK back as it writes them, ops/attention.h),
  // and the two, by default the one after the other.
  virtual std::string attention_rope_backward_misfit(const AttnShape&, const std::vector<RopeShape>&) const {
    return "two launches";
  }
  virtual void attention_rope_backward(const Tensor& dqkv, const Tensor& datt, const Tensor& qkv, const Tensor& att,
                                       const Tensor& saved, const AttnShape& s, const Tensor& table,
                                       const std::vector<RopeShape>& ropes) {
    attention_backward(dqkv, datt, qkv, att, saved, s);
    for (const RopeShape& r : ropes) rope_backward(dqkv, table, r);
  }
  // Version 5 (fp8-fused-attention): attention_forward, and its output [B T, H D] also in its FP8
  // forms att8 with delayed scaling, the bytes and amax of quantizing att: made by our flash
  // attention's kernel where it runs, else by the quantizing pass after it.
  virtual void fp8_attention_forward(const Fp8Matrix& att8, const Tensor& att, const Tensor& saved, const Tensor& qkv,
                                     const AttnShape& s) = 0;
  // One new token's attention over the key/value cache of `len` positions, rows ld elements
  // apart (generation; src/ops/attention_decode.h). s gives the heads and their size.
  virtual void attention_decode(const Tensor& out, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                                int64_t len, int64_t ld, const AttnShape& s) = 0;
  virtual void swiglu_forward(const Tensor& h, const Tensor& gateup, int64_t n, int f) = 0;
  virtual void swiglu_backward(const Tensor& dgateup, const Tensor& dh, const Tensor& gateup,
                               int64_t n, int f) = 0;
  // Version 5 (fp8-fused-norm): the norm of x [n, c] straight into its FP8 forms out8 with delayed
  // scaling, and rstd; no bf16 output (ops/rmsnorm.h).
  virtual void fp8_rmsnorm_forward(const Fp8Matrix& out8, const Tensor& rstd, const Tensor& x, const Tensor& w,
                                   int64_t n, int c, double eps) = 0;
  // Version 5 (fp8-fused-norm-backward): rmsnorm_backward (add: rmsnorm_backward_add) whose dx, the
  // residual stream's gradient as stored, is also written in its FP8 forms dx8 with delayed
  // scaling, the bytes and amax of quantizing it: by the norm's kernel where it fits, else by the
  // quantizing pass after it.
  virtual void fp8_rmsnorm_backward(const Fp8Matrix& dx8, const Tensor& dx, const Tensor& dw, const Tensor& dout,
                                    const Tensor& x, const Tensor& w, const Tensor& rstd, int64_t n, int c, bool add,
                                    bool add_dw) = 0;
  // Version 5 (CUDA): x [r, c] into its FP8 forms, and the delayed scales' update (ops/quantize.h).
  virtual void fp8_quantize(const Fp8Matrix& out, const Tensor& x, int64_t r, int64_t c, Fp8Scaling scaling) = 0;
  // Each cast as fp8_quantize would make it (here one by one; the CUDA backend, with delayed
  // scaling, in as few launches as it can).
  virtual void fp8_quantize_all(const std::vector<Fp8Cast>& casts, Fp8Scaling scaling) {
    for (const Fp8Cast& k : casts) fp8_quantize(k.out, k.x, k.r, k.c, scaling);
  }
  virtual void fp8_update_scales(const Tensor& slots, int count) = 0;
  // SwiGLU's output h [n, F] and input gradient dgateup [n, 2F] made straight in FP8 (ops/swiglu.h).
  virtual void fp8_swiglu_forward(const Fp8Matrix& h8, const Tensor& gateup, int64_t n, int f, Fp8Scaling scaling) = 0;
  virtual void fp8_swiglu_backward(const Fp8Matrix& dgateup8, const Tensor& dh, const Tensor& gateup, int64_t n, int f,
                                   Fp8Scaling scaling) = 0;
  virtual void add(const Tensor& out, const Tensor& a, const Tensor& b) = 0;
  virtual void cross_entropy_forward(const Tensor& losses, const Tensor& logits,
                                     const Tensor& targets, int64_t n, int v, int64_t ld) = 0;
  virtual void cross_entropy_backward(const Tensor& dlogits, const Tensor& logits,
                                      const Tensor& targets, int64_t n, int v, int64_t ld, double scale) = 0;
  // Both in one pass, the gradient written over the logits (the fused classifier).
  virtual void cross_entropy_fused(const Tensor& losses, const Tensor& logits, const Tensor& targets, int64_t n,
                                   int v, int64_t ld, double scale) = 0;
  // Both, the gradient [n, ld] made straight in FP8 (version 5's head, fp8-head) into dlogits8's
  // layouts through its slot's scale, as delayed scaling uses it (the caller sets it); the logits
  // stay. lse: scratch of n fp32 (ops/cross_entropy.h).
  virtual void fp8_cross_entropy_fused(const Fp8Matrix& dlogits8, const Tensor& lse, const Tensor& losses,
                                       const Tensor& logits, const Tensor& targets, int64_t n, int v, int64_t ld,
                                       double scale) = 0;
  // The step's AdamW scalars (learning rate, bias corrections): adamw() uses the last ones
  // set. The CUDA kernel reads them from device memory, so that a captured step replays with
  // the scalars of the current step; set them outside a capture, before the step.
  virtual void set_adamw_step(const AdamWStep& s) = 0;
  // p, g, m, v are master tensors of one parameter (or of several); p_act, when not
  // empty, is the act-typed copy of p used by the products, refreshed from the new p. decay:
  // whether weight decay applies to them. grad_sumsq, when not empty: the one-element master
  // tensor sum_squares filled, by which the gradients are clipped (AdamWStep::max_grad_norm).
  virtual void adamw(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v, const Tensor& p_act,
                     bool decay, const Tensor& grad_sumsq) = 0;
  // sumsq (one master element) = (accumulate ? sumsq : 0) + the sum of the squares of g (master),
  // in an order fixed by the size alone.
  virtual void sum_squares(const Tensor& sumsq, const Tensor& g, bool accumulate) = 0;
  // Work behind the backward pass, on three lanes beside the main stream: the collectives of data
  // parallelism on the communication lane, the optimizer behind the backward (fused-adamw) on
  // the update lane, a layer's weight gradients beside the layers below (weight-gradients-behind)
  // on theirs. What is enqueued between begin_behind(lane) and end_behind() starts once all the
  // work enqueued on the main stream before begin_behind() has run (and, after follow(other), all
  // the work enqueued on the other lane so far), and runs alongside what is enqueued on the main
  // stream after end_behind(). wait_behind() makes what is enqueued next on the main stream wait
  // for every lane, wait_lane(lane) for that one. A backend with one stream (the CPU) runs it all
  // in order.
  enum class Lane { Communication = 0, Update = 1, WeightGradients = 2 };
  virtual void begin_behind(Lane) {}
  virtual void follow(Lane) {}
  virtual void end_behind() {}
  virtual void wait_behind() {}
  virtual void wait_lane(Lane) {}
  // The stream work is enqueued on now (a cudaStream_t; none on the CPU): the collectives' stream.
  virtual void* stream() { return nullptr; }

  // CUDA graphs (the cuda-graph switch): the work enqueued between graph_capture_begin()
  // and graph_capture_end() is captured once, then graph_replay() runs it again. A backend
  // without graphs returns false from graph_capture_begin() and the caller runs eagerly.
  // graph_ready(): a captured graph is there to replay. graph_release() waits for the work
  // enqueued so far and destroys the graph (NCCL's teardown waits until every graph holding
  // its collectives is gone: src/parallel/comm_nccl.cpp); the next step captures anew.
  virtual bool graph_capture_begin() { return false; }
  virtual void graph_capture_end() {}
  virtual void graph_replay() {}
  virtual bool graph_ready() const { return false; }
  virtual void graph_release() {}

  // Which attention implementation runs, for the summary.
  virtual std::string attention_kind() const = 0;
  // Whether two runs give bitwise the same results (cuDNN's attention backward does not).
  virtual bool deterministic() const { return true; }
};

enum class DeviceKind { Auto, Cpu, Cuda };

struct BackendOptions {
  DeviceKind device = DeviceKind::Auto;
  Plan plan;
  int gpu = 0;  // which GPU of the node (a data-parallel rank's local rank)
  bool nvtx = true;  // named ranges on; off only to measure what they cost (--no-nvtx)
};

class ScopedRange {
 public:
  ScopedRange(Backend& b, const char* name) : b_(b) { b_.range_push(name); }
  ~ScopedRange() { b_.range_pop(); }
  ScopedRange(const ScopedRange&) = delete;
  ScopedRange& operator=(const ScopedRange&) = delete;

 private:
  Backend& b_;
};

// Builds the backend the options ask for. With Auto: CUDA when a GPU is present, else CPU.
// Throws UsageError for --device cuda without a usable GPU.
std::unique_ptr<Backend> make_backend(const BackendOptions& options);

// The double-precision CPU backend the gradient checks and parity tests compare against.
std::unique_ptr<Backend> make_cpu_backend_f64(const Plan& plan = plan_for_version(1));
// The backends make_backend chooses from: the fp32 CPU reference, and the CUDA backend on GPU
// `gpu` (where this build has CUDA).
std::unique_ptr<Backend> make_cpu_backend(const Plan& plan);
std::unique_ptr<Backend> make_cuda_backend(const Plan& plan, bool nvtx, int gpu);

// Whether a CUDA device is usable, and if not, why (for messages).
bool cuda_available(std::string* why);
// The GPUs this process sees (0 without a CUDA backend or device).
int cuda_device_count();

// What the reports say about the machine a run used.
struct DeviceInfo {
  std::string name;             // GPU or CPU model
  int sm_clock_mhz = 0;         // peak clocks (GPU)
  int memory_clock_mhz = 0;
  int multiprocessors = 0;
  size_t l2_bytes = 0;          // the GPU's L2 cache
  // What one SM holds at once (GPU): threads, registers, blocks, shared memory, and the shared
  // memory the runtime keeps for each block.
  int sm_threads = 0, sm_registers = 0, sm_blocks = 0;
  size_t sm_shared_bytes = 0, block_reserved_shared_bytes = 0;
  std::string driver, runtime;  // CUDA versions, "12.8"
  size_t memory_total = 0, memory_free = 0;
};
DeviceInfo device_info(bool cuda);

}  // namespace tt
