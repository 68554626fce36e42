// The tile of RoPE in the QKV product's epilogue (rope_product.h's contract), as a device function:
// rope_product.cu launches it a tile a block, and block_forward.cu's persistent kernel runs it as
// one of its tasks.
//
// A tile of tile_product.cuh: 128 rows by kN columns of qkv, W's rows c0.. K-major, one wgmma of
// width kN a step. Each thread holds columns 8 n + 2 t and + 1 of its rows: a pair of one head (the
// head size even). The epilogue rounds the sums to bf16 as cuBLAS's product stores them, turns the
// pairs of the rotated heads by the table as the RoPE kernel does (rope.cuh) and stores the tile.
// A thread's kN / 8 (cos, sin) of a row are read before any is used: reads between stores would
// each wait for the store before them (flash_attention.cu's one-block kernel measured that).
#pragma once
#include "ops/rope.cuh"
#include "ops/tile_product.cuh"

namespace tt::cuda::rope_tile {

using namespace tile;

// Tiles of 64 columns: 128 of them at 8 x 128 (QKV 1024 wide), one wave of 132 SMs. Eight buffers
// (192 KB): six of the eight chunks of a hidden size of 512 asked for at once. On an H200 at 8 x 128
// the kernel took 9.3 us with tiles of 128 columns, 8.3 with 64 and four buffers, 6.4 with eight
// (docs/data/2026-11-29-h200-v6-version); 6.6 with its first six chunks' weights asked for before
// its wait (docs/data/2026-11-29-h200-weights-before-the-wait), 6.3 with two, 6.4 with none
// (docs/data/2026-11-29-h200-qkv-early-chunks). Our guess, not measured: with six, 48 KB of weights
// arrived ahead of its first activation chunk.
constexpr int kN = 64, kBuffers = 8;
constexpr int kEarlyChunks = 2;  // chunks whose weights are asked for before the wait
constexpr int kBuffersBytes = kBuffers * (kABytes + kN * 128);  // the buffers; the barriers after them

struct RopeOp {
  CUtensorMap x, w;    // x [n, C] in boxes of 64 columns by 128 rows, W [Q, C] by kN rows
  bf16_t* qkv;         // [n, Q]
  const float* table;  // [T, D]: (cos, sin) of pair i at position p at (p D / 2 + i) 2
  int c, q, rotated, seq_len, head_dim;  // C, Q; the columns rotated (heads x D, from 0)
};

// The tile of rows m0.. and columns c0.. through the buffers at smem and kBuffers barriers at bars
// (initialized by the caller); `wait()` before the first read of x.
template <class Wait>
__device__ __forceinline__ void qkv_rope_tile(const RopeOp& op, unsigned char* smem, uint32_t bars, int m0, int c0,
                                              Wait&& wait) {
  float acc[1][kN / 2];
  linear_tile_sums<kN, kBuffers, kEarlyChunks>(acc, smem, bars, op.c, op.x, op.w, m0, c0, wait);
  constexpr int kPitch = kN * 2 + 16;  // a staged row
  const Fragment fr;
  const bool rotated = c0 < op.rotated;  // a tile's columns are all rotated or none (kN | heads x D)
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = fr.row0 + 8 * r, pos = (m0 + row) % op.seq_len;
    float2 cs[kN / 8];
#pragma unroll
    for (int n = 0; n < kN / 8; ++n) {
      const int pair = (c0 + 8 * n + 2 * fr.t) % op.head_dim / 2;
      cs[n] = rotated ? rope_cos_sin(op.table, op.head_dim, pos, pair) : float2{};
    }
#pragma unroll
    for (int n = 0; n < kN / 8; ++n) {
      const int i = 4 * n + 2 * r;
      __nv_bfloat162 v = __floats2bfloat162_rn(acc[0][i], acc[0][i + 1]);
      if (rotated) {
        const float2 x = rotate_pair(__low2float(v), __high2float(v), cs[n].x, cs[n].y);
        v = __floats2bfloat162_rn(x.x, x.y);
      }
      *fr.staged(smem, kPitch, row, n) = v;
    }
  }
  write_staged<1, kN>(smem, [&](int r, int) { return op.qkv + int64_t(m0 + r) * op.q + c0; });
}

}  // namespace tt::cuda::rope_tile
