#include "train/report.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <tuple>

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "core/arena.h"
#include "core/files.h"
#include "train/train_flags.h"

namespace tt {

using json = nlohmann::json;

size_t MemoryReport::total() const {
  size_t t = 0;
  for (size_t b : bytes) t += b;
  return t;
}

size_t MemoryReport::total_padding() const {
  size_t t = 0;
  for (size_t b : padding) t += b;
  return t;
}

std::string format_mb(size_t bytes) { return fmt::format("{:.1f} MB", double(bytes) / 1e6); }

std::string format_duration(double seconds) {
  const int64_t s = int64_t(std::llround(std::max(0.0, seconds)));
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}h{:02}m", s / 3600, s % 3600 / 60);
}

std::string step_line(const TrainOptions& o, const StepRecord& s, const MemoryReport& m, int world_size) {
  // Peak: all the run reserved (the arena, at start: the most it holds at any point of a step).
  // Live: what holds values from one step to the next (weights, gradients, optimizer state), as
  // the original's allocated memory between steps; activations and scratch are rewritten by
  // every step.
  const size_t live = m.bytes[int(Category::Parameters)] + m.bytes[int(Category::Gradients)] +
                      m.bytes[int(Category::OptimizerState)];
  const double samples = double(o.step_sequences(world_size)) / (s.step_ms / 1e3);
  return fmt::format("Step {:>3}/{} | Loss: {:.4f} | Speed: {:.1f} samples/sec, {:.0f} tokens/sec | Peak: {} | Live: {} | "
                     "Time: {:.1f}ms",
                     s.step, o.steps, s.loss, samples, samples * o.seq_len, format_mb(m.total()), format_mb(live), s.step_ms);
}

void print_summary(std::ostream& log, const TrainOptions& o, const TrainResult& r) {
  log << "\n=== Performance Summary ===\n";
  log << fmt::format("Device: {} | backend: {} | plan: {}\n", r.device, r.backend, r.plan);
  log << fmt::format("Attention: {}\n", r.attention);
  log << fmt::format("Total samples: {}\n", int64_t(r.steps.size()) * o.step_sequences(r.world_size));
  if (r.timed_steps == 0) {
    log << fmt::format("Timing: none (all {} steps were warm-up; raise --num-steps above --timing-warmup-steps {})\n",
                       r.steps.size(), o.timing_warmup);
  } else {
    log << fmt::format("Average samples/sec: {:.1f}\n", r.samples_per_sec);
    log << fmt::format("Average tokens/sec: {:.0f}\n", r.tokens_per_sec);
    if (r.world_size > 1)
      log << fmt::format("Per GPU or rank: {:.0f} tokens/sec ({} ranks)\n", r.tokens_per_sec / r.world_size, r.world_size);
    log << fmt::format("Average batch time: {:.2f} ms (median {:.2f} ms, {} timed steps after {} warm-up)\n",
                       r.step_ms, r.step_ms_median, r.timed_steps, int64_t(r.steps.size()) - r.timed_steps);
    const std::string each = o.grad_accum > 1 ? " (a micro-batch's: the last of the step's)" : "";
    if (o.grad_accum > 1)
      log << fmt::format("Average time of the micro-batches before the last: {:.2f} ms ({} of them, forward and "
                         "backward)\n", r.earlier_ms, o.grad_accum - 1);
    log << fmt::format("Average forward time: {:.2f} ms{}\n", r.forward_ms, each);
    log << fmt::format("Average backward time: {:.2f} ms{}\n", r.backward_ms, each);
    log << fmt::format("Average optimizer time: {:.2f} ms\n", r.optimizer_ms);
    log << fmt::format("Achieved: {:.3f} TFLOP/s ({:.1f} GFLOP per step, docs/profiling.md has the formula)\n",
                       r.tflops, r.flops_per_step / 1e9);
  }
  log << fmt::format("Final loss: {:.4f}\n", r.final_loss);
  if (!r.validation.empty())
    log << fmt::format("Final validation loss: {:.4f}\n", r.validation.back().second);
  log << fmt::format("Peak memory: {}\n", format_mb(r.memory.total()));
  for (int c = 0; c < kNumCategories; ++c)
    log << fmt::format("  {:<16} {:>10}{}\n", category_name(Category(c)), format_mb(r.memory.bytes[c]),
                       r.memory.padding[c] ? " (" + format_mb(r.memory.padding[c]) + " of it vocabulary padding)" : "");
}

