// The FLOP profile behind --flops-profile: FLOPs and parameters per model module, from the
// one formula of model/config.h split by where the work happens, joined with the GPU time
// the kernel trace measured for each module's ranges; and the model FLOPs utilization
// against the peak of the precision in use.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "model/config.h"
#include "trace/trace.h"

namespace tt {

struct ModuleFlops {
  std::string module;  // the innermost range name: attention, ffn, head_loss, ...
  int64_t params = 0;
  double forward_flops = 0, backward_flops = 0;  // per step, all layers
  double forward_us = 0, backward_us = 0;        // measured, per step
  double weight_gradient_flops = 0;              // of backward_flops, the weight gradients' products
};

// The modules of one step with their FLOPs (times zero); forward + backward sums to
// training_flops(config, batch, seq_len).
std::vector<ModuleFlops> module_flops(const ModelConfig& c, int64_t batch, int64_t seq_len);

// A step's FLOPs by the kernels that do them: the layers' products, the head's (the logits and
// their two gradients), and attention's own (q k^T and P v, causal), forward and backward; they
// sum to training_flops.
struct StepWork {
  double layer_products = 0, head_products = 0, attention = 0;
  bool head_fp8 = false;  // the head's products run in FP8 too (version 5's fp8-head)
  std::map<std::string, double> bytes;  // the memory-bound families' least bytes (Llama::family_bytes)
};
StepWork step_work(const ModelConfig& c, int64_t batch, int64_t seq_len);

// Adds the measured GPU time per module (mean over the trace's steps). With the fused classifier
// the head's backward products run inside the forward's head_loss range: where that range has
// forward time and no backward time, its backward FLOPs move to the forward row with them. With
// grouped-weight-gradients a layer's weight gradients run in one launch in a weight_gradients
// range of their own: its time goes to the modules in proportion to their weight_gradient_flops.
void add_measured_times(std::vector<ModuleFlops>& modules, const TraceData& trace);

// Dense peak FLOP rate of the precision in use on a known GPU (datasheet values, listed in
// docs/profiling.md), or 0 when the GPU is not in the table.
double peak_flops(const std::string& device_name, const std::string& precision);

}  // namespace tt
