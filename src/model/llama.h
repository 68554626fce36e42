// The Tiny LLaMA, forward and backward, written once as calls to a Backend.
//
//   x = embed(tokens)
//   per layer:  x = x + o_proj(attention(rope(qkv_proj(rmsnorm(x)))))
//               x = x + down_proj(silu(gate_proj(rmsnorm(x))) * up_proj(rmsnorm(x)))
//   logits = rmsnorm(x) @ embed^T ;  loss = mean cross-entropy against the next tokens
//
// The output head is a product with padded_vocab() rows (the backend's padding, see
// src/model/params.h); the logits have padded_vocab() columns, of which the first vocab_size
// take part in the softmax. With the fused-classifier switch the head runs in chunks of
// tokens in the forward pass: each chunk's logits, loss and gradient (written over the
// logits), then that chunk's products of the backward; the logits buffer holds one chunk.
//
// All memory (parameters, gradients, Adam moments, activations, scratch) is laid out once in
// the backend's arena when the model is built; a step allocates nothing. The parameters,
// gradients and optimizer state, their reductions over the ranks and the updates are the
// ParamState's (src/model/param_state.h); this class is the network.
//
// Version 5 (the fp8 switch, where uses_fp8()): each layer's four products (QKV, output,
// gate/up, down) take FP8 operands, in both layouts the products read (ops/quantize.h): the
// weights cast once a step, before the first forward; each activation and each gradient cast
// after the kernel that makes it, in one pass, except SwiGLU's output and input gradient, which
// SwiGLU's kernels write in FP8 themselves (fp8-fused-swiglu). The head, the attention and
// everything else stay as in v4.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "parallel/comm.h"
#include "model/config.h"
#include "model/param_state.h"
#include "model/params.h"

namespace tt {

class Llama {
 public:
  Llama(const ModelConfig& config, Backend& backend, int batch, int seq_len, DataParallel dp = {},
        StepOptions step = {});

  // What a model of this shape would reserve on this backend, by category, without
  // allocating anything (the batch-size finder searches with it).
  static std::array<size_t, kNumCategories> memory_needed(const ModelConfig& config, Backend& backend, int batch,
                                                          int seq_len, DataParallel dp = {}, StepOptions step = {});

  const ModelConfig& config() const { return cfg_; }
  Backend& backend() { return be_; }
  const Arena& arena() const { return arena_; }
  int batch() const { return B_; }  // sequences per micro-batch
  int seq_len() const { return T_; }
  int64_t tokens() const { return int64_t(B_) * T_; }  // per micro-batch
  const StepOptions& step_options() const { return step_; }
  // Whether the layers' products run in FP8 (version 5): the fp8 switch with bf16 activations on
  // the CUDA backend, every dimension of the products a multiple of 16 (cuBLASLt's rule), and a
  // shape where FP8 pays (fp8-every-shape: every shape that allows it).
  bool uses_fp8() const { return fp8_; }
  // How the layers' products run, and why, for the run's header ("" without the fp8 switch).
  std::string products_kind() const;

  // Parameters from initial_params(config, seed, std), written a tensor at a time; gradients and
  // moments zeroed.
  void init_weights(uint64_t seed, double std = kInitStd);

  // One step: set_batch, then forward and backward of each micro-batch in turn, then
  // optimizer_step. Each call only enqueues work on the backend; mean_loss() waits for it and
  // returns the loss of the micro-batches of the last set_batch. A forward for evaluation
  // computes the loss alone; backward() must follow a training forward (with the fused
  // classifier, that forward has already done the head's part of the backward). The backward of
  // micro-batch 0 writes the gradients, the others' add to them, and the last one's sums them
  // over the ranks.
  enum class Pass { Train, Eval };
  // micro_batches x B x T each, on the host: micro-batch i is rows [i B, (i + 1) B).
  void set_batch(const int32_t* tokens, const int32_t* targets, int micro_batches = 1);
  void forward(Pass pass = Pass::Train, int micro_batch = 0);
  void backward();
  void optimizer_step(const AdamWStep& step);
  double mean_loss();
  // The sum of the token losses over the first `sequences` sequences of the last set_batch, on
  // this rank alone (validation on a set number of windows counts only the real rows of a batch).
  double loss_sum(int sequences);
  // With StepOptions::clip or measure_norm: the gradients' global norm of the last step, before clipping.
  double grad_norm() { return state_.grad_norm(); }
  // Every micro-batch's forward and backward, and optimizer_step, with time marks 0..3 on the
  // backend (0 at the start, 1 after the last micro-batch's forward, 2 after its backward, 3
  // after the update); with the cuda-graph switch, captured at the first call and replayed after.
  // `stop`, when given and the step is not replayed from a graph, is asked after each micro-batch
  // but the last: true abandons the step there, before its update (the weights and moments stay
  // as they were). Returns whether the step was taken.
  bool train_step(const AdamWStep& step, const std::function<bool()>& stop = {});

  // The arena's use over one step: after each region (in execution order), the bytes that
  // hold data still needed, by category. Parameters, gradients, optimizer state and the
  // workspace are live throughout; a layer's activations from its forward until its backward.
  struct MemoryPoint {
    std::string region;
    std::array<size_t, kNumCategories> live;
  };
  std::vector<MemoryPoint> memory_timeline() const;

