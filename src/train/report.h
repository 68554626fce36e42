// Formatting of the per-step line, the summary block and the JSON report.
#pragma once
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

#include "train/flops.h"
#include "trace/trace.h"
#include "train/trainer.h"

namespace tt {

std::string format_mb(size_t bytes);
// A time left, as the log line shows it: 42s, 3m07s, 2h05m.
std::string format_duration(double seconds);
std::string step_line(const TrainOptions& o, const StepRecord& s, const MemoryReport& m, int world_size);
void print_summary(std::ostream& log, const TrainOptions& o, const TrainResult& r);
// The end of a --profile run: launches per step, GPU busy time, the top-10 kernels.
void print_profile(std::ostream& log, const TraceData& t, const std::vector<HotspotRow>& hot);
// The --flops-profile table and the model FLOPs utilization (peak 0: unknown GPU).
void print_flops_profile(std::ostream& log, const std::vector<ModuleFlops>& modules, double step_ms, double peak,
                         const std::string& precision);
nlohmann::json result_json(const TrainOptions& o, const TrainResult& r);

}  // namespace tt
