// `tiny_llama kernels` (see kernels.h): every row builds a CUDA backend for the plan of one
// implementation, lays out its workspace and an op case's tensors in an arena (op_case.h: an
// OpRig), fills them with random values, and times the case's calls. A batch of calls is captured as a CUDA
// graph and replayed between two events, so that the time is the GPU's, not the launches'.
#include "bench/kernels.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "bench/bench.h"
#include "bench/gpu_clocks.h"
#include "bench/op_case.h"
#include "core/files.h"
#include "model/config.h"
#include "train/ceilings.h"

namespace tt {

bool KernelBenchOptions::runs(const std::string& op) const {
  return ops.empty() || std::find(ops.begin(), ops.end(), op) != ops.end();
}

void KernelBenchOptions::validate() const {
  std::vector<std::string> names;
  for (const OpMaker& make : op_cases()) names.push_back(make(OpShape{})->name());
  for (const std::string& op : ops)
    if (std::find(names.begin(), names.end(), op) == names.end())
      usage_fail("--ops: the operations are " + fmt::format("{}", fmt::join(names, ", ")) + " (got '" + op + "')");
  auto positive = [](int v, const char* flag) {
    if (v <= 0) usage_fail(std::string(flag) + ": must be a positive integer (got " + std::to_string(v) + ")");
  };
  if (versions.empty()) usage_fail("--levels: give at least one of v1 to v" + std::to_string(kLatestVersion));
  for (int v : versions)
    if (v < 1 || v > kLatestVersion)
      usage_fail("--levels: implementations are v1 to v" + std::to_string(kLatestVersion) + " (got v" +
                 std::to_string(v) + ")");
  if (precision != "bf16" && precision != "fp32") usage_fail("--precision: must be bf16 or fp32 (got '" + precision + "')");
  positive(batch, "--batch-size");
  positive(seq_len, "--seq-len");
  positive(long_batch, "--long-batch");
  if (seq_lens.empty()) usage_fail("--seq-lens: give at least one sequence length");
  for (int t : seq_lens) positive(t, "--seq-lens");
  positive(hidden, "--hidden-dim");
  positive(heads, "--num-heads");
  positive(kv_heads, "--num-kv-heads");
  positive(head_dim, "--head-dim");
  positive(intermediate, "--intermediate-size");
  if (vocab < 2 || vocab > (1 << 20)) usage_fail("--vocab-size: must be in [2, 1048576] (got " + std::to_string(vocab) + ")");
  if (heads % kv_heads != 0) usage_fail("--num-kv-heads: must divide --num-heads");
  if (head_dim % 2 != 0) usage_fail("--head-dim: must be even (RoPE rotates pairs)");
  positive(repeats, "--repeats");
  if (warmup < 0) usage_fail("--warmup: must not be negative (got " + std::to_string(warmup) + ")");
  // Every tensor must stay under 2^31 elements (the widest is gate|up or qkv, per token).
  const int64_t width = std::max({int64_t(2) * intermediate, int64_t(heads + 2 * kv_heads) * head_dim, int64_t(hidden)});
  auto check_shape = [&](int b, int t, const char* flag) {
    if (int64_t(b) * t * width > INT_MAX)
      usage_fail(std::string(flag) + ": batch " + std::to_string(b) + " x sequence " + std::to_string(t) +
                 " gives a tensor of more than 2^31 elements");
  };
  check_shape(batch, seq_len, "--seq-len");
  for (int t : seq_lens) check_shape(long_batch, t, "--seq-lens");
  if (!csv_path.empty()) check_writable(csv_path, "--csv");
  if (!json_path.empty()) check_writable(json_path, "--json");
  if (check && programmatic) usage_fail("--programmatic: it changes how calls are timed, and --check times none");
}

namespace {

size_t gpu_l2_bytes() {
  static const size_t bytes = device_info(true).l2_bytes;
  return bytes;
}

// The SM clock reader of the run (gpu_clocks.h), opened on first use.
const GpuClocks& gpu_clocks() {
  static const GpuClocks clocks;
  return clocks;
}

// Per-call milliseconds of `times` replays of a graph of `calls` calls; with `clocks`, also the
// SM clock sampled while each replay runs.
std::vector<double> replay_ms(Backend& be, const std::function<void()>& call, int calls, int times,
                              std::vector<GpuClocks::Sample>* clocks = nullptr) {
  if (!be.graph_capture_begin()) fail("kernel bench: the backend cannot capture CUDA graphs");
  for (int i = 0; i < calls; ++i) call();
  be.graph_capture_end();
  be.graph_replay();  // the first replay uploads the graph
  std::vector<double> ms;
  for (int i = 0; i < times; ++i) {
    be.mark(0);
    be.graph_replay();
    if (clocks) clocks->push_back(gpu_clocks().sample());  // the replay is running on the GPU now
    be.mark(1);
    ms.push_back(be.elapsed_ms(0, 1) / calls);
  }
  return ms;
}

// A timed call: milliseconds per call over the repetitions, and the SM clock they ran at.
struct CallTiming {
  RepetitionStats ms;
  int sm_mhz = 0;             // the median of the repetitions' samples; 0 without NVML
  double clock_limited = 0;   // the share of repetitions with the clock held down for power or heat
};

// Warm-up calls run eagerly (they do any first-call set-up); then a graph of one call tells
// how many calls make a batch of about a millisecond, and the repetitions time such batches.
CallTiming time_call(Backend& be, const std::function<void()>& call, const KernelBenchOptions& o) {
  for (int i = 0; i < o.warmup; ++i) call();
  be.synchronize();
  const double one = repetition_stats(replay_ms(be, call, 1, 3), 1).median;
  const int calls = std::clamp(int(std::ceil(1.0 / std::max(one, 1e-4))), 1, 200);
  std::vector<GpuClocks::Sample> clocks;
  CallTiming t;
  t.ms = repetition_stats(replay_ms(be, call, calls, o.repeats, &clocks), 1);
  if (!gpu_clocks().available()) return t;
  std::vector<double> mhz;
  for (const GpuClocks::Sample& c : clocks) {
    mhz.push_back(c.sm_mhz);
    t.clock_limited += c.limited ? 1.0 / double(clocks.size()) : 0.0;
  }
  t.sm_mhz = int(repetition_stats(mhz, 1).median);
  return t;
}

// The rows of one case on its rig: forward and backward.
void time_op(OpRig& r, const KernelBenchOptions& o, std::vector<KernelRow>& rows, KernelRow row) {
  Backend& be = r.backend();
  OpCase& op = r.op();
  const bool has_fwd = op.has_forward();
  const std::function<void()> fwd = [&] { op.forward(be); }, bwd = [&] { op.backward(be); };
  const OpWork work = op.work(double(dtype_size(be.act_dtype())));
  const double fwd_amount = work.fwd, bwd_amount = work.bwd;
  const bool flops = work.flops;
  for (int backward = 0; backward < 2; ++backward) {
    if (!has_fwd && !backward) continue;  // an operation timed in one row (the cross-entropy)
    if (!op.has_backward() && backward) continue;  // a forward alone (the QKV product with RoPE)
    KernelRow x = row;
    x.direction = !has_fwd ? "fwd+bwd" : backward ? "bwd" : "fwd";
    (flops ? x.flops : x.bytes) = backward ? bwd_amount : fwd_amount;
    x.in_l2 = !flops && x.bytes < double(gpu_l2_bytes());
    try {
      if (has_fwd) fwd();  // the backward reads what the forward saved
      const CallTiming t = time_call(be, backward ? bwd : fwd, o);
      x.ms = t.ms.median, x.ms_min = t.ms.min, x.ms_max = t.ms.max;
      x.sm_mhz = t.sm_mhz, x.clock_limited = t.clock_limited;
    } catch (const UsageError& e) {  // an implementation that refuses this shape
      x.status = e.what();
    }
    rows.push_back(x);
  }
  if (flops && has_fwd && op.has_backward() && rows.back().status == "ok" && rows[rows.size() - 2].status == "ok") {
    KernelRow both = row;
    both.direction = "fwd+bwd";
    both.flops = fwd_amount + bwd_amount;
    both.ms = rows[rows.size() - 2].ms + rows.back().ms;
    both.ms_min = rows[rows.size() - 2].ms_min + rows.back().ms_min;
    both.ms_max = rows[rows.size() - 2].ms_max + rows.back().ms_max;
    both.sm_mhz = std::min(rows[rows.size() - 2].sm_mhz, rows.back().sm_mhz);
    both.clock_limited = std::max(rows[rows.size() - 2].clock_limited, rows.back().clock_limited);
    rows.push_back(both);
  }
}

// The check of one case on its rig (check_against_reference, op_case.h), a row per direction.
void check_op(OpRig& rig, std::vector<KernelRow>& rows, const KernelRow& row) {
  for (const OpCheck& c : check_against_reference(rig)) {
    KernelRow x = row;
    x.direction = c.direction, x.error = c.error, x.bound = c.bound, x.repeatable = c.repeatable, x.status = c.status;
    rows.push_back(x);
  }
}

// The ceilings: cuBLAS products of 8192 x 8192 x 8192 in bf16 and in fp32 and a 1 GiB copy, each
// on a v1 backend (train/ceilings.h measures them).
KernelCeilings measure_ceilings() {
  auto v1_backend = [](bool amp) {
    Plan p = plan_for_version(1);
    p.amp = amp;
    return make_backend({DeviceKind::Cuda, p, 0, false});
  };
  KernelCeilings c;
  c.gemm_bf16_tflops = measured_product_rate(*v1_backend(true), DType::BF16, DType::BF16, 8192) / 1e12;
  const std::unique_ptr<Backend> fp32 = v1_backend(false);
  c.gemm_fp32_tflops = measured_product_rate(*fp32, DType::F32, DType::F32, 8192) / 1e12;
  const size_t bytes = size_t(1) << 30;
  c.copy_gbps = 2.0 * double(bytes) / (measured_copy_ms(*fp32, bytes) * 1e-3) / 1e9;
  c.l2_bytes = gpu_l2_bytes();
  return c;
}

// Rates, fractions of the ceilings, and the speed against v2's row of the same measurement.
void finish_rows(std::vector<KernelRow>& rows, const KernelCeilings& c, bool bf16) {
  const double gemm = bf16 ? c.gemm_bf16_tflops : c.gemm_fp32_tflops;
  for (KernelRow& r : rows) {
    if (r.status != "ok") continue;
    if (r.flops > 0) {
      r.tflops = r.flops / (r.ms * 1e-3) / 1e12;
      r.ceiling_fraction = r.tflops / gemm;
    } else {
      r.gbps = r.bytes / (r.ms * 1e-3) / 1e9;
      r.ceiling_fraction = r.gbps / c.copy_gbps;
    }
  }
  for (KernelRow& r : rows)
    for (const KernelRow& base : rows)
      if (r.status == "ok" && base.status == "ok" && base.version == r.base_version && base.op == r.op &&
          base.direction == r.direction && base.shape == r.shape)
        r.vs_base = base.ms / r.ms;
}

// Whether a row of our own (v3's kernels, v4's fusions) meets its target: attention at 90% of
// its base's rate (cuDNN's, v2, for v3; v5's two backward kernels for v6's one), v5's products
// faster than v4's and v6's QKV product with RoPE and its blocks' forward faster than v5's
// launches one by one, the memory-bound operations at 80% of the copy bandwidth, where their bytes
// do not fit in L2 (there the rate is not an HBM rate, and no target applies).
std::string target(const KernelRow& r) {
  if (r.status != "ok") return "";
  if (r.op == "quantize") return r.in_l2 ? "in L2" : r.ceiling_fraction >= 0.8 ? "met" : "MISSED";
  if (r.version <= r.base_version) return "";
  if (r.op == "attention") return r.vs_base == 0 ? "" : r.vs_base >= 0.9 ? "met" : "MISSED";
  if (r.op == "linear" || r.op == "gated_product" || r.op == "qkv_rope" || r.op == "block_forward" ||
      r.op == "block_backward")
    return r.vs_base == 0 ? "" : r.vs_base >= 1.0 ? "met" : "MISSED";
  if (r.in_l2) return "in L2";
  return r.ceiling_fraction >= 0.8 ? "met" : "MISSED";
}

std::string short_status(const std::string& status) {
  if (status.find("not implemented") != std::string::npos) return "not implemented";
  return status.size() > 100 ? status.substr(0, 97) + "..." : status;
}
// How a row's calls were launched, as the CSV and JSON say it.
const char* launch_name(const KernelRow& r) { return r.programmatic ? "programmatic" : "plain"; }

void print_table(std::ostream& log, const std::vector<KernelRow>& rows) {
  log << fmt::format("{:<15}{:<8}{:<15}{:<5}{:>10}{:>17}{:>9}{:>8}{:>7}  {}\n", "op", "dir", "shape", "impl", "ms",
                     "rate", "% ceil", "vs base", "MHz", "target");
  for (const KernelRow& r : rows) {
    const std::string head = fmt::format("{:<15}{:<8}{:<15}v{:<4}", r.op, r.direction, r.shape, r.version);
    if (r.status != "ok") {
      log << head << "  " << short_status(r.status) << "\n";
      continue;
    }
    const std::string rate = r.flops > 0 ? fmt::format("{:.1f} TFLOP/s", r.tflops)
                                         : fmt::format("{:.0f} GB/s{}", r.gbps, r.in_l2 ? " (L2)" : "");
    const std::string vs = r.vs_base > 0 && r.version > r.base_version ? fmt::format("{:.2f}x", r.vs_base) : "";
    const std::string mhz = r.sm_mhz > 0 ? fmt::format("{}{}", r.sm_mhz, r.clock_limited >= 0.5 ? "*" : " ") : "";
    log << head << fmt::format("{:>10.4f}{:>17}{:>8.1f}%{:>8}{:>7}  {}\n", r.ms, rate, 100 * r.ceiling_fraction, vs, mhz,
                               target(r));
  }
}

void print_check(std::ostream& log, const std::vector<KernelRow>& rows) {
  log << fmt::format("{:<15}{:<8}{:<15}{:<5}{:>11}{:>9}{:>7}  {}\n", "op", "dir", "shape", "impl", "error", "bound",
                     "repeat", "result");
  int failed = 0;
  for (const KernelRow& r : rows) {
    const std::string head = fmt::format("{:<15}{:<8}{:<15}v{:<4}", r.op, r.direction, r.shape, r.version);
    if (r.error < 0) {  // did not run
      log << head << "  " << short_status(r.status) << "\n";
      ++failed;
      continue;
    }
    failed += r.status != "ok";
    log << head << fmt::format("{:>11.2e}{:>9.0e}{:>7}  {}\n", r.error, r.bound, r.repeatable ? "yes" : "no",
                               r.status == "ok" ? "ok" : short_status(r.status));
  }
  log << fmt::format("\n{} of {} rows match the CPU reference in double{}\n", rows.size() - size_t(failed), rows.size(),
                     failed ? "" : " (every output written, our kernels' bits repeatable)");
}

void write_csv(std::ostream& out, const KernelBenchOptions& o, const std::vector<KernelRow>& rows,
               const KernelCeilings& c, const DeviceInfo& d, const std::string& commit) {
  out << "op,direction,shape,version,precision,status,ms_median,ms_min,ms_max,flops,bytes,tflops,gbps,"
         "ceiling_fraction,base_version,vs_base,in_l2,gemm_bf16_tflops,gemm_fp32_tflops,copy_gbps,device,sm_clock_mhz,"
         "driver,cuda,commit,run_sm_mhz,clock_limited,launch\n";
  for (const KernelRow& r : rows)
    out << fmt::format("{},{},{},v{},{},\"{}\",{:.5f},{:.5f},{:.5f},{:.0f},{:.0f},{:.3f},{:.1f},{:.4f},v{},{:.4f},{},{:.1f},"
                       "{:.1f},{:.1f},\"{}\",{},{},{},{},{},{:.2f},{}\n",
                       r.op, r.direction, r.shape, r.version, o.precision, short_status(r.status), r.ms, r.ms_min,
                       r.ms_max, r.flops, r.bytes, r.tflops, r.gbps, r.ceiling_fraction, r.base_version, r.vs_base,
                       r.in_l2 ? 1 : 0, c.gemm_bf16_tflops, c.gemm_fp32_tflops, c.copy_gbps, d.name, d.sm_clock_mhz,
                       d.driver, d.runtime, commit, r.sm_mhz, r.clock_limited, launch_name(r));
}

void write_json(std::ostream& out, const KernelBenchOptions& o, const std::vector<KernelRow>& rows,
                const KernelCeilings& c, const DeviceInfo& d, const std::string& commit) {
  nlohmann::json list = nlohmann::json::array();
  for (const KernelRow& r : rows)
    list.push_back({{"op", r.op}, {"direction", r.direction}, {"shape", r.shape}, {"version", r.version},
                    {"status", short_status(r.status)}, {"ms_median", r.ms}, {"ms_min", r.ms_min},
                    {"ms_max", r.ms_max}, {"flops", r.flops}, {"bytes", r.bytes}, {"tflops", r.tflops},
                    {"gbps", r.gbps}, {"ceiling_fraction", r.ceiling_fraction}, {"base_version", r.base_version},
                    {"vs_base", r.vs_base}, {"in_l2", r.in_l2},
                    {"sm_mhz", r.sm_mhz}, {"clock_limited", r.clock_limited}, {"target", target(r)},
                    {"launch", launch_name(r)}});
  out << nlohmann::json{{"environment", environment_json(d, commit)},
                        {"precision", o.precision},
                        {"model", {{"hidden", o.hidden}, {"heads", o.heads}, {"kv_heads", o.kv_heads},
                                   {"head_dim", o.head_dim}, {"intermediate", o.intermediate}, {"vocab", o.vocab}}},
                        {"timing", {{"warmup_calls", o.warmup}, {"repetitions", o.repeats},
                                    {"programmatic", o.programmatic}}},
                        {"ceilings", {{"gemm_bf16_tflops", c.gemm_bf16_tflops},
                                      {"gemm_fp32_tflops", c.gemm_fp32_tflops},
                                      {"copy_gbps", c.copy_gbps}, {"l2_bytes", c.l2_bytes}}},
                        {"rows", list}}
             .dump(2)
      << "\n";
}

}  // namespace

std::vector<KernelRow> run_kernel_bench(const KernelBenchOptions& o, std::ostream& log) {
  o.validate();
  std::string why;
  if (!cuda_available(&why)) usage_fail("kernels: the kernel benchmark needs a CUDA GPU: " + why);
  const bool bf16 = o.precision == "bf16";
  const DeviceInfo device = device_info(true);
  const std::string commit = git_commit();
  log << fmt::format("Kernel benchmark on {} (SM clock {} MHz, driver {}, CUDA {}) | commit {}\n", device.name,
                     device.sm_clock_mhz, device.driver, device.runtime, commit);
  log << fmt::format("{} | heads {} (kv {}) of {}, hidden {}, ffn {} | {} warm-up calls, median of {} repetitions "
                     "(each a CUDA graph of calls adding up to about 1 ms), {}\n",
                     o.precision, o.heads, o.kv_heads, o.head_dim, o.hidden, o.intermediate, o.warmup, o.repeats,
                     o.programmatic ? "the calls launched programmatically where the version's step is, v3 on "
                                      "(--programmatic: each may start before the one before it ends; v1 and v2 plain)"
                                    : "each call launched plainly, after the one before it ends");
  log << "Accounting: causal attention fwd = 4 B H T^2 D / 2 FLOPs, bwd = 2.5 x fwd; the others: the bytes each\n"
         "must move at least (every input read once, every output written once). Ceilings: a cuBLAS 8192^3 GEMM, a\n"
         "1 GiB device-to-device copy as (read + write) bytes / time. Rows whose bytes fit in the L2 cache are\n"
         "marked (L2): their rate is not an HBM rate. Base: v2 for v3's kernels, v3 for v4's fusions (residual_norm,\n"
         "cross_entropy), v4's bf16 products for v5's FP8 ones (linear: the gate/up projection's three products,\n"
         "FLOPs 2 x tokens x hidden x 2 ffn each, against the bf16 GEMM ceiling). quantize: v5's pass from bf16 to\n"
         "FP8 in both layouts (2 + 1 + 1 bytes an element); swiglu v5: made straight in FP8, both layouts, against\n"
         "v3's bf16 kernel; gated_product v5: the gate/up product with SwiGLU in its epilogue, and down's input\n"
         "gradient with SwiGLU's backward in its, against v4's cuBLAS product and SwiGLU kernel (the products'\n"
         "FLOPs); attention v6: the backward in one kernel (sequences of at most 128), against v5's two; qkv_rope\n"
         "v6: the QKV product with RoPE in its epilogue (a forward alone), against v5's cuBLAS product and RoPE\n"
         "kernel; block_forward v6: two layers' forward in one persistent launch (blocks-forward-in-one-launch,\n"
         "sequences of 128 tokens; elsewhere the operations one by one), against v5's launches one by one (the\n"
         "products' and the attention's FLOPs); block_backward v6: their backward, weight gradients included, in\n"
         "one persistent launch (blocks-backward-in-one-launch, the same sequences), after their forward one by one\n"
         "(its fwd row), against v5's. Target: attention >= 0.90x its base, linear and gated_product faster than\n"
         "v4, qkv_rope, block_forward and block_backward faster than v5, the others >= 80% copy outside L2.\n"
         "The cross_entropy takes at most 16384 rows of a shape (a fused-classifier chunk) and --vocab-size padded\n"
         "to a multiple of 128.\n"
         "MHz: the median SM clock NVML reported while a row's repetitions ran, * where the GPU held it down for\n"
         "power or heat in most of them. Under a long compute-heavy load the GPU reaches its power limit, and a\n"
         "kernel can slow down before the reported clock does: more --warmup calls time a row there.\n"
      << std::flush;
  const KernelCeilings ceilings = o.check ? KernelCeilings{} : measure_ceilings();
  if (!o.check)
    log << fmt::format("Ceilings: bf16 GEMM {:.1f} TFLOP/s, fp32 GEMM {:.1f} TFLOP/s, device copy {:.0f} GB/s\n\n",
                       ceilings.gemm_bf16_tflops, ceilings.gemm_fp32_tflops, ceilings.copy_gbps)
        << std::flush;

  auto shape_of = [&](int B, int T) {
    OpShape s;
    s.B = B, s.T = T, s.hidden = o.hidden, s.heads = o.heads, s.kv_heads = o.kv_heads, s.head_dim = o.head_dim;
    s.intermediate = o.intermediate, s.vocab = o.vocab, s.bf16_inputs = bf16;
    return s;
  };
  std::vector<OpShape> shapes = {shape_of(o.batch, o.seq_len)};
  if (!o.check)  // the reference in double is too slow for the long sequences
    for (int t : o.seq_lens) shapes.push_back(shape_of(o.long_batch, t));
  std::vector<KernelRow> rows;
  for (const OpShape& shape : shapes)
    for (int version : o.versions)
      for (const OpMaker& make : op_cases()) {
        const std::unique_ptr<OpCase> op = make(shape);
        if (!op->has_version(version) || !o.runs(op->name())) continue;
        KernelRow row;
        row.op = op->name(), row.shape = shape.label(), row.version = version;
        row.base_version = op->base_version(version);
        std::unique_ptr<OpRig> rig;
        try {
          const Plan plan = op_plan(version, *op, bf16, o.programmatic);
          row.programmatic = plan.programmatic_launch;
          rig = std::make_unique<OpRig>(make, shape, make_backend({DeviceKind::Cuda, plan}), o.seed);
        } catch (const UsageError& e) {  // a switch not implemented yet, a shape it refuses, or out of memory
          for (const char* dir : {"fwd", "bwd"}) {
            row.direction = dir, row.status = e.what();
            rows.push_back(row);
          }
          continue;
        }
        if (o.check)
          check_op(*rig, rows, row);
        else
          time_op(*rig, o, rows, row);
      }
  // Side by side: the implementations of one operation, direction and shape.
  std::vector<KernelRow> grouped;
  for (const OpShape& shape : shapes)
    for (const OpMaker& make : op_cases()) {
      const std::string op = make(shape)->name();
      for (const char* dir : {"fwd", "bwd", "fwd+bwd"})
        for (int version : o.versions)
          for (const KernelRow& r : rows)
            if (r.shape == shape.label() && r.op == op && r.direction == dir && r.version == version)
              grouped.push_back(r);
    }
  rows = grouped;
  if (o.check) {
    print_check(log, rows);
  } else {
    finish_rows(rows, ceilings, bf16);
    print_table(log, rows);
  }
  if (!o.csv_path.empty())
    write_file_atomic(o.csv_path, [&](std::ostream& out) { write_csv(out, o, rows, ceilings, device, commit); });
  if (!o.json_path.empty())
    write_file_atomic(o.json_path, [&](std::ostream& out) { write_json(out, o, rows, ceilings, device, commit); });
  return rows;
}

int kernel_check_failures(const std::vector<KernelRow>& rows) {
  return int(std::count_if(rows.begin(), rows.end(), [](const KernelRow& r) { return r.status != "ok"; }));
}

}  // namespace tt
