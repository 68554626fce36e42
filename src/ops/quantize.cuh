// The quantizing pass of version 5 as a template over where the values come from (a Source), so
// that a kernel that makes a tensor can write it straight in FP8: quantize.cu reads a bf16 matrix;
// swiglu.cu computes SwiGLU's output or input gradient from its inputs, and never writes the bf16
// copy; rope.cu turns the QKV gradient's heads back as it reads them; cross_entropy.cu computes
// the logits' gradient from the logits and each row's log-sum-exp. A Source gives the values of 8 consecutive elements of a row (the row's width is a multiple
// of 8), rounded to the act type as the unfused kernel would store them, so that the bytes are
// those of quantizing what that kernel writes.
//
// A Source may make several parts of a row from one read (kParts, each c / kParts wide: part p's
// chunk sits at column col + p c / kParts): SwiGLU's input gradient makes dgate's and dup's chunks
// from one read of gate, up and dh. Its load takes float (&)[kParts][8]; the others', float (&)[8].
//
// A Source may also ask L2 for a chunk's lines ahead of its load (prefetch(row, col)): each thread
// then asks for both of its chunks before the block reads its scale, so that the block's three
// round trips to memory, each waiting on the one before (the scale, the first chunk, the second),
// overlap. Measured on an H200 at gpt2-small (`tiny_llama kernels`, one job): a gradient [16384,
// 4096] quantized 87.2 -> 79.6 us, the head's loss and FP8 gradient passes 1.747 -> 1.677 ms,
// SwiGLU's output 59.9 -> 58.8 us. SwiGLU's input gradient, with three inputs, slowed (95.5 ->
// 98.5 us) and RoPE's gradient did not change (62.4 -> 62.3): those two do not ask.
//
// Each block takes a 64 x 64 tile (of each part): 256 threads load 8 consecutive elements of a
// row each (two rows apart by 32), convert them with the hardware's saturating round-to-nearest-even (the bytes
// of src/core/fp8.h), store the 8 bytes to the row-major output, and put them in shared memory,
// from which each thread takes a 4 x 4 block of bytes (a word from each of four rows) and writes
// it as 4 bytes of four rows of the transpose (store_transposed_4x4). Gathering a column a byte
// at a time (16 one-byte shared loads and their packing for 16 bytes out) made the head's gradient
// pass, the quantizing passes and RoPE's backward wait on instruction issue: 4 x 4 blocks took the head's passes 1.433 ->
// 1.401 ms, a gradient's cast 79.3 -> 76.0 us, RoPE's backward 57.6 -> 49.8, SwiGLU's input
// gradient 95.5 -> 88.1, but SwiGLU's output 58.5 -> 60.9 (H200, gpt2-small, docs/experiments.md).
// Making both layouts in the pass that reads x costs one byte more per element written; a
// transpose of its own would read the FP8 matrix again and write it a second time.
#pragma once
#include <cuda_fp8.h>

#include <type_traits>
#include <utility>

#include "ops/cuda_common.cuh"
#include "ops/quantize.h"

namespace tt::cuda {

constexpr int kQuantizeTile = 64, kQuantizeThreads = 256, kQuantizeChunk = 8;

template <class S, class = void>
struct SourceParts : std::integral_constant<int, 1> {};
template <class S>
struct SourceParts<S, std::void_t<decltype(S::kParts)>> : std::integral_constant<int, S::kParts> {};

template <class S, class = void>
struct SourcePrefetches : std::false_type {};
template <class S>
struct SourcePrefetches<S, std::void_t<decltype(std::declval<const S&>().prefetch(int64_t(), int64_t()))>>
    : std::true_type {};

// The values of chunk `col` of row `row`, of each part.
template <class Source>
__device__ __forceinline__ void load_parts(const Source& src, int64_t row, int64_t col,
                                           float (&v)[SourceParts<Source>::value][kQuantizeChunk]) {
  if constexpr (SourceParts<Source>::value == 1) src.load(row, col, v[0]);
  else src.load(row, col, v);
}

// Current scaling's first pass: each block's largest |value| into partials[blockIdx.x].
template <class Source>
__global__ void amax_partials_kernel(Successor next, float* partials, Source src, int64_t r, int64_t c) {
  __shared__ float scratch[32];
  await_previous_kernel(next);
  constexpr int kParts = SourceParts<Source>::value;
  float m = 0.0f;
  const int64_t row_chunks = c / kParts / kQuantizeChunk, chunks = r * row_chunks;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < chunks; i += stride) {
    float v[kParts][kQuantizeChunk];
    load_parts(src, i / row_chunks, i % row_chunks * kQuantizeChunk, v);
#pragma unroll
    for (int p = 0; p < kParts; ++p)
#pragma unroll
      for (int k = 0; k < kQuantizeChunk; ++k) m = fmaxf(m, fabsf(v[p][k]));
  }
  m = block_max(m, scratch);
  if (threadIdx.x == 0) partials[blockIdx.x] = m;
}

