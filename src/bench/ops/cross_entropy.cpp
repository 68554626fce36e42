// The cross-entropy case (src/bench/op_case.h): the loss of each row of logits against its target
// and the logits' gradient written over them, as the model's head makes them (op_sequences.h):
// v3's forward and backward kernels, v4's one pass (fused-classifier), v5's gradient made in FP8
// in both layouts (fp8-head, at the fixed scale of its bound 1/n, as Llama sets it); at most one fused-classifier
// chunk of rows, the vocabulary padded to the backend's multiple as the model lays it out. The
// padding columns hold huge values that must take no part, and must come back zero. Its extra
// checks: the vocabularies of the workshop, LLaMA and GPT-2 (and 7, the scalar path), rows padded
// and not, 1 to 4096 rows, with bounds for what cancels (a loss or a gradient near a dominant
// target).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "bench/op_case.h"
#include "model/op_sequences.h"
#include "model/params.h"

namespace tt {

std::unique_ptr<OpCase> cross_entropy_case(const OpShape& shape);

namespace {

// The rows: the tokens, at most one fused-classifier chunk.
constexpr int64_t kMaxClassifierRows = 16384;

class CrossEntropyCase final : public OpCase {
 public:
  using OpCase::OpCase;
  const char* name() const override { return "cross_entropy"; }
  bool has_version(int version) const override { return version >= 3 && version <= 5; }
  int base_version(int version) const override { return version == 5 ? 4 : 3; }
  std::vector<bool Plan::*> switches() const override { return {&Plan::fused_classifier, &Plan::fp8_head}; }
  // In FP8 each element is within one step of E4M3 of the reference's: rarely a step apart in fp32.
  double fp32_bound(const Plan& p) const override { return p.fp8_head ? 2e-3 : 1e-5; }

  void layout(OpLayout& l) override {
    rows_ = std::min(shape_.tokens(), kMaxClassifierRows);
    ld_ = padded_ ? padded_vocab(shape_.vocab, std::max(l.backend().vocab_padding_multiple(), shape_.vocab_multiple))
                  : shape_.vocab;
    logits_ = l.act(rows_ * ld_), targets_ = l.take(DType::I32, rows_), losses_ = l.acc(rows_);
    fp8_ = l.backend().plan().fp8_head && ld_ % 8 == 0;  // FP8 rows: a multiple of 8 (the padded vocabulary)
    if (fp8_) d8_ = l.fp8(rows_, ld_, 1.0 / double(rows_)), lse_ = l.take(DType::F32, rows_);
  }
  void fill(OpFill& f) override {
    std::vector<double> logits = f.draw(logits_.numel, -4, 4, 12);
    for (int64_t i = 0; i < rows_; ++i)
      std::fill(logits.begin() + i * ld_ + shape_.vocab, logits.begin() + (i + 1) * ld_, 1e4);
    f.upload(logits_, std::move(logits));
    f.tokens(targets_, shape_.vocab);
  }
  bool has_forward() const override { return false; }
  void backward(Backend& be) override {  // the loss and the gradient
    const double scale = 1.0 / double(rows_);
    if (fp8_) return be.fp8_cross_entropy_fused(d8_, lse_, losses_, logits_, targets_, rows_, shape_.vocab, ld_, scale);
    if (!cross_entropy_loss(be, true, losses_, logits_, targets_, rows_, shape_.vocab, ld_, scale))
      cross_entropy_gradient(be, logits_, targets_, rows_, shape_.vocab, ld_, scale);
  }
  std::vector<OpOutput> outputs(bool) const override {
    if (fp8_) return {{"losses", losses_}, {"dlogits8 rows", d8_.rows}, {"dlogits8 cols", d8_.cols}};
    return {{"losses", losses_}, {"dlogits", logits_}};
  }
  std::vector<Tensor> written() const override {
    if (fp8_) return {losses_, d8_.rows, d8_.cols};
    return {losses_};
  }
  // Read and written once in the act type; in FP8, read twice and written as a byte in each layout.
  OpWork work(double a) const override {
    const double elements = double(rows_) * double(ld_);
    return {false, 0, (fp8_ ? 2 * a + 2 : 2 * a) * elements + 8.0 * double(rows_)};
  }

