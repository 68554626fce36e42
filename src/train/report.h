// Formatting of the per-step line, the summary block and the JSON report.
#pragma once
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

#include "train/trainer.h"

namespace tt {

std::string format_mb(size_t bytes);
std::string step_line(const TrainOptions& o, const StepRecord& s, const MemoryReport& m);
void print_summary(std::ostream& log, const TrainOptions& o, const TrainResult& r);
nlohmann::json result_json(const TrainOptions& o, const TrainResult& r);

}  // namespace tt