  // The output head's rows, and the tokens per chunk of the fused classifier (all tokens
  // without it).
  int padded_vocab() const { return Vp_; }
  const Weights& weights() const { return w_; }  // the act-typed views the products read
  // The logits of the last forward, [classifier_chunk(), padded_vocab()]: every token's without
  // the fused classifier (after a forward for evaluation: with training, they become dlogits).
  Tensor logits() const { return logits_; }
  int classifier_chunk() const { return chunk_; }
  // The bytes of each category that are vocabulary padding (zero rows of the head in the
  // parameters and gradients, padding columns of the logits): a part of arena().bytes().
  std::array<size_t, kNumCategories> padding_bytes() const;
  // The padding rows of the parameters, of their act-typed copy and of the gradients (none
  // without padding), for the tests that check they stay zero.
  std::vector<Tensor> padding_rows() const;

  // The master buffers (parameters, gradients, Adam moments), all laid out by param_table:
  // the real parameters only (the padding rows that follow them are the model's own).
  Tensor params() const { return state_.params().slice(0, cfg_.param_count()); }
  Tensor grads() const { return state_.grads().slice(0, cfg_.param_count()); }
  Tensor adam_m() const { return state_.adam_m(); }  // with ZeRO-1: this rank's parts only
  Tensor adam_v() const { return state_.adam_v(); }
  // For checkpoints, whatever the sharding. optimizer_state(1 or 2): the whole first or second
  // moment in the flat layout; with ZeRO-1 it is gathered from every rank into the gradients'
  // buffer (a collective: every rank calls it; the gradients are rewritten by the next step).
  // load_optimizer_state: the values of one tensor at `offset` of the flat layout, kept where
  // this rank holds them.
  Tensor optimizer_state(int which) { return state_.optimizer_state(which); }
  void load_optimizer_state(int which, int64_t offset, const std::vector<float>& values) {
    state_.load_optimizer_state(which, offset, values);
  }
  int rank() const { return state_.rank(); }
  DType reduce_dtype() const { return state_.reduce_dtype(); }
  int world_size() const { return state_.world_size(); }
  // Host copies of an fp32 or fp64 buffer (or a range of one; read_f32 also takes the act-typed
  // bf16 ones, such as the logits), converted from or to its element type. write() also refreshes the act-typed copy of the weights when it writes parameters.
  std::vector<double> read(const Tensor& master) { return state_.read(master); }
  std::vector<float> read_f32(const Tensor& master) { return state_.read_f32(master); }
  void write(const Tensor& master, const std::vector<float>& values) { state_.write(master, values); }

 private:
  struct MeasureOnly {};
  Llama(const ModelConfig& config, Backend& backend, int batch, int seq_len, DataParallel dp, StepOptions step,
        MeasureOnly);

  struct LayerActs {
    Tensor x;       // [N, C] residual stream entering the layer
    Tensor xn1;     // [N, C] rmsnorm(x)
    Tensor rstd1;   // [N]
    Tensor qkv;     // [N, (H + 2 KVH) D], RoPE applied to q and k (not with rope-in-attention)
    Tensor saved;   // what attention keeps for its backward (backend-specific)
    Tensor att;     // [N, H D] attention output
    Tensor x_mid;   // [N, C] x + o_proj(att)
    Tensor xn2;     // [N, C] rmsnorm(x_mid)
    Tensor rstd2;   // [N]
    Tensor gateup;  // [N, 2F]
    Tensor h;       // [N, F] silu(gate) * up
  };

  // Version 5's FP8 operands: per layer, the four products' inputs (activations, kept for the
  // weight gradients) and weights; one buffer for the gradient entering a product; and the
  // scale slots, kFp8Slots a layer (FP8Slot).
  struct LayerFp8 {
    Fp8Matrix xn1, att, xn2, h;          // [N, C], [N, H D], [N, C], [N, F]
    Fp8Matrix wqkv, wo, wgateup, wdown;  // as the weights
  };
  enum Fp8Slot { kWqkv, kWo, kWgateup, kWdown, kXn1, kAtt, kXn2, kH, kDqkv, kDo, kDgateup, kDdown, kFp8Slots };
  // The FP8 forms of a product's input and weight; empty: the product runs in the act type.
  struct Fp8Operands {
    Fp8Matrix x, w;
    bool empty() const { return x.slot.empty(); }
    Fp8Operands weight_rows(int64_t first, int64_t n) const { return {x, w.row_block(first, n)}; }
  };
  // Layer l's operands `x` and `w` (empty without FP8).
  Fp8Operands operands(int l, Fp8Matrix LayerFp8::*x, Fp8Matrix LayerFp8::*w) const {
    if (!fp8_) return {};
    return {fp8_layers_[size_t(l)].*x, fp8_layers_[size_t(l)].*w};
  }
  // FP8 for the layers' products: whether cuBLASLt takes this shape (every dimension a multiple of
  // 16), whether it pays here (kFp8MinHidden, kFp8MinTokens, or fp8-every-shape), and both with
  // the plan, the precision and the backend (fp8_ is decide_fp8()).
  bool fp8_fits() const;
  bool fp8_pays() const;
  bool decide_fp8() const;
  Fp8Scaling fp8_scaling() const;
  Tensor fp8_slot(int layer, Fp8Slot which) const {
    return fp8_slots_.slice((int64_t(layer) * kFp8Slots + which) * kFp8SlotFloats, kFp8SlotFloats);
  }
  void quantize(const Fp8Matrix& out, const Tensor& x, int64_t r, int64_t c);
  void quantize_weights();
  // The FP8 form of the gradient [N, c] entering a layer's products (grad8_, through its slot), and
  // that gradient quantized into it.
  Fp8Matrix gradient_fp8(int64_t c, int layer, Fp8Slot which) const;
  Fp8Matrix quantize_gradient(const Tensor& d, int64_t c, int layer, Fp8Slot which);
  void finish_fp8_step();  // delayed scaling: this step's amaxes into the history

