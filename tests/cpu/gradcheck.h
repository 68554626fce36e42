// Helpers for the tests: random inputs and finite-difference gradient checks in double.
#pragma once
#include <cmath>
#include <functional>
#include <vector>

#include "core/rng.h"
#include "core/tensor.h"

namespace tt::test {

// Fresh random values in [-scale, scale); every call to the same generator draws new ones.
struct Random {
  uint64_t seed;
  uint64_t next = 0;
  explicit Random(uint64_t s) : seed(s) {}
  std::vector<double> uniform(size_t n, double scale = 1.0) {
    CounterRng rng(seed, kStreamTest);
    std::vector<double> v(n);
    for (double& x : v) x = scale * (2.0 * rng.uniform(next++) - 1.0);
    return v;
  }
};

inline Tensor view(std::vector<double>& v) { return Tensor{v.data(), DType::F64, int64_t(v.size())}; }

// ||a - b|| / ||b||
inline double rel_error(const std::vector<double>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num) / std::max(std::sqrt(den), 1e-300);
}

// Central differences of the scalar loss() with respect to every element of x.
inline std::vector<double> numeric_grad(std::vector<double>& x, const std::function<double()>& loss,
                                        double h = 1e-6) {
  std::vector<double> g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double keep = x[i];
    x[i] = keep + h;
    const double up = loss();
    x[i] = keep - h;
    const double down = loss();
    x[i] = keep;
    g[i] = (up - down) / (2 * h);
  }
  return g;
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

}  // namespace tt::test
