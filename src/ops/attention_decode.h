// Attention of one new token per sequence against the key/value cache of the tokens before it
// (text generation, src/model/generate.h), for s.B sequences at once. Sequence b's cache holds
// up to s.T rows (its capacity) of KVH heads of D for keys and for values, ld elements apart, from
// row b * s.T; its query and output are row b of [B, H * D]. Query head h attends with key/value
// head h / (H / KVH) over the first len rows (the new token's own key and value are the last):
//   out[b, h, :] = softmax_j(q[b, h, :] . k[b, j, g(h), :] / sqrt(D)) v[b, j, g(h), :]
// The same function as attention_forward's last row, computed in O(len) instead of O(len^2).
// The CUDA kernel (src/ops/attention_decode.cu): a block per (sequence, head); the scores of all
// len positions in shared memory (a warp per position), then one thread per output element.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/stream.h"
#include "core/tensor.h"
#include "ops/attention.h"

namespace tt::ref {

template <class T>
void attention_decode(T* out, const T* q, const T* k_cache, const T* v_cache, int64_t len, int64_t ld,
                      const AttnShape& s) {
  std::vector<double> p(static_cast<size_t>(len));
  for (int b = 0; b < s.B; ++b)
    for (int h = 0; h < s.H; ++h) {
      const int g = h / s.group();
      const T* qh = q + (int64_t(b) * s.H + h) * s.D;
      const T* k = k_cache + int64_t(b) * s.T * ld + int64_t(g) * s.D;
      const T* v = v_cache + int64_t(b) * s.T * ld + int64_t(g) * s.D;
      double mx = -INFINITY;
      for (int64_t j = 0; j < len; ++j) {
        double dot = 0;
        for (int d = 0; d < s.D; ++d) dot += double(qh[d]) * double(k[j * ld + d]);
        p[size_t(j)] = dot * s.scale();
        mx = std::max(mx, p[size_t(j)]);
      }
      double sum = 0;
      for (double& x : p) sum += (x = std::exp(x - mx));
      for (int d = 0; d < s.D; ++d) {
        double acc = 0;
        for (int64_t j = 0; j < len; ++j) acc += p[size_t(j)] * double(v[j * ld + d]);
        out[(int64_t(b) * s.H + h) * s.D + d] = T(acc / sum);
      }
    }
}

}  // namespace tt::ref

namespace tt::cuda {
// The longest cache the kernel takes (its scores sit in shared memory).
constexpr int64_t kDecodeMaxLen = 32768;
void attention_decode(const Tensor& out, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, int64_t len,
                      int64_t ld, const AttnShape& s, Stream stream);
}  // namespace tt::cuda
