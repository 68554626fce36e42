// The ablation study behind `tiny_llama ablate`: a version's full plan, then that plan with
// each of its switches turned off in turn, each trained and timed in the same process, several
// runs each, the configurations taking turns (bench.h's turn()), and one table of the median ms
// per step, samples/s, peak memory and the change against the full plan.
#pragma once
#include <ostream>
#include <string>
#include <vector>

#include "train/trainer.h"

namespace tt {

struct AblateOptions {
  TrainOptions train;
  std::string csv_path;
  int repeats = 3;  // runs of each configuration; its row is their median
};

struct AblationRow {
  std::string config;  // "full v2" or "-qkv-fusion"
  double step_ms = 0, samples_per_sec = 0, final_loss = 0;
  size_t peak_bytes = 0;
  double change = 0;  // step time against the full plan, +0.05 = 5% slower
};

std::vector<AblationRow> run_ablation(const AblateOptions& options, std::ostream& log);

}  // namespace tt
