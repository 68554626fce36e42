#include "train/trainer.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <tuple>

#include "core/files.h"
#include "core/signals.h"
#include "parallel/comm.h"
#include "parallel/world.h"
#include "model/llama.h"
#include "trace/cupti_trace.h"
#include "train/bound_tokenizer.h"
#include "train/flops.h"
#include "train/checkpoint.h"
#include "data/loader.h"
#include "train/hf.h"
#include "data/tokenizer.h"
#include "train/evaluate.h"
#include "train/metrics.h"
#include "train/task.h"
#include "train/tensorboard.h"
#include "train/report.h"
#include "train/train_flags.h"

namespace tt {

void TrainOptions::validate() const {
  for (const TrainFlag& row : train_flags()) row.check(*this);  // each value's own rule
  if (save_every > 0 && save_path.empty() && save_dir.empty())
    usage_fail("--save-every: needs --save PATH or --save-dir DIR, where the checkpoints go");
  if (keep_last > 0 && save_dir.empty()) usage_fail("--keep-last: the step checkpoints of --save-dir to keep");
  if (zero != 0 && zero != 1) usage_fail("--zero: must be 0 or 1 (got " + std::to_string(zero) + ")");
  if (reduce_dtype != "fp32" && reduce_dtype != "bf16")
    usage_fail("--reduce-dtype: fp32 or bf16 (got '" + reduce_dtype + "')");
  if (reduce_dtype == "bf16" && !backend.plan.amp)
    usage_fail("--reduce-dtype bf16: gradients are summed in bf16 in bf16 runs (--use-amp) only");
  if (profile_memory && profile_dir.empty()) usage_fail("--profile-memory: writes DIR/memory.csv, so it needs --profile DIR");
  if (dist_timeout < 1 || dist_timeout > 86400) usage_fail("--dist-timeout: 1 to 86400 seconds");
  if (!dist_init.empty()) {
    const bool file = dist_init.rfind("file:", 0) == 0;
    if (dist_init != "env" && dist_init != "mpi" && !(file && dist_init.size() > 5))
      usage_fail("--dist-init: env, mpi or file:PATH (got '" + dist_init + "')");
    if (file && std::filesystem::is_directory(dist_init.substr(5)))
      usage_fail("--dist-init: '" + dist_init.substr(5) + "' is a directory: give the path of a file to meet through");
  }
  if (grad_accum > 65536) usage_fail("--grad-accum-steps: 1 to 65536 micro-batches a step");
  schedule().validate();
  if (seed > uint64_t(INT64_MAX))  // so that a checkpoint holds it as written (--seed -1 parses as 2^64 - 1)
    usage_fail("--seed: must be in [0, 9223372036854775807] (got " + std::to_string(seed) + ")");
  if (int64_t(batch) * seq_len * grad_accum > INT_MAX / 8)
    usage_fail("--batch-size x --seq-len x --grad-accum-steps: too many tokens per step (limit 268435455)");
  model.validate();
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

namespace {

// Names the first model field where the checkpoint (of --resume or --init-from) and this run disagree.
void check_same_model(const ModelConfig& ckpt, const ModelConfig& run, const char* flag = "--resume") {
  static const std::pair<const char*, const char*> flags[] = {
      {"vocab_size", "--vocab-size"},   {"hidden_dim", "--hidden-dim"},         {"num_layers", "--num-layers"},
      {"num_heads", "--num-heads"},     {"num_kv_heads", "--num-kv-heads"},     {"intermediate_size", "--intermediate-size"},
      {"norm_eps", "--norm-eps"},       {"rope_theta", "--rope-theta"}};
  if (ckpt.tie_embeddings != run.tie_embeddings)
    usage_fail(fmt::format("{}: the checkpoint's output head is {}, this run's {} (set {})", flag,
                           ckpt.tie_embeddings ? "the embedding" : "its own", run.tie_embeddings ? "the embedding" : "its own",
                           ckpt.tie_embeddings ? "--tie-embeddings" : "--no-tie-embeddings"));
  const nlohmann::json a = ckpt.to_json(), b = run.to_json();
  for (const auto& [key, field_flag] : flags)
    if (a[key] != b[key])
      usage_fail(fmt::format("{}: the checkpoint's model has {} {}, this run has {} (set {} to match)", flag, key,
                             a[key].dump(), b[key].dump(), field_flag));
}

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / double(v.size());
}

// The validation's windows: --val-tokens' (checked against the split), else the split's first
// kDefaultValidationWindows; 0 for data without a validation split.
int64_t run_validation_windows(const TrainOptions& o, const DataSource& data) {
  if (o.val_tokens == 0) return std::min(kDefaultValidationWindows, data.all_validation_windows());
  return validation_windows(o.val_tokens, o.seq_len, data);
}

void prepare_directory(const std::string& dir, const char* flag) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir)) usage_fail(std::string(flag) + ": cannot create directory '" + dir + "'");
  check_writable((std::filesystem::path(dir) / "trace.json").string(), flag);
}

