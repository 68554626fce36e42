// A profiled run on the GPU: it writes all its files, the kernels of each step fit in the
// step's measured time, and every step launches the same number of kernels.
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "gpu_harness.h"
#include "train/trainer.h"

namespace tt::test {
namespace {

namespace fs = std::filesystem;

class GpuProfile : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { REQUIRE_GPU(); }
};

TEST_P(GpuProfile, ThreeStepTraceIsCompleteAndConsistent) {
  const fs::path dir = fs::temp_directory_path() / ("tt_profile_v" + std::to_string(GetParam()));
  fs::remove_all(dir);
  TrainOptions o;
  o.model.hidden = 128;
  o.model.layers = 2;
  o.batch = 4;
  o.seq_len = 64;
  o.warmup = 2;
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

  std::ifstream in(dir / "trace.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  std::map<int, double> busy_us;
  int attributed = 0, records = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] != "X" || e["cat"] == "region") continue;
    busy_us[e["args"]["step"].get<int>()] += e["dur"].get<double>();
    records++;
    attributed += !e["args"]["region"].get<std::string>().empty();
  }
  ASSERT_EQ(busy_us.size(), 3u);
  for (int s = 0; s < 3; ++s) {
    const double step_ms = r.steps[size_t(o.warmup + s)].step_ms;
    EXPECT_LE(busy_us[s] / 1e3, step_ms) << "step " << s << ": kernels longer than the step";
    EXPECT_GT(busy_us[s], 0.0);
  }
  EXPECT_EQ(attributed, records) << "every kernel belongs to a model range";
  EXPECT_NE(log.str().find("Model FLOPs utilization"), std::string::npos) << log.str();
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Versions, GpuProfile, ::testing::Values(1, 2));

}  // namespace
}  // namespace tt::test