void print_profile(std::ostream& log, const TraceData& t, const std::vector<HotspotRow>& hot,
                   const std::vector<double>& step_ms) {
  const std::vector<int64_t> launches = launches_per_step(t);
  const std::vector<StepAccount> accounts = step_accounts(t);
  log << fmt::format("Kernel launches per profiled step: {}\n", fmt::join(launches, ", "));
  log << "Where each profiled step's time went (ms): from its first kernel to its last = some stream running +\n"
         "none; the kernels' own times (more: streams run side by side), the optimizer alone (AdamW's exposed\n"
         "part), and the step as its events measured it:\n";
  for (size_t i = 0; i < accounts.size(); ++i) {
    const StepAccount& a = accounts[i];
    log << fmt::format("  {:.3f} = {:.3f} busy + {:.3f} idle; kernels {:.3f} ({:.3f} side by side); optimizer alone {:.3f}",
                       a.window_us / 1e3, a.busy_us / 1e3, a.idle_us / 1e3, a.kernel_us / 1e3, a.concurrent_us / 1e3,
                       a.optimizer_alone_us / 1e3);
    if (i < step_ms.size()) log << fmt::format("; measured {:.3f}", step_ms[i]);
    log << "\n";
  }
  const bool waves = std::any_of(hot.begin(), hot.end(), [](const HotspotRow& h) { return h.waves > 0; });
  log << "Top 10 kernels by GPU time:\n";
  log << fmt::format("  {:>6} {:>10} {:>7} {:>9}{}  {}\n", "share", "total ms", "calls", "mean us",
                     waves ? fmt::format("{:>7}", "waves") : "", "kernel");
  for (size_t i = 0; i < hot.size() && i < 10; ++i)
    log << fmt::format("  {:>5.1f}% {:>10.3f} {:>7} {:>9.2f}{}  {}\n", 100 * hot[i].share, hot[i].total_us / 1e3,
                       hot[i].calls, hot[i].mean_us, waves ? fmt::format("{:>7.2f}", hot[i].waves) : "",
                       hot[i].name.substr(0, 90));
}

void print_waves(std::ostream& log, const TraceData& t, const SmLimits& sm) {
  if (sm.sms <= 0) return;
  const WaveAccount w = wave_account(t, sm);
  const double total = w.under_one_us + w.one_to_two_us + w.two_or_more_us;
  log << fmt::format("Waves (a kernel's blocks over what the {} SMs hold at once, docs/profiling.md), kernel time a step:\n",
                     sm.sms);
  log << fmt::format("  under one wave {:.3f} ms, one to two {:.3f}, two or more {:.3f}; what partial last waves leave "
                     "idle: {:.3f} ms of the {:.3f} ({:.1f}%)\n",
                     w.under_one_us / 1e3, w.one_to_two_us / 1e3, w.two_or_more_us / 1e3, w.partial_wave_idle_us / 1e3,
                     total / 1e3, total > 0 ? 100 * w.partial_wave_idle_us / total : 0.0);
}

