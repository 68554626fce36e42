// Rotary position embedding on interleaved pairs (2i, 2i+1) of each head, in place.
// The rotation angle of pair i at position t is t * theta^(-2i/D); the table holds
// cos and sin for every (t, i): table[(t * D/2 + i) * 2 + {0, 1}], computed once in double
// on the host so that every backend rotates by exactly the same numbers.
//   forward:  (x0, x1) <- (x0 c - x1 s, x0 s + x1 c)
//   backward: (d0, d1) <- (d0 c + d1 s, -d0 s + d1 c)      (the transposed rotation)
// The heads to rotate are `heads` consecutive heads starting at column `col` of a
// [tokens, ld] matrix: the queries, the keys, or both at once in the fused QKV buffer.
#pragma once
#include "core/stream.h"
#include "core/tensor.h"
#include "ops/quantize.h"
#include <cmath>
#include <cstdint>
#include <vector>

namespace tt {

struct RopeShape {
  int64_t tokens;  // B * T
  int seq_len;     // T: token n sits at position n % T
  int heads;
  int head_dim;
  int64_t col;  // first column of the first rotated head
  int64_t ld;   // row stride of the matrix
};

// The rows of positions first .. first + seq_len - 1 (generation fills its table a window at a time).
inline std::vector<double> rope_table(int seq_len, int head_dim, double theta, int first = 0) {
  std::vector<double> t(size_t(seq_len) * head_dim);
  const int half = head_dim / 2;
  for (int pos = 0; pos < seq_len; ++pos)
    for (int i = 0; i < half; ++i) {
      const double angle = (first + pos) * std::pow(theta, -2.0 * i / head_dim);
      t[(size_t(pos) * half + i) * 2] = std::cos(angle);
      t[(size_t(pos) * half + i) * 2 + 1] = std::sin(angle);
    }
  return t;
}

namespace ref {

template <class T, class S>
void rope(T* x, const S* table, const RopeShape& s, bool backward) {
  const int half = s.head_dim / 2;
#pragma omp parallel for
  for (int64_t n = 0; n < s.tokens; ++n) {
    const S* cs = table + size_t(n % s.seq_len) * half * 2;
    for (int h = 0; h < s.heads; ++h) {
      T* v = x + n * s.ld + s.col + int64_t(h) * s.head_dim;
      for (int i = 0; i < half; ++i) {
        const T c = T(cs[2 * i]), sn = backward ? -T(cs[2 * i + 1]) : T(cs[2 * i + 1]);
        const T x0 = v[2 * i], x1 = v[2 * i + 1];
        v[2 * i] = x0 * c - x1 * sn;
        v[2 * i + 1] = x0 * sn + x1 * c;
      }
    }
  }
}

}  // namespace ref
}  // namespace tt

// CUDA launcher (src/ops/rope.cu): one thread per rotated pair, or with `wide` (the
// custom-rope switch) one thread per 16 bytes of a head (4 pairs in bf16, 2 in fp32) where
// head_dim, col and ld are multiples of 16 bytes' elements and the pointers 16-byte aligned.
namespace tt::cuda {
void rope(const Tensor& x, const Tensor& table, const RopeShape& shape, bool backward, bool wide, Stream s);
// Version 5: the backward of x [shape.tokens, shape.ld] made straight in FP8 into dx8's layouts,
// every column (the rotated heads turned back), x left as it is; partials as quantize_fp8's.
void rope_backward_fp8(const Fp8Matrix& dx8, const Tensor& dx, const Tensor& table, const RopeShape& shape,
                       Fp8Scaling scaling, const Tensor& partials, Stream s);
}  // namespace tt::cuda
