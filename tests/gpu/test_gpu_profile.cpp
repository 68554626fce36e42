// A profiled run on the GPU, v1 to v6: it writes all its files, each stream's kernels of a step
// fit in the step's measured time, the kernel table adds up to the streams' busy times, the
// printed account of each step adds up to its window and the window fits in the step, and every
// step launches the same number of kernels.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "gpu_harness.h"
#include "run_outputs.h"
#include "train/trainer.h"

namespace tt::test {
namespace {

namespace fs = std::filesystem;

class GpuProfile : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { REQUIRE_GPU(); }
};

TEST_P(GpuProfile, ThreeStepTraceIsCompleteAndConsistent) {
  const ScratchDir scratch("profile");
  const fs::path dir = scratch.path() / "trace";
  TrainOptions o;
  o.model.hidden = 128;
  o.model.layers = 2;
  o.batch = 4;
  o.seq_len = 64;
  o.timing_warmup = 2;
  o.steps = 5;
  o.profile_steps = 3;
  o.profile_dir = dir.string();
  o.flops_profile = true;
  o.backend.device = DeviceKind::Cuda;
  o.backend.plan = plan_for_version(GetParam());
  std::ostringstream log;
  const TrainResult r = train(o, log);
  for (const char* f : {"trace.json", "kernels.csv", "regions.csv"}) EXPECT_TRUE(fs::exists(dir / f)) << f;

  ASSERT_EQ(r.launches_per_step.size(), 3u);
  EXPECT_GT(r.launches_per_step[0], 20);
  EXPECT_EQ(r.launches_per_step[0], r.launches_per_step[1]);
  EXPECT_EQ(r.launches_per_step[1], r.launches_per_step[2]);

  // Busy time per step and stream from the timeline: the union of the stream's records' intervals
  // (under programmatic launch, v3, kernels overlap the one before them; AdamW and NCCL run on
  // streams of their own beside the compute stream). Each fits in the step, and the kernel table
  // (kernels.csv) adds up to their sum.
  std::ifstream in(dir / "trace.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> intervals;  // (step, stream)
  int attributed = 0, records = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] != "X" || e["cat"] == "region") continue;
    const double ts = e["ts"].get<double>();
    intervals[{e["args"]["step"].get<int>(), e["args"]["stream"].get<int>()}].push_back({ts, ts + e["dur"].get<double>()});
    records++;
    attributed += !e["args"]["region"].get<std::string>().empty();
  }
  ASSERT_GE(intervals.size(), 3u);
  double busy_total_us = 0;
  for (auto& [key, iv] : intervals) {
    const int s = key.first;
    std::sort(iv.begin(), iv.end());
    double busy_us = 0, until = -1e300;
    for (const auto& [begin, end] : iv) {
      busy_us += std::max(0.0, end - std::max(begin, until));
      until = std::max(until, end);
    }
    const double step_ms = r.steps[size_t(o.timing_warmup + s)].step_ms;
    EXPECT_LE(busy_us / 1e3, step_ms) << "step " << s << ": kernels longer than the step";
    EXPECT_GT(busy_us, 0.0);
    busy_total_us += busy_us;
  }
  std::ifstream csv(dir / "kernels.csv");
  std::string line;
  std::getline(csv, line);  // header
  double table_us = 0;
  int rows = 0;
  while (std::getline(csv, line)) {  // kernel,calls,total_us,...: the kernel name may hold commas, in quotes
    const size_t name_end = line[0] == '"' ? line.find('"', 1) + 1 : line.find(',');
    std::istringstream fields(line.substr(name_end + 1));
    std::string calls, total;
    std::getline(fields, calls, ',');
    std::getline(fields, total, ',');
    table_us += std::stod(total);
    rows++;
  }
  EXPECT_NEAR(table_us, busy_total_us, 1e-3 * rows + 1e-6 * busy_total_us) << "kernels.csv against the timeline";
  // "  window = busy + idle; kernels ...; measured step": the rows add up to the window, and the
  // window (first kernel to last) fits in the step.
  const std::string text = log.str();
  ASSERT_NE(text.find("Where each profiled step's time went"), std::string::npos) << text;
  std::vector<std::string> accounts;
  std::istringstream all_lines(text);
  for (std::string l; std::getline(all_lines, l);)
    if (l.find(" busy + ") != std::string::npos) accounts.push_back(l);
  ASSERT_EQ(accounts.size(), 3u) << text;
  for (const std::string& l : accounts) {
    double window = 0, busy = 0, idle = 0, kernels = 0, side = 0, alone = 0, measured = 0;
    ASSERT_EQ(std::sscanf(l.c_str(), " %lf = %lf busy + %lf idle; kernels %lf (%lf side by side); optimizer alone %lf; measured %lf",
                          &window, &busy, &idle, &kernels, &side, &alone, &measured), 7) << l;
    EXPECT_NEAR(busy + idle, window, 2e-3) << l;
    EXPECT_GE(idle, -1e-3) << l;
    EXPECT_GE(side, -1e-3) << l;
    EXPECT_LE(alone, busy + 1e-3) << l;
    // Every step ends with an update nothing runs beside: after the backward (v1-v3), or the last
    // buckets' behind it (v4 on), the embedding's after its backward.
    EXPECT_GT(alone, 0) << l;
    EXPECT_LE(window, measured * 1.01 + 0.01) << l;
  }
  // The family table's rows brought to the step: less what ran side by side, plus the idle time and
  // the time outside the kernels (before the first, after the last), which the window fits in.
  const size_t rows_at = text.find("  the rows ");
  ASSERT_NE(rows_at, std::string::npos) << text;
  double sum = 0, copies = 0, side = 0, idle = 0, outside = 0, step = 0;
  ASSERT_EQ(std::sscanf(text.c_str() + rows_at,
                        "  the rows %lf - memory copies %lf - side by side %lf + idle %lf + outside the kernels %lf = %lf",
                        &sum, &copies, &side, &idle, &outside, &step), 6) << text.substr(rows_at, 200);
  EXPECT_NEAR(sum - copies - side + idle + outside, step, 3e-3) << text.substr(rows_at, 200);
  EXPECT_GE(copies, 0) << text.substr(rows_at, 200);
  EXPECT_GE(outside, -0.01 * step) << text.substr(rows_at, 200);
  EXPECT_EQ(attributed, records) << "every kernel belongs to a model range";
  EXPECT_NE(log.str().find("Model FLOPs utilization"), std::string::npos) << log.str();
  EXPECT_NE(log.str().find("Kernel time by family"), std::string::npos) << log.str();
  EXPECT_EQ(log.str().find("error in the profile"), std::string::npos) << "a module or family above its ceiling:\n" << log.str();
}

INSTANTIATE_TEST_SUITE_P(Versions, GpuProfile, ::testing::Values(1, 2, 3, 4, 5, 6));

}  // namespace
}  // namespace tt::test
