// A layer's weight gradients in one launch (grouped-weight-gradients): the products
//   dW_p[out, in] = beta * dW_p + dout_p[T, out]^T x_p[T, in]      p = 1 .. count
// of linear_dw_gemm's form (bf16 operands, fp32 dW) made by our own tile kernel, every tile of
// every product a block of one grid. At the default shape (1024 tokens) each of the four runs in
// a partial wave of the GPU when cuBLAS makes them one after another; together their tiles fill
// it (docs/experiments.md, "Version 6's second question"). Each output is one sum along the
// tokens in their order, the bytes cublasGemmEx writes (`GpuWeightGradients` checks it).
// CPU reference: the products one by one (Backend::matmul_group's default).
#pragma once
#include <string>
#include <vector>

#include "core/stream.h"
#include "ops/gemm.h"

namespace tt::cuda {

// Whether the kernel takes the products: each of linear_dw_gemm's form (A transposed, B as is),
// bf16 A and B, fp32 C written or added to (beta 0 or 1, alpha 1), out and in multiples of 128,
// the tokens a multiple of 64, 16-byte rows and bases; at most kGroupedMaxProducts of them; and
// where it pays: their tiles of 128 rows at most two waves of `sms` SMs, and at most 2048 tokens
// unless every output is a multiple of 256 (then tiles of 256 rows, measured to pay up to 16384
// tokens). On an H200: 8 x 128 1.211 -> 1.151 ms a step, 8 x 256 1.660 -> 1.607, and with tiles of
// 256 rows 8 x 512 2.612 -> 2.474 (docs/versions/v6.md).
// Empty when they fit, else why not.
constexpr int kGroupedMaxProducts = 8;
std::string weight_gradients_misfit(const std::vector<Gemm>& products, int sms);
// The products in one launch; they must fit (weight_gradients_misfit empty). `beside`: on a lane
// beside the backward's own kernels (weight-gradients-behind), where from 2048 tokens tiles of 128
// rows pay even where every output has 256 (weight_gradients.cu says why).
void weight_gradients(const std::vector<Gemm>& products, Stream s, bool beside = false);

}  // namespace tt::cuda
