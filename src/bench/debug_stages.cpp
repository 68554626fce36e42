// `tiny_llama debug STAGE` (see debug_stages.h): the narrative of each stage, symptom then fix
// with the measured numbers, around the measurements of the trainer (broken, optimal) and of
// src/bench/debug_gpu.cu (slow and better, the same, optimal); `all` ends with the journey's
// table.
#include "bench/debug_stages.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <tuple>
#include <vector>

namespace tt {

InitStageResult run_init_stage(const TrainOptions& base, std::ostream& log) {
  constexpr double kBrokenStd = 1.0;  // what a framework's default embedding initialisation gives
  auto losses = [&](double init_std) {
    TrainOptions t = base;
    t.init_std = init_std;
    t.timing_warmup = 0;
    t.log_every = t.steps;
    std::ostringstream quiet;
    const TrainResult r = train(t, quiet);
    return std::make_pair(r.steps.front().loss, r.steps.back().loss);
  };
  InitStageResult r;
  r.ln_vocab = std::log(double(base.model.vocab_size));
  log << "== Stage 1, broken: the initialisation ==\n"
      << fmt::format("{} steps of the model (hidden {}, layers {}, vocab {}), batch {} x {}; a uniform guess over the "
                     "vocabulary has loss ln({}) = {:.4f}\n",
                     base.steps, base.model.hidden, base.model.layers, base.model.vocab_size, base.batch, base.seq_len,
                     base.model.vocab_size, r.ln_vocab);
  std::tie(r.broken_first, r.broken_last) = losses(kBrokenStd);
  log << fmt::format("Symptom: weights ~ N(0, {:g}) (tiny_llama train --init-std {:g}): loss at step 1 {:.4f}, at step {} "
                     "{:.4f}, {:.1f}x ln(vocab)\n",
                     kBrokenStd, kBrokenStd, r.broken_first, base.steps, r.broken_last, r.broken_first / r.ln_vocab);
  std::tie(r.fixed_first, r.fixed_last) = losses(kInitStd);
  log << fmt::format("Fix:     weights ~ N(0, {:g}) (the default):               loss at step 1 {:.4f}, at step {} "
                     "{:.4f}, {:+.4f} from ln(vocab)\n",
                     kInitStd, r.fixed_first, base.steps, r.fixed_last, r.fixed_first - r.ln_vocab);
  log << "Lesson: before any training the loss must be ln(vocab): the output head must start near zero logits.\n"
         "With N(0, 1) weights each logit is a sum of hidden-size unit terms, so the model starts confidently\n"
         "wrong and the first steps are spent undoing the initialisation. Check the step-1 loss first.\n\n";
  return r;
}

namespace {

// One row of the journey's table: the stage, what was wrong and what fixed it, the number
// before and after.
struct JourneyRow {
  std::string stage, change, before, after;
};

#ifdef TT_HAVE_CUDA
// Stages 2 and 3 are the two sides of one measurement.
std::vector<JourneyRow> layout_stage(const DebugOptions& o, std::ostream& log) {
  const LayoutTimes t = measure_layout(8192, 8192, o.repeats);
  const double bytes = 2.0 * t.rows * t.cols * 4;  // the input read once, the output written once
  auto gbps = [&](double ms) { return bytes / (ms * 1e-3) / 1e9; };
  const double fixed_ms = t.transpose_ms + t.contiguous_ms;
  log << "== Stages 2 and 3, slow and better: non-contiguous input to a memory-bound kernel, made contiguous ==\n"
      << fmt::format("SiLU over a {} x {} fp32 matrix; GB/s counts its input read once and its output written once "
                     "({:.0f} MB); median of {}\n",
                     t.rows, t.cols, bytes / 1e6, o.repeats)
      << fmt::format("Symptom: the input is a transposed (column-major) view: neighbouring threads read {} floats apart\n",
                     t.rows)
      << fmt::format("  strided input                  {:9.3f} ms {:8.0f} GB/s\n", t.strided_ms, gbps(t.strided_ms))
      << "Fix: transpose once into a contiguous buffer (a tiled transpose through shared memory), then the same kernel\n"
      << fmt::format("  contiguous input               {:9.3f} ms {:8.0f} GB/s\n", t.contiguous_ms, gbps(t.contiguous_ms))
      << fmt::format("  transpose + contiguous input   {:9.3f} ms {:8.0f} GB/s effective ({:.1f}x faster than strided)\n",
                     fixed_ms, gbps(fixed_ms), t.strided_ms / fixed_ms)
      << fmt::format("The strided and contiguous outputs are {}.\n", t.same_result ? "bitwise equal" : "DIFFERENT (a bug)")
      << "Lesson: a kernel written for contiguous rows reads a strided view correctly but slowly: every warp load\n"
         "touches 32 memory sectors instead of 4. Make the input contiguous once, then run the fast kernel.\n\n";
  if (!t.same_result) fail("debug slow/better: the strided and contiguous results differ");
  return {{"2 slow", "SiLU reads a transposed view", fmt::format("{:.0f} GB/s", gbps(t.strided_ms)), ""},
          {"3 better", "transposed once, then contiguous", "", fmt::format("{:.0f} GB/s", gbps(fixed_ms))}};
}

JourneyRow sync_stage(const DebugOptions& o, std::ostream& log) {
  const SyncTimes t = measure_sync(4096, 10, o.repeats);
  const double flops = 2.0 * t.gemms * std::pow(double(t.size), 3);
  auto tflops = [&](double ms) { return flops / (ms * 1e-3) / 1e12; };
  log << "== Stage 4, the same: timing with synchronization shows what the fast number hid ==\n"
      << fmt::format("{} fp32 GEMMs of {}^3 (cuBLAS) on a stream, median of {}\n", t.gemms, t.size, o.repeats)
      << fmt::format("Symptom: host clock around the launches only   {:9.3f} ms  (would claim {:.1f} TFLOP/s)\n",
                     t.no_sync_ms, tflops(t.no_sync_ms))
      << fmt::format("Fix:     host clock + cudaStreamSynchronize    {:9.3f} ms  ({:.1f} TFLOP/s)\n", t.host_sync_ms,
                     tflops(t.host_sync_ms))
      << fmt::format("         CUDA events recorded on the stream     {:9.3f} ms  ({:.1f} TFLOP/s)\n", t.events_ms,
                     tflops(t.events_ms))
      << fmt::format("The unsynchronized time is {:.0f}x too short.\n", t.events_ms / t.no_sync_ms)
      << "Lesson: launches return before the GPU has done the work. Time GPU work with events on its stream (or\n"
         "synchronize before reading the clock), after a warm-up, and report the median of several repetitions.\n\n";
  return {"4 the same", "host clock without sync -> CUDA events", fmt::format("{:.3f} ms", t.no_sync_ms),
          fmt::format("{:.3f} ms", t.events_ms)};
}

std::vector<JourneyRow> optimal_stage(const DebugOptions& o, std::ostream& log) {
  const int tokens = o.train.batch * o.train.seq_len;
  struct Case {
    int m, n, k;
    std::string what;
  };
  const Case cases[] = {
      {tokens, o.train.model.intermediate, o.train.model.hidden, "FFN up projection"},
      {4096, 4096, 4096, "square"},
  };
  log << "== Stage 5, optimal: library products where they belong, our kernels where they win ==\n"
      << fmt::format("C[M, N] = A[M, K] B[K, N], fp32 inputs (bf16 for the tensor-core row), fp32 output; median of {}; "
                     "error: max |C - C_cuBLAS_fp32| / max |C_cuBLAS_fp32|\n",
                     o.repeats)
      << fmt::format("{:<40}{:<28}{:>10}{:>10}{:>16}{:>12}\n", "shape", "kernel", "ms", "TFLOP/s", "vs cuBLAS fp32",
                     "error");
  std::vector<JourneyRow> rows;
  for (const Case& c : cases) {
    const GemmTimes t = measure_gemm(c.m, c.n, c.k, o.repeats);
    const double flops = 2.0 * t.m * double(t.n) * t.k;
    const std::string shape = fmt::format("{} x {} -> {} ({})", t.m, t.k, t.n, c.what);
    auto row = [&](const std::string& label, const char* kernel, double ms, const std::string& error) {
      log << fmt::format("{:<40}{:<28}{:>10.3f}{:>10.2f}{:>15.2f}x{:>12}\n", label, kernel, ms,
                         flops / (ms * 1e-3) / 1e12, t.cublas_fp32_ms / ms, error);
    };
    row(shape, "naive (thread per output)", t.naive_ms, fmt::format("{:.1e}", t.naive_error));
    row("", "tiled (shared memory)", t.tiled_ms, fmt::format("{:.1e}", t.tiled_error));
    row("", "cuBLAS fp32", t.cublas_fp32_ms, "reference");
    row("", "cuBLAS bf16 (tensor cores)", t.cublas_bf16_ms, fmt::format("{:.1e}", t.bf16_error));
    if (t.naive_error > 1e-4 || t.tiled_error > 1e-4)
      fail(fmt::format("debug optimal: a hand-written kernel disagrees with cuBLAS at {} (errors {:.1e}, {:.1e})", shape,
                       t.naive_error, t.tiled_error));
    if (rows.empty())
      rows.push_back({"5 optimal", fmt::format("the FFN product: tiled kernel -> cuBLAS bf16"),
                      fmt::format("{:.1f} TFLOP/s", flops / (t.tiled_ms * 1e-3) / 1e12),
                      fmt::format("{:.1f} TFLOP/s", flops / (t.cublas_bf16_ms * 1e-3) / 1e12)});
  }
  // The whole training step: v1 (one kernel per operation, fp32) against the latest version (bf16,
  // fused, our kernels; FP8 where its rule says it pays).
  auto speed = [&](int version, bool amp) {
    TrainOptions t = o.train;
    t.backend.device = DeviceKind::Cuda;
    t.backend.plan = plan_for_version(version);
    t.backend.plan.amp = amp;
    t.steps = std::max<int64_t>(t.steps, 20);
    t.timing_warmup = 5;
    t.log_every = t.steps;
    std::ostringstream quiet;
    const TrainResult r = train(t, quiet);
    return std::make_pair(r.samples_per_sec, r.final_loss);
  };
  const auto [v1, v1_loss] = speed(1, false);
  const auto [latest, latest_loss] = speed(kLatestVersion, true);
  log << fmt::format("The training step, batch {} x {}: v1 fp32 {:.0f} samples/s (loss {:.4f}), v{} bf16 {:.0f} "
                     "samples/s (loss {:.4f}): {:.1f}x\n",
                     o.train.batch, o.train.seq_len, v1, v1_loss, kLatestVersion, latest, latest_loss, latest / v1);
  rows.push_back({"5 optimal", fmt::format("the training step: v1 fp32 -> v{} bf16", kLatestVersion),
                  fmt::format("{:.0f} samples/s", v1), fmt::format("{:.0f} samples/s", latest)});
  log << "Lesson: a correct hand-written GEMM is easy and slow. Shared-memory tiling helps, but cuBLAS uses the\n"
         "tensor cores, asynchronous copies and years of tuning: products belong to the library, and our own\n"
         "kernels belong where the library has nothing fused to offer (norms, activations, attention, and products\n"
         "with those in their epilogues).\n\n";
  return rows;
}
#endif

}  // namespace

void run_debug(const DebugOptions& o, std::ostream& log) {
  const std::vector<std::string> stages = {"broken", "slow", "better", "same", "optimal"};
  const std::string names = "broken, slow, better, same, optimal or all";
  if (o.stage.empty()) usage_fail("debug: name a stage: " + names + " (see --help)");
  if (o.stage != "all" && std::find(stages.begin(), stages.end(), o.stage) == stages.end())
    usage_fail("debug: unknown stage '" + o.stage + "' (stages: " + names + ")");
  if (o.repeats <= 0) usage_fail("--repeats: must be a positive integer (got " + std::to_string(o.repeats) + ")");
  o.train.validate();
  std::string why;
  const bool gpu = cuda_available(&why);
  if (o.stage != "all" && o.stage != "broken" && !gpu)
    usage_fail("debug " + o.stage + ": this stage needs a CUDA GPU (" + why + "); the broken stage runs on the CPU");
  std::vector<JourneyRow> journey;
  [[maybe_unused]] bool layout_done = false;  // read by the GPU stages (a CUDA build)
  for (const std::string& stage : stages) {
    if (o.stage != "all" && o.stage != stage) continue;
    if (stage == "broken") {
      const InitStageResult r = run_init_stage(o.train, log);
      journey.push_back({"1 broken", "weights N(0, 1) -> N(0, 0.02): the loss at step 1",
                         fmt::format("{:.2f} ({:.0f}x ln V)", r.broken_first, r.broken_first / r.ln_vocab),
                         fmt::format("{:.4f} (ln V = {:.4f})", r.fixed_first, r.ln_vocab)});
      continue;
    }
    if (!gpu) {
      log << "== Stage " << stage << ": needs a CUDA GPU (" << why << "): skipped ==\n";
      continue;
    }
#ifdef TT_HAVE_CUDA
    if ((stage == "slow" || stage == "better") && !layout_done) {
      for (const JourneyRow& r : layout_stage(o, log)) journey.push_back(r);
      layout_done = true;
    }
    if (stage == "same") journey.push_back(sync_stage(o, log));
    if (stage == "optimal")
      for (const JourneyRow& r : optimal_stage(o, log)) journey.push_back(r);
#endif
  }
  if (o.stage != "all") return;
  log << "== The journey ==\n| stage | change | before | after |\n|---|---|---|---|\n";
  for (const JourneyRow& r : journey) log << fmt::format("| {} | {} | {} | {} |\n", r.stage, r.change, r.before, r.after);
}

}  // namespace tt
