#include "train/metrics.h"

#include <fstream>
#include <sstream>
#include <vector>

#include "core/error.h"
#include "core/files.h"
#include "core/json_input.h"

namespace tt {

MetricsLog::MetricsLog(const std::string& path, int64_t from) : path_(path) {
  std::vector<std::string> kept;
  if (from > 0) {
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);) {
      // A line of this format with a step of at most `from`; anything else ends the series.
      nlohmann::json j;
      try {
        j = parse_json_input(line, "--metrics", 2);
      } catch (const UsageError&) {
        break;
      }
      if (!j.is_object() || !j.contains("step") || !j["step"].is_number_integer() || j["step"].get<int64_t>() > from) break;
      last_step_ = j["step"].get<int64_t>();
      kept.push_back(line);
    }
  }
  if (from > 0 && !kept.empty()) {  // the kept lines, then the file appended to
    write_file_atomic(path, [&](std::ostream& out) {
      for (const std::string& line : kept) out << line << "\n";
    });
    out_.open(path, std::ios::app);
  } else {
    out_.open(path, std::ios::trunc);
  }
  if (!out_) usage_fail("--metrics: cannot write '" + path + "'");
}

void MetricsLog::write(const nlohmann::json& line, std::ostream& log) {
  if (!out_.is_open()) return;
  out_ << line.dump() + "\n" << std::flush;
  if (out_) {
    last_step_ = line.value("step", last_step_);
    return;
  }
  log << "Warning: --metrics: cannot write '" << path_ << "' (disk full?): the run goes on without metrics\n";
  out_.close();
}

}  // namespace tt
