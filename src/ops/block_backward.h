// The transformer blocks' backward in one persistent launch (blocks-backward-in-one-launch, version
// 6): for every layer from the last, down's input gradient with SwiGLU's backward, gate/up's input
// gradient, the FFN norm's backward adding into the residual gradient, the output product's input
// gradient, the attention's backward with RoPE's, the QKV product's input gradient, the attention
// norm's backward, and the layer's four weight gradients, each a task of one kernel instead of a
// kernel each (block_backward.cu says how). Every task is a block of a kernel v6 runs one by one, so
// the bytes are those kernels' (the input gradients' products are our tiles where v6 has cuBLAS's:
// the same sums in the same order). CPU reference: the operations one by one
// (Backend::block_backward's default).
#pragma once
#include <string>
#include <vector>

#include "core/stream.h"
#include "core/tensor.h"
#include "ops/attention.h"
#include "ops/rope.h"

namespace tt {

// One layer's backward. From the forward, as the model keeps them: the layer's input x, its
// attention norm xn1 (rstd1), qkv (RoPE applied), att and what the attention saved for its backward,
// x_mid (the residual stream after the attention), xn2 (rstd2), gateup and h. The gradients: d_out
// (of the layer's output; in), and, written: dgateup, d_normed2 (of xn2), d_mid (of x_mid), datt,
// dqkv, d_normed1 (of xn1) and d_in (of x), each a tensor of its own; dh [n, F] only the operations
// one by one write. The weights' gradients, fp32, written or added to (`add`).
struct BlockBackwardLayer {
  Tensor x, xn1, rstd1, qkv, att, saved, x_mid, xn2, rstd2, gateup, h;
  Tensor wqkv, wo, wgateup, wdown, attn_norm, ffn_norm;
  Tensor d_out, dh, dgateup, d_normed2, d_mid, datt, dqkv, d_normed1, d_in;
  Tensor g_wqkv, g_wo, g_wgateup, g_wdown, g_attn_norm, g_ffn_norm;
};
struct BlockBackward {
  std::vector<BlockBackwardLayer> layers;  // in the model's order, run from the last: layers[i].d_out is layers[i + 1].d_in
  Tensor rope_table;                       // [T, D]
  std::vector<RopeShape> ropes;            // the heads RoPE turned after the QKV product (rope_shapes)
  AttnShape attn;
  int hidden = 0, intermediate = 0;
  bool add = false;  // the weights' gradients added to (gradient accumulation), not written
  int64_t tokens() const { return int64_t(attn.B) * attn.T; }
};

namespace cuda {

constexpr int kBlockBackwardSyncInts = 512;  // the kernel's queue and counters (int32, zero between launches)

// Whether the one launch takes this backward: bf16 throughout, sequences of 128 tokens, at most 1024
// tokens, head size 64, a kv head a query head, RoPE on the queries' and keys' heads from column 0,
// the widths whole tiles (C and the attention's H D multiples of 128 up to 1024, F of 128), at most 8
// layers, each layer's d_out the one above's d_in, every tensor its full size. Empty when it does,
// else why.
std::string block_backward_misfit(const BlockBackward& b);
// The backward as above: `sync` kBlockBackwardSyncInts int32 that are zero, left zero.
void block_backward(const BlockBackward& b, const Tensor& sync, int sms, Stream s);

}  // namespace cuda
}  // namespace tt
