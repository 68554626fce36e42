// FP8 quantization of a stored matrix, and the delayed scales' update (see quantize.h; the pass
// itself is quantize.cuh's, shared with the kernels that quantize what they make).
#include "ops/quantize.cuh"

#include <algorithm>
#include <climits>

namespace tt::cuda {
namespace {

// The values of a stored [r, c] matrix (rows contiguous, on a 16-byte boundary).
template <class T>
struct StoredMatrix {
  const T* x;
  int64_t c;
  __device__ __forceinline__ void prefetch(int64_t row, int64_t col) const { prefetch_l2(x + row * c + col); }
  __device__ __forceinline__ void load(int64_t row, int64_t col, float (&v)[kQuantizeChunk]) const {
    const Vec<T, kQuantizeChunk> chunk = Vec<T, kQuantizeChunk>::load(x + row * c + col);
#pragma unroll
    for (int k = 0; k < kQuantizeChunk; ++k) v[k] = to_float(chunk.v[k]);
  }
};

// quantize_fp8_all's matrices: each one's bytes, strides and slot; matrix j's tiles are blocks
// [first_tile[j], first_tile[j + 1]), a short array for each block's binary search. (Each block
// walking the jobs one by one, a dependent read each before its first load, took the 49 casts
// of gpt2-small 392 us a step against 331 for a launch a matrix in the same job; the search 169
// against 326.)
struct CastJob {
  const void* x;
  uint8_t *q, *qt;
  float* slot;
  int64_t ld, ld_t, r, c;
  int tiles_x;
  bool wide_t;
};
struct CastJobs {
  int64_t first_tile[kCastGroup + 1];
  CastJob job[kCastGroup];
  int count;
};
// Passed by value: over the 4 KB of kernel parameters before CUDA 12.1, within its 32,764 bytes.
static_assert(sizeof(CastJobs) + 64 <= 32764, "quantize_fp8_all's parameters");

template <class T>
__global__ void __launch_bounds__(kQuantizeThreads, 8)
    quantize_all_kernel(Successor next, const __grid_constant__ CastJobs jobs, __nv_fp8_interpretation_t format) {
  await_previous_kernel(next);
  const int64_t b = blockIdx.x;
  int lo = 0, hi = jobs.count - 1;  // the last job that starts at or before b
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (jobs.first_tile[mid] <= b) lo = mid;
    else hi = mid - 1;
  }
  const CastJob& job = jobs.job[lo];
  const int64_t t = b - jobs.first_tile[lo];
  quantize_tile<StoredMatrix<T>, true, true>(job.q, job.ld, job.qt, job.ld_t, job.wide_t, job.slot,
                                             StoredMatrix<T>{static_cast<const T*>(job.x), job.c}, job.r, job.c,
                                             t / job.tiles_x * kQuantizeTile, t % job.tiles_x * kQuantizeTile, false,
                                             false, nullptr, format, 0.0f);
}

__global__ void update_scales_kernel(Successor next, float* slots, int count) {
  await_previous_kernel(next);
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < count) fp8_roll_slot(slots + int64_t(i) * kFp8SlotFloats);
}

}  // namespace

void quantize_fp8(const Fp8Matrix& out, const Tensor& x, int64_t r, int64_t c, Fp8Scaling scaling,
                  const Tensor& partials, Stream s) {
  TT_CHECK(x.numel == r * c && aligned16(x.ptr), "quantize_fp8: x must be [r, c], on a 16-byte boundary");
  TT_DISPATCH_ACT(x.dtype,
                  { quantize_from(out, StoredMatrix<T>{static_cast<const T*>(x.ptr), c}, r, c, scaling, partials, s); });
}

void quantize_fp8_all(const std::vector<Fp8Cast>& casts, Stream s) {
  for (size_t first = 0; first < casts.size(); first += kCastGroup) {
    CastJobs jobs{};
    int64_t tiles = 0;
    DType type = casts[first].x.dtype;
    __nv_fp8_interpretation_t format = __NV_E4M3;
    for (size_t i = first; i < std::min(casts.size(), first + kCastGroup); ++i) {
      const Fp8Cast& k = casts[i];
      TT_CHECK(k.x.numel == k.r * k.c && aligned16(k.x.ptr) && k.x.dtype == type,
               "quantize_fp8_all: each x [r, c] of one type, on a 16-byte boundary");
      TT_CHECK(!k.out.rows.empty() && !k.out.cols.empty(), "quantize_fp8_all: both layouts of each matrix");
      const Fp8Out o = fp8_out(k.out, k.r, k.c);
      TT_CHECK(i == first || o.format == format, "quantize_fp8_all: one FP8 format");
      format = o.format;
      const int tiles_x = int((k.c + kQuantizeTile - 1) / kQuantizeTile);
      jobs.first_tile[jobs.count] = tiles;
      jobs.job[jobs.count++] = {k.x.ptr, o.rows, o.cols, o.slot, o.ld, o.ld_t, k.r, k.c, tiles_x, o.wide_t};
      tiles += int64_t(tiles_x) * ((k.r + kQuantizeTile - 1) / kQuantizeTile);
    }
    jobs.first_tile[jobs.count] = tiles;
    TT_CHECK(tiles <= INT_MAX, "quantize_fp8_all: too many tiles");
    TT_DISPATCH_ACT(type, {
      launch("quantize_fp8_all_kernel", quantize_all_kernel<T>, unsigned(tiles), kQuantizeThreads, 0, s, jobs, format);
    });
  }
}

void fp8_update_scales(const Tensor& slots, int count, Stream s) {
  TT_CHECK(slots.dtype == DType::F32 && slots.numel >= int64_t(count) * kFp8SlotFloats, "fp8_update_scales: slots");
  if (count == 0) return;
  launch("fp8_update_scales_kernel", update_scales_kernel, blocks_for(count, 128), 128, 0, s,
         static_cast<float*>(slots.ptr), count);
}

}  // namespace tt::cuda
