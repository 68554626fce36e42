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
#include "train/flops.h"
#include "train/checkpoint.h"
#include "data/loader.h"
#include "train/hf.h"
#include "train/report.h"

namespace tt {

void TrainOptions::validate() const {
  auto positive = [](int v, const char* flag) {
    if (v <= 0) usage_fail(std::string(flag) + ": must be a positive integer (got " + std::to_string(v) + ")");
  };
  positive(batch, "--batch-size");
  positive(seq_len, "--seq-len");
  positive(steps, "--num-steps");
  positive(log_every, "--log-every");
  if (save_every < 0) usage_fail("--save-every: must not be negative (got " + std::to_string(save_every) + ")");
  if (save_every > 0 && save_path.empty() && save_dir.empty())
    usage_fail("--save-every: needs --save PATH or --save-dir DIR, where the checkpoints go");
  if (keep_last < 0) usage_fail("--keep-last: must not be negative");
  if (keep_last > 0 && save_dir.empty()) usage_fail("--keep-last: the step checkpoints of --save-dir to keep");
  if (eval_every < 0) usage_fail("--eval-every: must not be negative (got " + std::to_string(eval_every) + ")");
  positive(profile_steps, "--profile-steps");
  if (timing_warmup < 0)
    usage_fail("--timing-warmup-steps: must not be negative (got " + std::to_string(timing_warmup) + ")");
  if (!(std::isfinite(learning_rate) && learning_rate > 0))
    usage_fail("--learning-rate: must be a positive finite number");
  if (lr_schedule_steps < 0) usage_fail("--lr-schedule-steps: must not be negative");
  if (zero != 0 && zero != 1) usage_fail("--zero: must be 0 or 1 (got " + std::to_string(zero) + ")");
  if (val_tokens < 0) usage_fail("--val-tokens: must not be negative");
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
  for (const auto& [flag, beta] : {std::pair{"--beta1", beta1}, {"--beta2", beta2}})
    if (!(std::isfinite(beta) && beta >= 0 && beta < 1)) usage_fail(std::string(flag) + ": must be in [0, 1)");
  if (!(std::isfinite(adam_eps) && adam_eps > 0)) usage_fail("--adam-eps: must be a positive finite number");
  if (grad_accum < 1 || grad_accum > 65536) usage_fail("--grad-accum-steps: 1 to 65536 micro-batches a step");
  if (!(std::isfinite(grad_clip) && grad_clip >= 0))
    usage_fail("--grad-clip: the largest global norm of the gradients, a finite number (0: no clipping)");
  schedule().validate();
  if (!(std::isfinite(init_std) && init_std > 0)) usage_fail("--init-std: must be a positive finite number");
  if (!(std::isfinite(weight_decay) && weight_decay >= 0))
    usage_fail("--weight-decay: must be a finite number, zero or more");
  if (seed > uint64_t(INT64_MAX))  // so that a checkpoint holds it as written (--seed -1 parses as 2^64 - 1)
    usage_fail("--seed: must be in [0, 9223372036854775807] (got " + std::to_string(seed) + ")");
  if (int64_t(batch) * seq_len * grad_accum > INT_MAX / 8)
    usage_fail("--batch-size x --seq-len x --grad-accum-steps: too many tokens per step (limit 268435455)");
  model.validate();
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

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// --val-tokens: the first ceil(N / T) windows of the validation split, in blocks over the ranks,
// each rank in batches of its --batch-size: the mean over exactly those windows' tokens, so the
// same for any batch size and number of ranks (to the rounding of the fp32 products, whose
// blocking follows the batch: 2e-10 relative at batch 3 against 8 on the CPU).
double validation_loss_on(Llama& model, const DataSource& data, int64_t windows, Communicator& comm) {
  const int64_t per = (windows + comm.size() - 1) / comm.size();
  const int64_t first = std::min(windows, comm.rank() * per), last = std::min(windows, first + per);
  Batch b;
  std::vector<double> sum = {0.0};
  for (int64_t at = first; at < last; at += model.batch()) {
    const int rows = int(std::min<int64_t>(model.batch(), last - at));
    data.validation_windows_batch(at, rows, b);
    model.set_batch(b.tokens.data(), b.targets.data());
    model.forward(Llama::Pass::Eval);
    sum[0] += model.loss_sum(rows);
  }
  if (!comm.solo()) comm.all_reduce_sum(sum);
  return sum[0] / double(windows * model.seq_len());
}

// The precision of the products, as peak_flops names it.
std::string precision_name(const Plan& plan) { return plan.amp ? "bf16" : plan.tf32 ? "tf32" : "fp32"; }

double validation_loss(Llama& model, const DataSource& data) {
  Batch b;
  double sum = 0;
  const int n = data.validation_batches();
  for (int i = 0; i < n; ++i) {
    data.validation_batch(i, b);
    model.set_batch(b.tokens.data(), b.targets.data());
    model.forward(Llama::Pass::Eval);
    sum += model.mean_loss();
  }
  return sum / n;
}

void prepare_directory(const std::string& dir, const char* flag) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir)) usage_fail(std::string(flag) + ": cannot create directory '" + dir + "'");
  check_writable((std::filesystem::path(dir) / "trace.json").string(), flag);
}

