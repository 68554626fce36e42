// The forward tile of SwiGLU in the gate/up product's epilogue (gated_product.h's contract), as a
// device function: gated_product.cu launches it a tile a block, and block_forward.cu's persistent
// kernel runs it as one of its tasks.
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
      unsigned char* at = smem + (fr.row0 + 8 * r) * kPitch + (8 * n + 2 * fr.t) * 2;
      *reinterpret_cast<__nv_bfloat162*>(at) = gate;
      *reinterpret_cast<__nv_bfloat162*>(at + kCols * 2) = up;
      *reinterpret_cast<__nv_bfloat162*>(at + 2 * kCols * 2) = h;
    }
  write_staged<3>(smem, [&](int r, int part) {  // gate, up, h
    const int64_t row = m0 + r;
    return part == 2 ? op.h + row * op.f + c0 : op.gateup + row * 2 * op.f + part * op.f + c0;
  });
}

}  // namespace tt::cuda::gated_tile
