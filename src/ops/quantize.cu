// FP8 quantization on the GPU (see quantize.h): one pass that reads a bf16 matrix once and writes
// its FP8 bytes row-major, transposed, or both, because Hopper's FP8 products read both operands
// along k (A as is, B transposed), so the weight-gradient product needs the transposes of the
// activations and of the gradients, and the input-gradient product that of the weights. Making
// both layouts in the pass that reads x costs one byte more per element written; a transpose of
// its own would read the FP8 matrix again and write it a second time.
//
// Each block takes a 64 x 64 tile: 256 threads load 8 consecutive elements of a row each (two
// rows apart by 32), convert them with the hardware's saturating round-to-nearest-even (the bytes
// of src/core/fp8.h), store the 8 bytes to the row-major output, and put them in shared memory,
// from which each thread then gathers 16 bytes of one tile column: 16 consecutive bytes of a row
// of the transpose.
#include <cuda_fp8.h>

#include "ops/cuda_common.cuh"
#include "ops/quantize.h"

namespace tt::cuda {
namespace {

constexpr int kTile = 64, kThreads = 256, kChunk = 8;

template <class T>
__global__ void amax_partials_kernel(Successor next, float* partials, const T* x, int64_t n, bool wide) {
  __shared__ float scratch[32];
  await_previous_kernel(next);
  float m = 0.0f;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x, first = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (wide) {
    for (int64_t i = first; i < n / kChunk; i += stride) {
      const Vec<T, kChunk> v = Vec<T, kChunk>::load(x + i * kChunk);
#pragma unroll
      for (int k = 0; k < kChunk; ++k) m = fmaxf(m, fabsf(to_float(v.v[k])));
    }
  } else {
    for (int64_t i = first; i < n; i += stride) m = fmaxf(m, fabsf(to_float(x[i])));
  }
  m = block_max(m, scratch);
  if (threadIdx.x == 0) partials[blockIdx.x] = m;
}

template <class T, bool kRows, bool kCols>
__global__ void quantize_kernel(Successor next, uint8_t* q, int64_t ld, uint8_t* qt, int64_t ld_t, bool wide_t,
                                float* slot, const T* x, int64_t r, int64_t c, bool current, const float* partials,
                                __nv_fp8_interpretation_t format, float largest) {
  __shared__ float scratch[32];
  __shared__ float block_scale;
  __shared__ alignas(16) uint8_t tile[kTile][kTile + 16];
  await_previous_kernel(next);
  if (threadIdx.x < 32) {
    float scale;
    if (current) {  // this tensor's amax, from the partial maxima (fp8_scale's rule, in double as it)
      float m = 0.0f;
      for (int i = int(threadIdx.x); i < kAmaxBlocks; i += 32) m = fmaxf(m, partials[i]);
      m = warp_max(m);
      scale = m > 0.0f && isfinite(m) ? float(double(largest) / double(m)) : 1.0f;
      if (threadIdx.x == 0 && blockIdx.x == 0 && blockIdx.y == 0) {
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
  const int64_t r0 = int64_t(blockIdx.y) * kTile, c0 = int64_t(blockIdx.x) * kTile;
  const int row_in_tile = int(threadIdx.x) / (kTile / kChunk), col_in_tile = int(threadIdx.x) % (kTile / kChunk) * kChunk;
  float amax = 0.0f;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int row = row_in_tile + half * (kThreads / (kTile / kChunk));
    const int64_t gr = r0 + row, gc = c0 + col_in_tile;
    uint2 bytes = {0u, 0u};
    if (gr < r && gc < c) {  // c is a multiple of kChunk: the chunk is whole
      const Vec<T, kChunk> v = Vec<T, kChunk>::load(x + gr * c + gc);
      uint16_t* pairs = reinterpret_cast<uint16_t*>(&bytes);
#pragma unroll
      for (int k = 0; k < kChunk; k += 2) {
        const float a = to_float(v.v[k]), b = to_float(v.v[k + 1]);
        amax = fmaxf(amax, fmaxf(fabsf(a), fabsf(b)));
        pairs[k / 2] = __nv_cvt_float2_to_fp8x2(make_float2(a * scale, b * scale), __NV_SATFINITE, format);
      }
      if (kRows) *reinterpret_cast<uint2*>(q + gr * ld + gc) = bytes;
    }
    if (kCols) *reinterpret_cast<uint2*>(&tile[row][col_in_tile]) = bytes;
  }
  if (kCols) {
    __syncthreads();
    // Row c0 + j of the transpose, its 16 columns from r0 + i0.
    const int j = int(threadIdx.x) / 4, i0 = int(threadIdx.x) % 4 * 16;
    const int64_t gc = c0 + j, gr = r0 + i0;
    if (gc < c && gr < r) {
      alignas(16) uint8_t column[16];
#pragma unroll
      for (int k = 0; k < 16; ++k) column[k] = tile[i0 + k][j];
      if (wide_t && gr + 16 <= r) {
        *reinterpret_cast<uint4*>(qt + gc * ld_t + gr) = *reinterpret_cast<const uint4*>(column);
      } else {
        for (int k = 0; k < 16 && gr + k < r; ++k) qt[gc * ld_t + gr + k] = column[k];
      }
    }
  }
  if (!current) {  // delayed: record this tensor's amax for the steps to come
    amax = block_max(amax, scratch);
    if (threadIdx.x == 0) atomicMax(reinterpret_cast<unsigned*>(slot + 2), __float_as_uint(amax));  // >= 0: ordered as bits
  }
}

__global__ void update_scales_kernel(Successor next, float* slots, int count) {
  await_previous_kernel(next);
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= count) return;
  float* s = slots + int64_t(i) * kFp8SlotFloats;
  float* history = s + 4;
  float m = s[2];
  for (int k = kFp8History - 1; k > 0; --k) {
    history[k] = history[k - 1];
    m = fmaxf(m, history[k]);
  }
  history[0] = s[2];
  const float scale = m > 0.0f && isfinite(m) && s[3] > 0.0f ? float(double(s[3]) / double(m)) : 1.0f;
  s[0] = 1.0f / scale;
  s[1] = scale;
  s[2] = 0.0f;
}

}  // namespace

void fp8_amax_partials(const Tensor& partials, const Tensor& x, Stream s) {
  TT_CHECK(partials.dtype == DType::F32 && partials.numel >= kAmaxBlocks, "fp8_amax_partials: partials too small");
  TT_DISPATCH_ACT(x.dtype, {
    const bool wide = x.numel % kChunk == 0 && aligned16(x.ptr);
    launch("fp8_amax_partials_kernel", amax_partials_kernel<T>, kAmaxBlocks, kThreads, 0, s,
           static_cast<float*>(partials.ptr), static_cast<const T*>(x.ptr), x.numel, wide);
  });
}

void quantize_fp8(const Fp8Matrix& out, const Tensor& x, int64_t r, int64_t c, Fp8Scaling scaling,
                  const Tensor& partials, Stream s) {
  const bool rows = !out.rows.empty(), cols = !out.cols.empty();
  TT_CHECK(rows || cols, "quantize_fp8: no output");
  const DType d = rows ? out.rows.dtype : out.cols.dtype;
  TT_CHECK(is_fp8(d) && (!rows || !cols || out.rows.dtype == out.cols.dtype), "quantize_fp8: outputs must be one FP8 type");
  TT_CHECK(x.numel == r * c && c % kChunk == 0 && aligned16(x.ptr),
           "quantize_fp8: x must be [r, c] with c a multiple of 8, on a 16-byte boundary");
  TT_CHECK(!rows || (out.ld >= c && out.ld % kChunk == 0 && reinterpret_cast<uintptr_t>(out.rows.ptr) % kChunk == 0 &&
                     out.rows.numel >= (r - 1) * out.ld + c),
           "quantize_fp8: the row-major output's stride or size");
  TT_CHECK(!cols || (out.ld_t >= r && out.cols.numel >= (c - 1) * out.ld_t + r), "quantize_fp8: the transpose's stride or size");
  TT_CHECK(out.slot.dtype == DType::F32 && out.slot.numel >= kFp8SlotFloats && aligned16(out.slot.ptr),
           "quantize_fp8: the scale's slot (on a 16-byte boundary)");
  TT_CHECK(scaling == Fp8Scaling::Delayed || partials.numel >= kAmaxBlocks, "quantize_fp8: current scaling needs the partial maxima");
  const dim3 grid(unsigned((c + kTile - 1) / kTile), unsigned((r + kTile - 1) / kTile));
  TT_CHECK(grid.y <= 65535, "quantize_fp8: too many rows");
  const Fp8Format f = fp8_format(d);
  const __nv_fp8_interpretation_t format = f == Fp8Format::E4M3 ? __NV_E4M3 : __NV_E5M2;
  const float largest = float(fp8_spec(f).max_finite);
  const bool wide_t = cols && out.ld_t % 16 == 0 && aligned16(out.cols.ptr);
  TT_DISPATCH_ACT(x.dtype, {
    auto run = [&](auto kernel) {
      launch("quantize_fp8_kernel", kernel, grid, kThreads, 0, s, static_cast<uint8_t*>(out.rows.ptr), out.ld,
             static_cast<uint8_t*>(out.cols.ptr), out.ld_t, wide_t, static_cast<float*>(out.slot.ptr),
             static_cast<const T*>(x.ptr), r, c, scaling == Fp8Scaling::Current,
             static_cast<const float*>(partials.ptr), format, largest);
    };
    if (rows && cols) run(quantize_kernel<T, true, true>);
    else if (rows) run(quantize_kernel<T, true, false>);
    else run(quantize_kernel<T, false, true>);
  });
}

void fp8_update_scales(const Tensor& slots, int count, Stream s) {
  TT_CHECK(slots.dtype == DType::F32 && slots.numel >= int64_t(count) * kFp8SlotFloats, "fp8_update_scales: slots");
  if (count == 0) return;
  launch("fp8_update_scales_kernel", update_scales_kernel, blocks_for(count, 128), 128, 0, s,
         static_cast<float*>(slots.ptr), count);
}

}  // namespace tt::cuda
