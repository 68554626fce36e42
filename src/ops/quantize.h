// FP8 quantization (version 5's products, src/core/fp8.h): a tensor's absolute maximum, which
// sets its per-tensor scale, and its values as FP8 bytes through that scale, q = fp8(x * scale),
// the product taken in fp32 and then converted (round to nearest even, saturating), so that a
// kernel doing the same two steps gives the same bytes; and the way back, x = q / scale. The CPU
// reference the quantizing kernels are checked against, byte for byte.
#pragma once
#include <cmath>
#include <cstdint>

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
