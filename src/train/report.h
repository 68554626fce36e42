// Formatting of the per-step line, the summary block and the JSON report.
#pragma once
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

#include "backend/backend.h"
#include "model/llama.h"
#include "trace/trace.h"
#include "train/checkpoint.h"
#include "train/flops.h"
#include "train/trainer.h"

namespace tt {

std::string format_mb(size_t bytes);
// A time left, as the log line shows it: 42s, 3m07s, 2h05m.
std::string format_duration(double seconds);
std::string step_line(const TrainOptions& o, const StepRecord& s, const MemoryReport& m, int world_size);
void print_summary(std::ostream& log, const TrainOptions& o, const TrainResult& r);
// The end of a --profile run: launches per step, where each profiled step's time went (the
// rows of step_accounts against `step_ms`, the steps as their events measured them), the top-10
// kernels (with their waves where `hot` has them).
void print_profile(std::ostream& log, const TraceData& t, const std::vector<HotspotRow>& hot,
                   const std::vector<double>& step_ms);
// The kernels' time a profiled step by their waves, and what partial last waves leave idle
// (wave_account); nothing without the GPU's limits (sm.sms 0).
void print_waves(std::ostream& log, const TraceData& t, const SmLimits& sm);
// The family table of a --profile run: each family's kernel time a step (all streams), its share,
// its work (`work`: FLOPs for the products and attention, as the FP8 products the layers' where
// the trace has FP8 products and the head's where it ran in FP8, attention its own where it ran
// fused, the products the rest; bytes for the memory-bound families, the copies' and fills' from
// the trace), its rate, and that rate against the ceilings `c` (measured in the run: a product of
// the family's precision, an HBM copy; the datasheet's peaks). Then the rows' sum brought to the
// profiled steps' mean `measured_ms` (their events' time; 0: not shown). A family above its hard
// ceiling (the datasheet's peak; for bytes, an L2-resident copy) is an error of the profile: a
// line says so and it returns false.
bool print_families(std::ostream& log, const TraceData& t, const StepWork& work, const Ceilings& c, double measured_ms);
// The --flops-profile table and the model FLOPs utilization (peak 0: unknown GPU). A module
// faster than its ceiling (product_peak for attention, ffn and the head, whose products may run
// in FP8; peak for the rest) is an error of the profile: a line says so and it returns false.
bool print_flops_profile(std::ostream& log, const std::vector<ModuleFlops>& modules, double step_ms, double peak,
                         const std::string& precision, double product_peak);
nlohmann::json result_json(const TrainOptions& o, const TrainResult& r);

// The precision of the products, as peak_flops names it.
std::string precision_name(const Plan& plan);

// What the run's header tells (src/train/trainer.cpp gathers it).
struct HeaderFacts {
  const TrainOptions& options;
  const TrainResult& result;
  const Backend& backend;
  const CheckpointInfo& resume;  // step 0 and no recipe for a new run
  bool data_parallel;  // a communicator of ranks, even of one
  std::string launcher, communicator;
  DType reduce_dtype;
  std::string tokenizer;  // the data's tokenizer, as the header names it ("": unknown)
};
void print_header(std::ostream& log, const HeaderFacts& facts);
// "every 100 steps and at the end, step files in DIR", or that the run saves nothing.
std::string checkpoints_note(const TrainOptions& o);
std::string cpu_threads_note();

// After the profiled steps: the trace's files in --profile DIR, the hotspots, the FLOP profile.
void report_profile(std::ostream& log, const TrainOptions& o, TrainResult& r, const TraceData& t,
                    const std::string& device);
// --profile-memory: the arena's live bytes by category over one step, into `path`.
void report_memory(std::ostream& log, const std::string& path, const Llama& model);

}  // namespace tt
