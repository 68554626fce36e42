// The tiles of SwiGLU in the FFN's products' epilogues (gated_product.h's contract), as device
// functions: gated_product.cu launches them a tile a block, and the persistent kernels run them as
// tasks (the forward's in block_forward.cu, the backward's in block_backward.cu).
//
// The B operand is W's 128 gate rows c0.. and 128 up rows F + c0.., both K-major, two wgmma of width
// 128 a step, so each thread holds a column's gate and up values in the same places of its two
// accumulators. The epilogue rounds gate and up to bf16 (gateup, which the backward reads) and makes
// h from those as the SwiGLU kernel does (swiglu.cuh).
#pragma once
#include "ops/swiglu.cuh"
#include "ops/tile_product.cuh"

namespace tt::cuda::gated_tile {

using namespace tile;

struct Forward {
  CUtensorMap x, w;  // x [n, C] and W [2F, C], in boxes of 64 columns by 128 rows
  bf16_t* gateup;    // [n, 2F]
  bf16_t* h;         // [n, F]
  int c, f;
};
constexpr int kBuffersBytes = kStages * (kABytes + 2 * kBPartBytes);  // the buffers; the barriers after them

// Gate and up of 128 columns c0.. of rows m0.. (W's rows c0.. and F + c0..: acc[0] and acc[1]), then
// h, through the buffers at smem and kStages barriers at bars (initialized by the caller); `wait()`
// before the first read of x.
template <class Wait>
__device__ __forceinline__ void gate_up_swiglu_tile(const Forward& op, unsigned char* smem, uint32_t bars, int m0,
                                                    int c0, Wait&& wait) {
  float acc[2][64];
  tile_sums<2, 0>(
      acc, smem, bars, op.c / kChunk, wait,
      [&](int c, uint32_t st, uint32_t bar) {
        mbar_expect(bar, kABytes + 2 * kBPartBytes);
        tma_load_2d(st + kABytes, &op.w, c * kChunk, c0, bar);
        tma_load_2d(st + kABytes + kBPartBytes, &op.w, c * kChunk, op.f + c0, bar);
      },
      [&](int c, uint32_t st, uint32_t bar) { tma_load_2d(st, &op.x, c * kChunk, m0, bar); });
  constexpr int kPitch = 3 * kCols * 2 + 16;  // a staged row: gate, up, h
  const Fragment fr;
#pragma unroll
  for (int n = 0; n < kCols / 8; ++n)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int i = 4 * n + 2 * r;
      const __nv_bfloat162 gate = __floats2bfloat162_rn(acc[0][i], acc[0][i + 1]),
                           up = __floats2bfloat162_rn(acc[1][i], acc[1][i + 1]);
      const __nv_bfloat162 h = __floats2bfloat162_rn(swiglu_value(__low2float(gate), __low2float(up)),
                                                     swiglu_value(__high2float(gate), __high2float(up)));
      __nv_bfloat162* at = fr.staged(smem, kPitch, fr.row0 + 8 * r, n);
      at[0] = gate;
      at[kCols / 2] = up;  // the next part of the row, kCols bf16 on
      at[kCols] = h;
    }
  write_staged<3>(smem, [&](int r, int part) {  // gate, up, h
    const int64_t row = m0 + r;
    return part == 2 ? op.h + row * op.f + c0 : op.gateup + row * 2 * op.f + part * op.f + c0;
  });
}

struct Backward {
  CUtensorMap dy, w, gateup;  // dy [n, C] (boxes of 64 x 128 rows), W [C, F] (64 x 64), gateup [n, 2F] (64 x 128)
  bf16_t* dgateup;            // [n, 2F]
  int c, f;
};
constexpr int kBackwardStages = kStages * (kABytes + kBPartBytes);  // then gate's and up's tile, 4 boxes
constexpr int kBackwardBytes = kBackwardStages + 4 * kBox;  // the buffers; the barriers after them

// Backward: dh of 128 columns c0.. of rows m0.. (down's input gradient, W MN-major), then dgate and
// dup from it and the tile's gate and up, which TMA brings in at the start (a barrier of their own):
// kBackwardBytes of buffers at smem, kStages + 1 barriers at bars (initialized by the caller);
// `wait()` before the first read of dy.
template <class Wait>
__device__ __forceinline__ void down_swiglu_backward_tile(const Backward& op, unsigned char* smem, uint32_t bars, int m0,
                                                          int c0, Wait&& wait) {
  unsigned char* gu = smem + kBackwardStages;  // gate c0.., c0 + 64.., up c0.., c0 + 64..: [128 rows][64] each
  const uint32_t gu_bar = bars + 8 * kStages;
  float acc[1][64];
  tile_sums<1, 1>(
      acc, smem, bars, op.c / kChunk, wait,
      [&](int c, uint32_t st, uint32_t bar) {
        mbar_expect(bar, kABytes + kBPartBytes);
        tma_load_2d(st + kABytes, &op.w, c0, c * kChunk, bar);
        tma_load_2d(st + kABytes + kBPartBytes / 2, &op.w, c0 + 64, c * kChunk, bar);
      },
      [&](int c, uint32_t st, uint32_t bar) {
        if (c == 0) {  // gate and up, from the forward, after the wait like every input
          mbar_expect(gu_bar, 4 * kBox);
          for (int b = 0; b < 4; ++b)
            tma_load_2d(smem_addr(gu + b * kBox), &op.gateup, (b / 2) * op.f + c0 + (b % 2) * 64, m0, gu_bar);
        }
        tma_load_2d(st, &op.dy, c * kChunk, m0, bar);
      });
  mbar_wait(gu_bar, 0);
  constexpr int kPitch = 2 * kCols * 2 + 16;  // a staged row: dgate, dup
  const Fragment fr;
#pragma unroll
  for (int n = 0; n < kCols / 8; ++n)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int i = 4 * n + 2 * r, row = fr.row0 + 8 * r;
      // Columns 8 n + 2 t, + 1 in box n / 8 of gate and of up: 16-byte chunk n % 8 of the row, swizzled.
      const int at = (n / 8) * kBox + row * 128 + (((n % 8) ^ (row % 8)) * 16) + 4 * fr.t;
      const __nv_bfloat162 g = *reinterpret_cast<const __nv_bfloat162*>(gu + at),
                           u = *reinterpret_cast<const __nv_bfloat162*>(gu + 2 * kBox + at),
                           d = __floats2bfloat162_rn(acc[0][i], acc[0][i + 1]);
      const float g0 = __low2float(g), g1 = __high2float(g), d0 = __low2float(d), d1 = __high2float(d);
      __nv_bfloat162* out = fr.staged(smem, kPitch, row, n);
      out[0] = __floats2bfloat162_rn(swiglu_dgate(g0, __low2float(u), d0), swiglu_dgate(g1, __high2float(u), d1));
      out[kCols / 2] = __floats2bfloat162_rn(swiglu_dup(g0, d0), swiglu_dup(g1, d1));  // kCols bf16 on
    }
  write_staged<2>(smem, [&](int r, int part) { return op.dgateup + int64_t(m0 + r) * 2 * op.f + part * op.f + c0; });
}


}  // namespace tt::cuda::gated_tile
