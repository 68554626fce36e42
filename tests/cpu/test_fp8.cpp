// The FP8 formats (src/core/fp8.h) and the quantizer reference (src/ops/quantize.h): every code
// decodes to the value its bits say; a float converts to the nearest code, ties to the even
// mantissa, as a brute-force search over all 256 codes finds it; saturation, NaN, signed zero
// and the subnormals; the same bytes as CUDA's conversion; and quantization through a scale
// recovers a tensor within half a step of the format. Then the reference of version 5's kernels:
// a matrix into both layouts through its scale slot (current and delayed scaling, the history's
// update), and the CPU backend's FP8 product, that of the dequantized operands.
#include <gtest/gtest.h>

#ifdef TT_HAVE_CUDA
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#endif

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "core/fp8.h"
#include "ops/gemm.h"
#include "ops/quantize.h"

namespace tt::test {
namespace {

const Fp8Format kFormats[] = {Fp8Format::E4M3, Fp8Format::E5M2};

// The nearest code to x among the finite non-negative codes (ties: the even one), with x's sign;
// beyond the largest, the largest.
uint8_t nearest_by_search(float x, Fp8Format f) {
  const double a = std::fabs(double(x));
  int best = -1;
  double best_d = INFINITY;
  for (int c = 0; c < 0x80; ++c) {
    const float v = fp8_to_float(uint8_t(c), f);
    if (!std::isfinite(v)) continue;
    const double d = std::fabs(double(v) - a);
    if (d < best_d || (d == best_d && (c & 1) == 0)) best = c, best_d = d;
  }
  if (a > fp8_spec(f).max_finite) best = f == Fp8Format::E4M3 ? 0x7E : 0x7B;
  return uint8_t(best | (std::signbit(x) ? 0x80 : 0));
}

TEST(Fp8, CodesDecodeToTheirValues) {
  // E4M3: 0x01 the smallest subnormal 2^-9, 0x08 the smallest normal 2^-6, 0x38 one, 0x7E the
  // largest 448, 0x7F NaN. E5M2: 0x01 2^-16, 0x3C one, 0x7B 57344, 0x7C infinity.
  EXPECT_EQ(fp8_to_float(0x01, Fp8Format::E4M3), std::ldexp(1.0f, -9));
  EXPECT_EQ(fp8_to_float(0x08, Fp8Format::E4M3), std::ldexp(1.0f, -6));
  EXPECT_EQ(fp8_to_float(0x38, Fp8Format::E4M3), 1.0f);
  EXPECT_EQ(fp8_to_float(0x7E, Fp8Format::E4M3), 448.0f);
  EXPECT_EQ(fp8_to_float(0xFE, Fp8Format::E4M3), -448.0f);
  EXPECT_TRUE(std::isnan(fp8_to_float(0x7F, Fp8Format::E4M3)));
  EXPECT_EQ(fp8_to_float(0x78, Fp8Format::E4M3), 256.0f) << "S.1111.xxx is finite but for xxx = 111";
  EXPECT_EQ(fp8_to_float(0x01, Fp8Format::E5M2), std::ldexp(1.0f, -16));
  EXPECT_EQ(fp8_to_float(0x3C, Fp8Format::E5M2), 1.0f);
  EXPECT_EQ(fp8_to_float(0x7B, Fp8Format::E5M2), 57344.0f);
  EXPECT_EQ(fp8_to_float(0x7C, Fp8Format::E5M2), INFINITY);
  EXPECT_TRUE(std::isnan(fp8_to_float(0x7D, Fp8Format::E5M2)));
  EXPECT_TRUE(std::signbit(fp8_to_float(0x80, Fp8Format::E4M3)));
  // Every finite code converts back to itself, and the finite values increase with the code.
  for (Fp8Format f : kFormats) {
    SCOPED_TRACE(fp8_name(f));
    float last = -1;
    for (int c = 0; c < 0x80; ++c) {
      const float v = fp8_to_float(uint8_t(c), f);
      if (!std::isfinite(v)) continue;
      EXPECT_GT(v, last) << c;
      last = v;
      EXPECT_EQ(float_to_fp8(v, f), c);
      EXPECT_EQ(float_to_fp8(-v, f), c | 0x80);
    }
  }
}

TEST(Fp8, RoundsToTheNearestTiesToEvenAndSaturates) {
  for (Fp8Format f : kFormats) {
    SCOPED_TRACE(fp8_name(f));
    // Midpoints between neighbouring codes go to the even one; just above or below, to the nearer.
    for (int c = 0; c + 1 < 0x80; ++c) {
      const float lo = fp8_to_float(uint8_t(c), f), hi = fp8_to_float(uint8_t(c + 1), f);
      if (!std::isfinite(hi)) continue;
      const float mid = float((double(lo) + double(hi)) / 2);
      EXPECT_EQ(float_to_fp8(mid, f), c % 2 == 0 ? c : c + 1) << "between " << lo << " and " << hi;
      EXPECT_EQ(float_to_fp8(std::nextafter(mid, 0.0f), f), c);
      EXPECT_EQ(float_to_fp8(std::nextafter(mid, INFINITY), f), c + 1);
    }
    const uint8_t largest = f == Fp8Format::E4M3 ? 0x7E : 0x7B;
    EXPECT_EQ(float_to_fp8(1e9f, f), largest);
    EXPECT_EQ(float_to_fp8(-1e9f, f), largest | 0x80);
    EXPECT_EQ(float_to_fp8(INFINITY, f), largest) << "saturating, as __NV_SATFINITE";
    EXPECT_EQ(float_to_fp8(NAN, f) & 0x7F, 0x7F);
    EXPECT_EQ(float_to_fp8(-0.0f, f), 0x80);
    EXPECT_EQ(float_to_fp8(1e-30f, f), 0x00) << "below half the smallest subnormal";
    // Random floats of every magnitude against the search over all codes.
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> mantissa(-1.0f, 1.0f);
    std::uniform_int_distribution<int> exponent(-24, 20);
    for (int i = 0; i < 20000; ++i) {
      const float x = std::ldexp(mantissa(rng), exponent(rng));
      ASSERT_EQ(float_to_fp8(x, f), nearest_by_search(x, f)) << x;
    }
  }
}

#ifdef TT_HAVE_CUDA
// CUDA's own conversions (cuda_fp8.h, whose host code the toolkit provides beside the device
// instruction's): every code decodes to the same value, and every 251st float of all 2^32 bit
// patterns (the NaNs and infinities among them) converts to the same byte, saturating as
// __NV_SATFINITE does. (All 2^32 agree as well: a 50 s run, too long for each test run.)
TEST(Fp8, ConvertsAsCudasConversion) {
  for (Fp8Format f : kFormats) {
    SCOPED_TRACE(fp8_name(f));
    const __nv_fp8_interpretation_t kind = f == Fp8Format::E4M3 ? __NV_E4M3 : __NV_E5M2;
    for (int c = 0; c < 256; ++c) {
      const float theirs = __half2float(__half(__nv_cvt_fp8_to_halfraw(__nv_fp8_storage_t(c), kind)));
      const float ours = fp8_to_float(uint8_t(c), f);
      if (std::isnan(theirs)) EXPECT_TRUE(std::isnan(ours)) << c;
      else EXPECT_EQ(ours, theirs) << c;
    }
    int64_t differ = 0;
    for (uint64_t u = 0; u < (uint64_t(1) << 32); u += 251) {
      const uint32_t bits = uint32_t(u);
      float x;
      std::memcpy(&x, &bits, 4);
      differ += float_to_fp8(x, f) != __nv_cvt_float_to_fp8(x, __NV_SATFINITE, kind);
    }
    EXPECT_EQ(differ, 0);
  }
}
#endif

// A tensor through its scale: amax lands on the largest value, and every element comes back
// within half a step of the format at its magnitude (relative 2^-4 for E4M3, 2^-3 for E5M2, or
// half the smallest subnormal over the scale near zero).
TEST(Fp8, QuantizationThroughTheScaleRecoversTheTensor) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> x(4096);
  for (float& v : x) v = normal(rng);
  x[17] = -25.0f;  // the largest magnitude
  for (Fp8Format f : kFormats) {
    SCOPED_TRACE(fp8_name(f));
    const Fp8Spec s = fp8_spec(f);
    const double amax = ref::amax(x.data(), int64_t(x.size()));
    EXPECT_EQ(amax, 25.0);
    const float scale = fp8_scale(float(amax), f);
    std::vector<uint8_t> q(x.size());
    std::vector<float> back(x.size());
    ref::quantize_fp8(q.data(), x.data(), int64_t(x.size()), scale, f);
    ref::dequantize_fp8(back.data(), q.data(), int64_t(x.size()), scale, f);
    EXPECT_EQ(fp8_to_float(q[17], f), -float(s.max_finite)) << "amax lands on the largest value";
    const double step = std::ldexp(1.0, -s.mantissa_bits - 1), floor = std::ldexp(1.0, 1 - s.bias - s.mantissa_bits - 1);
    for (size_t i = 0; i < x.size(); ++i)
      ASSERT_LE(std::fabs(double(back[i]) - x[i]), step * std::fabs(x[i]) + floor / scale + 1e-12) << i;
  }
  EXPECT_EQ(fp8_scale(0.0f, Fp8Format::E4M3), 1.0f);
  EXPECT_EQ(fp8_scale(NAN, Fp8Format::E5M2), 1.0f);
}

// [r, c] values in both layouts: the transpose holds the same bytes; current scaling sets the
// slot from the amax; delayed scaling uses the slot's scale (saturating what it cannot hold) and
// raises the slot's amax; the update moves the amax into the history and the scale follows it.
TEST(Fp8Matrix, BothLayoutsThroughTheScaleSlot) {
  const int64_t r = 37, c = 24;
  std::mt19937 rng(5);
  std::normal_distribution<double> normal(0.0, 2.0);
  std::vector<double> x(size_t(r * c));
  for (double& v : x) v = normal(rng);
  std::vector<uint8_t> rows(x.size()), cols(x.size());
  std::vector<float> slot(kFp8SlotFloats, 0.0f);
  Fp8Matrix m{{rows.data(), DType::F8E4M3, r * c}, {cols.data(), DType::F8E4M3, r * c}, c, r,
              {slot.data(), DType::F32, kFp8SlotFloats}};
  ref::quantize_fp8(m, x.data(), r, c, Fp8Scaling::Current);
  const float amax = float(ref::amax(x.data(), r * c)), scale = fp8_scale(amax, Fp8Format::E4M3);
  EXPECT_EQ(slot[0], 1.0f / scale);
  EXPECT_EQ(slot[1], scale);
  EXPECT_EQ(slot[2], amax);
  EXPECT_EQ(slot[3], 448.0f);
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j) {
      ASSERT_EQ(rows[size_t(i * c + j)], float_to_fp8(float(x[size_t(i * c + j)]) * scale, Fp8Format::E4M3));
      ASSERT_EQ(cols[size_t(j * r + i)], rows[size_t(i * c + j)]);
    }
  ref::fp8_update_scales(slot.data(), 1);
  EXPECT_EQ(slot[2], 0.0f);
  EXPECT_EQ(slot[4], amax);
  EXPECT_EQ(slot[1], scale);  // the history's largest is this amax
  slot[1] = 4 * scale;        // a scale too large: the largest values saturate
  ref::quantize_fp8(m, x.data(), r, c, Fp8Scaling::Delayed);
  EXPECT_EQ(slot[2], amax);
  int saturated = 0;
  for (uint8_t b : rows) saturated += (b & 0x7F) == 0x7E;
  EXPECT_GT(saturated, 0);
}