// a and b times `scale` as two FP8 bytes, saturating, rounded to nearest even (the bytes of
// src/core/fp8.h); their largest |value| joins amax. Every kernel that writes FP8 converts with
// it, so that a fused producer's bytes are the quantizing pass's.
__device__ __forceinline__ uint16_t fp8x2(float a, float b, float scale, __nv_fp8_interpretation_t format,
                                          float& amax) {
  amax = fmaxf(amax, fmaxf(fabsf(a), fabsf(b)));
  return __nv_cvt_float2_to_fp8x2(make_float2(a * scale, b * scale), __NV_SATFINITE, format);
}

// Eight values (float or the act type) times `scale` as FP8 bytes, pair by pair as above.
template <class T>
__device__ __forceinline__ uint2 fp8_chunk(const T (&x)[kQuantizeChunk], float scale, __nv_fp8_interpretation_t format,
                                           float& amax) {
  uint2 bytes;
  uint16_t* pairs = reinterpret_cast<uint16_t*>(&bytes);
#pragma unroll
  for (int k = 0; k < kQuantizeChunk; k += 2) pairs[k / 2] = fp8x2(to_float(x[k]), to_float(x[k + 1]), scale, format, amax);
  return bytes;
}

// A 4 x 4 block of FP8 bytes turned: row[k] holds 4 bytes of row k (its columns j .. j + 3), and
// column[k] gets 4 bytes of column j + k (its rows 0 .. 3), by byte permutes. Written as
// column[k] at dst + k ld_t, 4 bytes each: one 4-byte store where `whole` (dst on a 4-byte
// boundary, the 4 rows all there), else the first n bytes. Gathering a column a byte at a time
// (16 one-byte shared loads and their packing for 16 bytes out) made the passes that write a
// transpose wait on instruction issue (docs/experiments.md).
__device__ __forceinline__ void store_transposed_4x4(uint8_t* dst, int64_t ld_t, const uint32_t (&row)[4], bool whole,
                                                     int n) {
  const uint32_t lo01 = __byte_perm(row[0], row[1], 0x5140), lo23 = __byte_perm(row[2], row[3], 0x5140);
  const uint32_t hi01 = __byte_perm(row[0], row[1], 0x7362), hi23 = __byte_perm(row[2], row[3], 0x7362);
  const uint32_t column[4] = {__byte_perm(lo01, lo23, 0x5410), __byte_perm(lo01, lo23, 0x7632),
                              __byte_perm(hi01, hi23, 0x5410), __byte_perm(hi01, hi23, 0x7632)};
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    uint8_t* at = dst + k * ld_t;
    if (whole) *reinterpret_cast<uint32_t*>(at) = column[k];
    else
      for (int e = 0; e < n; ++e) at[e] = uint8_t(column[k] >> (8 * e));
  }
}

// A shared FP8 tile's pitch for store_transposed: its rows `cols` bytes rounded up to a multiple
// of 32, plus 4, so that the word loads of a warp's 4 x 4 blocks (below) meet every bank once.
__host__ __device__ constexpr int fp8_transpose_pitch(int cols) { return (cols + 31) / 32 * 32 + 4; }