  void layout(Arena& a);
  bool enqueue_step(const std::function<bool()>& stop = {});  // marks, forward, backward, the update
  void backward_pass(bool update_behind);
  // The micro-batch being computed, and whether its weight gradients add to the earlier ones'.
  bool accumulating() const { return micro_ > 0; }
  Tensor micro_slice(const Tensor& t) const { return t.slice(int64_t(micro_) * tokens(), tokens()); }
  // The gradient scale of the mean over every rank's tokens and micro-batches.
  double loss_grad_scale() const { return 1.0 / double(tokens() * state_.world_size() * step_.micro_batches); }
  // The column blocks of the QKV buffer that the unfused products write (q, k, v).
  struct QkvBlock {
    int64_t col;
    int width;
  };
  std::vector<QkvBlock> qkv_blocks() const;
  // What RoPE rotates: queries and keys in one call with custom-rope (they are adjacent
  // heads), otherwise one call each.
  std::vector<RopeShape> rope_shapes() const;
  void forward_attention(int layer);
  void forward_ffn(int layer);
  void backward_ffn(int layer);
  void backward_attention(int layer);
  void forward_head(Pass pass);
  // The RMSNorm that follows a residual add: its range name, output, statistics and weight.
  struct NormNext {
    const char* range;
    Tensor out, rstd, w;
  };
  void output_and_residual(const Tensor& sum, const Tensor& residual, const Tensor& x, const Tensor& w, int in_f,
                           const NormNext& next, const Fp8Operands& f8);
  void norm_backward_into_residual(const Tensor& dw, const Tensor& x, const Tensor& w, const Tensor& rstd);
  // The forward product out = x w^T (in FP8 when f8 is given), and linear() to run it.
  Gemm linear_product(const Tensor& out, int64_t ld_out, const Tensor& x, const Tensor& w, int in_f, int out_f,
                      const Fp8Operands& f8) const;
  void linear(const Tensor& out, int64_t ld_out, const Tensor& x, const Tensor& w, int in_f, int out_f,
              const Fp8Operands& f8 = {});
  // With f8, dout8 is dout's FP8 form.
  void linear_backward(const Tensor& dx, float beta_dx, const Tensor& dw, const Tensor& dout, int64_t ld_dout,
                       const Tensor& x, const Tensor& w, int in_f, int out_f, const Fp8Operands& f8 = {},
                       const Fp8Matrix& dout8 = {});

  ModelConfig cfg_;
  Backend& be_;
  int B_, T_;
  StepOptions step_;
  int micro_ = 0;   // the micro-batch of the last forward
  int loaded_ = 1;  // the micro-batches of the last set_batch
  int Vp_;     // rows of the output head, the vocabulary padded for the backend
  int chunk_;  // tokens per chunk of the head with the fused classifier, else all of them
  AttnShape attn_;
  bool fp8_;  // decide_fp8()
  bool fp8_calibrated_ = false;  // delayed scaling: a step with current scaling has filled the history
  ParamState state_;
  Arena arena_;

  std::vector<std::string> layer_names_;  // "layer.0", ...: the names of the layers' ranges
  Weights w_;  // views of the weights the products read (act-typed)
  Weights g_;  // views of the gradients

  bool head_backward_done_ = false;  // the fused classifier's training forward did the head's backward
  Tensor tokens_, targets_;  // [micro_batches, B, T]
  std::vector<LayerActs> acts_;
  Tensor x_out_, xf_, rstd_f_, logits_, losses_;  // logits_: [chunk_, Vp_]; losses_: [micro_batches, B, T]
  Tensor rope_table_;
  // Scratch: a branch's output before it joins the residual stream, and activation gradients.
  Tensor branch_, dres_, d_normed_, d_norm_in_, dqkv_, datt_, dgateup_, dh_;
  std::vector<LayerFp8> fp8_layers_;
  Tensor grad8_rows_, grad8_cols_;  // the gradient entering a product, [N, widest] and its transpose
  Tensor fp8_slots_;                // [layers, kFp8Slots, kFp8SlotFloats]
};

}  // namespace tt
