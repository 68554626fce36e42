// Element types of the tensors the backends move around. bf16 is stored as its 16 raw bits
// on the host; CUDA code reinterprets it as __nv_bfloat16. The two FP8 formats (src/core/fp8.h)
// are bytes, the operands of version 5's matrix products.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace tt {

enum class DType : uint8_t { F32, F64, BF16, I32, F8E4M3, F8E5M2 };

struct bf16 {
  uint16_t bits;
};

inline size_t dtype_size(DType d) {
  switch (d) {
    case DType::F32: return 4;
    case DType::F64: return 8;
    case DType::BF16: return 2;
    case DType::I32: return 4;
    case DType::F8E4M3:
    case DType::F8E5M2: return 1;
  }
  return 0;
}

inline const char* dtype_name(DType d) {
  switch (d) {
    case DType::F32: return "fp32";
    case DType::F64: return "fp64";
    case DType::BF16: return "bf16";
    case DType::I32: return "int32";
    case DType::F8E4M3: return "fp8e4m3";
    case DType::F8E5M2: return "fp8e5m2";
  }
  return "?";
}

inline bool is_fp8(DType d) { return d == DType::F8E4M3 || d == DType::F8E5M2; }

template <class T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::F32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::F64; };
template <> struct dtype_of<bf16> { static constexpr DType value = DType::BF16; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::I32; };

// Round-to-nearest-even conversions, the same rounding the GPU's conversion instructions use.
inline bf16 float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16{uint16_t((u >> 16) | 0x40)};  // NaN stays NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return bf16{uint16_t(u >> 16)};
}
inline float bf16_to_float(bf16 b) {
  uint32_t u = uint32_t(b.bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace tt