// The CPU backend's FP8 products (the three forms of a linear layer) are the products of the
// dequantized operands, in double.
TEST(Fp8Matrix, CpuProductIsTheProductOfTheDequantizedOperands) {
  auto be = make_cpu_backend_f64();
  const int n = 16, in = 8, out = 24;
  std::mt19937 rng(9);
  std::uniform_real_distribution<double> u(-1, 1);
  auto values = [&](int64_t count) {
    std::vector<double> v(static_cast<size_t>(count));
    for (double& e : v) e = u(rng);
    return v;
  };
  std::vector<double> x = values(n * in), w = values(out * in), dy = values(n * out);
  struct Q {
    std::vector<uint8_t> rows, cols;
    std::vector<float> slot = std::vector<float>(kFp8SlotFloats, 0.0f);
    Fp8Matrix m;
    Q(std::vector<double>& v, int64_t r, int64_t c, Backend& be) : rows(size_t(r * c)), cols(size_t(r * c)) {
      m = {{rows.data(), DType::F8E4M3, r * c}, {cols.data(), DType::F8E4M3, r * c}, c, r,
           {slot.data(), DType::F32, kFp8SlotFloats}};
      be.fp8_quantize(m, {v.data(), DType::F64, r * c}, r, c, Fp8Scaling::Current);
    }
    double at(bool transposed, int64_t i) const {
      return double(fp8_to_float((transposed ? cols : rows)[size_t(i)], Fp8Format::E4M3)) * double(slot[0]);
    }
  } x8(x, n, in, *be), w8(w, out, in, *be), dy8(dy, n, out, *be);
  std::vector<double> y(size_t(n * out)), dx(size_t(n * in)), dw(size_t(out * in));
  be->matmul(fp8_linear_gemm({y.data(), DType::F64, n * out}, out, x8.m, w8.m, n, in, out));
  be->matmul(fp8_linear_dx_gemm({dx.data(), DType::F64, n * in}, in, dy8.m, w8.m, n, in, out, 0.0f));
  be->matmul(fp8_linear_dw_gemm({dw.data(), DType::F64, out * in}, dy8.m, x8.m, n, in, out));
  for (int i = 0; i < n; ++i)
    for (int o = 0; o < out; ++o) {
      double s = 0;
      for (int k = 0; k < in; ++k) s += x8.at(false, i * in + k) * w8.at(false, o * in + k);
      EXPECT_NEAR(y[size_t(i * out + o)], s, 1e-12);
    }
  for (int i = 0; i < n; ++i)
    for (int k = 0; k < in; ++k) {
      double s = 0;
      for (int o = 0; o < out; ++o) s += dy8.at(false, i * out + o) * w8.at(true, k * out + o);
      EXPECT_NEAR(dx[size_t(i * in + k)], s, 1e-12);
    }
  for (int o = 0; o < out; ++o)
    for (int k = 0; k < in; ++k) {
      double s = 0;
      for (int i = 0; i < n; ++i) s += dy8.at(true, o * n + i) * x8.at(true, k * n + i);
      EXPECT_NEAR(dw[size_t(o * in + k)], s, 1e-12);
    }
}

}  // namespace
}  // namespace tt::test
