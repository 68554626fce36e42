// SwiGLU made in the epilogues of the FFN's products, by our own tile kernels (TMA and wgmma),
// instead of in kernels of its own after them:
//   forward (swiglu-in-gate-up): gateup[n, 2F] = x[n, C] W[2F, C]^T (W's rows: F of gate, then F
//     of up), then h[n, F] = silu(gate) * up from gate and up as rounded to bf16. h is made while
//     the tile is on chip, so gateup is not read back; gateup is still written, for the backward.
//   backward (swiglu-in-down-gradient): dh[n, F] = dy[n, C] W_down[C, F] (down's input
//     gradient), then dgate and dup [n, 2F] from dh as rounded to bf16 and the saved gateup. dh is
//     never stored.
// bf16, fp32 sums in the order of cuBLAS's, so the bytes are those of cuBLAS's product and the
// SwiGLU kernel after it (`GpuGatedProduct` checks it). CPU reference: the product, then SwiGLU
// (Backend::gate_up_swiglu's and Backend::down_swiglu_backward's defaults).
#pragma once
#include <string>

#include "core/stream.h"
#include "ops/gemm.h"

namespace tt::cuda {

// Whether the forward kernel takes the product: linear_gemm's form (y = x W^T, alpha 1, beta 0),
// bf16 x, W and gateup, gateup contiguous [n, 2F]; n and F multiples of 128, C of 64; 16-byte rows
// and bases; and where it pays: at most 1024 tokens (8 x 128: 1.161 -> 1.148 ms a step on an
// H200; 8 x 256: 1.597 against 1.600, no gain; docs/versions/v6.md). Empty when it does, else why.
std::string gated_product_misfit(const Gemm& gate_up, int f);
// gate_up.c = gateup and h [n, F], bf16, as above; the product must fit.
void gated_product(const Gemm& gate_up, const Tensor& h, int f, Stream s);

// Whether the backward kernel takes down's input gradient: linear_dx_gemm's form (dh = dy W,
// alpha 1, beta 0), bf16, dh contiguous [n, F]; the shapes and the token limit as above (8 x 128:
// 1.136-1.138 -> 1.122-1.126 ms a step on an H200; not measured beyond).
std::string swiglu_gradient_product_misfit(const Gemm& down_dx, int f);
// dgateup [n, 2F] from down_dx's product (its c, dh, is not written) and gateup [n, 2F].
void swiglu_gradient_product(const Gemm& down_dx, const Tensor& dgateup, const Tensor& gateup, int f, Stream s);

}  // namespace tt::cuda
