// The numerical validation behind `tiny_llama validate`: every version and precision against
// the CPU reference in double at a small size (loss, every parameter's gradient, and N
// training steps), and against v1 at the chosen size (losses over N steps and the first
// step's gradients). Fails when an error exceeds the bound of its precision.
#pragma once
#include <ostream>
#include <string>
#include <vector>

#include "plan/plan.h"

#include "train/trainer.h"

namespace tt {

struct ValidateOptions {
  TrainOptions base;  // the model and batch for the comparison against v1; the device
  int steps = 10;
  std::vector<int> versions = versions_from(1);
  std::vector<std::string> precisions = {"fp32", "bf16"};
  bool selected = false;  // --levels or --precisions given: on the CPU, only v1 fp32 may be asked for
  std::string json_path;
};

struct ValidationRow {
  std::string against;  // "cpu-fp64" or "v1"
  int version = 1;
  std::string precision, status = "ok";  // status: ok, or why it did not run
  double loss_error = 0, grad_error = 0, track_error = 0;  // relative
  double bound = 0;
  bool pass = true;
};

// The bound of a precision: fp32 1e-4, tf32 5e-3, bf16 2e-2 (relative error).
double validation_bound(const std::string& precision);

// Runs the validation, prints the table; false when a check failed.
bool run_validate(const ValidateOptions& o, std::ostream& log);

}  // namespace tt
