#include "bench/scaling.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <iterator>
#include <thread>
#include <nlohmann/json.hpp>

#include "bench/bench.h"
#include "core/error.h"
#include "core/files.h"
#include "parallel/launch.h"

namespace tt {

namespace {

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// The i-th GPU this process sees, as a child's CUDA_VISIBLE_DEVICES: the i-th entry of ours where
// it is set (a list of indices or UUIDs), else i.
std::string visible_gpu(int i) {
  const char* env = std::getenv("CUDA_VISIBLE_DEVICES");
  if (!env) return std::to_string(i);
  if (!*env) usage_fail("bench --nproc-per-node: CUDA_VISIBLE_DEVICES is set and empty: it hides every GPU");
  std::vector<std::string> ids(1);
  for (const char* c = env; *c; ++c)
    if (*c == ',')
      ids.emplace_back();
    else
      ids.back().push_back(*c);
  for (const std::string& id : ids)
    if (id.empty()) usage_fail(fmt::format("bench --nproc-per-node: CUDA_VISIBLE_DEVICES='{}' has an empty entry", env));
  if (i >= int(ids.size()))
    usage_fail(fmt::format("bench --nproc-per-node: CUDA_VISIBLE_DEVICES={} names {} GPU(s), fewer than the processes",
                           env, ids.size()));
  return ids[size_t(i)];
}

}  // namespace

int run_scaling_bench(int nproc, const std::vector<std::string>& train_args, std::ostream& out) {
  if (nproc < 2 || nproc > 64) usage_fail("bench --nproc-per-node: 2 to 64 processes");
  std::vector<std::string> args;
  std::string json_path;
  for (size_t i = 0; i < train_args.size(); ++i) {
    const std::string& a = train_args[i];
    if (a == "--json" && i + 1 < train_args.size()) {
      json_path = train_args[++i];
    } else if (a.rfind("--json=", 0) == 0) {
      json_path = a.substr(7);
    } else if (a == "--zero" || a == "--save" || a == "--resume" || a == "--profile") {
      usage_fail("bench --nproc-per-node: " + a + " is the benchmark's to set (it runs --zero 0 and 1, and saves nothing)");
    } else {
      args.push_back(a);
    }
  }
  if (!json_path.empty()) check_writable(json_path, "--json");
  bool cpu = false;  // CPU ranks: no GPU to choose
  for (size_t i = 0; i < args.size(); ++i)
    cpu = cpu || args[i] == "--device=cpu" || (args[i] == "--device" && i + 1 < args.size() && args[i + 1] == "cpu");
  const std::string unit = cpu ? "process" : "GPU", units = cpu ? "processes" : "GPUs";
  // Each one-process baseline's environment: its own GPU, or (CPU processes) its share of the
  // cores, as the launcher gives its ranks.
  std::vector<std::string> alone_env(static_cast<size_t>(nproc));
  const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
  for (int g = 0; g < nproc; ++g)
    alone_env[size_t(g)] = !cpu                             ? "CUDA_VISIBLE_DEVICES=" + shell_quote(visible_gpu(g)) + " "
                           : std::getenv("OMP_NUM_THREADS") ? std::string()
                                                            : fmt::format("OMP_NUM_THREADS={} ", std::max(1, cores / nproc));
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("tt_scaling_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  struct Removed {  // the runs' files go however the bench ends
    std::filesystem::path dir;
    ~Removed() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  } removed{dir};
  struct Run {
    std::string name;
    int ranks, zero;
    double tokens_per_sec = 0, step_ms = 0;
  };
  // The baseline is one GPU's training on each of the nproc GPUs, all at once: under the same load
  // as the many-GPU runs (power, cooling, the host), and with each chip's own speed. A
  // synchronous job runs at its slowest GPU's pace, so the efficiency is given against both the
  // GPUs' mean and the slowest.
  std::vector<Run> alone;
  for (int g = 0; g < nproc; ++g) alone.push_back({fmt::format("1 {} ({})", unit, g), 1, 0});
  std::vector<Run> runs;
  for (int n = 2; n <= nproc; n = n * 2 > nproc && n < nproc ? nproc : n * 2) {  // 2, 4, 8, ... and nproc
    runs.push_back({fmt::format("{} {}, all-reduce (--zero 0)", n, units), n, 0});
    runs.push_back({fmt::format("{} {}, ZeRO-1 (--zero 1)", n, units), n, 1});
  }
  std::string command = shell_quote(self_path()) + " train";
  for (const std::string& a : args) command += " " + shell_quote(a);
  out << "Scaling over " << nproc << " " << units << " of this node: " << command << "\n";
  auto run_file = [&](size_t i) { return (dir / fmt::format("run{}", i)).string(); };  // + .json, .log, .rc
  // Runs jobs at once (one, or one a GPU) and reads each one's summary; a failed job's log is shown.
  auto run_together = [&](std::vector<Run*> jobs, const std::string& name) {
    std::string script;
    for (size_t i = 0; i < jobs.size(); ++i) {
      const Run& run = *jobs[i];
      const std::string at = run_file(i);
      script += "(" + (run.ranks > 1 ? std::string() : alone_env[i]) + command +
                (run.ranks > 1 ? fmt::format(" --nproc-per-node {} --zero {}", run.ranks, run.zero) : "") + " --json " +
                shell_quote(at + ".json") + " >" + shell_quote(at + ".log") + " 2>&1; echo $? >" + shell_quote(at + ".rc") +
                ") & ";
    }
    out << "  " << name << " ..." << std::flush;
    std::system(("sh -c " + shell_quote(script + "wait")).c_str());
    int failed = 0;
    for (size_t i = 0; i < jobs.size(); ++i) {
      const std::string at = run_file(i);
      int rc = 1;
      std::ifstream(at + ".rc") >> rc;
      if (rc != 0) {
        std::ifstream log(at + ".log");
        out << fmt::format(" {} failed (exit {}):\n", jobs[i]->name, rc) << std::string(std::istreambuf_iterator<char>(log), {})
            << "\n";
        failed = failed ? failed : rc;
      }
    }
    if (failed) return failed;
    for (size_t i = 0; i < jobs.size(); ++i) {
      const std::string at = run_file(i);
      std::ifstream in(at + ".json");
      const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
      const nlohmann::json& summary = j.is_object() && j.contains("summary") ? j["summary"] : nlohmann::json{};
      if (!summary.is_object() || !summary.value("tokens_per_sec", nlohmann::json{}).is_number() ||
          !summary.value("step_ms", nlohmann::json{}).is_number()) {
        out << " no timed steps: --num-steps must exceed --timing-warmup-steps\n";
        return 2;
      }
      jobs[i]->tokens_per_sec = summary["tokens_per_sec"].get<double>();
      jobs[i]->step_ms = summary["step_ms"].get<double>();
      out << fmt::format(" {:.1f}", jobs[i]->step_ms);
      std::filesystem::remove(at + ".json");
    }
    out << " ms a step\n";
    return 0;
  };
  std::vector<Run*> each;
  for (Run& run : alone) each.push_back(&run);
  int rc = run_together(each, fmt::format("1 {}, on each of the {} at once", unit, nproc));
  for (Run& run : runs) rc = rc ? rc : run_together({&run}, run.name);
  if (rc) return rc;
  double sum = 0, slowest = alone[0].tokens_per_sec;
  for (const Run& run : alone) sum += run.tokens_per_sec, slowest = std::min(slowest, run.tokens_per_sec);
  const double one = sum / nproc;  // the GPUs' mean
  out << fmt::format("\n| run | ms/step | tokens/s | tokens/s per {0} | scaling efficiency | against the slowest {0} |\n"
                     "|---|---|---|---|---|---|\n",
                     unit);
  nlohmann::json table = nlohmann::json::array();
  for (const std::vector<Run>* list : {&alone, &runs})
    for (const Run& run : *list) {
      const double efficiency = run.tokens_per_sec / (one * run.ranks), to_slowest = run.tokens_per_sec / (slowest * run.ranks);
      out << fmt::format("| {} | {:.2f} | {:.0f} | {:.0f} | {:.1f}% | {:.1f}% |\n", run.name, run.step_ms, run.tokens_per_sec,
                         run.tokens_per_sec / run.ranks, 100 * efficiency, 100 * to_slowest);
      table.push_back({{"run", run.name}, {"processes", run.ranks}, {"zero", run.zero}, {"step_ms", run.step_ms},
                       {"tokens_per_sec", run.tokens_per_sec}, {"tokens_per_sec_per_gpu", run.tokens_per_sec / run.ranks},
                       {"scaling_efficiency", efficiency}, {"scaling_efficiency_vs_slowest", to_slowest}});
    }
  out << fmt::format("(scaling efficiency: tokens/s over the processes times the one-{0} runs' mean, {1:.0f}; the last "
                     "column over the slowest {0}'s, {2:.0f})\n",
                     unit, one, slowest);
  if (!json_path.empty())
    write_file_atomic(json_path, [&](std::ostream& o) {
      o << nlohmann::json{{"command", command}, {"environment", environment_json(device_info(true), git_commit())},
                          {"runs", table}}
               .dump(2)
        << "\n";
    });
  return 0;
}

}  // namespace tt