// What a non-finite loss or gradient norm says, and which setting to look at: the initial weights
// when the first step of a fresh run diverges or they are drawn with a deviation of 1 or more
// (their products overflow), the weight decay when it is 1 or more and scales the weights by a
// factor of magnitude 1 or more each step, otherwise the learning rate.
std::string divergence(const TrainOptions& o, const char* quantity, double value, int64_t step, int64_t updates) {
  const std::string what = fmt::format("training diverged: {} is {} at step {}", quantity, value, step);
  const bool fresh = o.resume_path.empty() && o.init_from.empty();
  if (fresh && updates == 0)
    return what + fmt::format(", before any update: the initial weights give it (--init-std {:g}; 0.02 is usual)", o.init_std);
  if (fresh && o.init_std >= 1)
    return what + fmt::format(" after {} update(s): the initial weights (--init-std {:g}; 0.02 is usual) make the "
                              "gradients overflow", updates, o.init_std);
  if (o.weight_decay >= 1 && o.learning_rate * o.weight_decay >= 1)
    return what + fmt::format(": --weight-decay {:g} at --learning-rate {:g} scales the weights by 1 - {:g} every step "
                              "(their product must stay below 1)", o.weight_decay, o.learning_rate,
                              o.learning_rate * o.weight_decay);
  return what + fmt::format(" after {} update(s): try a lower --learning-rate than {:g}", updates, o.learning_rate);
}

}  // namespace

