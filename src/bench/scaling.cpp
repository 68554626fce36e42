#include "bench/scaling.h"

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <iterator>
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
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("tt_scaling_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  struct Run {
    std::string name;
    int ranks, zero;
    double tokens_per_sec = 0, step_ms = 0;
  };
  std::vector<Run> runs = {{"1 GPU", 1, 0}};
  for (int n = 2; n <= nproc; n = n * 2 > nproc && n < nproc ? nproc : n * 2) {  // 2, 4, 8, ... and nproc
    runs.push_back({fmt::format("{} GPUs, all-reduce (--zero 0)", n), n, 0});
    runs.push_back({fmt::format("{} GPUs, ZeRO-1 (--zero 1)", n), n, 1});
  }
  std::string command = shell_quote(self_path()) + " train";
  for (const std::string& a : args) command += " " + shell_quote(a);
  out << "Scaling over " << nproc << " GPUs of this node: " << command << "\n";
  for (Run& run : runs) {
    const std::string json = (dir / ("run" + std::to_string(&run - runs.data()) + ".json")).string();
    const std::string log = (dir / "run.log").string();
    const std::string cmd = command + (run.ranks > 1 ? fmt::format(" --nproc-per-node {} --zero {}", run.ranks, run.zero) : "") +
                            " --json " + shell_quote(json) + " >" + shell_quote(log) + " 2>&1";
    out << "  " << run.name << " ..." << std::flush;
    const int status = std::system(cmd.c_str());
    const int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    if (rc != 0) {
      std::ifstream in(log);
      out << " failed (exit " << rc << "):\n" << std::string(std::istreambuf_iterator<char>(in), {}) << "\n";
      std::filesystem::remove_all(dir);
      return rc;
    }
    std::ifstream in(json);
    const nlohmann::json j = nlohmann::json::parse(in);
    run.tokens_per_sec = j["summary"]["tokens_per_sec"].get<double>();
    run.step_ms = j["summary"]["step_ms"].get<double>();
    out << fmt::format(" {:.1f} ms a step\n", run.step_ms);
  }
  std::filesystem::remove_all(dir);
  const double one = runs[0].tokens_per_sec;
  out << fmt::format("\n| run | ms/step | tokens/s | tokens/s per GPU | scaling efficiency |\n|---|---|---|---|---|\n");
  nlohmann::json table = nlohmann::json::array();
  for (const Run& run : runs) {
    const double efficiency = run.tokens_per_sec / (one * run.ranks);
    out << fmt::format("| {} | {:.2f} | {:.0f} | {:.0f} | {:.1f}% |\n", run.name, run.step_ms, run.tokens_per_sec,
                       run.tokens_per_sec / run.ranks, 100 * efficiency);
    table.push_back({{"run", run.name}, {"processes", run.ranks}, {"zero", run.zero}, {"step_ms", run.step_ms},
                     {"tokens_per_sec", run.tokens_per_sec}, {"tokens_per_sec_per_gpu", run.tokens_per_sec / run.ranks},
                     {"scaling_efficiency", efficiency}});
  }
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
