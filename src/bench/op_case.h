// One operation of the model as a case, the way ggml's test-backend-ops tests its ops: `tiny_llama
// kernels` times the cases, `kernels --check` runs each against the CPU reference in double, and
// the GPU tests (tests/gpu/test_gpu_op_cases.cpp) run that check at more shapes and the case's own
// extra checks. A case holds its tensors at one shape, how its inputs are filled, its forward and
// backward calls through the Backend interface (the model's own sequences where the plan chooses,
// src/model/op_sequences.h), the outputs a check compares, the work a call must do, its error
// bound, the versions that have a row and the plan switches that choose its implementation. Each
// op is one file of src/bench/ops/ and one line of op_cases() (op_case.cpp).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "core/arena.h"

namespace tt {

class OpCheckLog;

// The sizes of the model a case takes its shape from.
struct OpShape {
  int B = 8, T = 128;
  int hidden = 512, heads = 8, kv_heads = 4, head_dim = 64, intermediate = 2048, vocab = 50257;
  int vocab_multiple = 1;    // the vocabulary padded to a multiple of this at least (and of the backend's)
  bool bf16_inputs = false;  // the inputs rounded to bf16, as a bf16 run holds them (a check's reference too)
  int64_t tokens() const { return int64_t(B) * T; }
  AttnShape attn() const { return {B, T, heads, kv_heads, head_dim}; }
  std::string label() const;  // "B8 T128"
};

// What a call must do at least: FLOPs (the products, attention) or the bytes it must move.
struct OpWork {
  bool flops = false;
  double fwd = 0, bwd = 0;
};

// An output a check compares, by name.
struct OpOutput {
  std::string name;
  Tensor t;
};

// Takes a case's tensors from its rig's arena, in the backend's types.
class OpLayout {
 public:
  OpLayout(Arena& arena, Backend& backend, std::vector<std::pair<Tensor, double>>& fp8_slots)
      : arena_(arena), be_(backend), fp8_slots_(fp8_slots) {}
  const Backend& backend() const { return be_; }
  Tensor take(DType dtype, int64_t numel) { return arena_.take(Category::Activations, dtype, numel); }
  Tensor act(int64_t numel) { return take(be_.act_dtype(), numel); }
  Tensor acc(int64_t numel) { return take(be_.acc_dtype(), numel); }
  Tensor master(int64_t numel) { return take(be_.master_dtype(), numel); }
  // An E4M3 matrix [r, c] in both layouts, its scale slot set by the rig's fill to what delayed
  // scaling holds for values in [-range, range].
  Fp8Matrix fp8(int64_t r, int64_t c, double range);

 private:
  Arena& arena_;
  Backend& be_;
  std::vector<std::pair<Tensor, double>>& fp8_slots_;
};

// Writes a case's inputs: each tensor from its own stream of the seed (a number per input, the
// same for the same input in every case), so that every backend gets the same values, rounded to
// bf16 with the shape's bf16_inputs, then uploaded in the tensor's type.
class OpFill {
 public:
  OpFill(Backend& backend, uint64_t seed, bool bf16_inputs) : be_(backend), seed_(seed), bf16_(bf16_inputs) {}
  Backend& backend() { return be_; }
  std::vector<double> draw(int64_t n, double lo, double hi, uint64_t stream) const;  // uniform in [lo, hi)
  void upload(const Tensor& t, std::vector<double> values);  // rounded as the inputs
  void uniform(const Tensor& t, double lo, double hi, uint64_t stream) { upload(t, draw(t.numel, lo, hi, stream)); }
  void table(const Tensor& t, std::vector<double> values);  // rounded to fp32 alone (the GPU's tables are fp32)
  void tokens(const Tensor& t, int below);                  // token ids in [0, below)

 private:
  Backend& be_;
  uint64_t seed_;
  bool bf16_;
};

class OpCase {
 public:
  explicit OpCase(const OpShape& shape) : shape_(shape) {}
  virtual ~OpCase() = default;
  const OpShape& shape() const { return shape_; }

  // The operation, the same at every shape.
  virtual const char* name() const = 0;
  // A row in this version: it differs from the one below in a direction, at some shape.
  virtual bool has_version(int version) const = 0;
  virtual int base_version(int version) const = 0;  // the row it is compared with
  virtual std::vector<bool Plan::*> switches() const = 0;  // those that choose its implementation
  virtual void adjust_plan(Plan&) const {}                 // what else its rows change in the version's plan

  // At its shape on one backend (an OpRig calls them in this order).
  virtual void layout(OpLayout& l) = 0;
  virtual void fill(OpFill& f) = 0;
  virtual bool has_forward() const { return true; }   // false: one call does both (a "fwd+bwd" row)
  virtual bool has_backward() const { return true; }  // false: a forward alone (a "fwd" row)
  virtual void forward(Backend&) {}
  virtual void backward(Backend& be) = 0;
  // What a check compares after each call, and the tensors the calls write whole (a check fills
  // them with NaN first: an element left unwritten shows).
  virtual std::vector<OpOutput> outputs(bool backward) const = 0;
  virtual std::vector<Tensor> written() const = 0;
  virtual OpWork work(double act_bytes) const = 0;
  // The bound of a check's relative error where the activations are fp32 (in bf16: 2e-2).
  virtual double fp32_bound(const Plan&) const { return 1e-5; }
  double bound(const Backend& be) const { return be.act_dtype() == DType::BF16 ? 2e-2 : fp32_bound(be.plan()); }

