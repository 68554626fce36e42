#include "train/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/arena.h"

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
  return fmt::format("Step {:>3}/{} | Loss: {:.4f} | Speed: {:.1f} samples/sec | Peak: {} | Live: {} | Time: {:.1f}ms",
                     s.step, o.steps, s.loss, double(o.step_sequences(world_size)) / (s.step_ms / 1e3), format_mb(m.total()),
                     format_mb(live), s.step_ms);
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
    log << fmt::format("Average forward time: {:.2f} ms\n", r.forward_ms);
    log << fmt::format("Average backward time: {:.2f} ms\n", r.backward_ms);
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

void print_profile(std::ostream& log, const TraceData& t, const std::vector<HotspotRow>& hot) {
  const std::vector<int64_t> launches = launches_per_step(t);
  const std::vector<double> busy = busy_us_per_step(t);
  std::string per_step;
  for (size_t i = 0; i < launches.size(); ++i)
    per_step += fmt::format("{}{} ({:.2f} ms busy)", i ? ", " : "", launches[i], busy[i] / 1e3);
  log << fmt::format("Kernel launches per profiled step: {}\n", per_step);
  log << "Top 10 kernels by GPU time:\n";
  log << fmt::format("  {:>6} {:>10} {:>7} {:>9}  {}\n", "share", "total ms", "calls", "mean us", "kernel");
  for (size_t i = 0; i < hot.size() && i < 10; ++i)
    log << fmt::format("  {:>5.1f}% {:>10.3f} {:>7} {:>9.2f}  {}\n", 100 * hot[i].share, hot[i].total_us / 1e3,
                       hot[i].calls, hot[i].mean_us, hot[i].name.substr(0, 90));
}

void print_flops_profile(std::ostream& log, const std::vector<ModuleFlops>& modules, double step_ms, double peak,
                         const std::string& precision) {
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
  const double achieved = flops / (step_ms * 1e-3);
  if (peak > 0)
    log << fmt::format("Model FLOPs utilization: {:.2f} TFLOP/s of the {} peak {:.1f} TFLOP/s = {:.1f}% MFU\n",
                       achieved / 1e12, precision, peak / 1e12, 100 * achieved / peak);
  else
    log << fmt::format("Model FLOPs: {:.2f} TFLOP/s ({} peak of this GPU unknown: no MFU)\n", achieved / 1e12, precision);
}

json result_json(const TrainOptions& o, const TrainResult& r) {
  json steps = json::array(), val = json::array(), mem = json::object();
  for (const StepRecord& s : r.steps)
    steps.push_back({{"step", s.step}, {"loss", s.loss}, {"lr", s.lr}, {"ms", s.step_ms}, {"forward_ms", s.forward_ms},
                     {"backward_ms", s.backward_ms}, {"optimizer_ms", s.optimizer_ms}});
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
      {"training", {{"batch_size", o.batch}, {"grad_accum_steps", o.grad_accum}, {"seq_len", o.seq_len}, {"num_steps", o.steps},
                    {"learning_rate", o.learning_rate}, {"weight_decay", o.weight_decay}, {"seed", o.seed},
                    {"timing_warmup_steps", o.timing_warmup}, {"data", r.data}}},
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

}  // namespace tt