void report_profile(std::ostream& log, const TrainOptions& o, TrainResult& r, const TraceData& t,
                    const std::string& device) {
  r.launches_per_step = launches_per_step(t);
  const std::vector<HotspotRow> hot = hotspots(t);
  const std::vector<RegionRow> regions = region_times(t);
  if (!o.profile_dir.empty()) {
    const std::filesystem::path dir(o.profile_dir);
    write_file_atomic((dir / "trace.json").string(), [&](std::ostream& out) { write_chrome_trace(out, t); });
    write_file_atomic((dir / "kernels.csv").string(), [&](std::ostream& out) { write_kernels_csv(out, hot); });
    write_file_atomic((dir / "regions.csv").string(), [&](std::ostream& out) { write_regions_csv(out, regions); });
    log << fmt::format("Profile of {} steps written to {}: trace.json, kernels.csv, regions.csv\n", t.steps, o.profile_dir);
  }
  print_profile(log, t, hot);
  if (o.flops_profile) {
    std::vector<ModuleFlops> modules = module_flops(o.model, o.batch, o.seq_len);
    add_measured_times(modules, t);
    const std::string precision = precision_name(o.backend.plan);
    print_flops_profile(log, modules, r.steps.back().step_ms, peak_flops(device, precision), precision);
  }
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

void report_memory(std::ostream& log, const std::string& path, const Llama& model) {
  const std::vector<Llama::MemoryPoint> points = model.memory_timeline();
  size_t peak = 0;
  std::string peak_region;
  write_file_atomic(path, [&](std::ostream& out) {
    out << "region";
    for (int c = 0; c < kNumCategories; ++c) out << "," << category_name(Category(c));
    out << ",total\n";
    for (const Llama::MemoryPoint& p : points) {
      size_t total = 0;
      out << p.region;
      for (size_t b : p.live) out << "," << b, total += b;
      out << "," << total << "\n";
      if (total > peak) peak = total, peak_region = p.region;
    }
  });
  log << fmt::format("Memory over one step written to {}: live data peaks at {} after {} (the arena reserves {})\n",
                     path, format_mb(peak), peak_region, format_mb(model.arena().total_bytes()));
}

}  // namespace

std::vector<std::string> recipe_args(const TrainOptions& o) {
  auto number = [](double x) { return fmt::format("{}", x); };  // the shortest form that reads back exactly
  const ModelConfig& m = o.model;
  std::error_code ec;
  const std::string data = o.data == "synthetic" ? o.data : std::filesystem::absolute(o.data, ec).string();
  std::vector<std::string> args = {
      "--num-steps", std::to_string(o.steps), "--batch-size", std::to_string(o.batch), "--seq-len", std::to_string(o.seq_len),
      "--data", data, "--vocab-size", std::to_string(m.vocab_size), "--hidden-dim", std::to_string(m.hidden),
      "--num-layers", std::to_string(m.layers), "--num-heads", std::to_string(m.heads), "--num-kv-heads",
      std::to_string(m.kv_heads), "--intermediate-size", std::to_string(m.intermediate), "--norm-eps", number(m.norm_eps),
      "--rope-theta", number(m.rope_theta), m.tie_embeddings ? "--tie-embeddings" : "--no-tie-embeddings",
      "--seed", std::to_string(o.seed), "--learning-rate", number(o.learning_rate),
      "--lr-schedule", o.lr_schedule, "--lr-warmup-steps", std::to_string(o.lr_warmup), "--min-lr", number(o.min_lr),
      "--weight-decay", number(o.weight_decay), "--beta1", number(o.beta1), "--beta2", number(o.beta2), "--adam-eps",
      number(o.adam_eps), "--val-tokens", std::to_string(o.val_tokens), o.shuffle ? "--shuffle" : "--no-shuffle",
      "--grad-accum-steps", std::to_string(o.grad_accum), "--grad-clip", number(o.grad_clip),
      o.decay_norms ? "--decay-norms" : "--no-decay-norms", o.decay_embedding ? "--decay-embedding" : "--no-decay-embedding",
      "--log-every", std::to_string(o.log_every), "--eval-every", std::to_string(o.eval_every)};
  if (o.lr_decay > 0) args.insert(args.end(), {"--lr-decay-steps", std::to_string(o.lr_decay)});
  if (o.lr_schedule_steps > 0) args.insert(args.end(), {"--lr-schedule-steps", std::to_string(o.lr_schedule_steps)});
  return args;
}