namespace {

// What train() checks before any work is done or any file is written (everything the user gave),
// and what it learns on the way: the world, the data, the checkpoint resumed, the initial weights.
struct CheckedRun {
  World world;
  std::unique_ptr<DataSource> data;
  CheckpointInfo resume;
  std::vector<float> initial;  // --init-from's weights (none: drawn from the seed)
  std::string run_id;          // stored in its checkpoints: a new run's own, or the resumed one's
  std::vector<Task> tasks;     // --eval-task's
  std::optional<BoundTokenizer> tokenizer;  // the data's, stored in the checkpoints (none: unknown)
  bool on_gpu = false, wants_profile = false;
};

CheckedRun check_run(const TrainOptions& o) {
  CheckedRun c;
  // Everything the user gave is checked before any work is done or any file is written.
  o.validate();
  c.world = detect_world(process_environment());
  c.data = make_data_source(o.data, o.model.vocab_size, o.batch, o.seq_len, o.seed);
  CheckpointInfo& resume = c.resume;
  if (!o.resume_path.empty()) {
    resume = read_checkpoint_info(o.resume_path);
    check_same_model(resume.config, o.model);
    if (resume.data_identity != c.data->identity())
      usage_fail("--resume: the checkpoint was trained on '" + resume.data_identity + "', this run reads '" +
                 c.data->identity() + "' (same --data, --seed and --seq-len are needed)");
    if (resume.step >= o.steps)
      usage_fail(fmt::format("--num-steps: the checkpoint is at step {}; ask for more steps to continue", resume.step));
  }
  if (!o.init_from.empty() && !o.resume_path.empty())
    usage_fail("--init-from: starts a new run from a model; --resume continues one: give one of them");
  if (!o.init_from.empty() && !std::filesystem::is_directory(o.init_from))
    check_same_model(read_checkpoint_info(o.init_from, "--init-from").config, o.model, "--init-from");
  if (!o.init_from.empty())
    c.initial = std::filesystem::is_directory(o.init_from) ? import_hf(o.init_from, o.model)
                                                          : read_checkpoint_params(o.init_from, o.model, "--init-from");
  std::vector<std::pair<std::string, std::string>> inputs = {{"--resume", o.resume_path}};
  for (const std::string& f : data_files(o.data)) inputs.emplace_back("--data", f);
  const bool init_from_checkpoint = !o.init_from.empty() && !std::filesystem::is_directory(o.init_from);
  c.tokenizer = training_tokenizer(o.tokenizer, o.data, init_from_checkpoint ? o.init_from : o.resume_path,
                                   init_from_checkpoint ? "--init-from" : "--resume", o.model.vocab_size);
  if (!o.eval_task.empty()) {
    c.tasks.push_back(load_task(o.eval_task, c.tokenizer ? *c.tokenizer->tokenizer : *model_tokenizer("", "", o.model.vocab_size),
                                "--eval-task"));
    check_task_fits(c.tasks.back(), o.seq_len);
    inputs.emplace_back("--eval-task", o.eval_task);
  }
  if (!o.tensorboard_dir.empty()) check_tensorboard_dir(o.tensorboard_dir, "--tensorboard");
  check_distinct_paths({{"--json", o.json_path}, {"--save", o.save_path}, {"--metrics", o.metrics_path}}, inputs);
  if (!o.json_path.empty()) check_writable(o.json_path, "--json");
  const bool metrics_in_save_dir = !o.save_dir.empty() && std::filesystem::path(o.metrics_path).parent_path() == o.save_dir;
  if (!o.metrics_path.empty() && !metrics_in_save_dir) check_writable(o.metrics_path, "--metrics");
  if (!o.save_path.empty()) check_writable(o.save_path, "--save");
  if (!o.save_dir.empty()) check_writable_directory(o.save_dir, "--save-dir");
  c.run_id = o.resume_path.empty() ? new_run_id() : resume.run_id;
  if (!o.save_dir.empty() && std::filesystem::is_directory(o.save_dir))
    if (const std::vector<std::string> others = other_runs_step_files(o.save_dir, c.run_id); !others.empty())
      usage_fail("--save-dir: '" + o.save_dir + "' holds step files that are not this run's (" + others.front() +
                 (others.size() > 1 ? fmt::format(" and {} more", others.size() - 1) : "") +
                 "): continue that run with --resume " + o.save_dir + ", or give each run a directory of its own");
  c.wants_profile = !o.profile_dir.empty() || o.flops_profile;
  // What applies on the GPU only is refused on the CPU here, before any file or directory is made.
  std::string no_gpu;
  c.on_gpu = o.backend.device != DeviceKind::Cpu && cuda_available(&no_gpu);
  if (o.backend.device == DeviceKind::Cuda && !c.on_gpu) usage_fail("--device cuda: " + no_gpu);
  if (!c.on_gpu) {
    const std::string cpu = "the CPU backend is the fp32 reference" + (no_gpu.empty() ? "" : " (" + no_gpu + ")");
    if (o.backend.plan.amp) usage_fail("--use-amp: bf16 runs on the CUDA backend; " + cpu);
    if (o.backend.plan.tf32) usage_fail("--tf32: TF32 products run on the CUDA backend; " + cpu);
    if (c.wants_profile) usage_fail("--profile and --flops-profile trace GPU kernels: they need a GPU; " + cpu);
  }
  if (c.wants_profile && o.steps - resume.step < int64_t(o.timing_warmup) + o.profile_steps)
    usage_fail(fmt::format("--profile-steps: {} warm-up and {} profiled steps need --num-steps of at least {}", o.timing_warmup,
                           o.profile_steps, resume.step + o.timing_warmup + o.profile_steps));
  if (!o.profile_dir.empty() && c.world.rank == 0) prepare_directory(o.profile_dir, "--profile");

  if (!o.dist_init.empty()) {  // where GPU ranks meet: refused where no GPU ranks meet
    if (!c.on_gpu || c.world.launcher == "none")
      usage_fail("--dist-init: says where GPU ranks meet; " +
                 std::string(c.on_gpu ? "this process was started by no launcher" : "CPU ranks meet through MPI"));
  }
  return c;
}

// The timed steps' means (and the step's median) into r, and the rates they give.
void summarize_timing(TrainResult& r, const TrainOptions& o, const std::vector<double>& step_ms,
                      const std::vector<double>& fwd_ms, const std::vector<double>& bwd_ms, const std::vector<double>& opt_ms,
                      const std::vector<double>& earlier_ms) {
  r.timed_steps = int64_t(step_ms.size());
  r.step_ms = mean(step_ms);
  r.step_ms_median = median(step_ms);
  r.forward_ms = mean(fwd_ms);
  r.backward_ms = mean(bwd_ms);
  r.optimizer_ms = mean(opt_ms);
  r.earlier_ms = mean(earlier_ms);
  if (r.timed_steps) {
    r.samples_per_sec = double(o.step_sequences(r.world_size)) / (r.step_ms / 1e3);  // every process's
    r.tokens_per_sec = r.samples_per_sec * o.seq_len;
    r.tflops = r.flops_per_step / (r.step_ms / 1e3) / 1e12;
  }
}

// One training run: set up (the checks, the backend, the ranks, the model, the header, the first
// validation), then a step at a time (train, record, evaluate, log, save), then finish (the
// summary, the last checkpoint, the report).
class TrainingRun {
 public:
  TrainingRun(const TrainOptions& o, std::ostream& out);
  // The communicator goes before the model: when a run ends in an error, NCCL's kernels may still
  // use the model's memory (its window over NCCL's allocation), and the abort ends them first.
  ~TrainingRun() { comm_.reset(); }
  int64_t first_step() const { return c_.resume.step + 1; }
  bool step(int64_t step);  // false: stopped by a signal before it
  TrainResult finish();

