// The two 8-bit float formats of Hopper's FP8 tensor cores (version 5's products), on the host:
//   E4M3  sign, 4 exponent bits (bias 7), 3 mantissa bits; no infinities, one NaN (S.1111.111);
//         largest finite 448, smallest normal 2^-6, smallest subnormal 2^-9. For weights and
//         activations: more precision.
//   E5M2  sign, 5 exponent bits (bias 15), 2 mantissa bits, IEEE-like (infinities, NaNs);
//         largest finite 57344, smallest subnormal 2^-16. For gradients: more range.
// float_to_fp8 rounds to the nearest value, ties to the even mantissa, and saturates: a finite
// value beyond the largest (and an infinity) becomes the largest, of its sign, as the GPU's
// conversion does with __NV_SATFINITE; NaN stays NaN. All 2^32 floats give the bytes of CUDA's
// __nv_cvt_float_to_fp8 (tests/cpu/test_fp8.cpp checks a sample of them each run). A tensor goes to FP8 through a scale:
// q = fp8(x * scale), with scale = the format's largest / amax(x), so that the largest element
// lands on the largest value; x is read back as q / scale (fp8_scale).
#pragma once
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>

namespace tt {

enum class Fp8Format : uint8_t { E4M3, E5M2 };

struct Fp8Spec {
  int exponent_bits, mantissa_bits, bias;
  double max_finite;
  bool infinities;
};

inline Fp8Spec fp8_spec(Fp8Format f) {
  return f == Fp8Format::E4M3 ? Fp8Spec{4, 3, 7, 448.0, false} : Fp8Spec{5, 2, 15, 57344.0, true};
}

inline const char* fp8_name(Fp8Format f) { return f == Fp8Format::E4M3 ? "e4m3" : "e5m2"; }

inline float fp8_to_float(uint8_t code, Fp8Format f) {
  const Fp8Spec s = fp8_spec(f);
  const int m = code & ((1 << s.mantissa_bits) - 1), e = (code >> s.mantissa_bits) & ((1 << s.exponent_bits) - 1);
  const double sign = code & 0x80 ? -1.0 : 1.0;
  const int top = (1 << s.exponent_bits) - 1;
  if (s.infinities && e == top) return m == 0 ? float(sign * INFINITY) : NAN;
  if (!s.infinities && e == top && m == (1 << s.mantissa_bits) - 1) return NAN;
  const double quantum = std::ldexp(1.0, (e == 0 ? 1 : e) - s.bias - s.mantissa_bits);
  return float(sign * ((e == 0 ? 0 : (1 << s.mantissa_bits)) + m) * quantum);
}

inline uint8_t float_to_fp8(float x, Fp8Format f) {
  const Fp8Spec s = fp8_spec(f);
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const uint8_t nan = 0x7F;  // 0.1111.111 and 0.11111.11
  const uint8_t largest = f == Fp8Format::E4M3 ? 0x7E : 0x7B;  // 448 = 1.75 x 2^8, 57344 = 1.75 x 2^15
  if (std::isnan(x)) return nan;
  const double a = std::fabs(double(x));
  if (a > s.max_finite) return sign | largest;  // saturated
  // The spacing of the representable values around a: that of a's binade, or of the subnormals.
  const int min_exponent = 1 - s.bias;
  const int exponent = a == 0 ? min_exponent : std::max(min_exponent, std::ilogb(a));
  const double quantum = std::ldexp(1.0, exponent - s.mantissa_bits);
  const double n = std::nearbyint(a / quantum);  // ties to even (the default rounding mode)
  if (n == 0) return sign;
  // n quanta: a normal value 1.m x 2^exponent (n may have carried into the next binade), or a
  // subnormal one. The largest is representable, so a value at most the largest rounds to at most it.
  int e = exponent, mant = int(n);
  if (mant >= (2 << s.mantissa_bits)) mant >>= 1, ++e;
  if (mant < (1 << s.mantissa_bits)) return sign | uint8_t(mant);  // subnormal: exponent field 0
  return sign | uint8_t((e + s.bias) << s.mantissa_bits | (mant - (1 << s.mantissa_bits)));
}

// The per-tensor scale for a tensor whose largest magnitude is amax: the format's largest over
// amax, divided in double (1 for an all-zero or non-finite amax, which then leaves the values as
// they are). One rule for the CPU reference and the GPU's kernels, which call fp8_scale_of.
#ifdef __CUDACC__
#define TT_HOST_DEVICE __host__ __device__
#else
#define TT_HOST_DEVICE
#endif
TT_HOST_DEVICE inline float fp8_scale_of(float amax, float largest) {
  return amax > 0.0f && amax <= FLT_MAX ? float(double(largest) / double(amax)) : 1.0f;
}
inline float fp8_scale(float amax, Fp8Format f) { return fp8_scale_of(amax, float(fp8_spec(f).max_finite)); }

}  // namespace tt
