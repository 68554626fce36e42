// RoPE made in the epilogue of the QKV product (rope-in-qkv-product), by our own tile kernel (TMA
// and wgmma, ops/tile_product.cuh), instead of in a kernel of its own after it:
//   qkv[n, Q] = x[n, C] W[Q, C]^T, then the heads of `rope` (the queries and the keys, from column
//   0) rotated in place by the [T, D] cos/sin table, each pair from its product as rounded to bf16.
// The rotated columns are written once and never read back. bf16, fp32 sums in the order of
// cuBLAS's and RoPE's roundings (rope.cuh), so the bytes are those of cuBLAS's product and the RoPE
// kernel after it (`GpuRopeProduct` checks it). CPU reference: the product, then RoPE
// (Backend::qkv_rope's default).
#pragma once
#include <string>

#include "core/stream.h"
#include "ops/gemm.h"
#include "ops/rope.h"

namespace tt::cuda {

// Whether the kernel takes the product and the rotation: linear_gemm's form (y = x W^T, alpha 1,
// beta 0), bf16 x, W and qkv, qkv contiguous [n, Q]; n a multiple of 128, Q and C of 64; 16-byte
// rows and bases; `rope` the heads from column 0 of that qkv, of an even head size, whole tiles of
// 64 columns; and where it pays: at most 1024 tokens. Empty when it does, else why.
std::string rope_product_misfit(const Gemm& qkv, const RopeShape& rope);
// qkv.c, rotated by `table` (fp32 [rope.seq_len, rope.head_dim]) as above; it must fit.
void rope_product(const Gemm& qkv, const Tensor& table, const RopeShape& rope, Stream s);

}  // namespace tt::cuda
