// Attention of one new token against the key/value cache of the tokens before it (text
// generation, src/model/generate.h). The cache holds len rows of KVH heads of D for keys and
// for values, ld elements apart; query head h attends with key/value head h / (H / KVH) over
// all len positions (the new token's own key and value are the last row):
//   out[h, :] = softmax_j(q[h, :] . k[j, g(h), :] / sqrt(D)) v[j, g(h), :]
// The same function as attention_forward's last row, computed in O(len) instead of O(len^2).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "ops/attention.h"

namespace tt::ref {

template <class T>
void attention_decode(T* out, const T* q, const T* k_cache, const T* v_cache, int64_t len, int64_t ld,
                      const AttnShape& s) {
  std::vector<double> p(static_cast<size_t>(len));
  for (int h = 0; h < s.H; ++h) {
    const int g = h / s.group();
    const T* qh = q + int64_t(h) * s.D;
    double mx = -INFINITY;
    for (int64_t j = 0; j < len; ++j) {
      const T* kj = k_cache + j * ld + int64_t(g) * s.D;
      double dot = 0;
      for (int d = 0; d < s.D; ++d) dot += double(qh[d]) * double(kj[d]);
      p[size_t(j)] = dot * s.scale();
      mx = std::max(mx, p[size_t(j)]);
    }
    double sum = 0;
    for (double& x : p) sum += (x = std::exp(x - mx));
    for (int d = 0; d < s.D; ++d) {
      double acc = 0;
      for (int64_t j = 0; j < len; ++j) acc += p[size_t(j)] * double(v_cache[j * ld + int64_t(g) * s.D + d]);
      out[int64_t(h) * s.D + d] = T(acc / sum);
    }
  }
}

}  // namespace tt::ref
