// The training loop behind `tiny_llama train`: validate everything the user gave, build the
// backend and the model, train, log every --log-every steps, and report.
#pragma once
#include <cmath>
#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/config.h"
#include "model/params.h"
#include "trace/trace.h"
#include "train/ceilings.h"
#include "train/schedule.h"

namespace tt {

struct TrainOptions {
  ModelConfig model;
  int batch = 8;
  int seq_len = 256;
  int steps = 50;  // total optimizer steps; a resumed run continues up to this count
  double learning_rate = 3e-4;  // the peak of the schedule
  std::string lr_schedule = "constant";  // src/train/schedule.h
  int lr_warmup = 0, lr_decay = 0;
  int lr_schedule_steps = 0;  // the schedule's length (0: --num-steps)
  double min_lr = 0.0;
  double weight_decay = 0.01;
  uint64_t seed = 42;
  double init_std = kInitStd;  // of the normal-initialised weights; 0.02 unless showing a broken init
  int timing_warmup = 5;  // steps excluded from the timing (not the learning rate's warmup)
  int log_every = 10;
  int eval_every = 0;  // validation loss every N steps (0: with every log line)
  bool shuffle = false;  // the training windows in a seeded order of their own each pass
  int64_t val_tokens = 0;  // validation on this many tokens' windows, whatever the batch and ranks (0: 4 batches)
  BackendOptions backend;
  std::string data = "synthetic";
  std::string json_path, save_path, resume_path;
  std::string metrics_path;  // JSON lines, one at every log step, flushed as written
  std::string tensorboard_dir;  // TensorBoard event files, written with the metrics (src/train/tensorboard.h)
  std::string eval_task;        // a multiple-choice task scored with every validation (src/train/task.h)
  std::string tokenizer;        // the data's tokenizer (default: the one tokenize recorded beside the shards,
                                // bytes for a text file), stored in the checkpoints; --eval-task's
  double beta1 = 0.9, beta2 = 0.999, adam_eps = 1e-8;  // AdamW's
  int grad_accum = 1;      // micro-batches of --batch-size per optimizer step (gradient accumulation)
  double grad_clip = 0;    // > 0: the gradients clipped to this global norm (0: no clipping)
  bool decay_norms = true, decay_embedding = true;  // whether weight decay applies to them
  std::string init_from;  // a Hugging Face LLaMA directory to start from (src/train/hf.h)
  int save_every = 0;     // with save_path or save_dir: a checkpoint every N steps too (0: at the end only)
  std::string save_dir;   // step-numbered checkpoints (src/train/checkpoint.h)
  int keep_last = 0;      // with save_dir: the newest N step files kept (0: all)
  int zero = 0;           // data parallelism: 1 shards the Adam moments over the ranks (ZeRO-1)
  std::string reduce_dtype = "fp32";  // the gradients' type in the sums over GPU ranks: fp32, or bf16 in bf16 runs
  std::string dist_init;  // GPU ranks: where they find rank 0 (src/parallel/rendezvous.h); empty: env, or mpi under mpirun
  int dist_timeout = 60;  // seconds the ranks wait for each other to start
  int nproc_per_node = 0;  // the built-in launcher: start this many local ranks (src/parallel/launch.h)
  // Profiling (CUDA): a kernel trace of profile_steps steps after the warm-up.
  std::string profile_dir;
  int profile_steps = 3;
  bool flops_profile = false;
  // The learning-rate schedule these options describe (--learning-rate its peak, --num-steps its end).
  LrSchedule schedule() const {
    return {lr_schedule, learning_rate, min_lr, lr_warmup, lr_decay, lr_schedule_steps > 0 ? lr_schedule_steps : steps};
  }
  bool profile_memory = false;  // writes profile_dir/memory.csv

  // The sequences of one optimizer step over `ranks` ranks: every micro-batch of every rank.
  int64_t step_sequences(int ranks) const { return int64_t(batch) * grad_accum * ranks; }

  void validate() const;  // throws UsageError naming the flag
};

struct StepRecord {
  int64_t step;
  double loss, lr;
  // The step, and its parts: one micro-batch's forward and backward (the last one's), the update,
  // and with --grad-accum-steps the micro-batches before the last (forward and backward).
  double step_ms, forward_ms, backward_ms, optimizer_ms, earlier_ms = 0;
  double grad_norm = std::nan("");  // measured with --grad-clip only
};

struct MemoryReport {
  size_t bytes[kNumCategories] = {};
  size_t padding[kNumCategories] = {};  // of bytes: the output head's vocabulary padding
  size_t total() const;
  size_t total_padding() const;
};

struct TrainResult {
  std::string device, backend, plan, attention, data;
  std::string products;  // version 5: FP8 or not, and why ("" without the fp8 switch)
  bool head_fp8 = false;  // version 5: the head's products in FP8 too
  int padded_vocab = 0;     // the output head's rows (the vocabulary padded for the backend)
  int classifier_chunk = 0;  // tokens per chunk of the head (all of them without the fused classifier)
  std::vector<StepRecord> steps;
  std::vector<std::pair<int64_t, double>> validation;  // (step, validation loss)
  int64_t timed_steps = 0;
  double step_ms = 0, step_ms_median = 0, forward_ms = 0, backward_ms = 0, optimizer_ms = 0, earlier_ms = 0;
  double samples_per_sec = 0, tokens_per_sec = 0;
  double flops_per_step = 0, tflops = 0;
  double final_loss = 0;
  MemoryReport memory;
  std::vector<int64_t> launches_per_step;  // from the kernel trace, when profiled
  // --profile: the least bytes each memory-bound family moves a step (Llama::family_bytes), and
  // the GPU's ceilings, measured before the model is built.
  std::map<std::string, double> family_bytes;
  Ceilings ceilings;
  SmLimits sm;  // --profile on a GPU: what its SMs hold, for the kernels' waves
  int stopped_by = 0;  // the signal (SIGINT, SIGTERM) that stopped the run early, or 0
  int world_size = 1;  // processes of the data-parallel run (tokens/s and FLOPs are theirs together)
};

// The run's recipe as flags, stored in its checkpoints: the model, the data, the batch, the
// optimizer and its schedule, the step count, the logs and evaluations (not the outputs); a
// resume takes those it is not given (src/cli/options.cpp).
std::vector<std::string> recipe_args(const TrainOptions& o);

// Runs the training the options describe, printing progress and the summary to `log` (rank 0
// of a data-parallel run; the others print nothing). The world comes from the launcher's
// environment (src/parallel/world.h).
// Throws UsageError for bad input (before any work or output) and Error for failures.
TrainResult train(const TrainOptions& options, std::ostream& log);

// The middle value, or the mean of the two middle ones; 0 for none (a run's steps, bench's
// repetitions, ablate's runs).
double median(std::vector<double> v);

}  // namespace tt