bool print_families(std::ostream& log, const TraceData& t, const StepWork& work, const Ceilings& c,
                    double measured_ms) {
  const std::vector<FamilyRow> rows = kernel_families(t);
  const bool fp8 = std::any_of(rows.begin(), rows.end(), [](const FamilyRow& r) { return r.family == "FP8 products"; });
  const bool fused_attention = has_fused_attention(t);
  const double steps = std::max(t.steps, 1);
  double total_us = 0, copied = 0;
  for (const FamilyRow& r : rows) total_us += r.total_us;
  for (const TraceRecord& r : t.records) copied += double(r.bytes) / steps;  // the copies' and fills' bytes
  log << "Kernel time by family (ms a step, every stream; work: FLOPs by the formula, bytes by the least each family\n"
         "moves, docs/profiling.md; the rate against the ceilings measured in this run, and the datasheet's):\n";
  if (c.gemm > 0)
    log << fmt::format("  measured: a {} product {:.1f} TFLOP/s, an FP8 product {:.1f}, an HBM copy {:.1f} GB/s, an "
                       "L2-resident copy {}\n", c.precision, c.gemm / 1e12, c.fp8_gemm / 1e12, c.hbm_copy / 1e9,
                       c.l2_copy > 0 ? fmt::format("{:.1f}", c.l2_copy / 1e9) : std::string("not measured"));
  log << fmt::format("  {:<18}{:>9}{:>8}{:>11}{:>15}  {}\n", "family", "ms", "share", "work", "rate", "of the ceiling");
  bool within = true;
  const double head_fp8 = work.head_fp8 ? work.head_products : 0;  // the head's work where it ran in FP8
  for (const FamilyRow& r : rows) {
    const double ms = r.total_us / steps / 1e3;
    log << fmt::format("  {:<18}{:>9.3f}{:>7.1f}%", r.family, ms, total_us > 0 ? 100 * r.total_us / total_us : 0.0);
    double flops = 0, bytes = 0;
    if (r.family == "FP8 products") flops = work.layer_products + head_fp8;
    if (r.family == "products")
      flops = work.head_products - head_fp8 + (fp8 ? 0 : work.layer_products) + (fused_attention ? 0 : work.attention);
    if (r.family == "attention" && fused_attention) flops = work.attention;
    if (const auto b = work.bytes.find(r.family); b != work.bytes.end()) bytes = b->second;
    if (r.family == "copies and fills") bytes = copied;
    if (flops > 0 && ms > 0) {
      const bool in_fp8 = r.family == "FP8 products";
      const double rate = flops / (ms * 1e-3), measured = in_fp8 ? c.fp8_gemm : c.gemm, peak = in_fp8 ? c.fp8_peak : c.peak;
      const std::string name = in_fp8 ? "fp8" : c.precision;
      log << fmt::format("{:>8.3f} TF{:>9.1f} TF/s", flops / 1e12, rate / 1e12);
      if (measured > 0) log << fmt::format("  {:.1f}% of the measured {} product's {:.1f}", 100 * rate / measured, name, measured / 1e12);
      if (peak > 0) log << fmt::format("{}{:.1f}% of {}'s peak {:.1f}", measured > 0 ? ", " : "  ", 100 * rate / peak, name, peak / 1e12);
      if (peak > 0 && rate > peak) {
        within = false;
        log << fmt::format("\n  error in the profile: {} at {:.1f} TFLOP/s is above the {} peak of {:.1f}: kernels are booked "
                           "wrong", r.family, rate / 1e12, name, peak / 1e12);
      }
    } else if (bytes > 0 && ms > 0) {
      const double rate = bytes / (ms * 1e-3);
      log << fmt::format("{:>8.3f} GB{:>9.1f} GB/s", bytes / 1e9, rate / 1e9);
      if (c.hbm_copy > 0) log << fmt::format("  {:.1f}% of an HBM copy's {:.1f}", 100 * rate / c.hbm_copy, c.hbm_copy / 1e9);
      if (c.hbm_copy > 0 && rate > c.hbm_copy)
        log << fmt::format(" (its data in L2 in part: an L2 copy {:.1f})", c.l2_copy / 1e9);
      if (c.l2_copy > 0 && rate > c.l2_copy) {
        within = false;
        log << fmt::format("\n  error in the profile: {} at {:.1f} GB/s is above an L2-resident copy's {:.1f}: its bytes are "
                           "counted wrong, or kernels booked wrong", r.family, rate / 1e9, c.l2_copy / 1e9);
      }
    }
    log << "\n";
  }
  // The rows add up to the kernels' and copies' time on every stream; the step is that, less the
  // memory copies (paced by the host, outside the steps' accounts), less the time streams ran
  // side by side, plus the time none ran, plus the step's time before its first kernel and after
  // its last (the graph's launch, the batch's upload, the loss's read).
  // The memory copies are what the rows hold beyond the accounts' kernel time.
  StepAccount mean;
  const std::vector<StepAccount> accounts = step_accounts(t);
  for (const StepAccount& a : accounts)
    mean.window_us += a.window_us / double(accounts.size()), mean.idle_us += a.idle_us / double(accounts.size()),
        mean.concurrent_us += a.concurrent_us / double(accounts.size()),
        mean.kernel_us += a.kernel_us / double(accounts.size());
  if (!accounts.empty() && measured_ms > 0)
    log << fmt::format("  the rows {:.3f} - memory copies {:.3f} - side by side {:.3f} + idle {:.3f} + outside the kernels "
                       "{:.3f} = {:.3f} ms, the profiled steps' mean as their events measured it\n",
                       total_us / steps / 1e3, (total_us / steps - mean.kernel_us) / 1e3, mean.concurrent_us / 1e3,
                       mean.idle_us / 1e3, measured_ms - mean.window_us / 1e3, measured_ms);
  return within;
}

