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
// gate/up, down) take FP8 operands (src/model/fp8_state.h): the weights cast once a step, before
// the first forward; each product casts its input (and in the backward the gradient entering it)
// as it runs, except SwiGLU's output and input gradient, which SwiGLU's kernels write in FP8
// themselves (fp8-fused-swiglu), and the QKV gradient, which RoPE's backward writes
// (fp8-fused-rope). With fp8-head the head's three products take FP8 too: xf cast once, the
// logits' gradient written in FP8 by the cross-entropy's pass. The attention and everything else
// stay as in v4.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "parallel/comm.h"
#include "model/config.h"
#include "model/fp8_state.h"
#include "model/param_state.h"
#include "model/params.h"

namespace tt {

struct ResidualNorm;  // model/op_sequences.h

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
  // Whether the layers' products run in FP8 (version 5: decide_fp8, the shape rule), and how they
  // run and why, for the run's header ("" without the fp8 switch).
  bool uses_fp8() const { return fp8_.on(); }
  std::string products_kind() const;
  bool head_in_fp8() const { return fp8_.head_on(); }
  // The least bytes a step's memory-bound kernels move, by the profile's kernel family (RMSNorm,
  // RoPE, SwiGLU, cross-entropy, quantizing passes, AdamW), for this plan on this rank
  // (src/model/traffic.cpp).
  std::map<std::string, double> family_bytes() const;
  // Delayed scaling's state for checkpoints (Fp8State::scale_state: empty when there is none to
  // keep), whether this run would take one back, and putting one back.
  Tensor fp8_scale_state() const { return fp8_.scale_state(); }
  bool takes_fp8_scale_state(int64_t numel) const { return fp8_.takes_scales(numel); }
  void restore_fp8_scale_state(const std::vector<float>& values) { fp8_.restore_scales(values); }

  // Parameters from initial_params(config, seed, std), written a tensor at a time; gradients and
  // moments zeroed.
  void init_weights(uint64_t seed, double std = kInitStd);
  // Every rank's parameters become rank 0's (ParamState::take_rank0_params): after they are
  // initialized or loaded on every rank.
  void take_rank0_params() { state_.take_rank0_params(); }

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
  // Every token's loss (-log p of its target) of the last forward, [batch, seq_len], in double.
  std::vector<double> token_losses() { return read(micro_slice(losses_)); }
  // The sum of the token losses over the first `sequences` sequences of the last set_batch, on
  // this rank alone (validation on a set number of windows counts only the real rows of a batch).
  double loss_sum(int sequences);
  // With StepOptions::clip or measure_norm: the gradients' global norm of the last step, before clipping.
  double grad_norm() { return state_.grad_norm(); }
  // Every micro-batch's forward and backward, and optimizer_step, with time marks 0..4 on the
  // backend (0 at the start, 1 before the last micro-batch, 2 after its forward, 3 after its
  // backward, 4 after the update); with the cuda-graph switch, captured at the first call and
  // replayed after.
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
  // With ZeRO-1 in bf16 the fp32 masters are sharded after an update: params() is then refused
  // and whole_params() gathers them first (a collective: every rank calls it).
  Tensor params() const {
    TT_CHECK(state_.masters_whole(), "Llama::params: the fp32 masters are sharded (ZeRO-1); whole_params() gathers them");
    return state_.params().slice(0, cfg_.param_count());
  }
  Tensor whole_params() { return state_.whole_params().slice(0, cfg_.param_count()); }
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

