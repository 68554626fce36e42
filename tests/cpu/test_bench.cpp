// The benchmark suite without a GPU: statistics, the regression comparison, the writers and
// the list flags, the whole sweep end to end on the CPU at a tiny size, and the op cases of
// `tiny_llama kernels` checked on the CPU.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "bench/bench.h"
#include "bench/op_case.h"
#include "bench/validate.h"
#include "cli/options.h"
#include "run_outputs.h"

namespace tt::test {
namespace {

namespace fs = std::filesystem;

TEST(Bench, RepetitionStatistics) {
  // Three repetitions of two steps: means 2, 4, 10.
  const RepetitionStats s = repetition_stats({1, 3, 4, 4, 9, 11}, 2);
  EXPECT_DOUBLE_EQ(s.median, 4);
  EXPECT_DOUBLE_EQ(s.min, 2);
  EXPECT_DOUBLE_EQ(s.max, 10);
  EXPECT_DOUBLE_EQ(repetition_stats({1, 2, 3, 4}, 1).median, 2.5);
  EXPECT_DOUBLE_EQ(repetition_stats({5, 6, 7}, 2).median, 5.5);  // an incomplete repetition is dropped
}

BenchPoint point(int version, int batch, double ms, const char* precision = "bf16") {
  BenchPoint p;
  p.version = version, p.batch = batch, p.seq_len = 128, p.precision = precision, p.ms_median = ms;
  return p;
}

TEST(Bench, RegressionsAgainstABaseline) {
  const std::vector<BenchPoint> baseline = {point(1, 8, 10.0), point(2, 8, 2.0), point(2, 16, 3.0)};
  const std::vector<BenchPoint> current = {point(1, 8, 10.4), point(2, 8, 2.5), point(2, 16, 2.0),
                                           point(2, 8, 9.0, "fp32")};  // no fp32 baseline: not compared
  const std::vector<Regression> r = find_regressions(current, baseline, 0.95);
  ASSERT_EQ(r.size(), 1u);  // v1 is 4% slower (allowed); v2 batch 8 is 25% slower
  EXPECT_EQ(r[0].point.version, 2);
  EXPECT_EQ(r[0].point.batch, 8);
  EXPECT_DOUBLE_EQ(r[0].speedup, 0.8);
  EXPECT_TRUE(find_regressions(current, baseline, 0.7).empty());
}

// The ladder breaks only where a version's repetitions are all slower than the one below it;
// a median above it with repetitions that overlap is even, and the line says so.
TEST(Bench, LadderBreaksOnlyBeyondTheSpread) {
  auto timed = [](int version, double median, double min, double max, int batch = 8) {
    BenchPoint p = point(version, batch, median);
    p.ms_min = min, p.ms_max = max;
    return p;
  };
  std::ostringstream log;
  print_ladder(log,
               {timed(4, 1.223, 1.2215, 1.2239), timed(5, 1.225, 1.2209, 1.2259),  // overlapping: even
                timed(4, 2.0, 1.99, 2.01, 16), timed(5, 2.1, 2.05, 2.2, 16),        // disjoint: broken
                timed(4, 3.0, 2.9, 3.1, 32), timed(5, 2.5, 2.4, 2.6, 32),           // faster: holds
                timed(4, 1.5871, 1.586, 1.588, 64), timed(5, 1.5873, 1.585, 1.590, 64)},  // equal as printed
               {{{"bf16", 32, 128}, 4.0}});
  const std::string out = log.str();
  EXPECT_NE(out.find("bf16 batch 8 seq 128: v4 1.223 < v5 1.225  holds, even within the repetitions' spread: v5 and "
                     "v4 (1.221-1.226 against 1.222-1.224 ms);"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("bf16 batch 16 seq 128: v4 2.000 < v5 2.100  BROKEN: v5 slower than v4;"), std::string::npos) << out;
  EXPECT_NE(out.find("bf16 batch 32 seq 128: v4 3.000 > v5 2.500  holds | PyTorch strongest 4.000 (1.60x of it: v5)"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("bf16 batch 64 seq 128: v4 1.587 = v5 1.587  holds, even within the repetitions' spread"),
            std::string::npos)
      << out;
}

TEST(Bench, ListFlags) {
  BenchOptions o;
  ASSERT_TRUE(parse_bench_options({"--levels", "v1,v3", "--batch-sizes", "4,8,16,32", "--seq-lens", "128,256",
                                   "--precisions", "fp32,bf16", "--disable-cuda-graph", "--device", "cpu"},
                                  o));
  EXPECT_EQ(o.versions, (std::vector<int>{1, 3}));
  EXPECT_EQ(o.batch_sizes, (std::vector<int>{4, 8, 16, 32}));
  EXPECT_EQ(o.seq_lens, (std::vector<int>{128, 256}));
  EXPECT_EQ(o.precisions, (std::vector<std::string>{"fp32", "bf16"}));
  EXPECT_EQ(o.disable, (std::vector<std::string>{"cuda-graph"}));
  EXPECT_THROW(parse_bench_options({"--levels", "v7"}, o), UsageError);
}

TEST(Bench, JsonAndCsvWriters) {
  BenchOptions o;
  DeviceInfo d;
  d.name = "Test GPU";
  d.driver = "13.0";
  std::vector<BenchPoint> pts = {point(1, 8, 9.5), point(2, 8, 2.5)};
  pts[1].status = "out of GPU memory";
  std::ostringstream js, csv;
  write_bench_json(js, o, pts, d, "abc123");
  write_bench_csv(csv, pts, d, "abc123");
  const nlohmann::json j = nlohmann::json::parse(js.str());
  EXPECT_EQ(j["environment"]["name"], "Test GPU");
  EXPECT_EQ(j["environment"]["commit"], "abc123");
  ASSERT_EQ(j["points"].size(), 2u);
  EXPECT_EQ(j["points"][1]["status"], "out of GPU memory");
  // The JSON reads back as a baseline.
  const ScratchDir scratch("bench_writer");
  const fs::path p = scratch.path() / "bench.json";
  std::ofstream(p) << js.str();
  const std::vector<BenchPoint> back = read_bench_json(p.string());
  ASSERT_EQ(back.size(), 2u);
  EXPECT_DOUBLE_EQ(back[0].ms_median, 9.5);
  std::string header;
  std::istringstream lines(csv.str());
  std::getline(lines, header);
  EXPECT_EQ(header.rfind("version,batch_size,seq_len,precision,status,ms_median", 0), 0u);
  const std::string text = csv.str();
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 3);
}

int run(const std::string& args, const fs::path& dir) {
  const std::string cmd = std::string(TT_BINARY) + " bench --device cpu --hidden-dim 32 --num-layers 1 --num-heads 2 "
                          "--vocab-size 50 --steps 2 --repeats 2 --timing-warmup-steps 1 " + args + " >" +
                          (dir / "out.txt").string() + " 2>&1";
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(Bench, SweepEndToEndOnTheCpu) {
  const ScratchDir scratch("bench");
  const fs::path& dir = scratch.path();
  const std::string out = " --json " + (dir / "b.json").string() + " --csv " + (dir / "b.csv").string();
  ASSERT_EQ(run("--levels v1 --batch-sizes 2,3 --seq-lens 8,9 --precisions fp32" + out, dir), 0);
  // Each repetition is a run of its own, the points taking turns: in order, then in reverse.
  std::vector<std::string> turns;
  std::ifstream log(dir / "out.txt");
  for (std::string line; std::getline(log, line);)
    if (line.find(" of 2)") != std::string::npos) turns.push_back(line.substr(line.find("batch")));
  EXPECT_EQ(turns, (std::vector<std::string>{"batch 2 seq 8 (1 of 2)", "batch 2 seq 9 (1 of 2)", "batch 3 seq 8 (1 of 2)",
                                             "batch 3 seq 9 (1 of 2)", "batch 3 seq 9 (2 of 2)", "batch 3 seq 8 (2 of 2)",
                                             "batch 2 seq 9 (2 of 2)", "batch 2 seq 8 (2 of 2)"}));
  std::ifstream f(dir / "b.json");
  const nlohmann::json j = nlohmann::json::parse(f);
  ASSERT_EQ(j["points"].size(), 4u);
  for (const auto& p : j["points"]) {
    EXPECT_EQ(p["status"], "ok");
    EXPECT_GT(p["ms_median"].get<double>(), 0);
    EXPECT_NEAR(p["loss"].get<double>(), std::log(49.0), 0.2);
  }
  // The same sweep against itself passes; against a baseline of a nanosecond a step it fails.
  // (The bounds are far apart: on a loaded CPU the same point can run hundreds of times slower.)
  EXPECT_EQ(run("--levels v1 --batch-sizes 2 --seq-lens 8 --precisions fp32 --baseline " + (dir / "b.json").string() +
                    " --min-speedup 0.000001",
                dir),
            0);
  nlohmann::json fast = j;
  for (auto& p : fast["points"]) p["ms_median"] = 1e-6;
  std::ofstream(dir / "fast.json") << fast.dump();
  EXPECT_EQ(run("--levels v1 --batch-sizes 2 --seq-lens 8 --precisions fp32 --baseline " + (dir / "fast.json").string() +
                    " --min-speedup 0.9",
                dir),
            1);
  // The batch-size finder answers without running out of memory.
  EXPECT_EQ(run("--find-max-batch --levels v1 --seq-lens 8 --precisions fp32 --memory-budget 20", dir), 0);
}

}  // namespace
}  // namespace tt::test

namespace tt::test {
namespace {

TEST(Validate, CpuAgainstDoubleAndTheBounds) {
  EXPECT_DOUBLE_EQ(validation_bound("fp32"), 1e-4);
  EXPECT_DOUBLE_EQ(validation_bound("bf16"), 2e-2);
  ValidateOptions o;
  o.base.backend.device = DeviceKind::Cpu;
  o.base.model.hidden = 64;
  o.base.model.layers = 1;
  o.steps = 2;
  std::ostringstream log;
  EXPECT_TRUE(run_validate(o, log)) << log.str();
  EXPECT_NE(log.str().find("cpu-fp64  v1   fp32"), std::string::npos) << log.str();
  EXPECT_NE(log.str().find("pass"), std::string::npos);
}

// The op cases (src/bench/op_case.h): registered in the order of `kernels`' rows, 33 rows of a
// case and a version from v1 to v6.
TEST(OpCases, TheRowsOfKernels) {
  std::vector<std::string> names;
  int rows = 0;
  for (const OpMaker& make : op_cases()) {
    const std::unique_ptr<OpCase> op = make(OpShape{});
    names.push_back(op->name());
    for (int version : versions_from(1)) rows += op->has_version(version);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"attention", "rmsnorm", "swiglu", "rope", "residual_norm",
                                             "cross_entropy", "quantize", "linear", "gated_product",
                                             "qkv_rope", "block_forward", "block_backward"}));
  EXPECT_EQ(rows, 33);
}

// `kernels --check`'s code (check_against_reference) with the fp32 CPU backend in place of the GPU:
// each case in each of its versions (their sequences of calls, v5's FP8 forms too) against the
// reference in double, every output written, the errors under fp32's bounds, the bits repeated.
TEST(OpCases, EachMatchesTheReferenceOnTheCpu) {
  OpShape shape;
  shape.B = 2, shape.T = 32, shape.hidden = 64, shape.heads = 4, shape.kv_heads = 2, shape.head_dim = 16;
  shape.intermediate = 64, shape.vocab = 300;
  for (const OpMaker& make : op_cases())
    for (int version : versions_from(1)) {
      const std::unique_ptr<OpCase> op = make(shape);
      if (!op->has_version(version)) continue;
      SCOPED_TRACE(testing::Message() << op->name() << " v" << version);
      OpRig rig(make, shape, make_cpu_backend(op_plan(version, *op, false)), 42);
      const std::vector<OpCheck> checks = check_against_reference(rig);
      EXPECT_EQ(checks.size(), op->has_forward() && op->has_backward() ? 2u : 1u);  // or "fwd+bwd", or "fwd"
      for (const OpCheck& c : checks) {
        EXPECT_EQ(c.status, "ok") << c.direction;
        EXPECT_TRUE(c.repeatable) << c.direction;
      }
    }
}

}  // namespace
}  // namespace tt::test
