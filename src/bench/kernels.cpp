// `tiny_llama kernels` (see kernels.h): every row builds a CUDA backend for the plan of one
// implementation, lays out its workspace and the operation's tensors in an arena, fills them
// with random values, and times the backend's calls. A batch of calls is captured as a CUDA
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
#include "core/files.h"
#include "core/rng.h"
#include "model/config.h"
#include "model/params.h"
#include "ops/rope.h"

namespace tt {

void KernelBenchOptions::validate() const {
  auto positive = [](int v, const char* flag) {
    if (v <= 0) usage_fail(std::string(flag) + ": must be a positive integer (got " + std::to_string(v) + ")");
  };
  if (versions.empty()) usage_fail("--impl: give at least one of v1, v2, v3, v4");
  for (int v : versions)
    if (v < 1 || v > 4) usage_fail("--impl: implementations are v1 to v4 (got v" + std::to_string(v) + ")");
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
}

namespace {

enum class Op { Attention, RmsNorm, SwiGlu, Rope, ResidualNorm, CrossEntropy };
const Op kOps[] = {Op::Attention, Op::RmsNorm, Op::SwiGlu, Op::Rope, Op::ResidualNorm, Op::CrossEntropy};

const char* op_name(Op op) {
  switch (op) {
    case Op::Attention: return "attention";
    case Op::RmsNorm: return "rmsnorm";
    case Op::SwiGlu: return "swiglu";
    case Op::Rope: return "rope";
    case Op::ResidualNorm: return "residual_norm";
    case Op::CrossEntropy: return "cross_entropy";
  }
  return "?";
}

// Version 3's kernels are compared with version 2's, version 4's fusions with version 3's; an
// operation has no row for a version where it is the same as the one below.
bool fused_in_v4(Op op) { return op == Op::ResidualNorm || op == Op::CrossEntropy; }
int base_version(Op op) { return fused_in_v4(op) ? 3 : 2; }
bool has_row(Op op, int version) { return fused_in_v4(op) ? version >= 3 : version <= 3; }
constexpr int64_t kMaxClassifierRows = 16384;

// The plan of `version` for timing `op`: the preset in the run's precision with the custom
// kernels of the other operations off (they do not change this operation), so that a row is
// refused only when its own kernel is missing. Launched the plain way: a kernel timed on its
// own, like its v2 counterpart and the copy it is measured against (programmatic launch would
// overlap each repetition with the end of the one before).
Plan op_plan(int version, Op op, bool amp) {
  Plan p = plan_for_version(version);
  p.amp = amp;
  p.tf32 = false;
  p.programmatic_launch = false;
  if (op != Op::Attention) p.custom_attention = false;
  // In fp32 the backend keeps v2's materialized attention where its scores fit (it is faster
  // there); the v3 row times our FMA flash attention all the same.
  if (op == Op::Attention && version >= 3) p.flash_attention = false;
  if (op != Op::RmsNorm && op != Op::ResidualNorm) p.custom_rmsnorm = false;  // v3's norm: the residual's base
  if (op != Op::SwiGlu) p.custom_swiglu = false;
  if (op != Op::Rope) p.custom_rope = false;
  if (op != Op::ResidualNorm) p.fused_residual_norm = false;
  if (op != Op::CrossEntropy) p.fused_classifier = false;
  p.fused_adamw = p.gemm_epilogues = false;  // not timed here
  return p;
}

struct Shape {
  int B, T;
  std::string label() const { return fmt::format("B{} T{}", B, T); }
};

// The operations' tensors of one shape, in the backend's types (see the op headers).
struct Buffers {
  Tensor qkv, att, saved, dqkv, datt;     // attention; RoPE rotates the heads of qkv in place
  Tensor x, w, out, rstd, dout, dx, dw;  // RMSNorm
  Tensor gateup, h, dh, dgateup;         // SwiGLU
  Tensor table;                          // RoPE's cos/sin
  Tensor b, sum, dres;                   // the residual add: x + b, and the residual stream's gradient
  Tensor logits, targets, losses;        // the cross-entropy, [ce_rows, padded vocab]
};

// A backend of one plan with its workspace and the buffers of one shape in one arena.
struct Rig {
  std::unique_ptr<Backend> be;
  std::unique_ptr<Arena> arena;  // declared after be: released before it
  Buffers buf;
  AttnShape attn;
  int64_t n = 0;        // tokens
  int64_t ce_rows = 0;  // the cross-entropy's rows: the tokens, at most kMaxClassifierRows
  int padded_vocab = 0;
};

uint64_t g_stream = 0;  // a fresh random stream per filled tensor

// Uniform values in [lo, hi), converted to the tensor's type and uploaded.
void fill_uniform(Backend& be, const Tensor& t, double lo, double hi, uint64_t seed) {
  const CounterRng rng(seed, kStreamTest + ++g_stream);
  std::vector<float> v(size_t(t.numel));
#pragma omp parallel for
  for (int64_t i = 0; i < t.numel; ++i) v[size_t(i)] = float(lo + (hi - lo) * rng.uniform(uint64_t(i)));
  if (t.dtype == DType::F32) return be.upload(t, v.data());
  TT_CHECK(t.dtype == DType::BF16, std::string("kernel bench: cannot fill ") + dtype_name(t.dtype));
  std::vector<bf16> b(v.size());
#pragma omp parallel for
  for (int64_t i = 0; i < t.numel; ++i) b[size_t(i)] = float_to_bf16(v[size_t(i)]);
  be.upload(t, b.data());
}

// The cross-entropy's logits (up to 1.6 GB) only in a rig for that operation.
std::unique_ptr<Rig> make_rig(const Plan& plan, const KernelBenchOptions& o, const Shape& s, bool logits) {
  auto r = std::make_unique<Rig>();
  r->be = make_backend({DeviceKind::Cuda, plan, false});
  Backend& be = *r->be;
  r->attn = {s.B, s.T, o.heads, o.kv_heads, o.head_dim};
  r->n = int64_t(s.B) * s.T;
  r->ce_rows = logits ? std::min(r->n, kMaxClassifierRows) : 0;
  r->padded_vocab = padded_vocab(o.vocab, be.vocab_padding_multiple());
  const int64_t n = r->n, C = o.hidden, F = o.intermediate, HD = int64_t(o.heads) * o.head_dim;
  const DType A = be.act_dtype(), S = be.acc_dtype(), M = be.master_dtype();
  const TensorSpec saved = be.attention_saved(r->attn);
  const ModelShape shape{s.B, s.T, o.hidden, o.heads, o.kv_heads, o.head_dim, o.intermediate, ModelConfig().vocab_size};
  r->arena = std::make_unique<Arena>(be.memory());
  Buffers& b = r->buf;
  r->arena->build([&](Arena& a) {
    be.layout_workspace(a, shape);
    auto take = [&](DType d, int64_t numel) { return a.take(Category::Activations, d, numel); };
    b.qkv = take(A, n * r->attn.ld()), b.att = take(A, n * HD), b.saved = take(saved.dtype, saved.numel);
    b.dqkv = take(A, n * r->attn.ld()), b.datt = take(A, n * HD);
    b.x = take(A, n * C), b.w = take(A, C), b.out = take(A, n * C), b.rstd = take(S, n);
    b.dout = take(A, n * C), b.dx = take(A, n * C), b.dw = take(M, C);
    b.gateup = take(A, n * 2 * F), b.h = take(A, n * F), b.dh = take(A, n * F), b.dgateup = take(A, n * 2 * F);
    b.table = take(S, int64_t(s.T) * o.head_dim);
    b.b = take(A, n * C), b.sum = take(A, n * C), b.dres = take(A, n * C);
    b.logits = take(A, r->ce_rows * r->padded_vocab), b.targets = take(DType::I32, r->ce_rows);
    b.losses = take(DType::F32, r->ce_rows);
  });
  for (const Tensor* t : {&b.qkv, &b.dqkv, &b.datt, &b.x, &b.dout, &b.gateup, &b.dh, &b.b, &b.dres})
    fill_uniform(be, *t, -1, 1, o.seed);
  fill_uniform(be, b.logits, -4, 4, o.seed);
  std::vector<int32_t> targets(size_t(r->ce_rows));
  const CounterRng rng(o.seed, kStreamTest);
  for (size_t i = 0; i < targets.size(); ++i) targets[i] = int32_t(rng.below(i, uint32_t(o.vocab)));
  be.upload(b.targets, targets.data());
  fill_uniform(be, b.w, 0.5, 1.5, o.seed);
  be.zero(b.dw);
  TT_CHECK(S == DType::F32, "kernel bench: the CUDA backend keeps RoPE's table in fp32");
  const std::vector<double> table = rope_table(s.T, o.head_dim, 10000.0);
  const std::vector<float> table_f(table.begin(), table.end());
  be.upload(b.table, table_f.data());
  return r;
}

// The rotations one RoPE operation makes, as the model makes them (src/model/llama.cpp): the
// query and key heads in one call with the custom-rope switch, else one call each.
std::vector<RopeShape> rope_calls(const Rig& r) {
  const AttnShape& s = r.attn;
  if (r.be->plan().custom_rope) return {{r.n, s.T, s.H + s.KVH, s.D, 0, s.ld()}};
  return {{r.n, s.T, s.H, s.D, 0, s.ld()}, {r.n, s.T, s.KVH, s.D, s.k_col(), s.ld()}};
}

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

double attention_forward_flops(const AttnShape& s) { return 4.0 * s.B * s.H * double(s.T) * s.T * s.D / 2; }

// The rows of one operation on one rig: forward and backward.
void time_op(Rig& r, Op op, const KernelBenchOptions& o, std::vector<KernelRow>& rows, KernelRow row) {
  Backend& be = *r.be;
  const Buffers& b = r.buf;
  const AttnShape& s = r.attn;
  const double a = double(dtype_size(be.act_dtype())), n = double(r.n), C = o.hidden, F = o.intermediate;
  std::function<void()> fwd, bwd;
  double fwd_amount = 0, bwd_amount = 0;  // FLOPs (attention) or bytes
  switch (op) {
    case Op::Attention:
      fwd = [&] { be.attention_forward(b.att, b.saved, b.qkv, s); };
      bwd = [&] { be.attention_backward(b.dqkv, b.datt, b.qkv, b.att, b.saved, s); };
      fwd_amount = attention_forward_flops(s);
      bwd_amount = 2.5 * fwd_amount;
      break;
    case Op::RmsNorm:
      fwd = [&] { be.rmsnorm_forward(b.out, b.rstd, b.x, b.w, r.n, o.hidden, 1e-5); };
      bwd = [&] { be.rmsnorm_backward(b.dx, b.dw, b.dout, b.x, b.w, b.rstd, r.n, o.hidden, false); };
      fwd_amount = a * (2 * n * C + C) + 4 * n;
      bwd_amount = a * (3 * n * C + C) + 4 * n + 8 * C;
      break;
    case Op::SwiGlu:
      fwd = [&] { be.swiglu_forward(b.h, b.gateup, r.n, o.intermediate); };
      bwd = [&] { be.swiglu_backward(b.dgateup, b.dh, b.gateup, r.n, o.intermediate); };
      fwd_amount = a * 3 * n * F;
      bwd_amount = a * 5 * n * F;
      break;
    case Op::ResidualNorm:  // as the model makes it: one kernel each way with the switch, else the add apart
      if (be.plan().fused_residual_norm) {
        fwd = [&] { be.add_rmsnorm_forward(b.sum, b.out, b.rstd, b.x, b.b, b.w, r.n, o.hidden, 1e-5); };
        bwd = [&] { be.rmsnorm_backward_add(b.dres, b.dw, b.dout, b.sum, b.w, b.rstd, r.n, o.hidden, false); };
      } else {
        fwd = [&] {
          be.add(b.sum, b.x, b.b);
          be.rmsnorm_forward(b.out, b.rstd, b.sum, b.w, r.n, o.hidden, 1e-5);
        };
        bwd = [&] {
          be.rmsnorm_backward(b.dx, b.dw, b.dout, b.sum, b.w, b.rstd, r.n, o.hidden, false);
          be.add(b.dres, b.dres, b.dx);
        };
      }
      fwd_amount = a * (4 * n * C + C) + 4 * n;
      bwd_amount = a * (4 * n * C + C) + 4 * n + 8 * C;
      break;
    case Op::CrossEntropy: {  // one row, fwd+bwd: the loss and the gradient, over the logits
      const double scale = 1.0 / double(r.ce_rows);
      if (be.plan().fused_classifier)
        bwd = [&, scale] {
          be.cross_entropy_fused(b.losses, b.logits, b.targets, r.ce_rows, o.vocab, r.padded_vocab, scale);
        };
      else
        bwd = [&, scale] {
          be.cross_entropy_forward(b.losses, b.logits, b.targets, r.ce_rows, o.vocab, r.padded_vocab);
          be.cross_entropy_backward(b.logits, b.logits, b.targets, r.ce_rows, o.vocab, r.padded_vocab, scale);
        };
      bwd_amount = a * 2 * double(r.ce_rows) * r.padded_vocab + 8.0 * double(r.ce_rows);
      break;
    }
    case Op::Rope: {
      const std::vector<RopeShape> calls = rope_calls(r);
      fwd = [&, calls] { for (const RopeShape& c : calls) be.rope_forward(b.qkv, b.table, c); };
      bwd = [&, calls] { for (const RopeShape& c : calls) be.rope_backward(b.dqkv, b.table, c); };
      fwd_amount = bwd_amount = 2 * a * n * (s.H + s.KVH) * s.D + 4.0 * s.T * s.D;
      break;
    }
  }
  const bool flops = op == Op::Attention;
  for (int backward = 0; backward < 2; ++backward) {
    if (!fwd && !backward) continue;  // an operation timed in one row (the cross-entropy)
    KernelRow x = row;
    x.direction = !fwd ? "fwd+bwd" : backward ? "bwd" : "fwd";
    (flops ? x.flops : x.bytes) = backward ? bwd_amount : fwd_amount;
    x.in_l2 = !flops && x.bytes < double(gpu_l2_bytes());
    try {
      if (fwd) fwd();  // the backward reads what the forward saved
      const CallTiming t = time_call(be, backward ? bwd : fwd, o);
      x.ms = t.ms.median, x.ms_min = t.ms.min, x.ms_max = t.ms.max;
      x.sm_mhz = t.sm_mhz, x.clock_limited = t.clock_limited;
    } catch (const UsageError& e) {  // an implementation that refuses this shape
      x.status = e.what();
    }
    rows.push_back(x);
  }
  if (flops && rows.back().status == "ok" && rows[rows.size() - 2].status == "ok") {
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

// A ceiling GEMM: C = A B with square n x n operands of `dtype`, on a v1 backend (cuBLAS).
double gemm_tflops(DType dtype, int size, const KernelBenchOptions& o) {
  Plan p = plan_for_version(1);
  p.amp = dtype == DType::BF16;
  std::unique_ptr<Backend> be = make_backend({DeviceKind::Cuda, p, false});
  Arena arena(be->memory());
  Gemm g;
  g.m = g.n = g.k = size;
  g.lda = g.ldb = g.ldc = size;
  const int64_t numel = int64_t(size) * size;
  arena.build([&](Arena& a) {
    be->layout_workspace(a, ModelShape{1, 2, 64, 1, 1, 64, 64, ModelConfig().vocab_size});
    g.a = a.take(Category::Workspace, dtype, numel);
    g.b = a.take(Category::Workspace, dtype, numel);
    g.c = a.take(Category::Workspace, dtype, numel);
  });
  fill_uniform(*be, g.a, -1, 1, o.seed);
  fill_uniform(*be, g.b, -1, 1, o.seed);
  const CallTiming t = time_call(*be, [&] { be->matmul(g); }, o);
  return 2.0 * size * double(size) * size / (t.ms.median * 1e-3) / 1e12;
}

KernelCeilings measure_ceilings(const KernelBenchOptions& o) {
  KernelCeilings c;
  c.gemm_bf16_tflops = gemm_tflops(DType::BF16, 8192, o);
  c.gemm_fp32_tflops = gemm_tflops(DType::F32, 8192, o);
#ifdef TT_HAVE_CUDA
  c.copy_gbps = device_copy_gbps(size_t(1) << 30, o.warmup, o.repeats);
#endif
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
// cuDNN's (v2's) rate, the memory-bound operations at 80% of the copy bandwidth, where their
// bytes do not fit in L2 (there the rate is not an HBM rate, and no target applies).
std::string target(const KernelRow& r) {
  if (r.version <= r.base_version || r.status != "ok") return "";
  if (r.op == "attention") return r.vs_base == 0 ? "" : r.vs_base >= 0.9 ? "met" : "MISSED";
  if (r.in_l2) return "in L2";
  return r.ceiling_fraction >= 0.8 ? "met" : "MISSED";
}

std::string short_status(const std::string& status) {
  if (status.find("not implemented") != std::string::npos) return "not implemented";
  return status.size() > 100 ? status.substr(0, 97) + "..." : status;
}

void print_table(std::ostream& log, const std::vector<KernelRow>& rows) {
  log << fmt::format("{:<14}{:<8}{:<15}{:<5}{:>10}{:>17}{:>9}{:>8}{:>7}  {}\n", "op", "dir", "shape", "impl", "ms",
                     "rate", "% ceil", "vs base", "MHz", "target");
  for (const KernelRow& r : rows) {
    const std::string head = fmt::format("{:<14}{:<8}{:<15}v{:<4}", r.op, r.direction, r.shape, r.version);
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

void write_csv(std::ostream& out, const KernelBenchOptions& o, const std::vector<KernelRow>& rows,
               const KernelCeilings& c, const DeviceInfo& d, const std::string& commit) {
  out << "op,direction,shape,version,precision,status,ms_median,ms_min,ms_max,flops,bytes,tflops,gbps,"
         "ceiling_fraction,base_version,vs_base,in_l2,gemm_bf16_tflops,gemm_fp32_tflops,copy_gbps,device,sm_clock_mhz,"
         "driver,cuda,commit,run_sm_mhz,clock_limited\n";
  for (const KernelRow& r : rows)
    out << fmt::format("{},{},{},v{},{},\"{}\",{:.5f},{:.5f},{:.5f},{:.0f},{:.0f},{:.3f},{:.1f},{:.4f},v{},{:.4f},{},{:.1f},"
                       "{:.1f},{:.1f},\"{}\",{},{},{},{},{},{:.2f}\n",
                       r.op, r.direction, r.shape, r.version, o.precision, short_status(r.status), r.ms, r.ms_min,
                       r.ms_max, r.flops, r.bytes, r.tflops, r.gbps, r.ceiling_fraction, r.base_version, r.vs_base,
                       r.in_l2 ? 1 : 0, c.gemm_bf16_tflops, c.gemm_fp32_tflops, c.copy_gbps, d.name, d.sm_clock_mhz,
                       d.driver, d.runtime, commit, r.sm_mhz, r.clock_limited);
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
                    {"sm_mhz", r.sm_mhz}, {"clock_limited", r.clock_limited}, {"target", target(r)}});
  out << nlohmann::json{{"environment", environment_json(d, commit)},
                        {"precision", o.precision},
                        {"model", {{"hidden", o.hidden}, {"heads", o.heads}, {"kv_heads", o.kv_heads},
                                   {"head_dim", o.head_dim}, {"intermediate", o.intermediate}, {"vocab", o.vocab}}},
                        {"timing", {{"warmup_calls", o.warmup}, {"repetitions", o.repeats}}},
                        {"ceilings", {{"gemm_bf16_tflops", c.gemm_bf16_tflops},
                                      {"gemm_fp32_tflops", c.gemm_fp32_tflops},
                                      {"copy_gbps", c.copy_gbps}, {"l2_bytes", c.l2_bytes}}},
                        {"rows", list}}
             .dump(2)
      << "\n";
}

}  // namespace

void run_kernel_bench(const KernelBenchOptions& o, std::ostream& log) {
  o.validate();
  std::string why;
  if (!cuda_available(&why)) usage_fail("kernels: the kernel benchmark needs a CUDA GPU: " + why);
  const bool bf16 = o.precision == "bf16";
  const DeviceInfo device = device_info(true);
  const std::string commit = git_commit();
  log << fmt::format("Kernel benchmark on {} (SM clock {} MHz, driver {}, CUDA {}) | commit {}\n", device.name,
                     device.sm_clock_mhz, device.driver, device.runtime, commit);
  log << fmt::format("{} | heads {} (kv {}) of {}, hidden {}, ffn {} | {} warm-up calls, median of {} repetitions "
                     "(each a CUDA graph of calls adding up to about 1 ms)\n",
                     o.precision, o.heads, o.kv_heads, o.head_dim, o.hidden, o.intermediate, o.warmup, o.repeats);
  log << "Accounting: causal attention fwd = 4 B H T^2 D / 2 FLOPs, bwd = 2.5 x fwd; the others: the bytes each\n"
         "must move at least (every input read once, every output written once). Ceilings: a cuBLAS 8192^3 GEMM, a\n"
         "1 GiB device-to-device copy as (read + write) bytes / time. Rows whose bytes fit in the L2 cache are\n"
         "marked (L2): their rate is not an HBM rate. Base: v2 for v3's kernels, v3 for v4's fusions (residual_norm,\n"
         "cross_entropy). Target: attention >= 0.90x v2 (cuDNN), the others >= 80% copy outside L2. The\n"
         "cross_entropy takes at most 16384 rows of a shape (a fused-classifier chunk) and --vocab-size padded to\n"
         "a multiple of 128.\n"
         "MHz: the median SM clock NVML reported while a row's repetitions ran, * where the GPU held it down for\n"
         "power or heat in most of them. Under a long compute-heavy load the GPU reaches its power limit, and a\n"
         "kernel can slow down before the reported clock does: more --warmup calls time a row there.\n"
      << std::flush;
  const KernelCeilings ceilings = measure_ceilings(o);
  log << fmt::format("Ceilings: bf16 GEMM {:.1f} TFLOP/s, fp32 GEMM {:.1f} TFLOP/s, device copy {:.0f} GB/s\n\n",
                     ceilings.gemm_bf16_tflops, ceilings.gemm_fp32_tflops, ceilings.copy_gbps)
      << std::flush;

  std::vector<Shape> shapes = {{o.batch, o.seq_len}};
  for (int t : o.seq_lens) shapes.push_back({o.long_batch, t});
  std::vector<KernelRow> rows;
  for (const Shape& shape : shapes)
    for (int version : o.versions) {
      std::unique_ptr<Rig> rig;  // shared by the operations whose plans are the same
      std::string rig_plan, refusal;
      for (Op op : kOps) {
        const Plan plan = op_plan(version, op, bf16);
        const std::string key = describe(plan) + (op == Op::CrossEntropy ? " with logits" : "");
        if (!rig || key != rig_plan) {
          rig.reset();
          refusal.clear();
          rig_plan = key;
          try {
            rig = make_rig(plan, o, shape, op == Op::CrossEntropy);
          } catch (const UsageError& e) {  // a switch not implemented yet, or out of memory
            refusal = e.what();
          }
        }
        if (!has_row(op, version)) continue;
        KernelRow row;
        row.op = op_name(op), row.shape = shape.label(), row.version = version, row.base_version = base_version(op);
        if (!rig) {
          for (const char* dir : {"fwd", "bwd"}) {
            row.direction = dir, row.status = refusal;
            rows.push_back(row);
          }
          continue;
        }
        time_op(*rig, op, o, rows, row);
      }
    }
  // Side by side: the implementations of one operation, direction and shape.
  std::vector<KernelRow> grouped;
  for (const Shape& shape : shapes)
    for (Op op : kOps)
      for (const char* dir : {"fwd", "bwd", "fwd+bwd"})
        for (int version : o.versions)
          for (const KernelRow& r : rows)
            if (r.shape == shape.label() && r.op == op_name(op) && r.direction == dir && r.version == version)
              grouped.push_back(r);
  rows = grouped;
  finish_rows(rows, ceilings, bf16);
  print_table(log, rows);
  if (!o.csv_path.empty())
    write_file_atomic(o.csv_path, [&](std::ostream& out) { write_csv(out, o, rows, ceilings, device, commit); });
  if (!o.json_path.empty())
    write_file_atomic(o.json_path, [&](std::ostream& out) { write_json(out, o, rows, ceilings, device, commit); });
}

}  // namespace tt
