// What a kernel trace holds, and everything computed from it: the hotspot table, GPU time
// per model region and per kernel family, launches per step, each step's account of its time,
// and the Chrome trace-event file. Nothing here needs CUDA, so all of it is tested on the CPU;
// the collector is src/trace/cupti_trace.h.
#pragma once
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace tt {

struct TraceRecord {
  enum Kind { Kernel, Memcpy, Memset } kind = Kernel;
  std::string name;
  uint64_t start_ns = 0, end_ns = 0;
  int grid[3] = {0, 0, 0}, block[3] = {0, 0, 0};
  int registers = 0, static_smem = 0, dynamic_smem = 0;
  uint64_t bytes = 0;  // memcpy and memset
  int step = 0;        // which profiled step
  uint32_t stream = 0; // the CUDA stream it ran on (CUPTI's stream id)
  int region = -1;     // index into TraceData::regions (innermost named range), -1 outside any
  double duration_us() const { return double(end_ns - start_ns) / 1e3; }
};

struct TraceData {
  std::vector<std::string> regions;  // paths of nested ranges, e.g. "forward/layer.3/attention"
  std::vector<TraceRecord> records;
  int steps = 0;
};

// The time each record adds to its stream's busy time, in microseconds: its end minus the later
// of its start and the latest end among the records of its stream that started before it. With
// plain launches records of one stream do not overlap, and this is the duration. Under
// programmatic launch (v3) a kernel is placed while the one before it still runs and waits on
// chip for it; counting whole durations would count that overlap twice, so only the part past
// the end of the work before it counts. Records of other streams (AdamW's, NCCL's) run beside
// them and keep their whole time: booking only what a kernel adds to the whole GPU's busy time
// gave a product running beside AdamW almost nothing, and put products above the hardware's
// rate. Every per-kernel and per-region time below is this one.
std::vector<double> added_us(const TraceData& t);

// What bounds the blocks of one kernel an SM holds at once: the GPU's SMs and, per SM, its
// threads, registers, shared memory and blocks, and the shared memory the runtime keeps per block.
struct SmLimits {
  int sms = 0, threads = 0, registers = 0, blocks = 0;
  int64_t shared_bytes = 0, reserved_shared_bytes = 0;
};
// The blocks of kernel r one SM holds at once, by its threads (whole warps), registers (256 a
// warp at a time, in each of the SM's four partitions, as the hardware allocates them) and shared
// memory (its static and dynamic bytes and the runtime's, in 128-byte units, at the largest
// carve-out); at least 1. Thread-block clusters, which may hold fewer, are not modelled.
int resident_blocks(const TraceRecord& r, const SmLimits& sm);
// Its waves: its blocks over the block slots of the whole GPU (SMs x resident_blocks). The GPU
// spreads a kernel's blocks over the SMs before it stacks them, so a kernel of 0.5 waves with 4
// slots an SM runs 2 blocks on each SM (half the warps that could hide its latency), and only a
// kernel of fewer blocks than SMs leaves SMs with nothing; one of 1.25 waves fills every slot, then
// a quarter of them.
double waves(const TraceRecord& r, const SmLimits& sm);
struct HotspotRow {
  std::string name;
  int64_t calls = 0;
  double total_us = 0, mean_us = 0, min_us = 0, max_us = 0, share = 0;  // share of GPU time
  double waves = 0;  // a kernel's, the plain mean over its calls (0: memory operations, or no SM limits)
};
// Per kernel (and memory operation) name, sorted by total time, largest first; the waves with
// the GPU's limits `sm`, where given.
std::vector<HotspotRow> hotspots(const TraceData& t, const SmLimits& sm = {});

struct RegionRow {
  std::string path;
  int64_t kernels = 0;
  double gpu_us = 0, share = 0;  // summed over the profiled steps
};
// GPU time of the records attributed to each innermost region, in first-seen order.
std::vector<RegionRow> region_times(const TraceData& t);

// The kind of work a kernel does, from its name: the rows of the profile's family table.
// "FP8 products" (cuBLASLt's FP8 kernels), "products" (cuBLAS's others), "attention" (fused:
// ours, cuDNN's; unfused v1: its softmax and head reshapes, its products being cuBLAS's),
// "quantizing passes" (the casts of stored tensors, and current scaling's amax passes over
// them), "SwiGLU", "RoPE" and "cross-entropy" (each
// with the passes that make its output's FP8 forms), "RMSNorm", "AdamW", "copies and fills",
// "other".
std::string kernel_family(const std::string& name);
struct FamilyRow {
  std::string family;
  int64_t calls = 0;
  double total_us = 0;  // added_us summed, over the profiled steps
};
// Per family, largest first.
std::vector<FamilyRow> kernel_families(const TraceData& t);
// Whether the trace holds a fused attention kernel (ours or cuDNN's): then attention's own
// products run there, not in cuBLAS's.
bool has_fused_attention(const TraceData& t);

// Kernel launches in each profiled step.
std::vector<int64_t> launches_per_step(const TraceData& t);

// Where a profiled step's time went, in microseconds, so that the rows add up to it: from its
// first record's start to its last record's end (window) = the time some stream ran (busy) + the
// time none did (idle). The kernels' own times (kernel, added_us summed over every stream) exceed
// busy by the time streams ran side by side (concurrent): a CUDA graph runs the backward on a
// stream of its own, and AdamW runs behind it. optimizer_alone is the time when only the
// optimizer's kernels ran: AdamW's exposed part. Copies between host and GPU (the batch's upload,
// the loss's read) wait on the host, which paces them with its own work between steps: they stand
// outside the account.
struct StepAccount {
  double window_us = 0, busy_us = 0, idle_us = 0, kernel_us = 0, concurrent_us = 0, optimizer_alone_us = 0;
};
std::vector<StepAccount> step_accounts(const TraceData& t);

// The kernels' time a profiled step (added_us, the mean over the steps) by their waves: under
// one, one to two, two or more; and the block slots a partial last wave leaves empty, as time, if
// a kernel's blocks all take the same time: each kernel's time x (1 - waves / the waves rounded
// up). Empty slots are fewer warps on an SM, not always an idle SM (see waves), and kernels of
// other streams may fill them: this is what each kernel leaves, not what the GPU lost.
struct WaveAccount {
  double under_one_us = 0, one_to_two_us = 0, two_or_more_us = 0, partial_wave_idle_us = 0;
};
WaveAccount wave_account(const TraceData& t, const SmLimits& sm);

// Chrome trace-event JSON (opens in Perfetto and chrome://tracing): the records on a "GPU"
// track, the named ranges on a second track, each range spanning its records; ranges of one
// step nest, since their records run in sequence on one stream.
void write_chrome_trace(std::ostream& out, const TraceData& t);
void write_kernels_csv(std::ostream& out, const std::vector<HotspotRow>& rows);
void write_regions_csv(std::ostream& out, const std::vector<RegionRow>& rows);

// "tt::cuda::(anonymous namespace)::rms_kernel<float>(float*, ...)" -> "rms_kernel<float>".
std::string short_kernel_name(const std::string& demangled);

}  // namespace tt