// Rows [0, kRows) and columns [0, cols) of a shared tile of FP8 bytes (rows `pitch` bytes apart,
// fp8_transpose_pitch(cols); kRows a multiple of 32, cols of 4) into the transpose at qt (rows
// ld_t apart): the tile's column j to qt's row j, its row i to qt's column i, for the rows i below
// `valid`; 4-byte stores where wide_t and qt is on a 4-byte boundary. By the block's kThreads
// threads in 4 x 4 blocks (store_transposed_4x4), a warp taking 8 blocks down by 4 across, so
// that its word loads meet every bank once and each of its word stores fills 32-byte runs of four
// rows of qt. (The norm's and the attention's tiles; quantize_tile has its own order.)
template <int kThreads, int kRows>
__device__ __forceinline__ void store_transposed(uint8_t* qt, int64_t ld_t, bool wide_t, const uint8_t* tile, int pitch,
                                                 int cols, int valid) {
  constexpr int kDown = kRows / 32;  // the warps' pieces of 32 rows by 16 columns, down a column of them
  const int lane = int(threadIdx.x) % 32, pieces = kDown * ((cols + 15) / 16);
  for (int piece = int(threadIdx.x) / 32; piece < pieces; piece += kThreads / 32) {
    const int i = 4 * (piece % kDown * 8 + lane % 8), j = 4 * (piece / kDown * 4 + lane / 8);
    if (i >= valid || j >= cols) continue;
    uint32_t row[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) row[k] = *reinterpret_cast<const uint32_t*>(tile + (i + k) * pitch + j);
    store_transposed_4x4(qt + j * ld_t + i, ld_t, row, wide_t && i + 4 <= valid, min(4, valid - i));
  }
}

// One block's 64 x 64 tile, rows [r0, r0 + 64) and columns [c0, c0 + 64) of each part, of the
// matrix [r, c] that src gives: into q (row-major) and qt (the transpose), with current scaling
// from the partial maxima (the first block also fills the slot) or the slot's delayed scale.
template <class Source, bool kRows, bool kCols>
__device__ __forceinline__ void quantize_tile(uint8_t* q, int64_t ld, uint8_t* qt, int64_t ld_t, bool wide_t,
                                              float* slot, const Source& src, int64_t r, int64_t c, int64_t r0,
                                              int64_t c0, bool first_block, bool current, const float* partials,
                                              __nv_fp8_interpretation_t format, float largest) {
  __shared__ float scratch[32];
  __shared__ float block_scale;
  constexpr int kParts = SourceParts<Source>::value;
  // Rows of 68 bytes, 17 words: the 4 x 4 blocks' word loads below meet no bank more than twice.
  __shared__ alignas(16) uint8_t tile[kParts][kQuantizeTile][kQuantizeTile + 4];
  const int64_t w = c / kParts;  // a part's width; the tile's columns are [c0, c0 + 64) of each part
  constexpr int kChunksPerRow = kQuantizeTile / kQuantizeChunk, kRowsApart = kQuantizeThreads / kChunksPerRow;
  const int row_in_tile = int(threadIdx.x) / kChunksPerRow, col_in_tile = int(threadIdx.x) % kChunksPerRow * kQuantizeChunk;
  if constexpr (SourcePrefetches<Source>::value) {  // this thread's two chunks, asked of L2 before the scale is read
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int64_t gr = r0 + row_in_tile + half * kRowsApart, gc = c0 + col_in_tile;
      if (gr < r && gc < w) src.prefetch(gr, gc);
    }
  }
  if (threadIdx.x < 32) {
    float scale;
    if (current) {  // this tensor's amax, from the partial maxima
      float m = 0.0f;
      for (int i = int(threadIdx.x); i < kAmaxBlocks; i += 32) m = fmaxf(m, partials[i]);
      m = warp_max(m);
      scale = fp8_scale_of(m, largest);
      if (threadIdx.x == 0 && first_block) {
        slot[0] = 1.0f / scale;
        slot[1] = scale;
        slot[2] = fmaxf(slot[2], m);
        slot[3] = largest;
      }
    } else {
      scale = slot[1];
    }
    if (threadIdx.x == 0) block_scale = scale;
  }
  __syncthreads();
  const float scale = block_scale;
  float amax = 0.0f;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int row = row_in_tile + half * kRowsApart;
    const int64_t gr = r0 + row, gc = c0 + col_in_tile;
    uint2 bytes[kParts] = {};
    if (gr < r && gc < w) {  // w is a multiple of kQuantizeChunk: the chunk is whole
      float v[kParts][kQuantizeChunk];
      load_parts(src, gr, gc, v);
#pragma unroll
      for (int p = 0; p < kParts; ++p) {
        bytes[p] = fp8_chunk(v[p], scale, format, amax);
        if (kRows) *reinterpret_cast<uint2*>(q + gr * ld + p * w + gc) = bytes[p];
      }
    }
