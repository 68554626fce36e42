// FP8 quantization (version 5's products, src/core/fp8.h): a tensor's absolute maximum, which
// sets its per-tensor scale, and its values as FP8 bytes through that scale, q = fp8(x * scale),
// the product taken in fp32 and then converted (round to nearest even, saturating), so that a
// kernel doing the same two steps gives the same bytes; and the way back, x = q / scale. The CPU
// reference the quantizing kernels are checked against, byte for byte. Below it, the scaling
// state and the FP8 matrices of version 5, and the CUDA kernels that make them.
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/fp8.h"

namespace tt::ref {

template <class T>
double amax(const T* x, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < n; ++i) m = std::fmax(m, std::fabs(double(x[i])));
  return m;
}

template <class T>
void quantize_fp8(uint8_t* q, const T* x, int64_t n, float scale, Fp8Format f) {
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) q[i] = float_to_fp8(float(x[i]) * scale, f);
}

template <class T>
void dequantize_fp8(T* x, const uint8_t* q, int64_t n, float scale, Fp8Format f) {
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) x[i] = T(double(fp8_to_float(q[i], f)) / double(scale));
}

}  // namespace tt::ref

#include "core/stream.h"
#include "core/tensor.h"

namespace tt {

// How a tensor's scale is chosen (version 5):
//   Current  from this tensor's own amax: a pass that reads it first (fp8_amax_partials);
//   Delayed  from the largest amax of the last kFp8History steps (Transformer Engine's default):
//            the quantizing pass records this tensor's amax for the steps to come.
enum class Fp8Scaling : uint8_t { Current, Delayed };
constexpr int kFp8History = 16;

// The scaling state of one FP8 tensor, kFp8SlotFloats fp32 on the device:
//   [0] inverse 1 / scale, the factor the products dequantize with (first: cuBLASLt reads it
//               only from a 16-byte boundary, and slots are 80 bytes)
//   [1] scale   q = fp8(x * scale)
//   [2] amax    the largest |x| quantized through this slot since the last fp8_update_scales
//   [3] the format's largest finite value (448 or 57344)
//   [4, 4 + kFp8History) the amax of the last steps, newest first
constexpr int kFp8SlotFloats = 4 + kFp8History;

// An FP8 matrix [r, c] as the products take it: its bytes as rows (row stride ld) and as columns
// (the transpose [c, r], row stride ld_t); either may be left empty where no product reads it.
struct Fp8Matrix {
  Tensor rows, cols;
  int64_t ld = 0, ld_t = 0;
  Tensor slot;

  Tensor inverse_scale() const { return slot.slice(0, 1); }
  // Rows [first, first + n) of the matrix, or its columns: views into the same bytes.
  Fp8Matrix row_block(int64_t first, int64_t n) const {
    Fp8Matrix b = *this;
    if (!rows.empty()) b.rows = rows.slice(first * ld, rows.numel - first * ld);
    if (!cols.empty()) b.cols = cols.slice(first, cols.numel - first);
    return b;
  }
  Fp8Matrix col_block(int64_t first, int64_t n) const {
    Fp8Matrix b = *this;
    if (!rows.empty()) b.rows = rows.slice(first, rows.numel - first);
    if (!cols.empty()) b.cols = cols.slice(first * ld_t, cols.numel - first * ld_t);
    return b;
  }
};

// A stored matrix x [r, c] and the FP8 forms it is quantized into (Backend::fp8_quantize_all).
struct Fp8Cast {
  Fp8Matrix out;
  Tensor x;
  int64_t r = 0, c = 0;
};

inline Fp8Format fp8_format(DType d) { return d == DType::F8E5M2 ? Fp8Format::E5M2 : Fp8Format::E4M3; }

// One slot's step of delayed scaling (fp8_update_scales, on the CPU and the GPU): its amax joins
// the history (the oldest leaves), the scale follows the history's largest, the amax restarts.
TT_HOST_DEVICE inline void fp8_roll_slot(float* s) {
  float* history = s + 4;
  float m = s[2];
  for (int k = kFp8History - 1; k > 0; --k) {
    history[k] = history[k - 1];
    m = fmaxf(m, history[k]);
  }
  history[0] = s[2];
  const float scale = s[3] > 0.0f ? fp8_scale_of(m, s[3]) : 1.0f;
  s[0] = 1.0f / scale;
  s[1] = scale;
  s[2] = 0.0f;
}

}  // namespace tt

// CUDA (src/ops/quantize.cu, the pass in quantize.cuh).
namespace tt::cuda {
// Per-block partial maxima of the current-scaling pass (kAmaxBlocks fp32 of scratch).
constexpr int kAmaxBlocks = 264;
// x [r, c] (bf16 or fp32, contiguous, c a multiple of 8) into out.rows and/or out.cols (the
// format of their dtype) through the scale that `scaling` gives, in one pass that reads x once:
//   Current  scale = largest / amax, from a pass before it that reduces |x| into `partials`; the
//            slot gets amax (the larger of it and the slot's), scale and inverse;
//   Delayed  the slot's scale; the slot's amax grows to x's.
void quantize_fp8(const Fp8Matrix& out, const Tensor& x, int64_t r, int64_t c, Fp8Scaling scaling,
                  const Tensor& partials, Stream s);
// Several matrices as above, both layouts each, with delayed scaling (each through its slot): one
// launch for up to kCastGroup of them, a block for every tile of every matrix, the bytes and amax
// of quantizing each alone. Many small matrices (a step's weights) fill the GPU together where
// each alone leaves most of it idle.
constexpr int kCastGroup = 64;
void quantize_fp8_all(const std::vector<Fp8Cast>& casts, Stream s);
// For `count` consecutive slots: the amax joins the history (the oldest leaves), the scale comes
// from the history's largest (fp8_scale's rule), and the amax starts again from zero.
void fp8_update_scales(const Tensor& slots, int count, Stream s);
}  // namespace tt::cuda

namespace tt::ref {

// The quantizing pass and the scales' update on the CPU (the reference of the kernels above):
// the same slot, the same bytes. x is [r, c]; out's rows and cols as Fp8Matrix says.
template <class T>
void quantize_fp8(const Fp8Matrix& out, const T* x, int64_t r, int64_t c, Fp8Scaling scaling) {
  const Fp8Format f = fp8_format(out.rows.empty() ? out.cols.dtype : out.rows.dtype);
  float* slot = out.slot.data<float>();
  const float amax = float(ref::amax(x, r * c));
  if (scaling == Fp8Scaling::Current) {
    const float scale = fp8_scale(amax, f);
    slot[0] = 1.0f / scale, slot[1] = scale, slot[3] = float(fp8_spec(f).max_finite);
  }
  slot[2] = std::fmax(slot[2], amax);
  const float scale = slot[1];
  uint8_t *rows = static_cast<uint8_t*>(out.rows.ptr), *cols = static_cast<uint8_t*>(out.cols.ptr);
#pragma omp parallel for
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j) {
      const uint8_t q = float_to_fp8(float(x[i * c + j]) * scale, f);
      if (rows) rows[i * out.ld + j] = q;
      if (cols) cols[j * out.ld_t + i] = q;
    }
}

inline void fp8_update_scales(float* slots, int count) {
  for (int i = 0; i < count; ++i) fp8_roll_slot(slots + int64_t(i) * kFp8SlotFloats);
}

}  // namespace tt::ref
