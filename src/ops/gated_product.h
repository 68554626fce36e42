// The FFN's first product with SwiGLU in its epilogue (swiglu-in-gate-up):
//   gateup[n, 2F] = x[n, C] W[2F, C]^T        (bf16, fp32 sums; W's rows: F of gate, then F of up)
//   h[n, F]       = silu(gate) * up           (from gate and up as rounded to bf16)
// in one launch of our own tile kernel, instead of the product and the SwiGLU kernel after it: h
// is made while the tile is on chip, so gateup is not read back and a launch goes. gateup is still
// written, for the backward. The same bits as cuBLAS's product and the SwiGLU kernel
// (`GpuGatedProduct` checks it). CPU reference: the product, then SwiGLU (Backend::gate_up_swiglu's
// default).
#pragma once
#include <string>

#include "core/stream.h"
#include "ops/gemm.h"

namespace tt::cuda {

// Whether the kernel takes the product: linear_gemm's form (y = x W^T, alpha 1, beta 0), bf16 x, W
// and gateup, gateup contiguous [n, 2F]; n and F multiples of 128, C of 64; 16-byte rows and bases;
// and where it pays: at most 1024 tokens (8 x 128: 1.161 -> 1.148 ms a step on an H200; 8 x 256:
// 1.597 against 1.600, no gain; docs/versions/v6.md). Empty when it does, else why not.
std::string gated_product_misfit(const Gemm& gate_up, int f);
// gate_up.c = gateup and h [n, F], bf16, as above; the product must fit.
void gated_product(const Gemm& gate_up, const Tensor& h, int f, Stream s);

}  // namespace tt::cuda
