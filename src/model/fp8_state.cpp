#include "model/fp8_state.h"

#include <algorithm>
#include <vector>

#include "core/fp8.h"

namespace tt {

namespace {

// Where version 5 takes FP8 by itself: the casts cost a pass over every element a product reads,
// FP8 saves time in proportion to each element's multiply-adds, hidden of them. Measured on an
// H100 (docs/versions/v5.md), v5 against v4 a step: hidden 512 lost at every size tried (16384
// tokens: 9.61 against 9.24 ms), hidden 768 won at 16384 tokens (29.6 against 30.7 ms), hidden
// 1024 at 8192 (18.6 against 20.6 ms).
constexpr int kFp8MinHidden = 768;
constexpr int64_t kFp8MinTokens = 8192;

}  // namespace

bool fp8_dims_fit(std::initializer_list<int64_t> dims) {
  return std::all_of(dims.begin(), dims.end(), [](int64_t d) { return d % 16 == 0; });
}

Fp8Decision decide_fp8(const Plan& plan, bool cuda, const ModelConfig& c, int64_t tokens, int64_t padded_vocab,
                       int64_t chunk) {
  if (!plan.fp8 || !cuda) return {};
  if (!plan.amp) return {false, false, "fp32: v5's FP8 products take bf16 activations (--use-amp)"};
  if (!plan.fp8_every_shape && !(c.hidden >= kFp8MinHidden && tokens >= kFp8MinTokens))
    return {false, false,
            "bf16: FP8 pays from hidden " + std::to_string(kFp8MinHidden) + " and " + std::to_string(kFp8MinTokens) +
                " tokens a micro-batch (--enable-fp8-every-shape takes it anyway)"};
  if (!fp8_dims_fit({tokens, c.hidden, c.intermediate, c.qkv_dim(), int64_t(c.heads) * c.head_dim()}))
    return {false, false, "bf16: FP8 products need the tokens, hidden, FFN and attention widths to be multiples of 16"};
  // The head's gradient comes from the fused classifier's pass, a chunk of tokens at a time.
  const bool head = plan.fp8_head && plan.fused_classifier && fp8_dims_fit({chunk, padded_vocab});
  return {true, head, std::string("FP8 in the layers (E4M3 weights and activations, ") +
                          (plan.fp8_e5m2_gradients ? "E5M2" : "E4M3") + " gradients, " +
                          (plan.fp8_delayed_scaling ? "delayed" : "current") + " scaling); " +
                          (head ? "FP8 in the head (the logits' gradient at a fixed scale)" : "bf16 in the head")};
}

Fp8State::Fp8State(const ModelConfig& config, Backend& backend, int64_t tokens, int64_t padded_vocab, int64_t chunk)
    : cfg_(config),
      be_(backend),
      N_(tokens),
      Vp_(padded_vocab),
      chunk_(chunk),
      decision_(decide_fp8(backend.plan(), backend.is_cuda(), config, tokens, padded_vocab, chunk)) {}

void Fp8State::layout(Arena& a) {
  layers_.clear();
  if (!on()) return;
  const int64_t C = cfg_.hidden, F = cfg_.intermediate, HD = int64_t(cfg_.heads) * cfg_.head_dim(), QKV = cfg_.qkv_dim();
  const DType E4 = DType::F8E4M3;
  slots_ = a.take(Category::Workspace, DType::F32, slot_count() * kFp8SlotFloats);
  // The inputs' rows live until the product after them, in one buffer the layers share; their
  // transposes until the weight gradients, per layer.
  const Tensor rows = a.take(Category::Workspace, E4, N_ * std::max({C, HD, F}));
  auto weight = [&](int64_t r, int64_t c, int l, Slot which) {  // [r, c] in both layouts
    return Fp8Matrix{a.take(Category::Parameters, E4, r * c), a.take(Category::Parameters, E4, r * c), c, r, slot(l, which)};
  };
  auto input = [&](int64_t c, int l, Slot which) {  // [N, c]
    return Fp8Matrix{rows.slice(0, N_ * c), a.take(Category::Activations, E4, N_ * c), c, N_, slot(l, which)};
  };
  for (int l = 0; l < cfg_.layers; ++l)
    layers_.push_back({input(C, l, kXn1), input(HD, l, kAtt), input(C, l, kXn2), input(F, l, kH), weight(QKV, C, l, kWqkv),
                       weight(C, HD, l, kWo), weight(2 * F, C, l, kWgateup), weight(C, F, l, kWdown)});
  const DType G = be_.plan().fp8_e5m2_gradients ? DType::F8E5M2 : E4;
  const int64_t widest = std::max({QKV, 2 * F, C});
  grad_rows_ = a.take(Category::Workspace, G, N_ * widest);
  grad_cols_ = a.take(Category::Workspace, G, N_ * widest);
  hidden_grad_cols_ = a.take(Category::Workspace, G, N_ * C);
  if (!head_on()) return;
  // xf's rows in the shared buffer (the layers' products are done when the head runs).
  head_.x = {rows.slice(0, N_ * C), a.take(Category::Workspace, E4, N_ * C), C, N_, head_slot(kXf)};
  head_.w = {a.take(Category::Parameters, E4, Vp_ * C), a.take(Category::Parameters, E4, Vp_ * C), C, Vp_,
             head_slot(kWhead)};
  head_.d = {a.take(Category::Workspace, G, chunk_ * Vp_), a.take(Category::Workspace, G, chunk_ * Vp_), Vp_, chunk_,
             head_slot(kDlogits)};
  head_lse_ = a.take(Category::Workspace, DType::F32, chunk_);
}

void Fp8State::init_slots(double head_gradient_bound) {
  if (!on()) return;
  be_.zero(slots_);
  if (!head_on()) return;
  const float largest = float(fp8_spec(fp8_format(head_.d.rows.dtype)).max_finite);
  const float scale = fp8_scale_of(float(head_gradient_bound), largest);
  std::vector<float> slot(kFp8SlotFloats, 0.0f);
  slot[0] = 1.0f / scale, slot[1] = scale, slot[3] = largest;
  be_.upload(head_slot(kDlogits), slot.data());
}

int64_t Fp8State::width(Proj p) const {
  switch (p) {
    case Proj::Qkv: return cfg_.qkv_dim();
    case Proj::GateUp: return 2 * int64_t(cfg_.intermediate);
    case Proj::Out:
    case Proj::Down: break;
  }
  return cfg_.hidden;
}

Fp8Operands Fp8State::operands(int l, Proj p) const {
  if (!on()) return {};
  const Layer& f = layers_[size_t(l)];
  switch (p) {
    case Proj::Qkv: return {f.xn1, f.wqkv};
    case Proj::Out: return {f.att, f.wo};
    case Proj::GateUp: return {f.xn2, f.wgateup};
    case Proj::Down: break;
  }
  return {f.h, f.wdown};
}

Fp8Matrix Fp8State::gradient(int l, Proj p) const {
  if (!on()) return {};
  const Slot slots[] = {kDqkv, kDo, kDgateup, kDdown};
  const int64_t c = width(p);
  const bool hidden_wide = p == Proj::Out || p == Proj::Down;
  return {grad_rows_.slice(0, N_ * c), hidden_wide ? hidden_grad_cols_ : grad_cols_.slice(0, N_ * c), c, N_,
          slot(l, slots[int(p)])};
}

Fp8Scaling Fp8State::scaling() const {
  return be_.plan().fp8_delayed_scaling && calibrated_ ? Fp8Scaling::Delayed : Fp8Scaling::Current;
}

void Fp8State::cast(const Fp8Matrix& out, const Tensor& x, int64_t r, int64_t c) { be_.fp8_quantize(out, x, r, c, scaling()); }

void Fp8State::cast_weights(const Weights& w) {
  if (!on()) return;
  ScopedRange r(be_, "fp8_weights");
  const int64_t C = cfg_.hidden, F = cfg_.intermediate, HD = int64_t(cfg_.heads) * cfg_.head_dim();
  // With delayed scaling, up to 64 matrices a launch (Backend::fp8_quantize_all): a launch a
  // matrix, each under a wave of the GPU, took gpt2-small's 49 casts 326 us a step; one launch 169.
  std::vector<Fp8Cast> casts;
  for (int l = 0; l < cfg_.layers; ++l) {
    const LayerWeights& lw = w.layers[size_t(l)];
    const Layer& f = layers_[size_t(l)];
    casts.push_back({f.wqkv, lw.wqkv, cfg_.qkv_dim(), C});
    casts.push_back({f.wo, lw.wo, C, HD});
    casts.push_back({f.wgateup, lw.wgateup, 2 * F, C});
    casts.push_back({f.wdown, lw.wdown, C, F});
  }
  if (head_on()) casts.push_back({head_.w, w.head, Vp_, C});
  be_.fp8_quantize_all(casts, scaling());
}

void Fp8State::finish_step() {
  if (!delayed()) return;
  static_assert(kDlogits == kHeadSlots - 1, "the fixed slot is the last");
  be_.fp8_update_scales(slots_, int(slot_count()) - 1);  // the head gradient's scale stays
  calibrated_ = true;
}

bool Fp8State::settled() const { return !delayed() || calibrated_; }

Tensor Fp8State::scale_state() const {
  return delayed() && calibrated_ ? slots_ : Tensor{};
}

void Fp8State::restore_scales(const std::vector<float>& values) {
  TT_CHECK(takes_scales(int64_t(values.size())), "restore_scales: no delayed scaling here, or values of another size");
  be_.upload(slots_, values.data());
  calibrated_ = true;
}

size_t Fp8State::kept_bytes(int l, size_t (*aligned)(const Tensor&)) const {
  if (!on()) return 0;
  const Layer& f = layers_[size_t(l)];
  return aligned(f.xn1.cols) + aligned(f.att.cols) + aligned(f.xn2.cols) + aligned(f.h.cols);
}

}  // namespace tt