  // More than the check of `kernels --check`: awkward shapes, properties (accumulation, bits
  // equal to another version's), at `version` (one that has a row), in `log`'s precision. The GPU
  // tests run them (tests/gpu/test_gpu_op_cases.cpp).
  virtual void extra_checks(OpCheckLog& log, int version) const {}

 protected:
  OpShape shape_;
};

// A case at a shape: the registered ones (op_cases()), or an extra check's variant of one.
using OpMaker = std::function<std::unique_ptr<OpCase>(const OpShape&)>;
// The registered cases, in the order of `kernels`' rows.
const std::vector<OpMaker>& op_cases();

// The plan of `version` for a case: the preset in the run's precision with the switches of the
// other cases off (they do not change this one), launched the plain way, or with `programmatic`
// as the version launches in a step.
Plan op_plan(int version, const OpCase& op, bool amp, bool programmatic = false);

// A case laid out on one backend: the backend, one arena holding the backend's workspace for the
// case's shape and the case's tensors; filled from the seed once made.
class OpRig {
 public:
  OpRig(const OpMaker& make, const OpShape& shape, std::unique_ptr<Backend> backend, uint64_t seed);
  OpCase& op() { return *op_; }
  Backend& backend() { return *be_; }
  std::vector<double> values(const Tensor& t);
  void fill();
  // One check's run: fill, NaN in every tensor the calls write with `poison`, the forward and the
  // backward; the values of the outputs after each call (forward first).
  using Outputs = std::vector<std::pair<std::string, std::vector<double>>>;
  std::pair<Outputs, Outputs> run(bool poison);
  // The same case on the CPU reference in double, from the same inputs, laid out as here.
  OpRig reference() const;

 private:
  OpMaker make_;
  OpShape shape_;
  uint64_t seed_;
  std::unique_ptr<Backend> be_;
  std::unique_ptr<Arena> arena_;  // declared after be_: released before it
  std::unique_ptr<OpCase> op_;
  std::vector<std::pair<Tensor, double>> fp8_slots_;  // each FP8 matrix's slot and range
};

// `kernels --check` of a rig's case, a result per row (fwd and bwd, or fwd+bwd): each output's
// relative error ||ours - ref|| / ||ref|| against the reference in double, the largest against the
// bound, every output written, and a second run repeating the bits where the implementation
// promises it (ours from v3; cuBLAS and cuDNN are not held to it).
struct OpCheck {
  std::string direction;
  double error = 0, bound = 0;
  bool repeatable = true;
  std::string status = "ok";  // or why not
};
std::vector<OpCheck> check_against_reference(OpRig& ours);

// What an extra check finds: a line for each failure, naming the case, where and what differs.
class OpCheckLog {
 public:
  OpCheckLog(bool bf16, uint64_t seed) : bf16_(bf16), seed_(seed) {}
  bool bf16() const { return bf16_; }
  double tol() const { return bf16_ ? 1e-2 : 1e-5; }  // the tests' bound of an output in the act type
  void where(std::string at) { where_ = std::move(at); }
  void expect(bool ok, const std::string& what);
  // Every element written (finite), and ||ours - ref|| / ||ref|| under tol.
  void expect_match(const std::string& name, const std::vector<double>& ours, const std::vector<double>& ref,
                    double tol);
  // A rig for a variant on the GPU (or none: the failure is logged); and a run of a rig beside its
  // reference's, each output matched under tol(), or under its entry of tols: the run's outputs.
  std::unique_ptr<OpRig> gpu_rig(const OpMaker& make, const OpShape& shape, const Plan& plan);
  using Tols = std::vector<std::pair<std::string, double>>;
  std::pair<OpRig::Outputs, OpRig::Outputs> expect_reference(OpRig& ours, const Tols& tols = {});
  // The case at shape under `ours` against its reference, and its outputs bit for bit those of the
  // same case under `theirs` (another version's kernels, named by `whose` in the failure).
  void expect_reference_and_bits(const OpMaker& make, const OpShape& shape, const Plan& ours, const Plan& theirs,
                                 const std::string& whose);
  // The blocks' cases (src/bench/ops/block_forward.cpp, block_backward.cpp): v6 with `in_one_launch`
  // at one row block of a small model and at the default model (bf16), the work in one launch
  // (`misfit` of the rig empty), against the reference and bit for bit against v6's kernels one by one.
  void expect_blocks_in_one_launch(const OpMaker& make, const OpCase& op, bool Plan::*in_one_launch,
                                   const std::function<std::string(OpRig&)>& misfit);
  const std::vector<std::string>& failures() const { return failures_; }

 private:
  bool bf16_;
  uint64_t seed_;
  std::string where_;
  std::vector<std::string> failures_;
};

// The values of an output of a run, by name.
const std::vector<double>& output(const OpRig::Outputs& outputs, const std::string& name);

// Uniform values in [lo, hi) from (seed, stream), rounded to bf16 or fp32, uploaded in the
// tensor's type; NaN in every element; a tensor's values in double, from any float type.
void fill_uniform(Backend& be, const Tensor& t, double lo, double hi, uint64_t seed, uint64_t stream, bool round_bf16);
void poison_values(Backend& be, const Tensor& t);
std::vector<double> download_values(Backend& be, const Tensor& t);

}  // namespace tt