bool print_flops_profile(std::ostream& log, const std::vector<ModuleFlops>& modules, double step_ms, double peak,
                         const std::string& precision, double product_peak) {
  log << "FLOP profile per module (per step; FLOPs from the formula in docs/profiling.md, time from the kernel trace):\n";
  log << fmt::format("  {:<15}{:>12}{:>11}{:>11}{:>9}{:>9}{:>10}{:>10}{:>8}\n", "module", "params", "fwd GFLOP",
                     "bwd GFLOP", "fwd ms", "bwd ms", "fwd TF/s", "bwd TF/s", "share");
  double flops = 0;
  for (const ModuleFlops& m : modules) {
    auto rate = [](double f, double us) { return us > 0 ? f / (us * 1e-6) / 1e12 : 0.0; };
    log << fmt::format("  {:<15}{:>12}{:>11.2f}{:>11.2f}{:>9.3f}{:>9.3f}{:>10.1f}{:>10.1f}{:>7.1f}%\n", m.module,
                       m.params, m.forward_flops / 1e9, m.backward_flops / 1e9, m.forward_us / 1e3,
                       m.backward_us / 1e3, rate(m.forward_flops, m.forward_us), rate(m.backward_flops, m.backward_us),
                       100 * (m.forward_us + m.backward_us) / 1e3 / step_ms);
    flops += m.forward_flops + m.backward_flops;
  }
  // No module runs faster than the hardware: one that does has kernels of others booked to it.
  bool within = true;
  for (const ModuleFlops& m : modules) {
    const double ceiling = m.module == "attention" || m.module == "ffn" || m.module == "head_loss" ? product_peak : peak;
    for (const auto& [f, us, pass] : {std::tuple{m.forward_flops, m.forward_us, "forward"},
                                      std::tuple{m.backward_flops, m.backward_us, "backward"}}) {
      const double rate = us > 0 ? f / (us * 1e-6) : 0;
      if (ceiling > 0 && rate > ceiling) {
        within = false;
        log << fmt::format("  error in the profile: {} {} at {:.1f} TFLOP/s is above its ceiling of {:.1f}: kernels of "
                           "other modules are booked to it\n",
                           m.module, pass, rate / 1e12, ceiling / 1e12);
      }
    }
  }
  const double achieved = flops / (step_ms * 1e-3);
  if (peak > 0)
    log << fmt::format("Model FLOPs utilization: {:.2f} TFLOP/s of the {} peak {:.1f} TFLOP/s = {:.1f}% MFU\n",
                       achieved / 1e12, precision, peak / 1e12, 100 * achieved / peak);
  else
    log << fmt::format("Model FLOPs: {:.2f} TFLOP/s ({} peak of this GPU unknown: no MFU)\n", achieved / 1e12, precision);
  return within;
}

