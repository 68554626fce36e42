#include "bench/validate.h"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "core/files.h"
#include "model/llama.h"
#include "data/loader.h"

namespace tt {

double validation_bound(const std::string& precision) {
  return precision == "bf16" ? 2e-2 : precision == "tf32" ? 5e-3 : 1e-4;
}

namespace {

double rel_error(const std::vector<double>& a, const std::vector<double>& b, int64_t from, int64_t n) {
  double num = 0, den = 0;
  for (int64_t i = from; i < from + n; ++i) {
    num += (a[size_t(i)] - b[size_t(i)]) * (a[size_t(i)] - b[size_t(i)]);
    den += b[size_t(i)] * b[size_t(i)];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

// One model's run: the loss and gradients at initialisation, then the losses of `steps`
// training steps, all from the same weights and data.
struct Run {
  double loss = 0;
  std::vector<double> grads, losses;
};

Run run_model(Backend& be, const ModelConfig& c, int batch, int seq_len, int steps, uint64_t seed) {
  Llama m(c, be, batch, seq_len);
  m.init_weights(seed);
  auto data = make_data_source("synthetic", c.vocab_size, batch, seq_len, seed);
  Batch b;
  data->next_batch(b);
  m.set_batch(b.tokens.data(), b.targets.data());
  m.forward();
  Run r;
  r.loss = m.mean_loss();
  m.backward();
  r.grads = m.read(m.grads());
  AdamWStep s;
  for (int step = 1; step <= steps; ++step) {
    if (step > 1) data->next_batch(b);
    m.set_batch(b.tokens.data(), b.targets.data());
    s.t = step;
    m.train_step(s);
    r.losses.push_back(m.mean_loss());
  }
  return r;
}

Plan plan_of(int version, const std::string& precision) {
  Plan p = plan_for_version(version);
  p.amp = precision == "bf16";
  p.tf32 = precision == "tf32";
  return p;
}

// Compares `got` with `ref`: loss, the worst parameter tensor's gradient, the worst step.
void compare(ValidationRow& row, const Run& got, const Run& ref, const ModelConfig& c) {
  row.loss_error = std::fabs(got.loss - ref.loss) / ref.loss;
  for (const ParamEntry& e : param_table(c))
    row.grad_error = std::max(row.grad_error, rel_error(got.grads, ref.grads, e.offset, e.numel));
  for (size_t i = 0; i < ref.losses.size(); ++i)
    row.track_error = std::max(row.track_error, std::fabs(got.losses[i] - ref.losses[i]) / ref.losses[i]);
  row.bound = validation_bound(row.precision);
  row.pass = row.loss_error <= row.bound && row.grad_error <= row.bound && row.track_error <= row.bound;
}

}  // namespace

bool run_validate(const ValidateOptions& o, std::ostream& log) {
  if (o.steps <= 0) usage_fail("--steps: must be positive");
  for (int v : o.versions)
    if (v < 1 || v > kLatestVersion) usage_fail("--levels: levels are 1 to " + std::to_string(kLatestVersion));
  for (const std::string& p : o.precisions)
    if (p != "fp32" && p != "tf32" && p != "bf16") usage_fail("--precisions: each must be fp32, tf32 or bf16");
  o.base.validate();
  if (!o.json_path.empty()) check_writable(o.json_path, "--json");
  std::string why;
  const bool cuda = o.base.backend.device != DeviceKind::Cpu && cuda_available(&why);
  if (o.base.backend.device == DeviceKind::Cuda && !cuda) usage_fail("--device cuda: " + why);
  if (!cuda && o.selected)
    for (int v : o.versions)
      for (const std::string& p : o.precisions)
        if (v != 1 || p != "fp32")
          usage_fail("--levels, --precisions: v" + std::to_string(v) + " " + p + " runs on the CUDA backend; on the "
                     "CPU validate checks v1 fp32 against fp64 (" + (why.empty() ? "--device cpu" : why) + ")");

  std::vector<ValidationRow> rows;
  auto attempt = [&](ValidationRow row, const std::function<void(ValidationRow&)>& body) {
    try {
      body(row);
    } catch (const UsageError& e) {  // a version whose switches are not implemented yet
      row.status = e.what();
      row.pass = true;
    }
    rows.push_back(row);
  };

  // Against the CPU reference in double, at a small size with grouped heads (head size 32, a
  // size every attention implementation takes).
  ModelConfig small;
  small.vocab_size = 97, small.hidden = 128, small.layers = 2, small.heads = 4, small.kv_heads = 2;
  small.intermediate = 256;
  const int sb = 2, st = 33;
  auto ref_backend = make_cpu_backend_f64();
  const Run ref = run_model(*ref_backend, small, sb, st, o.steps, o.base.seed);
  for (int version : cuda ? o.versions : std::vector<int>{1})
    for (const std::string& precision : cuda ? o.precisions : std::vector<std::string>{"fp32"})
      attempt({"cpu-fp64", version, precision}, [&](ValidationRow& row) {
        auto be = cuda ? make_backend({DeviceKind::Cuda, plan_of(version, precision)})
                       : make_backend({DeviceKind::Cpu, plan_of(version, precision)});
        compare(row, run_model(*be, small, sb, st, o.steps, o.base.seed), ref, small);
      });

  // Against v1 at the chosen size.
  if (cuda)
    for (const std::string& precision : o.precisions) {
      auto v1_backend = make_backend({DeviceKind::Cuda, plan_of(1, precision)});
      const Run v1 = run_model(*v1_backend, o.base.model, o.base.batch, o.base.seq_len, o.steps, o.base.seed);
      v1_backend.reset();
      for (int version : o.versions)
        if (version != 1)
          attempt({"v1", version, precision}, [&](ValidationRow& row) {
            auto be = make_backend({DeviceKind::Cuda, plan_of(version, precision)});
            compare(row, run_model(*be, o.base.model, o.base.batch, o.base.seq_len, o.steps, o.base.seed), v1,
                    o.base.model);
          });
    }
  else
    log << "No GPU: the CUDA versions are not validated; the CPU fp32 backend is checked against fp64.\n";

  bool ok = true;
  log << fmt::format("Validation over {} steps (relative errors; small model against the CPU in fp64, batch {} x {} "
                     "against v1)\n",
                     o.steps, o.base.batch, o.base.seq_len);
  log << fmt::format("{:<10}{:<5}{:<6}{:>12}{:>12}{:>12}{:>9}  {}\n", "against", "ver", "prec", "loss", "max grad",
                     "max step", "bound", "result");
  for (const ValidationRow& r : rows) {
    ok = ok && r.pass;
    if (r.status != "ok")
      log << fmt::format("{:<10}v{:<4}{:<6}  skipped: {}\n", r.against, r.version, r.precision, r.status.substr(0, 100));
    else
      log << fmt::format("{:<10}v{:<4}{:<6}{:>12.2e}{:>12.2e}{:>12.2e}{:>9.0e}  {}\n", r.against, r.version, r.precision,
                         r.loss_error, r.grad_error, r.track_error, r.bound, r.pass ? "pass" : "FAIL");
  }
  if (!o.json_path.empty())
    write_file_atomic(o.json_path, [&](std::ostream& out) {
      nlohmann::json j = nlohmann::json::array();
      for (const ValidationRow& r : rows)
        j.push_back({{"against", r.against}, {"version", r.version}, {"precision", r.precision}, {"status", r.status},
                     {"loss_error", r.loss_error}, {"grad_error", r.grad_error}, {"track_error", r.track_error},
                     {"bound", r.bound}, {"pass", r.pass}});
      out << j.dump(2) << "\n";
    });
  return ok;
}

}  // namespace tt
