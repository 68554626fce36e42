// A profiled run on the GPU, v1 to v3: it writes all its files, the kernels of each step fit in
// the step's measured time, the kernel table adds up to the timeline's busy time, and every
// step launches the same number of kernels.
#include <algorithm>
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

  // Busy time per step from the timeline: the union of the records' intervals (under
  // programmatic launch, v3, kernels overlap the one before them). It fits in the step, and the
  // kernel table (kernels.csv) adds up to it.
  std::ifstream in(dir / "trace.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  std::map<int, std::vector<std::pair<double, double>>> intervals;
  int attributed = 0, records = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] != "X" || e["cat"] == "region") continue;
    const double ts = e["ts"].get<double>();
    intervals[e["args"]["step"].get<int>()].push_back({ts, ts + e["dur"].get<double>()});
    records++;
    attributed += !e["args"]["region"].get<std::string>().empty();
  }
  ASSERT_EQ(intervals.size(), 3u);
  double busy_total_us = 0;
  for (int s = 0; s < 3; ++s) {
    std::vector<std::pair<double, double>>& iv = intervals[s];
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
  EXPECT_EQ(attributed, records) << "every kernel belongs to a model range";
  EXPECT_NE(log.str().find("Model FLOPs utilization"), std::string::npos) << log.str();
}

INSTANTIATE_TEST_SUITE_P(Versions, GpuProfile, ::testing::Values(1, 2, 3));

}  // namespace
}  // namespace tt::test