namespace {

// What train() checks before any work is done or any file is written (everything the user gave),
// and what it learns on the way: the world, the data, the checkpoint resumed, the initial weights.
struct CheckedRun {
  World world;
  std::unique_ptr<DataSource> data;
  CheckpointInfo resume;
  std::vector<float> initial;  // --init-from's weights (none: drawn from the seed)
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
  check_distinct_paths({{"--json", o.json_path}, {"--save", o.save_path}, {"--metrics", o.metrics_path}}, inputs);
  if (!o.json_path.empty()) check_writable(o.json_path, "--json");
  if (!o.metrics_path.empty()) check_writable(o.metrics_path, "--metrics");
  if (!o.save_path.empty()) check_writable(o.save_path, "--save");
  if (!o.save_dir.empty()) check_writable_directory(o.save_dir, "--save-dir");
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

// The run's header: the model, backend, data, recipe, memory and where it starts.
void print_header(std::ostream& log, const TrainOptions& o, const TrainResult& r, const Llama& model, const Backend& backend,
                  const Communicator& comm, const World& world, const CheckpointInfo& resume) {
  const LrSchedule schedule = o.schedule();
  const bool constant_lr = schedule.kind == "constant" && schedule.warmup == 0;  // printed as before schedules
  const ModelConfig& m = o.model;
  log << fmt::format("Tiny LLaMA: {} parameters (vocab {}, hidden {}, {} layers, {} heads / {} kv heads of {}, ffn {})\n",
                     m.param_count(), m.vocab_size, m.hidden, m.layers, m.heads, m.kv_heads, m.head_dim(),
                     m.intermediate);
  log << fmt::format("Backend: {} | plan: {}\n", r.backend, r.plan);
  if (!backend.is_cuda() && describe(o.backend.plan) != describe(plan_for_version(1)))
    log << fmt::format("CPU: {} selects CUDA kernels; the CPU computes the same function its one way, so this run "
                       "times the reference, not {}\n", describe(o.backend.plan), describe(o.backend.plan));
  log << fmt::format("Attention: {}\n", r.attention);
  if (!r.products.empty()) log << fmt::format("Products: {}\n", r.products);
  log << fmt::format("Data: {}\n", r.data);
  log << fmt::format("Batch {} x {} tokens, steps {}..{}, lr {}, weight decay {:g}, seed {}\n", o.batch, o.seq_len,
                     resume.step + 1, o.steps, constant_lr ? fmt::format("{:g}", o.learning_rate) : schedule.describe(),
                     o.weight_decay, o.seed);
  if (o.grad_accum > 1)
    log << fmt::format("Gradient accumulation: {} micro-batches of {} a step, {} sequences per update{}\n", o.grad_accum,
                       o.batch, o.step_sequences(comm.size()), comm.solo() ? "" : " over all processes");
  if (o.grad_clip > 0 || !o.decay_norms || !o.decay_embedding) {
    std::string exempt = !o.decay_norms && !o.decay_embedding ? "norms and embedding"
                         : !o.decay_norms                     ? "norms"
                         : !o.decay_embedding                 ? "embedding"
                                                              : "";
    log << fmt::format("Optimizer: AdamW betas {:g}, {:g}, eps {:g}{}{}\n", o.beta1, o.beta2, o.adam_eps,
                       o.grad_clip > 0 ? fmt::format(", gradients clipped to global norm {:g}", o.grad_clip) : "",
                       exempt.empty() ? "" : ", no weight decay on the " + exempt);
  }
  log << fmt::format("Memory: {} reserved at start\n", format_mb(r.memory.total()));
  if (!comm.solo())
    log << fmt::format("Data parallel: {} processes ({}, {}), ZeRO-{}, gradients summed in {}: batch {} per process, {} in "
                       "all\n", comm.size(), world.launcher, comm.name(), o.zero,
                       dtype_name(model.reduce_dtype()), o.batch, o.batch * comm.size());
  if (r.padded_vocab != m.vocab_size)
    log << fmt::format("Output head: {} rows, the vocabulary padded to a multiple of {} for aligned products "
                       "(zero rows, not counted as parameters or FLOPs; {} of the memory)\n",
                       r.padded_vocab, backend.vocab_padding_multiple(), format_mb(r.memory.total_padding()));
  if (backend.plan().fused_classifier && backend.is_cuda())
    log << fmt::format("Fused classifier: {} tokens per chunk ({} of logits)\n", r.classifier_chunk,
                       format_mb(size_t(r.classifier_chunk) * size_t(r.padded_vocab) * dtype_size(backend.act_dtype())));
  if (!o.resume_path.empty()) {
    log << fmt::format("Resumed from {} at step {}\n", o.resume_path, resume.step);
    std::string changed;
    for (auto [flag, was, now] : {std::tuple{"--learning-rate", resume.learning_rate, fmt::format("{}", o.learning_rate)},
                                  {"--lr-schedule", resume.lr_schedule, schedule.describe()},
                                  {"--weight-decay", resume.weight_decay, fmt::format("{}", o.weight_decay)},
                                  {"--batch-size", resume.batch_size, std::to_string(o.batch)}})
      if (!was.empty() && was != now && !(was.rfind("constant", 0) == 0 && now.rfind("constant", 0) == 0))  // a
        changed += fmt::format("{}{} {} -> {}", changed.empty() ? "" : ", ", flag, was, now);  // constant's is the lr
    if (!changed.empty()) log << "Resuming with changed settings: " << changed << "\n";
  }
  if (!o.init_from.empty()) log << fmt::format("Initialized from {}\n", o.init_from);
  if (o.profile_memory && world.rank == 0) report_memory(log, (std::filesystem::path(o.profile_dir) / "memory.csv").string(), model);
  log.flush();
}

// The timed steps' means (and the step's median) into r, and the rates they give.
void summarize_timing(TrainResult& r, const TrainOptions& o, const std::vector<double>& step_ms,
                      const std::vector<double>& fwd_ms, const std::vector<double>& bwd_ms, const std::vector<double>& opt_ms) {
  r.timed_steps = int64_t(step_ms.size());
  r.step_ms = mean(step_ms);
  r.step_ms_median = median(step_ms);
  r.forward_ms = mean(fwd_ms);
  r.backward_ms = mean(bwd_ms);
  r.optimizer_ms = mean(opt_ms);
  if (r.timed_steps) {
    r.samples_per_sec = double(o.step_sequences(r.world_size)) / (r.step_ms / 1e3);  // every process's
    r.tokens_per_sec = r.samples_per_sec * o.seq_len;
    r.tflops = r.flops_per_step / (r.step_ms / 1e3) / 1e12;
  }
}

}  // namespace

TrainResult train(const TrainOptions& o, std::ostream& out) {
  const CheckedRun checked = check_run(o);
  const World& world = checked.world;
  const std::unique_ptr<DataSource>& data = checked.data;
  const CheckpointInfo& resume = checked.resume;
  const bool on_gpu = checked.on_gpu, wants_profile = checked.wants_profile;
  const bool profiling = wants_profile && world.rank == 0;  // rank 0 traces its GPU
  const DType reduce_dtype = o.reduce_dtype == "bf16" ? DType::BF16 : DType::F32;
  BackendOptions backend_options = o.backend;
  if (world.launcher != "none" && on_gpu) {
    // One GPU per rank, the local rank's.
    const int gpus = cuda_device_count();
    if (world.local_size > gpus)
      usage_fail(fmt::format("{} processes on this node, but it has {} GPU(s): one GPU per process", world.local_size, gpus));
    backend_options.gpu = world.local_rank;
  }
  std::unique_ptr<Backend> backend = make_backend(backend_options);
  const std::string dist_init =
      !o.dist_init.empty() ? o.dist_init : world.launcher == "mpirun" && world.master_addr.empty() ? "mpi" : "env";
  const std::unique_ptr<Communicator> comm = make_communicator(world, *backend, dist_init, o.dist_timeout);
  std::ostringstream quiet;  // the other ranks' log
  std::ostream& log = comm->rank() == 0 ? out : quiet;
  if (!comm->solo())
    // Everything that decides which collectives a rank calls, and with what.
    check_same_on_every_rank(*comm,
                             fmt::format("{} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {}", o.model.to_json().dump(),
                                         o.batch, o.seq_len, o.steps,
                                         fmt::format("{} {} {} {} {} {} {} {} {} {}", o.schedule().describe(),
                                                     o.weight_decay, o.beta1, o.beta2, o.adam_eps, o.shuffle, o.grad_accum,
                                                     o.grad_clip, o.decay_norms, o.decay_embedding),
                                         o.seed,
                                         data->identity(), describe(o.backend.plan), o.zero, dtype_name(reduce_dtype),
                                         resume.step, o.log_every, o.eval_every, o.save_path.empty() && o.save_dir.empty(),
                                         o.save_every,
                                         fmt::format("{} {} {}", wants_profile, o.timing_warmup, o.profile_steps)),
                             "model, batch, data, plan, optimizer or schedule of logs, evaluations and checkpoints");
  std::unique_ptr<KernelTrace> trace;
  if (profiling) {
    trace = KernelTrace::create();  // before the first step, so that graph captures are seen
  }
  Llama model(o.model, *backend, o.batch, o.seq_len, {comm.get(), o.zero, comm->size() == 1 ? DType::F32 : reduce_dtype},
              {o.grad_accum, o.grad_clip > 0, o.decay_norms, o.decay_embedding});
  data->set_shard(comm->rank(), comm->size());
  if (o.shuffle) data->set_shuffle(o.seed);
  if (o.resume_path.empty()) {
    model.init_weights(o.seed, o.init_std);
    if (!checked.initial.empty()) model.write(model.params(), checked.initial);
  } else {
    load_checkpoint(o.resume_path, model);
    data->set_position(resume.data_position, resume.data_epoch);
  }

  TrainResult r;
  r.device = backend->is_cuda() ? "cuda" : "cpu";
  r.backend = backend->name();
  r.plan = backend->is_cuda() ? describe(backend->plan()) : "reference (plan switches apply to the CUDA backend)";
  r.attention = backend->attention_kind();
  r.products = model.products_kind();
  r.data = data->describe();
  const std::array<size_t, kNumCategories> padding = model.padding_bytes();
  for (int c = 0; c < kNumCategories; ++c) {
    r.memory.bytes[c] = model.arena().bytes(Category(c));
    r.memory.padding[c] = padding[size_t(c)];
  }
  r.padded_vocab = model.padded_vocab();
  r.classifier_chunk = model.classifier_chunk();
  r.world_size = comm->size();
  r.flops_per_step = training_flops(o.model, o.step_sequences(comm->size()), o.seq_len);

  const LrSchedule schedule = o.schedule();
  const bool constant_lr = schedule.kind == "constant" && schedule.warmup == 0;  // printed as before schedules
  print_header(log, o, r, model, *backend, *comm, world, resume);

  // The validation of this run: --val-tokens' windows, or the first batches of the split.
  int64_t val_windows = 0;
  if (o.val_tokens > 0) {
    val_windows = (o.val_tokens + o.seq_len - 1) / o.seq_len;
    if (val_windows > data->all_validation_windows())
      usage_fail(fmt::format("--val-tokens: {} tokens are {} windows of --seq-len {}; the validation split holds {}",
                             o.val_tokens, val_windows, o.seq_len, data->all_validation_windows()));
  }
  auto validate = [&] {
    return val_windows > 0 ? validation_loss_on(model, *data, val_windows, *comm) : validation_loss(model, *data);
  };
  if (data->validation_batches() > 0) {
    r.validation.emplace_back(resume.step, validate());
    log << fmt::format("Validation loss at step {}: {:.4f}\n", resume.step, r.validation.back().second);
  }

  AdamWStep adam;
  adam.lr = o.learning_rate;
  adam.weight_decay = o.weight_decay;
  adam.beta1 = o.beta1, adam.beta2 = o.beta2, adam.eps = o.adam_eps;
  adam.max_grad_norm = o.grad_clip;
  // --metrics: a JSON line at every log step, each written whole and flushed, so that a run that
  // stops early (a signal, an error) leaves every line up to its last log.
  std::ofstream metrics;
  if (!o.metrics_path.empty() && comm->rank() == 0) {
    metrics.open(o.metrics_path, std::ios::trunc);
    if (!metrics) usage_fail("--metrics: cannot write '" + o.metrics_path + "'");
  }
  const double peak = backend->is_cuda() ? peak_flops(backend->name(), precision_name(o.backend.plan)) : 0;
  const auto run_start = std::chrono::steady_clock::now();
  auto write_metrics = [&](const StepRecord& s, const std::optional<double>& validation) {
    if (!metrics.is_open()) return;
    const double tokens_per_sec = double(o.step_sequences(comm->size())) * o.seq_len / (s.step_ms / 1e3);
    nlohmann::json line = {{"step", s.step},
                           {"tokens", s.step * o.step_sequences(comm->size()) * o.seq_len},
                           {"loss", s.loss},
                           {"lr", s.lr},
                           {"grad_norm", std::isfinite(s.grad_norm) ? nlohmann::json(s.grad_norm) : nlohmann::json()},
                           {"step_ms", s.step_ms},
                           {"tokens_per_sec", tokens_per_sec},
                           {"mfu", peak > 0 ? nlohmann::json(r.flops_per_step / (s.step_ms / 1e3) / peak) : nlohmann::json()},
                           {"elapsed_s", std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count()},
                           {"validation_loss", validation ? nlohmann::json(*validation) : nlohmann::json()}};
    metrics << line.dump() + "\n" << std::flush;
    if (!metrics) fail("--metrics: error while writing '" + o.metrics_path + "' (disk full?)");
  };
  Batch batch, micro;
  std::vector<double> step_ms, fwd_ms, bwd_ms, opt_ms;
  const int64_t first_profiled = resume.step + o.timing_warmup + 1, last_profiled = first_profiled + o.profile_steps - 1;
  // --save's file, and --save-dir's step file (the older ones beyond --keep-last removed after).
  auto save = [&](int64_t step) {
    const CheckpointInfo info{o.model, step, data->position(), data->epoch(), data->identity(), o.seed, o.seq_len,
                              fmt::format("{}", o.learning_rate), fmt::format("{}", o.weight_decay),
                              std::to_string(o.batch), schedule.describe(), recipe_args(o)};
    if (!o.save_path.empty()) save_checkpoint(o.save_path, model, info);
    if (o.save_dir.empty()) return;
    if (comm->rank() == 0) {
      std::error_code ec;
      std::filesystem::create_directories(o.save_dir, ec);
      if (ec) fail("--save-dir: cannot create '" + o.save_dir + "': " + ec.message());
    }
    save_checkpoint(step_checkpoint_path(o.save_dir, step), model, info);
    if (comm->rank() == 0) remove_older_step_checkpoints(o.save_dir, o.keep_last);
  };
  const bool saves = !o.save_path.empty() || !o.save_dir.empty();
  // A signal to any rank stops every rank after the same step (they agree on it each step).
  int stopped_by = 0;
  auto should_stop = [&] {
    std::vector<double> signal = {double(stop_requested())};
    if (!comm->solo()) comm->all_reduce_sum(signal);
    if (signal[0] > 0 && !stopped_by) stopped_by = stop_requested() ? stop_requested() : SIGTERM;
    return signal[0] > 0;
  };
  int64_t last_step = resume.step;
  for (int64_t step = resume.step + 1; step <= o.steps; ++step) {
    if (should_stop()) break;  // the previous step is whole: stop after it
    last_step = step;
    // The profiled steps skip the evaluation on every rank (rank 0 alone traces them).
    const bool in_profile = wants_profile && step >= first_profiled && step <= last_profiled;
    const bool profiled = trace && in_profile;
    if (profiled && step == first_profiled) trace->begin();
    for (int i = 0; i < o.grad_accum; ++i) {  // the micro-batches, as consecutive batches of the data
      data->next_batch(micro);
      if (i == 0) batch.tokens.clear(), batch.targets.clear();
      batch.tokens.insert(batch.tokens.end(), micro.tokens.begin(), micro.tokens.end());
      batch.targets.insert(batch.targets.end(), micro.targets.begin(), micro.targets.end());
    }
    model.set_batch(batch.tokens.data(), batch.targets.data(), o.grad_accum);
    adam.t = step;
    adam.lr = schedule.at(step);
    model.train_step(adam);
    StepRecord s{step, model.mean_loss(), adam.lr, backend->elapsed_ms(0, 3), backend->elapsed_ms(0, 1),
                 backend->elapsed_ms(1, 2), backend->elapsed_ms(2, 3)};
    if (o.grad_clip > 0) s.grad_norm = model.grad_norm();
    // A non-finite loss or norm stops the run here: no checkpoint of this step is written, and
    // the last one (--save-every) is the last good state.
    if (!std::isfinite(s.loss)) fail(divergence(o, "the loss", s.loss, step, step - 1 - resume.step));
    if (o.grad_clip > 0 && !std::isfinite(s.grad_norm))
      fail(divergence(o, "the gradients' norm", s.grad_norm, step, step - 1 - resume.step));
    r.steps.push_back(s);
    if (profiled) {
      trace->end_step();
      if (step == last_profiled) report_profile(log, o, r, trace->finish(), backend->name());
    }
    if (int64_t(r.steps.size()) > o.timing_warmup) {
      step_ms.push_back(s.step_ms);
      fwd_ms.push_back(s.forward_ms);
      bwd_ms.push_back(s.backward_ms);
      opt_ms.push_back(s.optimizer_ms);
    }
    const bool log_step = step % o.log_every == 0 || step == o.steps;
    const bool eval_step = data->validation_batches() > 0 && !in_profile &&
                           ((o.eval_every > 0 ? step % o.eval_every == 0 : log_step) || step == o.steps);
    if (eval_step) r.validation.emplace_back(step, validate());
    if (log_step) {
      const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count();
      std::string line = step_line(o, s, r.memory, comm->size());
      if (!constant_lr) line += fmt::format(" | LR: {:.3e}", s.lr);
      if (o.grad_clip > 0) line += fmt::format(" | Norm: {:.3f}", s.grad_norm);
      if (step < o.steps) line += " | ETA: " + format_duration(elapsed / double(step - resume.step) * double(o.steps - step));
      if (eval_step) line += fmt::format(" | Val: {:.4f}", r.validation.back().second);
      log << line << "\n";
    } else if (eval_step) {
      log << fmt::format("Validation loss at step {}: {:.4f}\n", step, r.validation.back().second);
    }
    if (log_step || eval_step) log.flush();
    if (log_step) write_metrics(s, eval_step ? std::optional<double>(r.validation.back().second) : std::nullopt);
    if (o.save_every > 0 && step % o.save_every == 0 && step < o.steps) save(step);
  }
  const bool stopped = stopped_by && last_step < o.steps;
  summarize_timing(r, o, step_ms, fwd_ms, bwd_ms, opt_ms);
  r.final_loss = r.steps.empty() ? std::nan("") : r.steps.back().loss;
  if (stopped) {
    r.stopped_by = stopped_by;
    log << fmt::format("Stopped by signal {} after step {}{}\n", r.stopped_by, last_step,
                       saves ? ": writing the checkpoint" : " (no --save: no checkpoint)");
  } else {
    print_summary(log, o, r);
  }
  // The model first: a report that cannot be written (a full disk) must not cost the model.
  if (saves && last_step > resume.step) {
    save(last_step);
    const std::string where = o.save_path.empty() ? step_checkpoint_path(o.save_dir, last_step) : o.save_path;
    log << "Saved checkpoint: " << where << (stopped ? fmt::format(" at step {} (resume with --resume)", last_step) : "")
        << "\n";
  }
  if (!o.json_path.empty() && comm->rank() == 0)
    write_file_atomic(o.json_path, [&](std::ostream& out) { out << result_json(o, r).dump(2) << "\n"; });
  comm->finish();
  return r;
}

}  // namespace tt