json result_json(const TrainOptions& o, const TrainResult& r) {
  json steps = json::array(), val = json::array(), mem = json::object();
  const int64_t step_tokens = o.step_sequences(r.world_size) * o.seq_len;
  for (const StepRecord& s : r.steps)
    steps.push_back({{"step", s.step}, {"tokens", s.step * step_tokens}, {"loss", s.loss}, {"lr", s.lr},
                     {"grad_norm", std::isfinite(s.grad_norm) ? json(s.grad_norm) : json()}, {"ms", s.step_ms},
                     {"tokens_per_sec", double(step_tokens) / (s.step_ms / 1e3)}, {"forward_ms", s.forward_ms},
                     {"backward_ms", s.backward_ms}, {"optimizer_ms", s.optimizer_ms},
                     {"earlier_micro_batches_ms", s.earlier_ms}});
  // The run's settings: the flag table's agreed rows beyond the model's (in "model").
  json training = {{"data", r.data}};
  for (const TrainFlag* f : train_flags_with(kAgreed))
    if (f->group != FlagGroup::Model || f->name() == "--seed") training[f->key()] = f->value(o);
  for (const auto& [step, loss] : r.validation) val.push_back({{"step", step}, {"loss", loss}});
  json padding = json::object();
  for (int c = 0; c < kNumCategories; ++c) {
    mem[category_name(Category(c))] = r.memory.bytes[c];
    padding[category_name(Category(c))] = r.memory.padding[c];
  }
  auto timed = [&](double v) { return r.timed_steps ? json(v) : json(nullptr); };
  return {
      {"model", o.model.to_json()},
      {"parameters", o.model.param_count()},
      {"padded_vocab", r.padded_vocab},
      {"classifier_chunk", r.classifier_chunk},
      {"training", training},
      {"device", r.device},
      {"backend", r.backend},
      {"plan", r.plan},
      {"attention", r.attention},
      {"products", r.products},
      {"steps", steps},
      {"validation", val},
      {"launches_per_step", r.launches_per_step},
      {"summary",
       {{"total_samples", int64_t(r.steps.size()) * o.step_sequences(r.world_size)},
        {"world_size", r.world_size},
        {"timed_steps", r.timed_steps},
        {"samples_per_sec", timed(r.samples_per_sec)},
        {"tokens_per_sec", timed(r.tokens_per_sec)},
        {"step_ms", timed(r.step_ms)},
        {"step_ms_median", timed(r.step_ms_median)},
        {"forward_ms", timed(r.forward_ms)},
        {"backward_ms", timed(r.backward_ms)},
        {"optimizer_ms", timed(r.optimizer_ms)},
        {"flops_per_step", r.flops_per_step},
        {"tflops", timed(r.tflops)},
        {"final_loss", r.final_loss},
        {"peak_memory_bytes", r.memory.total()},
        {"memory_bytes", mem},
        {"vocab_padding_bytes", padding}}},
  };
}

// Where the run's checkpoints go, or that none is written.
std::string checkpoints_note(const TrainOptions& o) {
  std::string where;
  if (!o.save_dir.empty())
    where = fmt::format("step files in {}{}", o.save_dir,
                        o.keep_last > 0 ? fmt::format(" (this run's newest {} kept)", o.keep_last) : "");
  if (!o.save_path.empty()) where += (where.empty() ? "" : " and ") + o.save_path;
  if (where.empty()) return "none (no --save or --save-dir: this run saves nothing)";
  return (o.save_every > 0 ? fmt::format("every {} steps and at the end, ", o.save_every) : "at the end, ") + where;
}

// The OpenMP threads of the CPU backend and how they wait (src/cli/main.cpp chooses passive).
std::string cpu_threads_note() {
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  if (!policy) return fmt::format("{}, waiting as the OpenMP runtime does by default", omp_get_max_threads());
  return fmt::format("{}, OMP_WAIT_POLICY={}{}", omp_get_max_threads(), policy,
                     std::getenv("TT_WAIT_POLICY_CHOSEN") ? " (chosen for you: spinning threads slow down a busy "
                                                            "machine; set OMP_WAIT_POLICY to choose)"
                                                          : "");
}

// The precision of the products, as peak_flops names it.
std::string precision_name(const Plan& plan) { return plan.amp ? "bf16" : plan.tf32 ? "tf32" : "fp32"; }

