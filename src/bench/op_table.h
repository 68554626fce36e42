// The table of operations that `tiny_llama kernels` times and `tiny_llama kernels --check` tests:
// for each, the plan that selects one version's implementation, the tensors it reads and writes
// at a shape, its forward and backward calls through the Backend interface (the same calls on
// the CUDA backend and on the CPU reference), the outputs a check compares, and the bytes or
// FLOPs it must move. An operation added here is both timed and checked against the reference
// (src/bench/kernels.cpp; tests/gpu/test_gpu_kernels.cpp runs the check).
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

// Version 5's: Quantize (a bf16 matrix into FP8, both layouts: an activation [tokens, hidden]
// forward, a gradient [tokens, 2 ffn] backward) and Linear (the gate/up projection's three
// products, [tokens, hidden] x [2 ffn, hidden]: bf16 in v4, FP8 in v5).
enum class Op { Attention, RmsNorm, SwiGlu, Rope, ResidualNorm, CrossEntropy, Quantize, Linear };
extern const std::vector<Op> kOps;

const char* op_name(Op op);
// Version 3's kernels are compared with version 2's, version 4's fusions with version 3's, v5's
// FP8 products with v4's bf16 ones and v5's SwiGLU made in FP8 with v3's stored bf16; an
// operation has no row for a version where it is the same as the one below.
int base_version(Op op, int version);
bool has_row(Op op, int version);
// The plan of `version` for `op`: the preset in the run's precision with the custom kernels of
// the other operations off (they do not change this operation), launched the plain way.
Plan op_plan(int version, Op op, bool amp);

struct OpShape {
  int B = 8, T = 128;
  int hidden = 512, heads = 8, kv_heads = 4, head_dim = 64, intermediate = 2048, vocab = 50257;
  int vocab_multiple = 1;    // the vocabulary padded to a multiple of this at least (and of the backend's)
  bool bf16_inputs = false;  // the inputs rounded to bf16, as a bf16 run holds them (a check's reference too)
  std::string label() const;  // "B8 T128"
};

// The cross-entropy's rows: the tokens, at most one fused-classifier chunk.
constexpr int64_t kMaxClassifierRows = 16384;

// One backend (CUDA, or the CPU reference in double) with the tensors of one shape in one arena.
// fill() writes every input from the seed, the same values on any backend (rounded to the
// backend's type); the cross-entropy's logits (up to 1.6 GB) only when `logits`.
class OpRig {
 public:
  OpRig(std::unique_ptr<Backend> backend, const OpShape& shape, bool logits, uint64_t seed);
  void fill();
  Backend& backend() { return *be_; }
  const OpShape& shape() const { return shape_; }

  // The operations' tensors (see the op headers), in the backend's types.
  struct Buffers {
    Tensor qkv, att, saved, dqkv, datt;    // attention; RoPE rotates the heads of qkv in place
    Tensor x, w, out, rstd, dout, dx, dw;  // RMSNorm
    Tensor gateup, h, dh, dgateup;         // SwiGLU
    Tensor table;                          // RoPE's cos/sin
    Tensor b, sum, dres;                   // the residual add: x + b, and the residual stream's gradient
    Tensor logits, targets, losses;        // the cross-entropy, [ce_rows, padded vocab]
    Tensor lw, ly, ldy, ldx, ldw;          // Linear: W [2F, C], y [n, 2F], dy [n, 2F], dx [n, C], dW (master)
    Tensor slots;                          // FP8 (v5): the scale slots of x8, w8, dy8, h8 and dgateup8
    Fp8Matrix x8, w8, dy8;                 // the FP8 forms of x, W and dy
    Fp8Matrix h8, dgateup8;                // SwiGLU's, made in FP8
  } buf;
  AttnShape attn;
  int64_t n = 0;        // tokens
  int64_t ce_rows = 0;  // the cross-entropy's rows
  int padded_vocab = 0;

 private:
  std::unique_ptr<Backend> be_;
  std::unique_ptr<Arena> arena_;  // declared after be_: released before it
  OpShape shape_;
  uint64_t seed_;
};

// An operation bound to a rig's tensors.
struct OpCalls {
  std::function<void()> fwd, bwd;  // fwd empty: one call, forward and backward (the cross-entropy)
  bool flops = false;              // the amounts are FLOPs (attention), else bytes
  double fwd_amount = 0, bwd_amount = 0;
  // What a check compares after each call, by name; the outputs each call writes whole (a check
  // fills them with NaN first: an element left unwritten shows).
  std::vector<std::pair<std::string, Tensor>> fwd_outputs, bwd_outputs;
  std::vector<Tensor> written;
};
OpCalls bind_op(OpRig& rig, Op op);

// Uniform values in [lo, hi) from (seed, stream), rounded to bf16 or fp32, uploaded in the
// tensor's type; NaN in every element; a tensor's values in double, from any float type.
void fill_uniform(Backend& be, const Tensor& t, double lo, double hi, uint64_t seed, uint64_t stream, bool round_bf16);
void poison_values(Backend& be, const Tensor& t);
std::vector<double> download_values(Backend& be, const Tensor& t);

}  // namespace tt
