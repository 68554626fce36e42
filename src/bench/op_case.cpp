// The op cases' registry, their rig (a case laid out on a backend, filled from a seed), `kernels --check`'s
// comparison with the CPU reference in double, and the extra checks' log (see op_case.h).
#include "bench/op_case.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <tuple>

#include "core/dtype.h"
#include "core/rng.h"
#include "model/config.h"

namespace tt {

// The cases, one line each (src/bench/ops/), in the order of `kernels`' rows.
std::unique_ptr<OpCase> attention_case(const OpShape&);
std::unique_ptr<OpCase> rmsnorm_case(const OpShape&);
std::unique_ptr<OpCase> swiglu_case(const OpShape&);
std::unique_ptr<OpCase> rope_case(const OpShape&);
std::unique_ptr<OpCase> residual_norm_case(const OpShape&);
std::unique_ptr<OpCase> cross_entropy_case(const OpShape&);
std::unique_ptr<OpCase> quantize_case(const OpShape&);
std::unique_ptr<OpCase> linear_case(const OpShape&);
std::unique_ptr<OpCase> gated_product_case(const OpShape&);
std::unique_ptr<OpCase> qkv_rope_case(const OpShape&);
std::unique_ptr<OpCase> block_forward_case(const OpShape&);
std::unique_ptr<OpCase> block_backward_case(const OpShape&);

const std::vector<OpMaker>& op_cases() {
  static const std::vector<OpMaker> cases = {attention_case, rmsnorm_case,       swiglu_case,   rope_case,
                                             residual_norm_case, cross_entropy_case, quantize_case, linear_case,
                                             gated_product_case, qkv_rope_case, block_forward_case,
                                             block_backward_case};
  return cases;
}

std::string OpShape::label() const { return fmt::format("B{} T{}", B, T); }

// Launched the plain way unless asked: a kernel timed on its own, like its v2 counterpart and the
// copy it is measured against (programmatic launch overlaps each call with the end of the one
// before, as the kernels of a step overlap).
Plan op_plan(int version, const OpCase& op, bool amp, bool programmatic) {
  Plan p = plan_for_version(version);
  p.amp = amp;
  p.tf32 = false;
  p.programmatic_launch = programmatic && p.programmatic_launch;
  p.fused_adamw = p.gemm_epilogues = false;  // no case's: the step's
  const std::vector<bool Plan::*> mine = op.switches();
  for (const OpMaker& make : op_cases())
    for (bool Plan::*s : make(op.shape())->switches())
      if (std::find(mine.begin(), mine.end(), s) == mine.end()) p.*s = false;
  op.adjust_plan(p);
  return p;
}

namespace {

// `values` rounded to the check's input type (fp32, or bf16 for the activations of a bf16 run),
// then uploaded in the tensor's type.
void upload_values(Backend& be, const Tensor& t, std::vector<double> values, bool round_bf16) {
  for (double& v : values) v = round_bf16 ? bf16_to_float(float_to_bf16(float(v))) : double(float(v));
  if (t.dtype == DType::F64) return be.upload(t, values.data());
  if (t.dtype == DType::F32) {
    const std::vector<float> f(values.begin(), values.end());
    return be.upload(t, f.data());
  }
  if (is_fp8(t.dtype)) {  // the codes of the values, unscaled (NaN for a poison)
    std::vector<uint8_t> q(values.size());
    for (size_t i = 0; i < q.size(); ++i) q[i] = float_to_fp8(float(values[i]), fp8_format(t.dtype));
    return be.upload(t, q.data());
  }
  TT_CHECK(t.dtype == DType::BF16, std::string("op case: cannot fill ") + dtype_name(t.dtype));
  std::vector<bf16> h(values.size());
  for (size_t i = 0; i < h.size(); ++i) h[i] = float_to_bf16(float(values[i]));
  be.upload(t, h.data());
}

std::vector<double> uniform_values(int64_t n, double lo, double hi, uint64_t seed, uint64_t stream) {
  const CounterRng rng(seed, kStreamTest + stream);
  std::vector<double> v(static_cast<size_t>(n));
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = lo + (hi - lo) * rng.uniform(uint64_t(i));
  return v;
}

}  // namespace

void fill_uniform(Backend& be, const Tensor& t, double lo, double hi, uint64_t seed, uint64_t stream, bool round_bf16) {
  upload_values(be, t, uniform_values(t.numel, lo, hi, seed, stream), round_bf16);
}

void poison_values(Backend& be, const Tensor& t) {
  upload_values(be, t, std::vector<double>(size_t(t.numel), std::nan("")), false);
}

std::vector<double> download_values(Backend& be, const Tensor& t) {
  std::vector<double> out(size_t(t.numel));
  if (t.dtype == DType::F64) {
    be.download(out.data(), t);
  } else if (t.dtype == DType::F32) {
    std::vector<float> f(out.size());
    be.download(f.data(), t);
    std::copy(f.begin(), f.end(), out.begin());
  } else if (is_fp8(t.dtype)) {  // the codes' values, unscaled
    std::vector<uint8_t> q(out.size());
    be.download(q.data(), t);
    for (size_t i = 0; i < q.size(); ++i) out[i] = fp8_to_float(q[i], fp8_format(t.dtype));
  } else {
    TT_CHECK(t.dtype == DType::BF16, std::string("op case: cannot read ") + dtype_name(t.dtype));
    std::vector<bf16> h(out.size());
    be.download(h.data(), t);
    for (size_t i = 0; i < h.size(); ++i) out[i] = bf16_to_float(h[i]);
  }
  return out;
}

Fp8Matrix OpLayout::fp8(int64_t r, int64_t c, double range) {
  const Tensor slot = take(DType::F32, kFp8SlotFloats);
  fp8_slots_.emplace_back(slot, range);
  return Fp8Matrix{take(DType::F8E4M3, r * c), take(DType::F8E4M3, r * c), c, r, slot};
}

std::vector<double> OpFill::draw(int64_t n, double lo, double hi, uint64_t stream) const {
  return uniform_values(n, lo, hi, seed_, stream);
}
void OpFill::upload(const Tensor& t, std::vector<double> values) { upload_values(be_, t, std::move(values), bf16_); }
void OpFill::table(const Tensor& t, std::vector<double> values) { upload_values(be_, t, std::move(values), false); }

void OpFill::tokens(const Tensor& t, int below) {
  std::vector<int32_t> ids(size_t(t.numel));
  const CounterRng rng(seed_, kStreamTest);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(rng.below(i, uint32_t(below)));
  be_.upload(t, ids.data());
}

OpRig::OpRig(const OpMaker& make, const OpShape& shape, std::unique_ptr<Backend> backend, uint64_t seed)
    : make_(make), shape_(shape), seed_(seed), be_(std::move(backend)), op_(make(shape)) {
  Backend& be = *be_;
  const ModelShape model{shape.B,        shape.T,           shape.hidden,
                         shape.heads,    shape.kv_heads,    shape.head_dim,
                         shape.intermediate, ModelConfig().vocab_size};
  arena_ = std::make_unique<Arena>(be.memory());
  arena_->build([&](Arena& a) {
    be.layout_workspace(a, model);
    fp8_slots_.clear();
    OpLayout l(a, be, fp8_slots_);
    op_->layout(l);
  });
  fill();
}

std::vector<double> OpRig::values(const Tensor& t) { return download_values(*be_, t); }

// Delayed scaling's slots as a history would leave them, each from its tensor's range; then the
// case's inputs.
void OpRig::fill() {
  for (const auto& [slot, range] : fp8_slots_) {
    const float scale = fp8_scale(float(range), Fp8Format::E4M3);
    std::vector<float> s(kFp8SlotFloats, 0.0f);
    s[0] = 1.0f / scale, s[1] = scale, s[3] = float(fp8_spec(Fp8Format::E4M3).max_finite);
    be_->upload(slot, s.data());
  }
  OpFill f(*be_, seed_, shape_.bf16_inputs);
  op_->fill(f);
}

std::pair<OpRig::Outputs, OpRig::Outputs> OpRig::run(bool poison) {
  fill();
  if (poison)
    for (const Tensor& t : op_->written()) poison_values(*be_, t);
  std::pair<Outputs, Outputs> out;
  if (op_->has_forward()) {
    op_->forward(*be_);
    for (const OpOutput& o : op_->outputs(false)) out.first.emplace_back(o.name, values(o.t));
  }
  if (op_->has_backward()) {
    op_->backward(*be_);
    for (const OpOutput& o : op_->outputs(true)) out.second.emplace_back(o.name, values(o.t));
  }
  return out;
}

OpRig OpRig::reference() const {
  OpShape shape = shape_;
  shape.vocab_multiple = std::max(shape.vocab_multiple, be_->vocab_padding_multiple());  // logits laid out as here
  return OpRig(make_, shape, make_cpu_backend_f64(be_->plan()), seed_);
}

std::vector<OpCheck> check_against_reference(OpRig& ours) {
  OpRig ref = ours.reference();
  const auto expected = ref.run(false), got = ours.run(true), again = ours.run(true);
  std::vector<OpCheck> checks;
  for (int backward = 0; backward < 2; ++backward) {
    if ((!ours.op().has_forward() && !backward) || (!ours.op().has_backward() && backward)) continue;
    const OpRig::Outputs &a = backward ? got.second : got.first, &b = backward ? expected.second : expected.first,
                         &a2 = backward ? again.second : again.first;
    OpCheck c;
    c.direction = !ours.op().has_forward() ? "fwd+bwd" : backward ? "bwd" : "fwd";
    c.bound = ours.op().bound(ours.backend());
    std::string worst;
    for (size_t i = 0; i < a.size(); ++i) {
      const std::vector<double>&x = a[i].second, &y = b[i].second;
      double err = 0, norm = 0;
      for (size_t j = 0; j < x.size(); ++j) err += (x[j] - y[j]) * (x[j] - y[j]), norm += y[j] * y[j];
      const double rel = std::sqrt(err / std::max(norm, 1e-300));
      if (!(rel <= c.error)) c.error = std::isfinite(rel) ? rel : INFINITY, worst = a[i].first;
      c.repeatable = c.repeatable && x == a2[i].second;
    }
    if (!(c.error <= c.bound))
      c.status = fmt::format("{}: relative error {:.2e} over the bound {:.0e}", worst, c.error, c.bound);
    else if (!c.repeatable && ours.backend().plan().version >= 3)
      c.status = "a second run gave other bits";
    checks.push_back(c);
  }
  return checks;
}

const std::vector<double>& output(const OpRig::Outputs& outputs, const std::string& name) {
  for (const auto& [n, v] : outputs)
    if (n == name) return v;
  fail("op case: no output named " + name);
}

void OpCheckLog::expect(bool ok, const std::string& what) {
  if (!ok) failures_.push_back(where_ + ": " + what);
}

void OpCheckLog::expect_match(const std::string& name, const std::vector<double>& ours, const std::vector<double>& ref,
                              double tol) {
  if (ours.size() != ref.size()) return expect(false, name + ": " + std::to_string(ours.size()) + " elements, not " +
                                                          std::to_string(ref.size()));
  double err = 0, norm = 0;
  bool finite = true;
  for (size_t i = 0; i < ours.size(); ++i) {
    finite = finite && std::isfinite(ours[i]);
    err += (ours[i] - ref[i]) * (ours[i] - ref[i]), norm += ref[i] * ref[i];
  }
  expect(finite, name + " has unwritten (NaN) elements");
  const double rel = std::sqrt(err) / std::max(std::sqrt(norm), 1e-300);
  expect(rel < tol, fmt::format("{}: relative error {:.3e}, not under {:.0e}", name, rel, tol));
}

std::unique_ptr<OpRig> OpCheckLog::gpu_rig(const OpMaker& make, const OpShape& shape, const Plan& plan) {
  try {
    return std::make_unique<OpRig>(make, shape, make_backend({DeviceKind::Cuda, plan}), seed_);
  } catch (const UsageError& e) {
    expect(false, std::string("no rig: ") + e.what());
    return nullptr;
  }
}

std::pair<OpRig::Outputs, OpRig::Outputs> OpCheckLog::expect_reference(OpRig& ours, const Tols& tols) {
  OpRig ref = ours.reference();
  const auto expected = ref.run(false), got = ours.run(true);
  auto compare = [&](const OpRig::Outputs& a, const OpRig::Outputs& b) {
    for (size_t i = 0; i < a.size(); ++i) {
      double t = tol();
      for (const auto& [name, bound] : tols)
        if (name == a[i].first) t = bound;
      expect_match(a[i].first, a[i].second, b[i].second, t);
    }
  };
  compare(got.first, expected.first);
  compare(got.second, expected.second);
  return got;
}

void OpCheckLog::expect_reference_and_bits(const OpMaker& make, const OpShape& shape, const Plan& ours,
                                           const Plan& theirs, const std::string& whose) {
  const std::unique_ptr<OpRig> a = gpu_rig(make, shape, ours), b = gpu_rig(make, shape, theirs);
  if (!a || !b) return;
  const auto got = expect_reference(*a), apart = b->run(false);
  expect(got == apart, "not the bits of " + whose);
}

void OpCheckLog::expect_blocks_in_one_launch(const OpMaker& make, const OpCase& op, bool Plan::*in_one_launch,
                                             const std::function<std::string(OpRig&)>& misfit) {
  // (B, hidden, heads, kv heads, FFN): one row block of a small model; the default model.
  for (auto [B, C, H, KVH, F] : {std::tuple{1, 128, 2, 1, 256}, {8, 512, 8, 4, 2048}}) {
    OpShape shape = op.shape();
    shape.B = B, shape.T = 128, shape.hidden = C, shape.heads = H, shape.kv_heads = KVH, shape.head_dim = 64;
    shape.intermediate = F;
    shape.bf16_inputs = true;
    where(fmt::format("{} v6 B={} C={} H={} KVH={} F={}", op.name(), B, C, H, KVH, F));
    const Plan ours = op_plan(6, op, true);
    Plan theirs = ours;
    theirs.*in_one_launch = false;
    if (const std::unique_ptr<OpRig> rig = gpu_rig(make, shape, ours)) {
      const std::string why = misfit(*rig);
      expect(why.empty(), "in one launch (not: " + why + ")");
    }
    expect_reference_and_bits(make, shape, ours, theirs, "v6's kernels one by one");
  }
}

}  // namespace tt
