// What the two blocks' cases share (block_forward.cpp, block_backward.cpp): two layers of the model's
// forward after the first attention norm, laid out and filled the same way, and their FLOPs.
#pragma once
#include "bench/op_case.h"
#include "ops/block_forward.h"

namespace tt {

constexpr int kBlockLayers = 2;  // the second starts from what the first wrote: the counters across layers

// The layers' tensors from the rig's arena: the first layer's input x and its norm xn1, each layer's
// activations and weights, each layer's output the next one's input.
BlockForward block_forward_layout(OpLayout& l, const OpShape& shape);
// Their inputs: the first layer's x and xn1, the RoPE table, the weights (the norms' gains near 1).
void block_forward_fill(OpFill& f, const BlockForward& b, const OpShape& shape);
// The tensors the forward writes whole.
std::vector<Tensor> block_forward_written(const BlockForward& b);
// The forward's products' and attention's FLOPs, and the backward's (the products twice: the input
// and the weight gradients; the attention 2.5 times: dQ, dK, dV and the recomputed scores).
OpWork block_flops(const OpShape& shape);

}  // namespace tt
