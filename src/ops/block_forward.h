// The transformer blocks' forward in one persistent launch (blocks-forward-in-one-launch, version 6):
// for every layer, the QKV product with RoPE, the attention, the output product with the residual
// added, RMSNorm, gate/up with SwiGLU, down with the residual added and the next RMSNorm, each a
// task of one kernel instead of a kernel each (block_forward.cu says how). The layer's tensors are
// the ones the kernels one by one write, with their bytes (the products' sums run in cuBLAS's
// order), so the backward is unchanged. CPU reference: the operations one by one
// (Backend::block_forward's default).
#pragma once
#include <string>
#include <vector>

#include "core/stream.h"
#include "core/tensor.h"
#include "ops/attention.h"
#include "ops/rope.h"

namespace tt {

// One layer's forward as the model keeps it. x is the residual stream in; the attention's norm of it
// (xn1) was made before, by the layer before or by a kernel ahead of the launch for the first.
struct BlockLayer {
  // saved: what the attention keeps for its backward (Backend::attention_saved)
  Tensor xn1, qkv, att, saved, x, x_mid, xn2, rstd2, gateup, h, x_next, xn_next, rstd_next;
  Tensor wqkv, wo, ffn_norm, wgateup, wdown, next_norm;  // next_norm: the next layer's attention norm, or the final one
};
struct BlockForward {
  std::vector<BlockLayer> layers;
  Tensor rope_table;              // [T, D]
  std::vector<RopeShape> ropes;  // the heads RoPE turns after the QKV product (rope_shapes)
  AttnShape attn;
  int hidden = 0, intermediate = 0;
  double eps = 0.0;
  int64_t tokens() const { return int64_t(attn.B) * attn.T; }
};

namespace cuda {

constexpr int kBlockForwardSyncInts = 512;  // the kernel's queue and counters (int32, zero between launches)

// Whether the one launch takes this forward: bf16 throughout, sequences of 128 tokens (a row block
// of 128 tokens is one sequence, the attention's whole causal span), at most 1024 tokens, head size
// 64, the widths whole tiles (C a multiple of 64 up to 1024, F of 128), at most 16 layers, each
// layer's input the one before's output, every tensor its full size. Empty when it does, else why.
std::string block_forward_misfit(const BlockForward& f);
// The forward as above: `sync` kBlockForwardSyncInts int32 that are zero, left zero.
void block_forward(const BlockForward& f, const Tensor& sync, int sms, Stream s);

}  // namespace cuda
}  // namespace tt