  void layout(Arena& a);
  bool enqueue_step(const std::function<bool()>& stop = {});  // marks, forward, backward, the update
  void backward_pass(bool update_behind);
  // The micro-batch being computed, and whether its weight gradients add to the earlier ones'.
  bool accumulating() const { return micro_ > 0; }
  float dw_beta() const { return accumulating() ? 1.0f : 0.0f; }  // a weight gradient's product: written, or added to
  Tensor micro_slice(const Tensor& t) const { return t.slice(int64_t(micro_) * tokens(), tokens()); }
  // The gradient scale of the mean over every rank's tokens and micro-batches.
  double loss_grad_scale() const { return 1.0 / double(tokens() * state_.world_size() * step_.micro_batches); }
  void forward_attention(int layer);
  void forward_ffn(int layer);
  void backward_ffn(int layer);
  void backward_attention(int layer, bool ffn_update_ahead);
  std::string weight_gradients_misfit(const LayerWeights& g, const LayerActs& a) const;  // empty: made in one group
  std::string weight_gradients_behind_misfit() const;  // empty: that group on its lane
  Gemm gate_up_product(int layer) const;
  Gemm down_input_gradient(int layer) const;
  std::string swiglu_epilogue_misfit() const;  // what keeps both SwiGLU pieces out whatever the shape
  std::string swiglu_in_gate_up_misfit() const;  // empty: SwiGLU in the gate/up product's epilogue
  Gemm qkv_product(int l) const;
  std::string rope_in_qkv_misfit() const;  // empty: RoPE in the QKV product's epilogue
  BlockForward blocks_forward() const;      // every layer's forward, for blocks-forward-in-one-launch
  std::string block_forward_misfit() const;  // empty: the layers' forward in one launch
  std::string swiglu_in_down_gradient_misfit() const;  // empty: SwiGLU's backward in its epilogue
  void weight_gradients_done();
  void layer_complete(int l, bool update_behind);
  void update_follows_weight_gradients();
  void forward_head(Pass pass);
  // Data parallelism where every rank's tokens' residual gradients are fewer bytes than the
  // embedding's bucket (a large vocabulary): that bucket is summed over the ranks early, at the
  // start of the last micro-batch's backward (all but the last lookup's part is in it then), and
  // once the residual gradient is final, gather_lookup gathers every rank's on the communication
  // lane and embedding_backward_gathered adds the lookup's part of them all on the update lane,
  // instead of the bucket's sum being the step's last, exposed, reduction.
  bool lookup_gathered() const;
  void gather_lookup();
  void embedding_backward_gathered();
  // The RMSNorm that follows a residual add: its range name, output, statistics and weight, and
  // the product that takes its output (layer < 0: the head).
  struct NormNext {
    const char* range;
    Tensor out, rstd, w;
    int layer;
    Proj proj;
  };
  // Layer l's product p's FP8 input where the norm before it writes it (norm_in_fp8), else empty.
  Fp8Matrix norm_output8(int l, Proj p) const;
  // Layer l's product p's (Out or Down) FP8 gradient input, the residual stream's gradient, where
  // the norm's backward before it writes it (norm_backward_in_fp8), else empty (l < 0: none).
  Fp8Matrix residual_gradient8(int l, Proj p) const;
  // The norm of a layer's input (r.sum) that begins block p (Qkv or GateUp) where no residual add
  // made it already; returns whether it wrote p's FP8 input.
  bool block_norm(int l, Proj p, const ResidualNorm& r);
  bool attention_norm(int l);  // block_norm of layer l's attention
  // Layer l's product p: its output columns [col, col + width), made by the weight's rows of the
  // same numbers; one block for the whole product, or the unfused products of QKV (q, k, v) and
  // gate/up (gate, up) without qkv-fusion and gate-up-fusion.
  struct Block {
    int64_t col;
    int width;
  };
  std::vector<Block> blocks(Proj p) const;
  int in_features(Proj p) const {
    return p == Proj::Out ? cfg_.heads * cfg_.head_dim() : p == Proj::Down ? cfg_.intermediate : cfg_.hidden;
  }
  int out_features(Proj p) const {
    return p == Proj::Qkv ? cfg_.qkv_dim() : p == Proj::GateUp ? 2 * cfg_.intermediate : cfg_.hidden;
  }
  // Layer l's product p's FP8 operands (none without FP8), its input x cast into them first unless
  // its producer wrote them (x_cast).
  Fp8Operands cast_input(int l, Proj p, const Tensor& x, bool x_cast);
  // out = x w^T block by block, and its backward: dx (the first block writes it, the others add)
  // and dw (written, or added to after the first micro-batch); in FP8, dout cast first unless its
  // producer wrote its FP8 form (dout_cast).
  void project(int l, Proj p, const Tensor& out, const Tensor& x, const Tensor& w, bool x_cast = false);
  void project_backward(int l, Proj p, const Tensor& dx, const Tensor& dw, const Tensor& dout, const Tensor& x,
                        const Tensor& w, bool dout_cast = false);
  void project_input_gradient(int l, Proj p, const Tensor& dx, const Tensor& dout, const Tensor& w, bool dout_cast);
  void project_weight_gradient(int l, Proj p, const Tensor& dw, const Tensor& dout, const Tensor& x);
  // A layer's output product (p: Out or Down) and the residual add after it, with the RMSNorm next.
  void output_and_residual(int l, Proj p, const Tensor& sum, const Tensor& residual, const Tensor& x, const Tensor& w,
                           const NormNext& next, bool x_cast = false);

  ModelConfig cfg_;
  Backend& be_;
  int B_, T_;
  StepOptions step_;
  int micro_ = 0;   // the micro-batch of the last forward
  int loaded_ = 1;  // the micro-batches of the last set_batch
  int Vp_;     // rows of the output head, the vocabulary padded for the backend
  int chunk_;  // tokens per chunk of the head with the fused classifier, else all of them
  AttnShape attn_;
  Fp8State fp8_;
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
  // grouped-weight-gradients, where layout() found that the backend groups the layers' weight
  // gradients: the layer's weight-gradient products, made in one group at the layer's end
  // (project_weight_gradient, weight_gradients_done), and the buffers of the residual stream's
  // gradient that dres_ takes in turn (next_dres). One where nothing groups them: the norms'
  // backward writes in place. Two where a layer's group runs before its attention norm's backward:
  // the FFN norm's writes the other, so that down's weight gradient reads the old one. Four with
  // weight-gradients-behind, where the group runs beside the layer below's FFN: every norm writes
  // the next, and the layer below's gate/up gradient goes into the other of dgateups_.
  bool grouped_dw_ = false, dw_behind_ = false;
  std::vector<Gemm> layer_dw_;
  std::vector<Tensor> dres_ring_;
  size_t dres_at_ = 0;
  Tensor dgateups_[2];
  Tensor next_dres(bool keep);
  // swiglu-in-gate-up and swiglu-in-down-gradient: why each is not used (empty where it is), decided
  // once by the constructor.
  std::string swiglu_in_gate_up_misfit_, swiglu_in_down_gradient_misfit_, rope_in_qkv_misfit_, block_forward_misfit_;
  // lookup_gathered(): every rank's residual gradient [ranks, B, T, C] and tokens [ranks, B, T]
  Tensor lookup_rows_, lookup_tokens_;
};

}  // namespace tt
