#include "bench/bench.h"

#include <fmt/format.h>

#include <map>
#include <tuple>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/files.h"
#include "core/json_input.h"
#include "model/llama.h"
#include "train/flops.h"

namespace tt {

using json = nlohmann::json;

constexpr size_t kMaxReportBytes = size_t(256) << 20;  // a --baseline or --pytorch file: a few kilobytes in practice

RepetitionStats repetition_stats(const std::vector<double>& values, int per) {
  std::vector<double> means;
  for (size_t i = 0; i + size_t(per) <= values.size(); i += size_t(per)) {
    double s = 0;
    for (int k = 0; k < per; ++k) s += values[i + size_t(k)];
    means.push_back(s / per);
  }
  if (means.empty()) return {};
  const auto [lo, hi] = std::minmax_element(means.begin(), means.end());
  return {median(means), *lo, *hi};
}

std::vector<Regression> find_regressions(const std::vector<BenchPoint>& current, const std::vector<BenchPoint>& baseline,
                                         double min_speedup) {
  std::vector<Regression> out;
  for (const BenchPoint& c : current) {
    if (c.status != "ok") continue;
    for (const BenchPoint& b : baseline)
      if (b.status == "ok" && b.version == c.version && b.batch == c.batch && b.seq_len == c.seq_len &&
          b.precision == c.precision) {
        const double speedup = b.ms_median / c.ms_median;
        if (speedup < min_speedup) out.push_back({c, b.ms_median, speedup});
      }
  }
  return out;
}

static json point_json(const BenchPoint& p) {
  return {{"version", p.version},         {"batch_size", p.batch},        {"seq_len", p.seq_len},
          {"precision", p.precision},     {"plan", p.plan},               {"status", p.status},
          {"ms_median", p.ms_median},     {"ms_min", p.ms_min},           {"ms_max", p.ms_max},
          {"spread", p.spread},           {"forward_ms", p.forward_ms},   {"backward_ms", p.backward_ms},
          {"optimizer_ms", p.optimizer_ms}, {"samples_per_sec", p.samples_per_sec},
          {"tokens_per_sec", p.tokens_per_sec}, {"tflops", p.tflops},     {"mfu", p.mfu},
          {"loss", p.loss},               {"peak_bytes", p.peak_bytes}};
}

std::vector<BenchPoint> read_bench_json(const std::string& path) {
  const json j = read_json_file(path, "--baseline", kMaxReportBytes);
  std::vector<BenchPoint> points;
  try {
    for (const json& p : j.at("points")) {
      BenchPoint b;
      b.version = p.at("version");
      b.batch = p.at("batch_size");
      b.seq_len = p.at("seq_len");
      b.precision = p.at("precision");
      b.status = p.at("status");
      b.ms_median = p.at("ms_median");
      points.push_back(b);
    }
  } catch (const json::exception&) {
    usage_fail("--baseline: '" + path + "' is not a bench JSON file (tiny_llama bench --json)");
  }
  return points;
}

void write_bench_csv(std::ostream& out, const std::vector<BenchPoint>& points, const DeviceInfo& d,
                     const std::string& commit) {
  out << "version,batch_size,seq_len,precision,status,ms_median,ms_min,ms_max,spread,forward_ms,backward_ms,"
         "optimizer_ms,samples_per_sec,tokens_per_sec,tflops,mfu,loss,peak_bytes,device,sm_clock_mhz,driver,cuda,commit\n";
  for (const BenchPoint& p : points)
    out << fmt::format("v{},{},{},{},{},{:.4f},{:.4f},{:.4f},{:.4f},{:.4f},{:.4f},{:.4f},{:.2f},{:.0f},{:.3f},{:.4f},{:.5f},{},"
                       "\"{}\",{},{},{},{}\n",
                       p.version, p.batch, p.seq_len, p.precision, p.status, p.ms_median, p.ms_min, p.ms_max, p.spread,
                       p.forward_ms, p.backward_ms, p.optimizer_ms, p.samples_per_sec, p.tokens_per_sec, p.tflops, p.mfu,
                       p.loss, p.peak_bytes, d.name, d.sm_clock_mhz, d.driver, d.runtime, commit);
}

json environment_json(const DeviceInfo& d, const std::string& commit) {
  return {{"name", d.name},       {"sm_clock_mhz", d.sm_clock_mhz}, {"memory_clock_mhz", d.memory_clock_mhz},
          {"multiprocessors", d.multiprocessors}, {"driver", d.driver}, {"cuda_runtime", d.runtime},
          {"memory_total_bytes", d.memory_total}, {"l2_bytes", d.l2_bytes}, {"commit", commit}};
}

void write_bench_json(std::ostream& out, const BenchOptions& o, const std::vector<BenchPoint>& points,
                      const DeviceInfo& d, const std::string& commit) {
  json pts = json::array();
  for (const BenchPoint& p : points) pts.push_back(point_json(p));
  out << json{{"environment", environment_json(d, commit)},
              {"model", o.base.model.to_json()},
              {"timing",
               {{"timing_warmup_steps", o.timing_warmup},
                {"steps_per_repetition", o.steps},
                {"repetitions", o.repeats},
                {"order", "each repetition a run of its own; the points take turns, in order then in reverse"}}},
              {"points", pts}}
             .dump(2)
      << "\n";
}

std::string program_version() { return std::string("tiny_llama ") + TT_VERSION + " (commit " + git_commit() + ")"; }

// TT_GIT_COMMIT serves a copy of the tree without its .git, as on a remote GPU machine.
std::string git_commit() {
  if (const char* env = std::getenv("TT_GIT_COMMIT"); env && *env) return env;
  const std::string dir = TT_SOURCE_DIR;
  auto run = [](const std::string& cmd) {
    std::string out;
    if (FILE* f = popen(cmd.c_str(), "r")) {
      char buf[256];
      while (fgets(buf, sizeof buf, f)) out += buf;
      pclose(f);
    }
    while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
    return out;
  };
  std::string commit = run("git -C '" + dir + "' rev-parse --short=12 HEAD 2>/dev/null");
  if (commit.empty()) return "unknown";
  if (!run("git -C '" + dir + "' status --porcelain --untracked-files=no 2>/dev/null").empty()) commit += "+dirty";
  return commit;
}

namespace {

Plan point_plan(int version, const std::string& precision, const BenchOptions& o) {
  Plan p = plan_for_version(version);
  for (const std::string& n : o.disable) set_switch(p, n, false, "--disable");
  for (const std::string& n : o.enable) set_switch(p, n, true, "--enable");
  p.amp = precision == "bf16";
  p.tf32 = precision == "tf32";
  p.classifier_chunk = o.base.backend.plan.classifier_chunk;
  return p;
}

void validate(const BenchOptions& o) {
  auto positive_list = [](const std::vector<int>& v, const char* flag) {
    if (v.empty()) usage_fail(std::string(flag) + ": give at least one value");
    for (int x : v)
      if (x <= 0) usage_fail(std::string(flag) + ": values must be positive (got " + std::to_string(x) + ")");
  };
  positive_list(o.versions, "--levels");
  for (int v : o.versions)
    if (v > kLatestVersion)
      usage_fail("--levels: levels are 1 to " + std::to_string(kLatestVersion) + " (got " + std::to_string(v) + ")");
  positive_list(o.batch_sizes, "--batch-sizes");
  positive_list(o.seq_lens, "--seq-lens");
  if (o.precisions.empty()) usage_fail("--precisions: give at least one of fp32, tf32, bf16");
  for (const std::string& p : o.precisions)
    if (p != "fp32" && p != "tf32" && p != "bf16") usage_fail("--precisions: each must be fp32, tf32 or bf16 (got '" + p + "')");
  if (o.timing_warmup < 0) usage_fail("--timing-warmup-steps: must not be negative");
  if (o.steps <= 0) usage_fail("--steps: must be positive");
  if (o.repeats <= 0) usage_fail("--repeats: must be positive");
  if (!std::isfinite(o.min_speedup) || o.min_speedup < 0 || (o.min_speedup > 0 && o.baseline_path.empty()))
    usage_fail("--min-speedup: needs --baseline and a positive finite value");
  if (!std::isfinite(o.memory_budget_mb) || o.memory_budget_mb < 0)
    usage_fail("--memory-budget: must be a finite number of MB, 0 (free memory) or more");
  if (!o.csv_path.empty()) check_writable(o.csv_path, "--csv");
  if (!o.json_path.empty()) check_writable(o.json_path, "--json");
  o.base.model.validate();
  for (int v : o.versions)
    for (const std::string& p : o.precisions) point_plan(v, p, o);  // unknown switch names fail here
}

void progress(std::ostream& log, size_t done, size_t total, const std::string& what) {
  const int width = 30;
  const int filled = int(width * done / total);
  const std::string bar = std::string(size_t(filled), '#') + std::string(size_t(width - filled), '.');
  if (isatty(STDERR_FILENO)) {
    std::fprintf(stderr, "\r[%s] %zu/%zu %-40s", bar.c_str(), done, total, what.c_str());
    if (done == total) std::fprintf(stderr, "\n");
  } else {
    log << fmt::format("[{}] {}/{} {}\n", bar, done, total, what) << std::flush;
  }
}

// A point's runs so far: what each repetition's steps took, appended run by run.
struct PointRuns {
  BenchPoint point;
  std::vector<double> ms, forward, backward, optimizer;
  double flops_per_step = 0;
};

// One repetition of a point: a training run of its own, the warm-up steps untimed, then
// o.steps timed. A point that cannot run (out of memory, a switch it cannot take) keeps why.
void run_repetition(const BenchOptions& o, PointRuns& run) {
  BenchPoint& p = run.point;
  TrainOptions t = o.base;
  t.batch = p.batch;
  t.seq_len = p.seq_len;
  t.timing_warmup = o.timing_warmup;
  t.steps = o.timing_warmup + o.steps;
  t.log_every = t.steps;
  t.json_path.clear();
  t.backend.plan = point_plan(p.version, p.precision, o);
  p.plan = describe(t.backend.plan);
  std::ostringstream quiet;
  TrainResult r;
  try {
    r = train(t, quiet);
  } catch (const UsageError& e) {
    p.status = e.what();
    return;
  }
  for (size_t i = size_t(o.timing_warmup); i < r.steps.size(); ++i) {
    run.ms.push_back(r.steps[i].step_ms);
    run.forward.push_back(r.steps[i].forward_ms);
    run.backward.push_back(r.steps[i].backward_ms);
    run.optimizer.push_back(r.steps[i].optimizer_ms);
  }
  run.flops_per_step = r.flops_per_step;
  p.loss = r.final_loss;
  p.peak_bytes = r.memory.total();
}

// The point's figures over its repetitions.
BenchPoint finish(const BenchOptions& o, const PointRuns& run, const std::string& device_name) {
  BenchPoint p = run.point;
  if (p.status != "ok") return p;
  const RepetitionStats s = repetition_stats(run.ms, o.steps);
  p.ms_median = s.median, p.ms_min = s.min, p.ms_max = s.max;
  p.spread = s.median > 0 ? (s.max - s.min) / s.median : 0;
  p.forward_ms = repetition_stats(run.forward, o.steps).median;
  p.backward_ms = repetition_stats(run.backward, o.steps).median;
  p.optimizer_ms = repetition_stats(run.optimizer, o.steps).median;
  p.samples_per_sec = p.batch / (p.ms_median / 1e3);
  p.tokens_per_sec = p.samples_per_sec * p.seq_len;
  p.tflops = run.flops_per_step / (p.ms_median / 1e3) / 1e12;
  const double peak = peak_flops(device_name, p.precision);
  p.mfu = peak > 0 ? p.tflops * 1e12 / peak : 0;
  return p;
}

void print_table(std::ostream& log, const std::vector<BenchPoint>& points) {
  log << fmt::format("{:<4}{:<6}{:>6}{:>7}{:>10}{:>8}{:>10}{:>11}{:>8}{:>8}{:>8}{:>9}{:>7}{:>8}\n", "ver", "prec",
                     "batch", "seq", "ms/step", "spread", "samp/s", "tok/s", "fwd", "bwd", "opt", "peak MB", "MFU",
                     "loss");
  for (const BenchPoint& p : points) {
    if (p.status != "ok") {
      log << fmt::format("v{:<3}{:<6}{:>6}{:>7}  {}\n", p.version, p.precision, p.batch, p.seq_len, p.status.substr(0, 90));
      continue;
    }
    log << fmt::format("v{:<3}{:<6}{:>6}{:>7}{:>10.3f}{:>7.1f}%{:>10.0f}{:>11.0f}{:>8.2f}{:>8.2f}{:>8.2f}{:>9.1f}{:>6.1f}%{:>8.4f}\n",
                       p.version, p.precision, p.batch, p.seq_len, p.ms_median, 100 * p.spread, p.samples_per_sec,
                       p.tokens_per_sec, p.forward_ms, p.backward_ms, p.optimizer_ms, p.peak_bytes / 1e6, 100 * p.mfu,
                       p.loss);
  }
}

// PyTorch's strongest mode (compile + graph) of a tools/pytorch_reference.py --json file, by
// precision, batch and sequence length.
std::map<std::tuple<std::string, int, int>, double> read_pytorch_json(const std::string& path) {
  const json j = read_json_file(path, "--pytorch", kMaxReportBytes);
  std::map<std::tuple<std::string, int, int>, double> ms;
  try {
    for (const json& p : j.at("points"))
      if (p.at("version") == "pytorch-compile+graph" && p.at("status") == "ok")
        ms[{p.at("precision").get<std::string>(), p.at("batch_size").get<int>(), p.at("seq_len").get<int>()}] =
            p.at("ms_median").get<double>();
  } catch (const json::exception&) {
    usage_fail("--pytorch: '" + path + "' is not a JSON file of tools/pytorch_reference.py --json");
  }
  return ms;
}

}  // namespace

// The ladder: for each precision and shape, the versions in order, the sign between two medians
// theirs, and whether each is no slower than the one below it. A median above the one below
// breaks the ladder only when the two sets of repetitions do not overlap (the version's fastest
// slower than the other's slowest); else
// the two are even within their spread, and the line says so. PyTorch's strongest beside them
// when given.
void print_ladder(std::ostream& log, const std::vector<BenchPoint>& points,
                  const std::map<std::tuple<std::string, int, int>, double>& torch) {
  std::map<std::tuple<std::string, int, int>, std::vector<const BenchPoint*>> rungs;
  for (const BenchPoint& p : points)
    if (p.status == "ok") rungs[{p.precision, p.batch, p.seq_len}].push_back(&p);
  bool header = false;
  for (auto& [key, list] : rungs) {
    if (list.size() < 2 && !torch.count(key)) continue;
    if (!header) log << "Ladder (ms per step; each version must be no slower than the one below it):\n";
    header = true;
    std::sort(list.begin(), list.end(), [](const BenchPoint* a, const BenchPoint* b) { return a->version < b->version; });
    std::string line = fmt::format("  {} batch {} seq {}:", std::get<0>(key), std::get<1>(key), std::get<2>(key));
    std::string broken, even;
    for (size_t i = 0; i < list.size(); ++i) {
      const BenchPoint &p = *list[i], *below = i ? list[i - 1] : nullptr;
      // The sign between two medians is theirs as printed: "v4 1.214 > v5 1.121", "v5 3.979 < v6
      // 4.024", "v5 1.587 = v6 1.587".
      const long shown = std::lround(p.ms_median * 1000);
      const long shown_below = below ? std::lround(below->ms_median * 1000) : shown;
      const char* sign = !below ? "" : shown < shown_below ? " >" : shown > shown_below ? " <" : " =";
      line += fmt::format("{} v{} {:.3f}", sign, p.version, p.ms_median);
      if (!below || p.ms_median <= below->ms_median) continue;
      if (p.ms_min > below->ms_max)
        broken += fmt::format(" v{} slower than v{};", p.version, below->version);
      else
        even += fmt::format(" v{} and v{} ({:.3f}-{:.3f} against {:.3f}-{:.3f} ms);", p.version, below->version,
                            p.ms_min, p.ms_max, below->ms_min, below->ms_max);
    }
    if (!broken.empty()) line += "  BROKEN:" + broken;
    else if (!even.empty()) line += "  holds, even within the repetitions' spread:" + even;
    else line += "  holds";
    const auto t = torch.find(key);
    if (t != torch.end())
      line += fmt::format(" | PyTorch strongest {:.3f} ({:.2f}x of it: v{})", t->second, t->second / list.back()->ms_median,
                          list.back()->version);
    log << line << "\n";
  }
}

namespace {

// The memory the search may fill: --memory-budget, at most what is free (the GPU's, or the
// host's available memory on the CPU, whose allocations succeed lazily and so prove nothing).
size_t free_memory(bool cuda) {
  return cuda ? device_info(true).memory_free : available_host_bytes();
}
size_t memory_budget(const BenchOptions& o, bool cuda, std::ostream& log) {
  const size_t free = free_memory(cuda);
  if (o.memory_budget_mb <= 0) return free;
  const size_t asked = size_t(std::min(o.memory_budget_mb * 1e6, 1e18));
  if (free > 0 && asked > free) {
    log << fmt::format("--memory-budget {:.0f} MB is more than the {:.0f} MB free: searching within what is free\n",
                       o.memory_budget_mb, free / 1e6);
    return free;
  }
  return asked;
}

void find_max_batches(const BenchOptions& o, std::ostream& log) {
  log << fmt::format("{:<4}{:<6}{:>7}{:>11}{:>13}{:>13}\n", "ver", "prec", "seq", "max batch", "needs MB", "budget MB");
  for (int version : o.versions)
    for (const std::string& precision : o.precisions)
      for (int seq_len : o.seq_lens) {
        BackendOptions bo = o.base.backend;
        bo.plan = point_plan(version, precision, o);
        std::unique_ptr<Backend> be = make_backend(bo);
        const size_t budget = memory_budget(o, be->is_cuda(), log);
        auto needs = [&](int b) {
          size_t total = 0;
          for (size_t bytes : Llama::memory_needed(o.base.model, *be, b, seq_len)) total += bytes;
          return total;
        };
        // Grow, then bisect: the largest batch whose arena fits the budget.
        int lo = 0, hi = 1;
        while (hi <= (1 << 20) && int64_t(hi) * seq_len <= (int64_t(1) << 28) && needs(hi) <= budget) lo = hi, hi *= 2;
        while (hi - lo > 1) {
          const int mid = lo + (hi - lo) / 2;
          (needs(mid) <= budget ? lo : hi) = mid;
        }
        // Prove it: build the model at that batch (allocating). If the allocation fails (a budget
        // above what the machine has), bisect between 0 and it on real allocations: a few tries.
        auto fits = [&](int b) {
          try {
            Llama m(o.base.model, *be, b, seq_len);
            return true;
          } catch (const UsageError&) {
            return false;
          }
        };
        if (lo > 0 && !fits(lo)) {
          int good = 0, bad = lo;
          while (bad - good > 1) {
            const int mid = good + (bad - good) / 2;
            (fits(mid) ? good : bad) = mid;
          }
          lo = good;
        }
        log << fmt::format("v{:<3}{:<6}{:>7}{:>11}{:>13.1f}{:>13.1f}\n", version, precision, seq_len, lo,
                           lo ? needs(lo) / 1e6 : 0.0, budget / 1e6);
      }
}

}  // namespace

bool run_bench(const BenchOptions& options, std::ostream& log) {
  validate(options);
  BenchOptions o = options;
  const std::vector<BenchPoint> baseline = o.baseline_path.empty() ? std::vector<BenchPoint>{} : read_bench_json(o.baseline_path);
  const auto torch = o.pytorch_path.empty() ? std::map<std::tuple<std::string, int, int>, double>{}
                                            : read_pytorch_json(o.pytorch_path);
  std::string why;
  const bool cuda = o.base.backend.device == DeviceKind::Cuda ||
                    (o.base.backend.device == DeviceKind::Auto && cuda_available(&why));
  if (o.base.backend.device == DeviceKind::Cuda && !cuda_available(&why)) usage_fail("--device cuda: " + why);
  if (!cuda) {
    // The CPU computes every version the same way, in fp32: one row per shape, never look-alike
    // rows named after CUDA plans.
    const bool cuda_only = std::any_of(o.versions.begin(), o.versions.end(), [](int v) { return v != 1; }) ||
                           std::any_of(o.precisions.begin(), o.precisions.end(), [](const std::string& p) { return p != "fp32"; }) ||
                           !o.enable.empty() || !o.disable.empty();
    if (o.selected && cuda_only)
      usage_fail("bench on the CPU: versions above v1, bf16, tf32 and plan switches select CUDA kernels; the CPU backend "
                 "is the fp32 reference (give --levels v1 --precisions fp32, or run on a GPU)");
    if (cuda_only)
      log << "CPU: one row per shape, the fp32 reference (versions and precisions select CUDA kernels)\n";
    o.versions = {1};
    o.precisions = {"fp32"};
  }
  const DeviceInfo device = device_info(cuda);
  const std::string commit = git_commit();
  if (cuda)
    log << fmt::format("Device: {} (SM clock {} MHz, driver {}, CUDA {}) | commit {}\n", device.name, device.sm_clock_mhz,
                       device.driver, device.runtime, commit);
  else
    log << fmt::format("Device: {} (CPU, {} cores) | commit {}\n", device.name, device.multiprocessors, commit);
  if (o.find_max_batch) {
    find_max_batches(o, log);
    return true;
  }

  // The points take turns (turn()), one repetition each a round.
  std::vector<PointRuns> runs;
  for (int version : o.versions)
    for (const std::string& precision : o.precisions)
      for (int batch : o.batch_sizes)
        for (int seq_len : o.seq_lens) {
          PointRuns r;
          r.point.version = version, r.point.batch = batch, r.point.seq_len = seq_len, r.point.precision = precision;
          runs.push_back(r);
        }
  const size_t total = runs.size() * size_t(o.repeats);
  size_t done = 0;
  for (int round = 0; round < o.repeats; ++round)
    for (size_t k = 0; k < runs.size(); ++k) {
      PointRuns& r = runs[turn(round, k, runs.size())];
      const BenchPoint& p = r.point;
      progress(log, done++, total,
               fmt::format("v{} {} batch {} seq {} ({} of {})", p.version, p.precision, p.batch, p.seq_len, round + 1,
                           o.repeats));
      if (p.status == "ok") run_repetition(o, r);
    }
  std::vector<BenchPoint> points;
  for (const PointRuns& r : runs) points.push_back(finish(o, r, device.name));
  progress(log, total, total, "done");
  print_table(log, points);
  print_ladder(log, points, torch);
  if (!o.csv_path.empty())
    write_file_atomic(o.csv_path, [&](std::ostream& out) { write_bench_csv(out, points, device, commit); });
  if (!o.json_path.empty())
    write_file_atomic(o.json_path, [&](std::ostream& out) { write_bench_json(out, o, points, device, commit); });

  if (o.baseline_path.empty()) return true;
  const std::vector<Regression> slow = find_regressions(points, baseline, o.min_speedup);
  log << fmt::format("Against {}: {} of {} points slower than {:.2f}x the baseline's speed\n", o.baseline_path,
                     slow.size(), points.size(), o.min_speedup);
  for (const Regression& r : slow)
    log << fmt::format("  v{} {} batch {} seq {}: {:.3f} ms against {:.3f} ms ({:.2f}x)\n", r.point.version,
                       r.point.precision, r.point.batch, r.point.seq_len, r.point.ms_median, r.baseline_ms, r.speedup);
  return slow.empty();
}

}  // namespace tt
