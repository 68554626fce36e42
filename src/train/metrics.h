// --metrics: the run's JSON lines, one at every log step, each written whole and flushed, so that
// a run that stops early (a signal, an error, a kill) leaves every line up to its last log. A
// resumed run appends: the lines of steps after the one it continues from (a killed run's) are
// dropped first, so that the file stays one increasing series. A line that cannot be written (a
// full disk) never costs the model: the log says so once and the run goes on without metrics.
#pragma once
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

namespace tt {

class MetricsLog {
 public:
  MetricsLog() = default;  // writes nothing
  // Keeps the lines of `path` up to step `from` (all of them dropped when from is 0: a new run).
  // UsageError naming --metrics when the file cannot be opened.
  MetricsLog(const std::string& path, int64_t from);
  bool open() const { return out_.is_open(); }
  // The last step the kept lines hold (-1: none).
  int64_t last_step() const { return last_step_; }
  void write(const nlohmann::json& line, std::ostream& log);

 private:
  std::string path_;
  std::ofstream out_;
  int64_t last_step_ = -1;
};

}  // namespace tt
