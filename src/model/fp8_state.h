// Version 5's FP8 operands, apart from the network that uses them (src/model/llama.h): whether the
// layers' four products (QKV, output, gate/up, down) run in FP8 at this shape (the shape rule),
// and the output head's three (fp8-head), their FP8 forms in both layouts the products read
// (ops/quantize.h: the weights' and inputs' per layer, the gradient entering a product in buffers
// the layers share), the scale slots and delayed scaling's calibration, the weights' cast once a
// step, and the step's end. The model asks it for a product's operands; the product helper casts
// its input into them. The next precision (FP8 attention, MXFP8 or NVFP4 on newer GPUs) changes
// this unit, not the model.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/arena.h"
#include "model/config.h"
#include "model/params.h"

namespace tt {

// The layers' products that run in FP8, by the input and weight they read.
enum class Proj { Qkv, Out, GateUp, Down };

// cuBLASLt's rule for FP8 products: every dimension a multiple of 16.
bool fp8_dims_fit(std::initializer_list<int64_t> dims);

// Where version 5 takes FP8 by itself: the shape rule, with the plan, the precision and the
// backend. `why` says how the products run and why, for the run's header ("" without the fp8
// switch or off the GPU).
struct Fp8Decision {
  bool on = false;
  bool head = false;  // the head's products too: fp8-head, with the fused classifier, in chunks that fit
  std::string why;
};
// chunk: the head's tokens at a time (the fused classifier's chunk), padded_vocab its rows.
Fp8Decision decide_fp8(const Plan& plan, bool cuda, const ModelConfig& config, int64_t tokens, int64_t padded_vocab,
                       int64_t chunk);

// A product's FP8 operands: its input's and its weight's forms; empty: the product runs in the
// act type.
struct Fp8Operands {
  Fp8Matrix x, w;
  bool empty() const { return x.slot.empty(); }
  Fp8Operands weight_rows(int64_t first, int64_t n) const { return empty() ? *this : Fp8Operands{x, w.row_block(first, n)}; }
};

class Fp8State {
 public:
  Fp8State(const ModelConfig& config, Backend& backend, int64_t tokens, int64_t padded_vocab, int64_t chunk);
  bool on() const { return decision_.on; }
  bool head_on() const { return decision_.head; }
  const std::string& description() const { return decision_.why; }
  // Takes the FP8 forms from the arena (none when off): the weights' (Parameters), the inputs'
  // transposes, kept for the weight gradients (Activations), the inputs' rows, the gradients'
  // forms and the scale slots (Workspace).
  void layout(Arena& a);
  // Every slot zero, but the head gradient's: its fixed scale for the bound of the logits'
  // gradient, |scale (softmax - onehot)| <= scale (the loss's gradient scale), so that the
  // cross-entropy pass needs no amax pass and no history.
  void init_slots(double head_gradient_bound);

  // Layer l's operands of product p, and the FP8 form of the gradient entering it (the shared
  // buffers, with the layer's slot).
  Fp8Operands operands(int layer, Proj p) const;
  Fp8Matrix gradient(int layer, Proj p) const;
  // The head's (with head_on): its input xf [N, C] and weight [Vp, C]; the logits' gradient
  // [chunk, Vp] in both layouts, which the cross-entropy pass writes; its scratch of chunk floats.
  Fp8Operands head_operands() const { return {head_.x, head_.w}; }
  const Fp8Matrix& head_gradient() const { return head_.d; }
  const Tensor& head_scratch() const { return head_lse_; }
  // x [r, c] into its FP8 form, with the step's scaling.
  void cast(const Fp8Matrix& out, const Tensor& x, int64_t r, int64_t c);
  Fp8Scaling scaling() const;
  // The weights cast once a step, before the first forward (the weights change only at the update).
  void cast_weights(const Weights& w);
  // After the update: delayed scaling's history takes this step's amaxes.
  void finish_step();
  // Whether the step may be captured in a graph: delayed scaling's first step runs with current
  // scaling, outside the graph, to fill the history.
  bool settled() const;
  // Delayed scaling's state (every slot: its scale, amax and history), as a checkpoint keeps it
  // so that a resumed run scales as the uninterrupted one: empty before the history is filled
  // or without delayed scaling (a run resumed from it calibrates again). takes_scales: whether
  // this run scales with a history of that many values; restore_scales puts them back and counts
  // the history as filled.
  Tensor scale_state() const;
  bool takes_scales(int64_t numel) const { return delayed() && numel == slot_count() * kFp8SlotFloats; }
  void restore_scales(const std::vector<float>& values);
  // The bytes of layer l's kept FP8 forms (the inputs' transposes), for the memory timeline.
  size_t kept_bytes(int layer, size_t (*aligned)(const Tensor&)) const;

 private:
  // Per layer: the products' inputs (their transposes kept) and weights, in both layouts.
  struct Layer {
    Fp8Matrix xn1, att, xn2, h;          // [N, C], [N, H D], [N, C], [N, F]
    Fp8Matrix wqkv, wo, wgateup, wdown;  // as the weights
  };
  // The scale slots of a layer (kFp8SlotFloats each): weights, inputs, output gradients.
  enum Slot { kWqkv, kWo, kWgateup, kWdown, kXn1, kAtt, kXn2, kH, kDqkv, kDo, kDgateup, kDdown, kSlots };
  // The head's, after the layers': its input, its weight, the logits' gradient (the last: its
  // scale is fixed, so delayed scaling's update leaves it).
  enum HeadSlot { kXf, kWhead, kDlogits, kHeadSlots };
  Tensor slot(int layer, int which) const {
    return slots_.slice((int64_t(layer) * kSlots + which) * kFp8SlotFloats, kFp8SlotFloats);
  }
  Tensor head_slot(HeadSlot which) const {
    return slots_.slice((int64_t(cfg_.layers) * kSlots + which) * kFp8SlotFloats, kFp8SlotFloats);
  }
  int64_t slot_count() const { return int64_t(cfg_.layers) * kSlots + kHeadSlots; }
  int64_t width(Proj p) const;  // the product's output columns
  bool delayed() const { return on() && be_.plan().fp8_delayed_scaling; }  // FP8 with delayed scaling

  ModelConfig cfg_;
  Backend& be_;
  int64_t N_, Vp_, chunk_;
  Fp8Decision decision_;
  bool calibrated_ = false;  // delayed scaling: a step with current scaling has filled the history
  std::vector<Layer> layers_;
  struct {
    Fp8Matrix x, w, d;  // xf [N, C], the head's weight [Vp, C], the logits' gradient [chunk, Vp]
  } head_;
  Tensor head_lse_;  // the cross-entropy pass's scratch (each row's log-sum-exp)
  Tensor grad_rows_, grad_cols_;  // the gradient entering a product, [N, widest] and its transpose
  // Out's and Down's transposes apart: Down's weight gradient runs after SwiGLU's backward has
  // written GateUp's gradient (Llama::backward_ffn).
  Tensor hidden_grad_cols_;
  Tensor slots_;                  // [layers, kSlots, kFp8SlotFloats]
};

}  // namespace tt