#pragma unroll
    for (int p = 0; p < kParts; ++p)
      if (kCols) {  // two words: a row is 4-byte aligned
        uint32_t* at = reinterpret_cast<uint32_t*>(&tile[p][row][col_in_tile]);
        at[0] = bytes[p].x;
        at[1] = bytes[p].y;
      }
  }
  if (kCols) {
    __syncthreads();
    // Thread t's block: rows 4a .. 4a + 3, columns 4b .. 4b + 3 of the tile; a warp takes a = 0..15
    // for two b, so that each of its word stores fills 64 consecutive bytes of two transposed rows.
    // (store_transposed's order and loop, a warp of 8 a by 4 b whose loads meet every bank once,
    // made the passes of this kernel 2-5% slower: docs/experiments.md.)
    const int t = int(threadIdx.x), a = t % 16, b = t / 16;
    const int64_t gr = r0 + 4 * a, gc = c0 + 4 * b;
    if (gr < r && gc < w) {  // w is a multiple of 8: the block's 4 columns are all there
#pragma unroll 1
      for (int p = 0; p < kParts; ++p) {
        uint32_t row[4];  // row 4a + k, its bytes the columns 4b ..
#pragma unroll
        for (int k = 0; k < 4; ++k) row[k] = *reinterpret_cast<const uint32_t*>(&tile[p][4 * a + k][4 * b]);
        store_transposed_4x4(qt + (p * w + gc) * ld_t + gr, ld_t, row, wide_t && gr + 4 <= r, int(min(int64_t(4), r - gr)));
      }
    }
  }
  if (!current) {  // delayed: record this tensor's amax for the steps to come
    amax = block_max(amax, scratch);
    if (threadIdx.x == 0) atomicMax(reinterpret_cast<unsigned*>(slot + 2), __float_as_uint(amax));  // >= 0: ordered as bits
  }
}

// Eight blocks an SM (32 registers a thread): the kernel waits on its loads, and more warps keep
// more of them in flight (at 36 registers six blocks fit, 71% of the warps ran). SwiGLU's
// input-gradient source spilled 8 bytes at this bound until the transposes took 4 x 4 blocks (none
// since), and RoPE's spilled 30 until its indices became 32-bit; both measured faster with it all
// the same (96.1 against 99.3 us, 62.0 against 66.8 at gpt2-small).
template <class Source, bool kRows, bool kCols>
__global__ void __launch_bounds__(kQuantizeThreads, 8)
    quantize_kernel(Successor next, uint8_t* q, int64_t ld, uint8_t* qt, int64_t ld_t, bool wide_t, float* slot,
                    Source src, int64_t r, int64_t c, bool current, const float* partials,
                    __nv_fp8_interpretation_t format, float largest) {
  await_previous_kernel(next);
  quantize_tile<Source, kRows, kCols>(q, ld, qt, ld_t, wide_t, slot, src, r, c, int64_t(blockIdx.y) * kQuantizeTile,
                                      int64_t(blockIdx.x) * kQuantizeTile, blockIdx.x == 0 && blockIdx.y == 0, current,
                                      partials, format, largest);
}

// That out can take an FP8 matrix [r, c] from a quantizing kernel: one FP8 type, 8-byte runs of
// rows, strides and sizes, the slot. Returns its format.
inline Fp8Format check_fp8_output(const Fp8Matrix& out, int64_t r, int64_t c) {
  const bool rows = !out.rows.empty(), cols = !out.cols.empty();
  TT_CHECK(rows || cols, "quantize_fp8: no output");
  const DType d = rows ? out.rows.dtype : out.cols.dtype;
  TT_CHECK(is_fp8(d) && (!rows || !cols || out.rows.dtype == out.cols.dtype), "quantize_fp8: outputs must be one FP8 type");
  TT_CHECK(c % kQuantizeChunk == 0, "quantize_fp8: the rows' width must be a multiple of 8");
  TT_CHECK(!rows || (out.ld >= c && out.ld % kQuantizeChunk == 0 &&
                     reinterpret_cast<uintptr_t>(out.rows.ptr) % kQuantizeChunk == 0 && out.rows.numel >= (r - 1) * out.ld + c),
           "quantize_fp8: the row-major output's stride or size");
  TT_CHECK(!cols || (out.ld_t >= r && out.cols.numel >= (c - 1) * out.ld_t + r), "quantize_fp8: the transpose's stride or size");
  TT_CHECK(out.slot.dtype == DType::F32 && out.slot.numel >= kFp8SlotFloats && aligned16(out.slot.ptr),
           "quantize_fp8: the scale's slot (on a 16-byte boundary)");
  return fp8_format(d);
}
// Whether the transpose's runs can be written in 4-byte stores (the producers' runs start at
// multiples of 4 of its columns). Asking for 16-byte rows and base, as when the runs were 16
// bytes, leaves some shapes (ld_t a multiple of 4 but not of 16) on byte stores.
inline bool wide_transpose(const Fp8Matrix& out) {
  return !out.cols.empty() && out.ld_t % 16 == 0 && aligned16(out.cols.ptr);
}
inline __nv_fp8_interpretation_t fp8_interpretation(Fp8Format f) { return f == Fp8Format::E4M3 ? __NV_E4M3 : __NV_E5M2; }