  void extra_checks(OpCheckLog& log, int version) const override {
    if (version == 5) {  // the FP8 gradient: rows not a multiple of the 64-row tile, element by element
      for (int v : {1000, 50257})  // within one step of E4M3 (2^-3) of the reference's
        for (int n : {7, 129}) {
          OpShape shape = shape_;
          shape.B = 1, shape.T = n, shape.vocab = v, shape.bf16_inputs = log.bf16();
          log.where(fmt::format("cross_entropy v5 n={} v={}", n, v));
          if (const std::unique_ptr<OpRig> rig = log.gpu_rig(cross_entropy_case, shape, op_plan(5, *this, log.bf16())))
            log.expect_reference(*rig, {{"dlogits8 rows", 0x1p-3}, {"dlogits8 cols", 0x1p-3}});
        }
      return;
    }
    for (int v : {7, 1000, 32000, 50257})
      for (int n : {1, 7, 129, 4096})
        for (bool padded : {false, true}) {
          if (!padded && padded_vocab(v, 128) == v) continue;  // the same layout twice
          OpShape shape = shape_;
          shape.B = 1, shape.T = n, shape.vocab = v, shape.bf16_inputs = log.bf16();
          const OpMaker make = [padded](const OpShape& s) {
            auto c = std::make_unique<CrossEntropyCase>(s);
            c->padded_ = padded;
            return c;
          };
          log.where(fmt::format("cross_entropy v{} n={} v={}{}", version, n, v, padded ? " padded" : ""));
          const std::unique_ptr<OpRig> rig = log.gpu_rig(make, shape, op_plan(version, *this, log.bf16()));
          if (rig) check_rows(log, *rig);
        }
  }

 private:
  void check_rows(OpCheckLog& log, OpRig& rig) const {
    const int64_t ld = static_cast<const CrossEntropyCase&>(rig.op()).ld_, v = shape_.vocab;
    OpRig ref = rig.reference();
    const std::vector<double> logits = ref.values(static_cast<const CrossEntropyCase&>(ref.op()).logits_);
    double max_logit = 0;
    for (size_t i = 0; i < logits.size(); ++i)
      if (int64_t(i) % ld < v) max_logit = std::max(max_logit, std::fabs(logits[i]));
    const auto expected = ref.run(false).second, got = rig.run(true).second;
    // loss = logsumexp - logit[target] cancels when the target dominates, so bound the error by
    // fp32's resolution at the logits' magnitude rather than relative to the loss.
    const std::vector<double>&loss = output(got, "losses"), &loss_ref = output(expected, "losses");
    for (size_t i = 0; i < loss.size(); ++i)
      if (!(std::fabs(loss[i] - loss_ref[i]) <= 1e-6 * (1 + max_logit))) {
        log.expect(false, fmt::format("row {}: loss {} against {}", i, loss[i], loss_ref[i]));
        break;
      }
    // The gradient (softmax - onehot) / n cancels at the target the same way: p - 1 is off by up
    // to fp32's resolution near 1 (2^-24) / n however small the gradient is (n = 1, v = 2, a
    // dominant target: a gradient of 1e-5 with relative error 6e-5). Hence a floor of twice that
    // per row under the relative bound. The padding columns must be exactly zero.
    const std::vector<double>&d = output(got, "dlogits"), &d_ref = output(expected, "dlogits");
    const double n = double(loss.size());
    double err = 0, norm = 0;
    bool finite = true, zero_padding = true;
    for (size_t i = 0; i < d.size(); ++i) {
      finite = finite && std::isfinite(d[i]);
      zero_padding = zero_padding && (int64_t(i) % ld < v || d[i] == 0.0);
      err += (d[i] - d_ref[i]) * (d[i] - d_ref[i]), norm += d_ref[i] * d_ref[i];
    }
    log.expect(finite, "the logits' gradient has unwritten (NaN) elements");
    log.expect(zero_padding, "a padding column's gradient is not zero");
    log.expect(std::sqrt(err) <= log.tol() * std::sqrt(norm) + std::sqrt(n) * 0x1p-23 / n,
               fmt::format("the logits' gradient is {:.3e} off, over the bound", std::sqrt(err)));
  }

  bool padded_ = true;  // the rows padded to the backend's multiple, as the model lays them out
  bool fp8_ = false;    // the gradient made in FP8 (v5)
  int64_t rows_ = 0, ld_ = 0;
  Tensor logits_, targets_, losses_, lse_;
  Fp8Matrix d8_;
};

}  // namespace

std::unique_ptr<OpCase> cross_entropy_case(const OpShape& shape) { return std::make_unique<CrossEntropyCase>(shape); }

}  // namespace tt
