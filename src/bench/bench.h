// The benchmark suite behind `tiny_llama bench`: a sweep of versions x batch sizes x
// sequence lengths x precisions, each point trained several times (its repetitions, each a run
// of its own: a warm-up, then timed steps; the points take turns); the median and spread of the
// step time, throughput, the forward/backward/optimizer split, peak memory, MFU and loss; a
// terminal table, CSV and JSON with the machine and the git commit; a comparison against a
// baseline file (the performance regression test); and the largest batch that fits a memory
// budget (the batch-size finder).
#pragma once
#include <nlohmann/json_fwd.hpp>
#include <map>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "plan/plan.h"

#include "train/trainer.h"

namespace tt {

// Which of n runs goes k-th in round `round` when runs take turns: in the listed order, then in
// reverse, so that each runs early as often as late (a GPU warming over the job, or a choice made
// once a run, weighs on every run alike). bench's points and ablate's configurations take turns so.
inline size_t turn(int round, size_t k, size_t n) { return round % 2 ? n - 1 - k : k; }

struct BenchOptions {
  TrainOptions base;  // model shape, device, seed, data; its plan carries the user's switches
  std::vector<std::string> enable, disable;  // switches applied to every point's version preset
  std::vector<int> versions = versions_from(1);
  bool selected = false;  // --levels or --precisions given: on the CPU, only v1 fp32 may be asked for
  std::vector<int> batch_sizes = {8};
  std::vector<int> seq_lens = {128};
  std::vector<std::string> precisions = {"fp32", "bf16"};
  int timing_warmup = 5, steps = 10, repeats = 5;  // each repetition a run: the warm-up, then `steps` timed
  std::string csv_path, json_path, baseline_path;
  std::string pytorch_path;  // tools/pytorch_reference.py --json: its strongest mode beside the ladder
  double min_speedup = 0;  // with a baseline: fail when current/baseline speed is below this
  bool find_max_batch = false;
  double memory_budget_mb = 0;  // 0: the GPU's free memory (host memory on the CPU)
};

struct BenchPoint {
  int version = 1, batch = 0, seq_len = 0;
  std::string precision, plan, status = "ok";  // status: ok, or why the point did not run
  double ms_median = 0, ms_min = 0, ms_max = 0, spread = 0;  // over repetitions; spread = (max-min)/median
  double forward_ms = 0, backward_ms = 0, optimizer_ms = 0;
  double samples_per_sec = 0, tokens_per_sec = 0, tflops = 0, mfu = 0, loss = 0;
  size_t peak_bytes = 0;
};

// Median, min, max of the repetition means (each the mean of `per` consecutive values).
struct RepetitionStats {
  double median = 0, min = 0, max = 0;
};
RepetitionStats repetition_stats(const std::vector<double>& values, int per);

// Points of `current` slower than the same point in `baseline` by more than allowed:
// speedup = baseline ms / current ms < min_speedup. Points are matched by version, batch,
// sequence length and precision.
struct Regression {
  BenchPoint point;
  double baseline_ms, speedup;
};
std::vector<Regression> find_regressions(const std::vector<BenchPoint>& current, const std::vector<BenchPoint>& baseline,
                                         double min_speedup);

std::vector<BenchPoint> read_bench_json(const std::string& path);
void write_bench_csv(std::ostream& out, const std::vector<BenchPoint>& points, const DeviceInfo& device,
                     const std::string& commit);
void write_bench_json(std::ostream& out, const BenchOptions& o, const std::vector<BenchPoint>& points,
                      const DeviceInfo& device, const std::string& commit);

// The commit of the source tree (TT_GIT_COMMIT when set, else git; "+dirty" with local changes),
// and the machine and commit as the reports' "environment" object.
std::string git_commit();
// "tiny_llama 0.4.0 (commit ...)": what tiny_llama --version prints (the project's version in CMakeLists.txt).
std::string program_version();
nlohmann::json environment_json(const DeviceInfo& device, const std::string& commit);

// The ladder's lines: each precision and shape, its versions by median and whether each is no
// slower than the one below (medians above it but repetitions that overlap: even, not broken);
// `torch` (PyTorch's strongest by precision, batch and sequence length) beside them.
void print_ladder(std::ostream& log, const std::vector<BenchPoint>& points,
                  const std::map<std::tuple<std::string, int, int>, double>& torch);

// Runs everything the options ask for; returns false when the regression check failed.
bool run_bench(const BenchOptions& o, std::ostream& log);

}  // namespace tt