// The run's header: the model, backend, data, recipe, memory, checkpoints and where it starts.
void print_header(std::ostream& log, const HeaderFacts& h) {
  const TrainOptions& o = h.options;
  const TrainResult& r = h.result;
  const Backend& backend = h.backend;
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
  if (!backend.is_cuda()) log << "CPU threads: " << cpu_threads_note() << "\n";
  log << fmt::format("Attention: {}\n", r.attention);
  if (!r.products.empty()) log << fmt::format("Products: {}\n", r.products);
  log << fmt::format("Data: {}\n", r.data);
  if (!h.tokenizer.empty())
    log << "Tokenizer: " << h.tokenizer
        << (o.save_path.empty() && o.save_dir.empty() ? "" : ", stored in the checkpoints") << "\n";
  log << fmt::format("Batch {} x {} tokens, steps {}..{}, lr {}, weight decay {:g}, seed {}\n", o.batch, o.seq_len,
                     h.resume.step + 1, o.steps, constant_lr ? fmt::format("{:g}", o.learning_rate) : schedule.describe(),
                     o.weight_decay, o.seed);
  const int64_t step_tokens = o.step_sequences(r.world_size) * o.seq_len;
  log << fmt::format("Tokens: {} a step{}, {} by step {}\n", step_tokens, r.world_size > 1 ? " over all processes" : "",
                     step_tokens * o.steps, o.steps);
  if (o.grad_accum > 1)
    log << fmt::format("Gradient accumulation: {} micro-batches of {} a step, {} sequences per update{}\n", o.grad_accum,
                       o.batch, o.step_sequences(r.world_size), r.world_size == 1 ? "" : " over all processes");
  if (const std::string settings = settings_line(o); !settings.empty()) log << "Settings: " << settings << "\n";
  log << fmt::format("Memory: {} reserved at start\n", format_mb(r.memory.total()));
  if (h.data_parallel)
    log << fmt::format("Data parallel: {} processes ({}, {}), ZeRO-{}, gradients summed in {}: batch {} per process, {} in "
                       "all\n", r.world_size, h.launcher, h.communicator, o.zero, dtype_name(h.reduce_dtype), o.batch,
                       o.batch * r.world_size);
  if (r.padded_vocab != m.vocab_size)
    log << fmt::format("Output head: {} rows, the vocabulary padded to a multiple of {} for aligned products "
                       "(zero rows, not counted as parameters or FLOPs; {} of the memory)\n",
                       r.padded_vocab, backend.vocab_padding_multiple(), format_mb(r.memory.total_padding()));
  if (backend.plan().fused_classifier && backend.is_cuda())
    log << fmt::format("Fused classifier: {} tokens per chunk ({} of logits)\n", r.classifier_chunk,
                       format_mb(size_t(r.classifier_chunk) * size_t(r.padded_vocab) * dtype_size(backend.act_dtype())));
  log << "Checkpoints: " << checkpoints_note(o) << "\n";
  if (!o.metrics_path.empty())
    log << "Metrics: " << o.metrics_path << (h.resume.step > 0 ? fmt::format(" (after step {})", h.resume.step) : "") << "\n";
  if (!o.resume_path.empty()) {
    log << fmt::format("Resumed from {} at step {}\n", o.resume_path, h.resume.step);
    if (const std::string changed = changed_settings(h.resume.recipe, o); !changed.empty())
      log << "Resuming with changed settings: " << changed << "\n";
  }
  if (!o.init_from.empty()) log << fmt::format("Initialized from {}\n", o.init_from);
}

void report_profile(std::ostream& log, const TrainOptions& o, TrainResult& r, const TraceData& t,
                    const std::string& device) {
  r.launches_per_step = launches_per_step(t);
  const std::vector<HotspotRow> hot = hotspots(t, r.sm);
  const std::vector<RegionRow> regions = region_times(t);
  if (!o.profile_dir.empty()) {
    const std::filesystem::path dir(o.profile_dir);
    write_file_atomic((dir / "trace.json").string(), [&](std::ostream& out) { write_chrome_trace(out, t); });
    write_file_atomic((dir / "kernels.csv").string(), [&](std::ostream& out) { write_kernels_csv(out, hot); });
    write_file_atomic((dir / "regions.csv").string(), [&](std::ostream& out) { write_regions_csv(out, regions); });
    log << fmt::format("Profile of {} steps written to {}: trace.json, kernels.csv, regions.csv\n", t.steps, o.profile_dir);
  }
  std::vector<double> step_ms;  // the profiled steps: the last ones
  for (size_t i = r.steps.size() - std::min(r.steps.size(), size_t(t.steps)); i < r.steps.size(); ++i)
    step_ms.push_back(r.steps[i].step_ms);
  print_profile(log, t, hot, step_ms);
  print_waves(log, t, r.sm);
  const std::string precision = precision_name(o.backend.plan);
  const double peak = peak_flops(device, precision), fp8_peak = peak_flops(device, "fp8");
  StepWork work = step_work(o.model, o.step_sequences(1), o.seq_len);
  work.head_fp8 = r.head_fp8;
  work.bytes = r.family_bytes;
  Ceilings ceilings = r.ceilings;
  ceilings.peak = peak, ceilings.fp8_peak = fp8_peak;
  double measured_ms = 0;
  for (double ms : step_ms) measured_ms += ms / double(step_ms.size());
  print_families(log, t, work, ceilings, measured_ms);
  if (o.flops_profile) {
    std::vector<ModuleFlops> modules = module_flops(o.model, o.step_sequences(1), o.seq_len);  // this rank's step
    add_measured_times(modules, t);
    print_flops_profile(log, modules, r.steps.back().step_ms, peak, precision, o.backend.plan.fp8 ? fp8_peak : peak);
  }
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

}  // namespace tt
