// The model's parameter state, apart from the network it computes (src/model/llama.h): the
// flat master buffers laid out by param_table (parameters, their act-typed copy, gradients,
// Adam moments), the buckets the gradients are summed over the ranks in, ZeRO-1's shards, the
// AdamW updates, the gradients' global norm, and the optimizer state as checkpoints read and
// write it. The model calls it at three moments: a bucket's gradients complete (in the backward),
// the step's update, and a checkpoint.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "backend/backend.h"
#include "parallel/comm.h"
#include "model/config.h"
#include "model/params.h"

namespace tt {

// Data parallelism (src/parallel/comm.h): each rank trains on its batch, the loss is the mean over
// every rank's tokens, and each bucket of gradients (a layer's, the last layer's with the final
// norm's, the embedding's pieces: buckets()) is summed over the ranks as soon as it is complete.
// With ZeRO-1 (zero = 1) a rank keeps the Adam moments of its part of each bucket only
// (split_offsets), updates that part of the weights, and gathers the others' parts: the
// products' bf16 copy in bf16 runs (half the bytes of the fp32 masters, which then stay sharded:
// each rank's are current in its own parts only, until whole_params() gathers them). The
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
  // The norm measured every step for the log alone, without clipping (clip measures it anyway):
  // one more pass over the gradients and a read of one number.
  bool measure_norm = false;
  bool norm_measured() const { return clip || measure_norm; }
};

class ParamState {
 public:
  ParamState(const ModelConfig& config, Backend& backend, DataParallel dp, StepOptions step, int padded_vocab);
  // Takes the buffers from the arena: parameters and their act-typed copy (Parameters), gradients
  // and the reduction's bucket in its type (Gradients), the moments (OptimizerState), the norm's
  // sum of squares (Workspace).
  void layout(Arena& a);

  // The whole flat buffers (padding rows included) and the act-typed copy (empty when the
  // parameters are already the products' type); the moments are this rank's parts with ZeRO-1.
  const Tensor& params() const { return params_; }
  // False while ZeRO-1 keeps the fp32 masters sharded (after an update in a bf16 run): the other
  // ranks' parts of params() are stale. whole_params() gathers them (a collective: every rank).
  bool masters_whole() const { return masters_whole_; }
  const Tensor& whole_params();
  // A step updates the weights: with ZeRO-1 in a bf16 run the masters are sharded after it. Called
  // on the host for every step, replayed from a CUDA graph or not (the graph's host code ran once).
  void weights_updated() {
    if (zero_ == 1 && !params_act_.empty()) masters_whole_ = false;
  }
  const Tensor& params_act() const { return params_act_; }
  const Tensor& grads() const { return grads_; }
  const Tensor& adam_m() const { return m_; }
  const Tensor& adam_v() const { return v_; }

  bool distributed() const { return dp_; }  // a communicator that reduces (a world of one under a launcher too)
  Communicator* comm() const { return comm_; }
  int rank() const { return rank_; }
  int world_size() const { return world_; }
  DType reduce_dtype() const { return reduce_dtype_; }
  size_t buckets() const { return buckets_.size(); }
  // The embedding's buckets (an untied head's too) are the last ones, from this one on; a layer's
  // bucket is its index.
  size_t first_embedding_bucket() const { return size_t(cfg_.layers); }

  // Every rank's parameters become rank 0's, as DDP makes them at the start: ranks that read a
  // different --init-from file of the same name, or drew other weights, train one model. Zero on
  // the other ranks, then the sum over the ranks (exact: x + 0); the act-typed copy follows.
  void take_rank0_params();

  // In the last micro-batch's backward, as bucket b's gradients are complete: their sum over the
  // ranks behind the backward, and with `update_behind` the bucket's AdamW after it (ZeRO-1: its
  // gathering follows the next bucket's reduction). finish_behind() after the last bucket.
  //
  // A bucket may also be summed early, behind the backward before it is complete (reduce_early),
  // when what is still to come can be added to the sum on every rank alike: complete_early_sum
  // runs `gather` on the communication lane (after the early sum: the lane runs in order), then
  // `add` on the update lane once that has run; bucket_complete(b, update_behind, true) then
  // updates the bucket without summing it again.
  void bucket_complete(size_t b, bool update_behind, bool summed_early = false);
  // One GPU, the updates behind the backward: layer l's FFN tensors (its norm's gain, gate/up, down:
  // the last of its bucket, their gradients complete before its attention's) updated now on the
  // update lane; bucket_complete(l, true) then updates the rest of the bucket.
  void update_ffn_ahead(int l);
  void reduce_early(size_t b);
  void complete_early_sum(const std::function<void()>& gather, const std::function<void()>& add);
  void finish_behind();
  // After the backward: the gradients' global norm (clipping), then the update of every bucket
  // not updated behind the backward.
  void measure_grad_norm();
  double grad_norm();  // of the last measure, on the host
  void update();

  // For checkpoints, whatever the sharding. optimizer_state(1 or 2): the whole first or second
  // moment in the flat layout; with ZeRO-1 gathered from every rank into the gradients' buffer
  // (a collective: every rank calls it; the gradients are rewritten by the next step).
  // load_optimizer_state: the values of one tensor at `offset` of the flat layout, kept where
  // this rank holds them.
  Tensor optimizer_state(int which);
  void load_optimizer_state(int which, int64_t offset, const std::vector<float>& values);

  // Host copies of a buffer of any element type, and writes of fp32 values; a write into the
  // parameters refreshes that range of the act-typed copy.
  std::vector<double> read(const Tensor& t);
  std::vector<float> read_f32(const Tensor& t);
  void write(const Tensor& t, const std::vector<float>& values);

 private:
  // The ranges the fused AdamW updates, in the flat buffers' order (the buckets).
  std::vector<ParamRange> update_ranges() const;
  void reduce_bucket(size_t b);
  void update_bucket(size_t b);  // every rank all of it; with ZeRO-1 its own part
  void gather_bucket(size_t b);  // ZeRO-1: the parts to every rank
  // AdamW over elements [offset, offset + n) of the flat buffers, whose moments sit at m_at of
  // m_ and v_: one launch per run of tensors that all decay or all do not.
  void adamw_runs(int64_t offset, int64_t n, int64_t m_at);
  bool decays(const ParamEntry& e) const;
  int64_t shard_numel() const;  // the Adam moments this rank keeps

  const ModelConfig& cfg_;
  Backend& be_;
  StepOptions step_;
  Communicator* comm_;
  bool dp_;
  int zero_, rank_, world_;
  DType reduce_dtype_;
  int Vp_;
  std::vector<ParamEntry> table_;
  std::vector<ParamRange> buckets_;
  std::vector<std::vector<int64_t>> bucket_split_;  // per bucket: split_offsets among the ranks
  std::vector<int64_t> shard_at_;                   // ZeRO-1: where this rank's part of each bucket sits in m_, v_
  int pending_gather_ = -1;                         // ZeRO-1 behind the backward: the bucket to gather next
  std::vector<int64_t> updated_ahead_;              // per bucket: its last elements update_ffn_ahead updated
  bool masters_whole_ = true;                       // every part of params_ current on this rank
  Tensor params_, params_act_, grads_, m_, v_;
  Tensor reduce_scratch_;  // a bucket in reduce_dtype_ when that is not the gradients' type
  Tensor clip_sumsq() const { return step_.clip ? grad_sumsq_ : Tensor{}; }  // what AdamW clips by (none: no clipping)
  Tensor grad_sumsq_;      // the gradients' sum of squares (one master element), when measured
};

}  // namespace tt
