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
// the backend's arena when the model is built; a step allocates nothing.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "dist/comm.h"
#include "model/config.h"
#include "model/params.h"

namespace tt {

// Data parallelism (src/dist/comm.h): each rank trains on its batch, the loss is the mean over
// every rank's tokens, and each bucket of gradients (a layer's, the last layer's with the final
// norm's, the embedding's: update_ranges) is summed over the ranks as soon as it is complete.
// With ZeRO-1 (zero = 1) a rank keeps the Adam moments of its part of each bucket only
// (split_offsets), updates that part of the weights, and gathers the others' parts. The
// reductions run on the backend's communication lane, the updates behind the backward on its
// update lane (Backend::Lane).
struct DataParallel {
  Communicator* comm = nullptr;  // none: one process
  int zero = 0;
  // The type the gradients are summed in: the master gradients' (fp32), or bf16, half the bytes
  // (each bucket converted before its reduction and back after; bf16 runs only).
  DType reduce = DType::F32;
};

// What a training step does beyond forward, backward and AdamW: the micro-batches whose
// gradients it sums (gradient accumulation: one update for micro_batches x batch sequences, the
// gradients of the mean over all of them), clipping by the gradients' global norm, and the
// tensors exempt from weight decay. The defaults are the original's step.
struct StepOptions {
  int micro_batches = 1;
  // The gradients' global norm is measured every step (sum_squares over every tensor and rank,
  // after the reductions), and AdamW clips them to AdamWStep::max_grad_norm.
  bool clip = false;
  bool decay_norms = true;      // the RMSNorm gains decay (false: exempt, as nanoGPT exempts 1-D tensors)
  bool decay_embedding = true;  // the embedding (the tied head) decays
};

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
  // With StepOptions::clip: the gradients' global norm of the last step, before clipping.
  double grad_norm();
  // Every micro-batch's forward and backward, and optimizer_step, with time marks 0..3 on the
  // backend (0 at the start, 1 after the last micro-batch's forward, 2 after its backward, 3
  // after the update); with the cuda-graph switch, captured at the first call and replayed after.
  void train_step(const AdamWStep& step);

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
  Tensor params() const { return params_.slice(0, cfg_.param_count()); }
  Tensor grads() const { return grads_.slice(0, cfg_.param_count()); }
  Tensor adam_m() const { return m_; }  // with ZeRO-1: this rank's parts only
  Tensor adam_v() const { return v_; }
  // For checkpoints, whatever the sharding. optimizer_state(1 or 2): the whole first or second
  // moment in the flat layout; with ZeRO-1 it is gathered from every rank into the gradients'
  // buffer (a collective: every rank calls it; the gradients are rewritten by the next step).
  // load_optimizer_state: the values of one tensor at `offset` of the flat layout, kept where
  // this rank holds them.
  Tensor optimizer_state(int which);
  void load_optimizer_state(int which, int64_t offset, const std::vector<float>& values);
  int rank() const { return rank_; }
  DType reduce_dtype() const { return reduce_dtype_; }
  int world_size() const { return world_; }
  // Host copies of an fp32 or fp64 buffer (or a range of one; read_f32 also takes the act-typed
  // bf16 ones, such as the logits), converted from or to its element type. write() also refreshes the act-typed copy of the weights when it writes parameters.
  std::vector<double> read(const Tensor& master);
  std::vector<float> read_f32(const Tensor& master);
  void write(const Tensor& master, const std::vector<float>& values);

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
  void enqueue_step();       // marks, forward, backward, update_parameters
  void backward_pass(bool update_behind);
  void update_parameters();  // AdamW with the scalars of the last set_adamw_step
  std::vector<ParamRange> update_ranges() const;
  void update_range(const ParamRange& r);
  // AdamW over elements [offset, offset + n) of the flat buffers, whose moments sit at m_at of
  // m_ and v_: one launch per run of tensors that all decay or all do not.
  void adamw_runs(int64_t offset, int64_t n, int64_t m_at);
  bool decays(const ParamEntry& e) const;
  void measure_grad_norm();  // clipping: grad_sumsq_, over every tensor and rank
  // The micro-batch being computed, and whether its weight gradients add to the earlier ones'.
  bool accumulating() const { return micro_ > 0; }
  Tensor micro_slice(const Tensor& t) const { return t.slice(int64_t(micro_) * tokens(), tokens()); }
  void bucket_complete(size_t b, bool update_behind);
  // Data parallelism: the gradient scale of the mean over every rank's tokens, a bucket's
  // gradients summed over the ranks, and its update (this rank's part with ZeRO-1, then gathered).
  double loss_grad_scale() const { return 1.0 / double(tokens() * world_ * step_.micro_batches); }
  void reduce_bucket(size_t b);
  void update_shard(size_t b);
  void gather_bucket(size_t b);
  int64_t shard_numel() const;  // the Adam moments this rank keeps
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
                           const NormNext& next);
  void norm_backward_into_residual(const Tensor& dw, const Tensor& x, const Tensor& w, const Tensor& rstd);
  void linear(const Tensor& out, int64_t ld_out, const Tensor& x, const Tensor& w, int in_f,
              int out_f);
  void linear_backward(const Tensor& dx, float beta_dx, const Tensor& dw, const Tensor& dout,
                       int64_t ld_dout, const Tensor& x, const Tensor& w, int in_f, int out_f);

  ModelConfig cfg_;
  Backend& be_;
  int B_, T_;
  StepOptions step_;
  int micro_ = 0;   // the micro-batch of the last forward
  int loaded_ = 1;  // the micro-batches of the last set_batch
  Communicator* comm_;
  bool dp_;  // a communicator that reduces (a world of one under a launcher too)
  int zero_, rank_, world_;
  std::vector<ParamRange> buckets_;                 // update_ranges()
  std::vector<std::vector<int64_t>> bucket_split_;  // per bucket: split_offsets among the ranks
  std::vector<int64_t> shard_at_;                   // ZeRO-1: where this rank's part of each bucket sits in m_, v_
  DType reduce_dtype_;                              // the gradients' type in the reductions
  int pending_gather_ = -1;                         // ZeRO-1 behind the backward: the bucket to gather next
  int Vp_;     // rows of the output head, the vocabulary padded for the backend
  int chunk_;  // tokens per chunk of the head with the fused classifier, else all of them
  AttnShape attn_;
  Arena arena_;

  Tensor params_, params_act_, grads_, m_, v_;
  Tensor reduce_scratch_;  // a bucket in reduce_dtype_ when that is not the gradients' type
  std::vector<ParamEntry> table_;
  std::vector<std::string> layer_names_;  // "layer.0", ...: the names of the layers' ranges
  Weights w_;  // views of the weights the products read (act-typed)
  Weights g_;  // views of the gradients

  bool head_backward_done_ = false;  // the fused classifier's training forward did the head's backward
  Tensor tokens_, targets_;  // [micro_batches, B, T]
  Tensor grad_sumsq_;        // clipping: the gradients' sum of squares (one master element)
  std::vector<LayerActs> acts_;
  Tensor x_out_, xf_, rstd_f_, logits_, losses_;  // logits_: [chunk_, Vp_]; losses_: [micro_batches, B, T]
  Tensor rope_table_;
  // Scratch: a branch's output before it joins the residual stream, and activation gradients.
  Tensor branch_, dres_, d_normed_, d_norm_in_, dqkv_, datt_, dgateup_, dh_;
};

}  // namespace tt