// An FP8 matrix as a producing kernel takes it, with delayed scaling (the scale in slot[1], the
// amax recorded into slot[2]): the row-major bytes and the transpose (either null where not
// wanted), their strides, and whether the transpose's runs take 4-byte stores (wide_transpose).
struct Fp8Out {
  uint8_t* rows = nullptr;
  int64_t ld = 0;
  uint8_t* cols = nullptr;
  int64_t ld_t = 0;
  bool wide_t = false;
  float* slot = nullptr;
  __nv_fp8_interpretation_t format = __NV_E4M3;
};
// out [r, c], checked (check_fp8_output), as a kernel's Fp8Out.
inline Fp8Out fp8_out(const Fp8Matrix& out, int64_t r, int64_t c) {
  const Fp8Format f = check_fp8_output(out, r, c);
  return {static_cast<uint8_t*>(out.rows.ptr), out.ld, static_cast<uint8_t*>(out.cols.ptr), out.ld_t,
          wide_transpose(out), static_cast<float*>(out.slot.ptr), fp8_interpretation(f)};
}

// The matrix [r, c] that `src` gives into out.rows and/or out.cols (see quantize_fp8 in quantize.h;
// with current scaling, a pass over src for its amax first).
template <class Source>
void quantize_from(const Fp8Matrix& out, Source src, int64_t r, int64_t c, Fp8Scaling scaling, const Tensor& partials,
                   Stream s) {
  const Fp8Format f = check_fp8_output(out, r, c);
  const bool rows = !out.rows.empty(), cols = !out.cols.empty();
  const bool current = scaling == Fp8Scaling::Current;
  constexpr int kParts = SourceParts<Source>::value;
  TT_CHECK(c % (kParts * kQuantizeChunk) == 0, "quantize_fp8: each part's width must be a multiple of 8");
  TT_CHECK(!current || partials.numel >= kAmaxBlocks, "quantize_fp8: current scaling needs the partial maxima");
  const int64_t w = c / kParts;
  const dim3 grid(unsigned((w + kQuantizeTile - 1) / kQuantizeTile), unsigned((r + kQuantizeTile - 1) / kQuantizeTile));
  TT_CHECK(grid.y <= 65535, "quantize_fp8: too many rows");
  float* partial = static_cast<float*>(partials.ptr);
  if (current)
    launch("fp8_amax_partials_kernel", amax_partials_kernel<Source>, kAmaxBlocks, kQuantizeThreads, 0, s, partial, src,
           r, c);
  const __nv_fp8_interpretation_t format = fp8_interpretation(f);
  const float largest = float(fp8_spec(f).max_finite);
  const bool wide_t = wide_transpose(out);
  auto run = [&](auto kernel) {
    launch("quantize_fp8_kernel", kernel, grid, kQuantizeThreads, 0, s, static_cast<uint8_t*>(out.rows.ptr), out.ld,
           static_cast<uint8_t*>(out.cols.ptr), out.ld_t, wide_t, static_cast<float*>(out.slot.ptr), src, r, c, current,
           static_cast<const float*>(partial), format, largest);
  };
  if (rows && cols) run(quantize_kernel<Source, true, true>);
  else if (rows) run(quantize_kernel<Source, true, false>);
  else run(quantize_kernel<Source, false, true>);
}

}  // namespace tt::cuda
