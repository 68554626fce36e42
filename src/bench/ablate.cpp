#include "bench/ablate.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>

#include "bench/bench.h"
#include "core/files.h"
#include "train/trainer.h"

namespace tt {

std::vector<AblationRow> run_ablation(const AblateOptions& options, std::ostream& log) {
  TrainOptions base = options.train;
  base.validate();
  if (options.repeats <= 0) usage_fail("--repeats: must be positive");
  std::string why;
  if (base.backend.device == DeviceKind::Cpu || !cuda_available(&why))
    usage_fail("ablate turns off the CUDA plan's switches one at a time; the CPU backend has none (it is the fp32 "
               "reference" + (why.empty() ? std::string(")") : "; " + why + ")") + ": run it on a GPU");
  if (!options.csv_path.empty()) check_writable(options.csv_path, "--csv");
  if (!base.json_path.empty()) check_writable(base.json_path, "--json");
  const std::string json_path = base.json_path;
  base.json_path.clear();

  // The full plan, then one run per switch that the plan has on.
  std::vector<std::pair<std::string, Plan>> configs = {{"full " + describe(base.backend.plan), base.backend.plan}};
  for (const PlanSwitch& sw : plan_switches())
    if (base.backend.plan.*sw.field) {
      Plan p = base.backend.plan;
      p.*sw.field = false;
      configs.push_back({std::string("-") + sw.name, p});
    }

  // Each round runs every configuration once, the configurations taking turns: the full plan, run
  // first every time, was 3% faster than the switches that change nothing at its shape (v6 at 8 x
  // 128 on an H200, 2026-11-30).
  const size_t n = configs.size(), total = n * size_t(options.repeats);
  std::vector<std::vector<double>> ms(n);
  std::vector<TrainResult> last(n);
  for (int round = 0; round < options.repeats; ++round)
    for (size_t k = 0; k < n; ++k) {
      const size_t i = turn(round, k, n);
      log << fmt::format("[{}/{}] {} ({} of {}) ...", size_t(round) * n + k + 1, total, configs[i].first, round + 1,
                         options.repeats)
          << std::flush;
      TrainOptions o = base;
      o.backend.plan = configs[i].second;
      std::ostringstream quiet;
      last[i] = train(o, quiet);
      ms[i].push_back(last[i].step_ms_median);
      log << fmt::format(" {:.2f} ms/step\n", ms[i].back());
    }
  std::vector<AblationRow> rows;
  for (size_t i = 0; i < n; ++i) {
    const double ms_median = median(ms[i]);
    AblationRow row{configs[i].first, ms_median, base.batch / (ms_median / 1e3), last[i].final_loss,
                    last[i].memory.total(), 0};
    row.change = rows.empty() ? 0 : row.step_ms / rows.front().step_ms - 1;
    rows.push_back(row);
  }

  log << fmt::format("\nAblation of {}: batch {}, sequence {}, {} timed steps a run, the median of {} runs each, "
                     "the configurations taking turns (ms/step)\n",
                     describe(base.backend.plan), base.batch, base.seq_len, base.steps - base.timing_warmup,
                     options.repeats);
  size_t width = 28;  // the config column: the longest switch name and its sign, and two spaces
  for (const AblationRow& r : rows) width = std::max(width, r.config.size() + 2);
  log << fmt::format("{:<{}}{:>10}{:>12}{:>11}{:>12}{:>10}\n", "config", width, "ms/step", "samples/s", "peak MB",
                     "vs full", "loss");
  for (const AblationRow& r : rows)
    log << fmt::format("{:<{}}{:>10.3f}{:>12.0f}{:>11.1f}{:>11}{:>10.4f}\n", r.config, width, r.step_ms,
                       r.samples_per_sec, r.peak_bytes / 1e6, &r == &rows.front() ? std::string("-") : fmt::format("{:+.1f}%", 100 * r.change),
                       r.final_loss);

  if (!options.csv_path.empty())
    write_file_atomic(options.csv_path, [&](std::ostream& out) {
      out << "config,ms_per_step,samples_per_sec,peak_bytes,change,final_loss\n";
      for (const AblationRow& r : rows)
        out << fmt::format("{},{:.4f},{:.2f},{},{:.5f},{:.6f}\n", r.config, r.step_ms, r.samples_per_sec, r.peak_bytes,
                           r.change, r.final_loss);
    });
  if (!json_path.empty())
    write_file_atomic(json_path, [&](std::ostream& out) {
      nlohmann::json j = nlohmann::json::array();
      for (const AblationRow& r : rows)
        j.push_back({{"config", r.config}, {"ms_per_step", r.step_ms}, {"samples_per_sec", r.samples_per_sec},
                     {"peak_bytes", r.peak_bytes}, {"change", r.change}, {"final_loss", r.final_loss}});
      out << j.dump(2) << "\n";
    });
  return rows;
}

}  // namespace tt