 private:
  void agree_between_ranks();
  void describe_run();
  bool train_one(int64_t step);  // false: abandoned between micro-batches by a signal
  void evaluate_and_log(int64_t step, const StepRecord& s, bool in_profile);
  nlohmann::json metrics_line(const StepRecord* s, std::optional<double> validation) const;
  double validate();  // the validation loss, and the tasks' scores
  void write_metrics(const StepRecord* s, std::optional<double> validation);
  void save(int64_t step);
  void make_save_dir() const;
  bool stop_asked();

  const TrainOptions& o_;
  CheckedRun c_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Communicator> comm_;
  std::ostringstream quiet_;  // the other ranks' log
  std::ostream& log_;
  std::unique_ptr<KernelTrace> trace_;
  std::unique_ptr<Llama> model_;
  TrainResult r_;
  LrSchedule schedule_;
  AdamWStep adam_;
  int64_t val_windows_ = 0;  // the validation's windows (0: none)
  MetricsLog metrics_;
  std::unique_ptr<TensorBoardWriter> tensorboard_;
  std::vector<TaskScore> task_scores_;  // of the last validation
  double peak_ = 0;          // the GPU's peak rate in this precision (0: unknown)
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::vector<double> step_ms_, fwd_ms_, bwd_ms_, opt_ms_, earlier_ms_;
  int64_t last_step_ = 0, first_profiled_ = 0, last_profiled_ = 0;
  int stopped_by_ = 0;
  int64_t abandoned_step_ = 0;  // the step a signal stopped between its micro-batches (0: none)
};

TrainingRun::TrainingRun(const TrainOptions& o, std::ostream& out)
    : o_(o), c_(check_run(o)), log_(out), schedule_(o.schedule()) {
  BackendOptions backend_options = o.backend;
  // One GPU per rank: the local rank's, or under Slurm the only one a task sees (srun
  // --gpus-per-task 1 gives each its own; two ranks on one GPU are refused when they meet).
  if (c_.world.launcher != "none" && c_.on_gpu) {
    const int gpus = cuda_device_count();
    const bool own_gpu = gpus == 1 && c_.world.launcher == "slurm";
    if (c_.world.local_size > gpus && !own_gpu)
      usage_fail(fmt::format("{} processes on this node, but it has {} GPU(s): one GPU per process", c_.world.local_size, gpus));
    backend_options.gpu = own_gpu ? 0 : c_.world.local_rank;
  }
  backend_ = make_backend(backend_options);
  const std::string dist_init = !o.dist_init.empty()                                              ? o.dist_init
                                : c_.world.launcher == "mpirun" && c_.world.master_addr.empty() ? "mpi"
                                                                                                : "env";
  comm_ = make_communicator(c_.world, *backend_, dist_init, o.dist_timeout);
  agree_between_ranks();
  if (c_.wants_profile && c_.world.rank == 0 && c_.on_gpu) {  // the ceilings first: the trace sees none of it
    r_.ceilings.precision = precision_name(o.backend.plan);
    measure_ceilings(r_.ceilings, backend_options.gpu);
    const DeviceInfo d = device_info(true);
    r_.sm = {d.multiprocessors, d.sm_threads, d.sm_registers, d.sm_blocks, int64_t(d.sm_shared_bytes),
             int64_t(d.block_reserved_shared_bytes)};
  }
  if (c_.wants_profile && c_.world.rank == 0) trace_ = KernelTrace::create();  // before the first step: graphs are seen
  const DType reduce = comm_->size() == 1 || o.reduce_dtype != "bf16" ? DType::F32 : DType::BF16;
  model_ = std::make_unique<Llama>(o.model, *backend_, o.batch, o.seq_len, DataParallel{comm_.get(), o.zero, reduce},
                                   StepOptions{o.grad_accum, o.grad_clip > 0, o.decay_norms, o.decay_embedding, !c_.on_gpu});
  c_.data->set_shard(comm_->rank(), comm_->size());
  if (o.shuffle) c_.data->set_shuffle(o.seed);
  if (o.resume_path.empty()) {
    model_->init_weights(o.seed, o.init_std);
    if (!c_.initial.empty()) model_->write(model_->params(), c_.initial);
  } else {
    load_checkpoint(o.resume_path, *model_);
    c_.data->set_position(c_.resume.data_position, c_.resume.data_epoch);
  }
  model_->take_rank0_params();
  adam_ = {o.learning_rate, o.beta1, o.beta2, o.adam_eps, o.weight_decay, o.grad_clip};
  last_step_ = c_.resume.step;
  first_profiled_ = c_.resume.step + o.timing_warmup + 1, last_profiled_ = first_profiled_ + o.profile_steps - 1;
  describe_run();
}

// Everything that decides which collectives a rank calls, and with what: the agreed rows of the
// flag table, and what the rank found (its data, plan, checkpoint step, whether it saves).
void TrainingRun::agree_between_ranks() {
  if (comm_->solo()) return;
  std::vector<std::string> values = agreed_values(o_);
  for (const auto& [name, value] :
       {std::pair{"data", c_.data->identity()}, {"plan", describe(o_.backend.plan)},
        {"resumed step", std::to_string(c_.resume.step)},
        {"saving", o_.save_path.empty() && o_.save_dir.empty() ? "no" : "yes"},
        {"profiling", c_.wants_profile ? "yes" : "no"}})
    values.push_back(std::string(name) + "=" + value);
  check_same_on_every_rank(*comm_, values);
}

// The result's facts, the header, the validation's windows, the first validation and --metrics.
void TrainingRun::describe_run() {
  std::ostream& log = comm_->rank() == 0 ? log_ : quiet_;
  r_.device = backend_->is_cuda() ? "cuda" : "cpu";
  r_.backend = backend_->name();
  r_.plan = backend_->is_cuda() ? describe(backend_->plan()) : "reference (plan switches apply to the CUDA backend)";
  r_.attention = backend_->attention_kind();
  r_.products = model_->products_kind();
  r_.head_fp8 = model_->head_in_fp8();
  r_.data = c_.data->describe();
  const std::array<size_t, kNumCategories> padding = model_->padding_bytes();
  for (int c = 0; c < kNumCategories; ++c) {
    r_.memory.bytes[c] = model_->arena().bytes(Category(c));
    r_.memory.padding[c] = padding[size_t(c)];
  }
  r_.padded_vocab = model_->padded_vocab();
  r_.classifier_chunk = model_->classifier_chunk();
  r_.world_size = comm_->size();
  r_.flops_per_step = training_flops(o_.model, o_.step_sequences(comm_->size()), o_.seq_len);
  print_header(log, {o_, r_, *backend_, c_.resume, !comm_->solo(), c_.world.launcher, comm_->name(), model_->reduce_dtype(),
                     c_.tokenizer ? c_.tokenizer->tokenizer->describe() : ""});
  if (o_.profile_memory && comm_->rank() == 0)
    report_memory(log, (std::filesystem::path(o_.profile_dir) / "memory.csv").string(), *model_);
  peak_ = backend_->is_cuda() ? peak_flops(backend_->name(), precision_name(o_.backend.plan)) : 0;
  val_windows_ = run_validation_windows(o_, *c_.data);
  if (!o_.metrics_path.empty() && comm_->rank() == 0) {
    if (!o_.save_dir.empty()) make_save_dir();  // which may hold the metrics
    metrics_ = MetricsLog(o_.metrics_path, c_.resume.step);
  }
  if (val_windows_ > 0) {
    r_.validation.emplace_back(c_.resume.step, validate());
    log << fmt::format("Validation loss at step {}: {:.4f}\n", c_.resume.step, r_.validation.back().second);
  }
  if (!o_.tensorboard_dir.empty() && comm_->rank() == 0)
    tensorboard_ = std::make_unique<TensorBoardWriter>(o_.tensorboard_dir, "--tensorboard");
  if (val_windows_ > 0 && metrics_.last_step() < c_.resume.step)  // the series starts at the run's first validation
    write_metrics(nullptr, r_.validation.back().second);
  log.flush();
}

// A signal to any rank stops every rank after the same step (they agree on it each step).
bool TrainingRun::stop_asked() {
  std::vector<double> signal = {double(stop_requested())};
  if (!comm_->solo()) comm_->all_reduce_sum(signal);
  if (signal[0] > 0 && !stopped_by_) stopped_by_ = stop_requested() ? stop_requested() : SIGTERM;
  return signal[0] > 0;
}

bool TrainingRun::step(int64_t step) {
  if (stop_asked()) return false;  // the previous step is whole: stop after it
  // The profiled steps skip the evaluation on every rank (rank 0 alone traces them).
  const bool in_profile = c_.wants_profile && step >= first_profiled_ && step <= last_profiled_;
  if (trace_ && step == first_profiled_) trace_->begin();
  if (!train_one(step)) return false;
  last_step_ = step;
  const StepRecord& s = r_.steps.back();
  if (trace_ && in_profile) {
    trace_->end_step();
    if (step == last_profiled_) r_.family_bytes = model_->family_bytes();  // as the profiled steps ran (FP8 calibrated)
    if (step == last_profiled_) report_profile(comm_->rank() == 0 ? log_ : quiet_, o_, r_, trace_->finish(), backend_->name());
  }
  if (int64_t(r_.steps.size()) > o_.timing_warmup) {
    step_ms_.push_back(s.step_ms);
    fwd_ms_.push_back(s.forward_ms);
    bwd_ms_.push_back(s.backward_ms);
    opt_ms_.push_back(s.optimizer_ms);
    earlier_ms_.push_back(s.earlier_ms);
  }
  evaluate_and_log(step, s, in_profile);
  if (o_.save_every > 0 && step % o_.save_every == 0 && step < o_.steps) save(step);
  return true;
}

// The step's micro-batches from the data, the update, and its record. One process without a
// step graph checks for a signal between micro-batches too: a step abandoned there leaves the
// model as the last step left it, and the data where that step's ended.
bool TrainingRun::train_one(int64_t step) {
  const int64_t position = c_.data->position(), epoch = c_.data->epoch();
  Batch batch;
  c_.data->next_batches(o_.grad_accum, batch);
  model_->set_batch(batch.tokens.data(), batch.targets.data(), o_.grad_accum);
  adam_.t = step;
  adam_.lr = schedule_.at(step);
  std::function<bool()> between_micro_batches;
  if (comm_->solo())
    between_micro_batches = [&] {
      if (stop_requested()) stopped_by_ = stop_requested();
      return stopped_by_ != 0;
    };
  if (!model_->train_step(adam_, between_micro_batches)) {
    c_.data->set_position(position, epoch);
    abandoned_step_ = step;
    return false;
  }
  StepRecord s{step, model_->mean_loss(), adam_.lr, backend_->elapsed_ms(0, 4), backend_->elapsed_ms(1, 2),
               backend_->elapsed_ms(2, 3), backend_->elapsed_ms(3, 4), backend_->elapsed_ms(0, 1)};
  if (model_->step_options().norm_measured()) s.grad_norm = model_->grad_norm();
  // A non-finite loss or norm stops the run here: no checkpoint of this step is written, and the
  // last one (--save-every) is the last good state.
  if (!std::isfinite(s.loss)) fail(divergence(o_, "the loss", s.loss, step, step - 1 - c_.resume.step));
  if (o_.grad_clip > 0 && !std::isfinite(s.grad_norm))
    fail(divergence(o_, "the gradients' norm", s.grad_norm, step, step - 1 - c_.resume.step));
  r_.steps.push_back(s);
  return true;
}

void TrainingRun::evaluate_and_log(int64_t step, const StepRecord& s, bool in_profile) {
  std::ostream& log = comm_->rank() == 0 ? log_ : quiet_;
  const bool log_step = step % o_.log_every == 0 || step == o_.steps;
  const bool eval_step = val_windows_ > 0 && !in_profile &&
                         ((o_.eval_every > 0 ? step % o_.eval_every == 0 : log_step) || step == o_.steps);
  if (eval_step) r_.validation.emplace_back(step, validate());
  const std::optional<double> validation = eval_step ? std::optional(r_.validation.back().second) : std::nullopt;
  if (log_step) {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    std::string line = step_line(o_, s, r_.memory, comm_->size());
    if (schedule_.kind != "constant" || schedule_.warmup != 0) line += fmt::format(" | LR: {:.3e}", s.lr);
    if (std::isfinite(s.grad_norm)) line += fmt::format(" | Norm: {:.3f}", s.grad_norm);
    if (step < o_.steps) line += " | ETA: " + format_duration(elapsed / double(step - c_.resume.step) * double(o_.steps - step));
    if (validation) line += fmt::format(" | Val: {:.4f}", *validation);
    if (validation && !task_scores_.empty()) line += fmt::format(" | Acc: {:.4f}", task_scores_[0].acc_norm());
    log << line << "\n";
    write_metrics(&s, validation);
  } else if (validation) {
    log << fmt::format("Validation loss at step {}: {:.4f}\n", step, *validation);
  }
  if (log_step || eval_step) log.flush();
}

double TrainingRun::validate() {
  task_scores_.clear();
  for (const Task& t : c_.tasks) task_scores_.push_back(score_task(*model_, t, *comm_));
  return mean_loss_on_windows(*model_, *c_.data, val_windows_, *comm_);
}

// A --metrics line, and the TensorBoard event of the same numbers.
void TrainingRun::write_metrics(const StepRecord* s, std::optional<double> validation) {
  const nlohmann::json line = metrics_line(s, validation);
  metrics_.write(line, comm_->rank() == 0 ? log_ : quiet_);
  if (tensorboard_) tensorboard_->write(line["step"].get<int64_t>(), metrics_scalars(line));
}

// A --metrics line: a step's record (none: the validation before the first step).
nlohmann::json TrainingRun::metrics_line(const StepRecord* s, std::optional<double> validation) const {
  using json = nlohmann::json;
  const int64_t step = s ? s->step : c_.resume.step, sequences = o_.step_sequences(comm_->size());
  auto number = [](double v) { return std::isfinite(v) ? json(v) : json(); };
  const double per_sec = s ? double(sequences) * o_.seq_len / (s->step_ms / 1e3) : std::nan("");
  json line = {{"step", step},
          {"tokens", step * sequences * o_.seq_len},
          {"loss", s ? number(s->loss) : json()},
          {"lr", s ? number(s->lr) : json()},
          {"grad_norm", s ? number(s->grad_norm) : json()},
          {"step_ms", s ? number(s->step_ms) : json()},
          {"tokens_per_sec", number(per_sec)},
          {"mfu", s && peak_ > 0 ? json(r_.flops_per_step / (s->step_ms / 1e3) / peak_) : json()},
          {"elapsed_s", std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count()},
          {"validation_loss", validation ? json(*validation) : json()}};
  if (!c_.tasks.empty()) {
    line["task_acc"] = validation ? json(task_scores_[0].acc()) : json();
    line["task_acc_norm"] = validation ? json(task_scores_[0].acc_norm()) : json();
  }
  return line;
}

// --save's file, and --save-dir's step file (the run's older ones beyond --keep-last removed after).
void TrainingRun::save(int64_t step) {
  CheckpointInfo info{o_.model, step, c_.data->position(), c_.data->epoch(), c_.data->identity(), o_.seed, o_.seq_len,
                      c_.run_id, recipe_of(o_), ""};  // save_checkpoint records the tokenizer's kind
  const TokenizerFiles* tokenizer = c_.tokenizer ? &c_.tokenizer->files : nullptr;
  if (!o_.save_path.empty()) save_checkpoint(o_.save_path, *model_, info, tokenizer);
  if (o_.save_dir.empty()) return;
  if (comm_->rank() == 0) make_save_dir();
  save_checkpoint(step_checkpoint_path(o_.save_dir, step), *model_, info, tokenizer);
  if (comm_->rank() == 0) remove_older_step_checkpoints(o_.save_dir, o_.keep_last, c_.run_id);
}

void TrainingRun::make_save_dir() const {
  std::error_code ec;
  std::filesystem::create_directories(o_.save_dir, ec);
  if (ec) fail("--save-dir: cannot create '" + o_.save_dir + "': " + ec.message());
}

TrainResult TrainingRun::finish() {
  std::ostream& log = comm_->rank() == 0 ? log_ : quiet_;
  const bool stopped = stopped_by_ && last_step_ < o_.steps;
  summarize_timing(r_, o_, step_ms_, fwd_ms_, bwd_ms_, opt_ms_, earlier_ms_);
  r_.final_loss = r_.steps.empty() ? std::nan("") : r_.steps.back().loss;
  const bool saves = !o_.save_path.empty() || !o_.save_dir.empty();
  if (stopped) {
    r_.stopped_by = stopped_by_;
    log << fmt::format("Stopped by signal {} {}after step {}{}\n", r_.stopped_by,
                       abandoned_step_ ? fmt::format("during step {}, between its micro-batches (not taken), ",
                                                     abandoned_step_)
                                       : "",
                       last_step_, saves ? ": writing the checkpoint" : " (no --save: no checkpoint)");
  } else {
    print_summary(log, o_, r_);
  }
  // The model first: a report that cannot be written (a full disk) must not cost the model.
  if (saves && last_step_ > c_.resume.step) {
    save(last_step_);
    const std::string where = o_.save_path.empty() ? step_checkpoint_path(o_.save_dir, last_step_) : o_.save_path;
    log << "Saved checkpoint: " << where << (stopped ? fmt::format(" at step {} (resume with --resume)", last_step_) : "")
        << "\n";
  }
  if (!o_.json_path.empty() && comm_->rank() == 0)
    write_file_atomic(o_.json_path, [&](std::ostream& out) { out << result_json(o_, r_).dump(2) << "\n"; });
  comm_->finish();
  return r_;
}

}  // namespace

TrainResult train(const TrainOptions& o, std::ostream& out) {
  TrainingRun run(o, out);
  for (int64_t step = run.first_step(); step <= o.steps; ++step)
    if (!run.step(step)) break;
  return run.finish();
}

}  // namespace tt
