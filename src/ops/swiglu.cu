// SwiGLU on the GPU (see swiglu.h). Elementwise over [n, F] with gate and up read from the
// two halves of each gateup row. Unfused (version 1) runs one kernel per PyTorch operator:
//   forward:  silu(gate) -> scratch; h = scratch * up
//   backward: silu(gate) -> scratch; dup = dh * scratch; dsilu = dh * up -> scratch;
//             dgate = dsilu * silu'(gate)
// Fused (gate-up-fusion): one kernel each way, reading gate and up once, one element per
// thread. Vectorized (custom-swiglu): the same kernels with 16-byte accesses (8 bf16 or 4 fp32
// per thread) when F and the pointers allow it. Bytes moved, forward: read gate and up, write
// h, 3*n*F elements; backward: read gate, up and dh, write dgate and dup, 5*n*F elements.
// With FP8 (version 5) the same values go through quantize.cuh's pass instead of being stored:
// forward, read gate and up, write h's two FP8 layouts (4 bytes an element of h against 6 for the
// store and 4 more for a separate cast); backward, each tile reads gate, up and dh once and
// makes the same columns of dgate and dup (quantize.cuh's parts).

#include "ops/quantize.cuh"
#include "ops/swiglu.cuh"
#include "ops/swiglu.h"

namespace tt::cuda {
namespace {

constexpr int kThreads = 256;

// Index helpers: element i of an [n, f] view whose rows are `ld` apart.
struct View2D {
  int f;
  __device__ __forceinline__ int64_t at(int64_t i, int64_t ld) const { return (i / f) * ld + i % f; }
};

template <class T>
__global__ void silu_kernel(Successor next, T* out, int64_t ld_out, const T* g, int64_t ld_g, int64_t count, View2D v) {
  await_previous_kernel(next);
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= count) return;
  const float x = to_float(g[v.at(i, ld_g)]);
  out[v.at(i, ld_out)] = from_float<T>(x * sigmoid(x));
}

template <class T>
__global__ void mul_kernel(Successor next, T* out, int64_t ld_out, const T* a, int64_t ld_a, const T* b, int64_t ld_b,
                           int64_t count, View2D v) {
  await_previous_kernel(next);
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= count) return;
  out[v.at(i, ld_out)] = from_float<T>(to_float(a[v.at(i, ld_a)]) * to_float(b[v.at(i, ld_b)]));
}

// dgate = dsilu * sigmoid(g) * (1 + g * (1 - sigmoid(g)))
template <class T>
__global__ void silu_backward_kernel(Successor next, T* dg, int64_t ld_dg, const T* dsilu, int64_t ld_ds, const T* g,
                                     int64_t ld_g, int64_t count, View2D v) {
  await_previous_kernel(next);
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= count) return;
  const float x = to_float(g[v.at(i, ld_g)]), s = sigmoid(x);
  dg[v.at(i, ld_dg)] = from_float<T>(to_float(dsilu[v.at(i, ld_ds)]) * s * (1.0f + x * (1.0f - s)));
}

// Thread t computes elements [t * kVec, (t + 1) * kVec) of h, which lie in one row since
// kVec divides f.
template <class T, int kVec>
__global__ void swiglu_forward_kernel(Successor next, T* h, const T* gateup, int64_t count, View2D v) {
  await_previous_kernel(next);
  using V = Vec<T, kVec>;
  const int64_t i = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * kVec;
  if (i >= count) return;
  const int64_t gi = v.at(i, 2 * v.f);
  const V g = V::load(gateup + gi), u = V::load(gateup + gi + v.f);
  V out;
#pragma unroll
  for (int e = 0; e < kVec; ++e) out.v[e] = from_float<T>(swiglu_value(to_float(g.v[e]), to_float(u.v[e])));
  out.store(h + i);
}

template <class T, int kVec>
__global__ void swiglu_backward_kernel(Successor next, T* dgateup, const T* dh, const T* gateup, int64_t count,
                                       View2D v) {
  await_previous_kernel(next);
  using V = Vec<T, kVec>;
  const int64_t i = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * kVec;
  if (i >= count) return;
  const int64_t gi = v.at(i, 2 * v.f);
  const V g = V::load(gateup + gi), u = V::load(gateup + gi + v.f), d = V::load(dh + i);
  V dg, du;
#pragma unroll
  for (int e = 0; e < kVec; ++e) {
    const float ge = to_float(g.v[e]), ue = to_float(u.v[e]), de = to_float(d.v[e]);
    dg.v[e] = from_float<T>(swiglu_dgate(ge, ue, de));
    du.v[e] = from_float<T>(swiglu_dup(ge, de));
  }
  dg.store(dgateup + gi);
  du.store(dgateup + gi + v.f);
}

// quantize.cuh's sources: h [n, F] and dgateup [n, 2F], element by element as the kernels above
// compute them, rounded to T as they store them.
template <class T>
struct SwiGluOutput {
  const T* gateup;
  int f;
  __device__ __forceinline__ void prefetch(int64_t row, int64_t col) const {
    prefetch_l2(gateup + row * 2 * f + col);
    prefetch_l2(gateup + row * 2 * f + f + col);
  }
  __device__ __forceinline__ void load(int64_t row, int64_t col, float (&v)[kQuantizeChunk]) const {
    using V = Vec<T, kQuantizeChunk>;
    const V g = V::load(gateup + row * 2 * f + col), u = V::load(gateup + row * 2 * f + f + col);
#pragma unroll
    for (int k = 0; k < kQuantizeChunk; ++k) v[k] = to_float(from_float<T>(swiglu_value(to_float(g.v[k]), to_float(u.v[k]))));
  }
};
// The input gradient in two parts, dgate (columns [0, F)) and dup ([F, 2F)), from one read of
// gate, up and dh.
template <class T>
struct SwiGluInputGradient {
  static constexpr int kParts = 2;
  const T *gateup, *dh;
  int f;
  __device__ __forceinline__ void load(int64_t row, int64_t j, float (&v)[2][kQuantizeChunk]) const {
    using V = Vec<T, kQuantizeChunk>;
    const V g = V::load(gateup + row * 2 * f + j), u = V::load(gateup + row * 2 * f + f + j), d = V::load(dh + row * f + j);
#pragma unroll
    for (int k = 0; k < kQuantizeChunk; ++k) {
      const float ge = to_float(g.v[k]), de = to_float(d.v[k]);
      v[0][k] = to_float(from_float<T>(swiglu_dgate(ge, to_float(u.v[k]), de)));
      v[1][k] = to_float(from_float<T>(swiglu_dup(ge, de)));
    }
  }
};

}  // namespace

void swiglu_forward_fp8(const Fp8Matrix& h8, const Tensor& gateup, int64_t n, int f, Fp8Scaling scaling,
                        const Tensor& partials, Stream s) {
  TT_CHECK(f % kQuantizeChunk == 0 && aligned16(gateup.ptr), "swiglu_forward_fp8: F a multiple of 8, aligned inputs");
  TT_DISPATCH_ACT(gateup.dtype, {
    quantize_from(h8, SwiGluOutput<T>{static_cast<const T*>(gateup.ptr), f}, n, f, scaling, partials, s);
  });
}

void swiglu_backward_fp8(const Fp8Matrix& dgateup8, const Tensor& dh, const Tensor& gateup, int64_t n, int f,
                         Fp8Scaling scaling, const Tensor& partials, Stream s) {
  TT_CHECK(f % kQuantizeChunk == 0 && aligned16(gateup.ptr) && aligned16(dh.ptr),
           "swiglu_backward_fp8: F a multiple of 8, aligned inputs");
  TT_DISPATCH_ACT(gateup.dtype, {
    const SwiGluInputGradient<T> src{static_cast<const T*>(gateup.ptr), static_cast<const T*>(dh.ptr), f};
    quantize_from(dgateup8, src, n, 2 * int64_t(f), scaling, partials, s);
  });
}

void swiglu_forward(const Tensor& h, const Tensor& gateup, int64_t n, int f, SwiGluKernels kernels,
                    const Tensor& scratch, Stream s) {
  const int64_t count = n * f;
  const unsigned blocks = blocks_for(count, kThreads);
  const View2D v{f};
  TT_DISPATCH_ACT(h.dtype, {
    T* hp = static_cast<T*>(h.ptr);
    const T* gate = static_cast<const T*>(gateup.ptr);
    if (kernels != SwiGluKernels::Unfused) {
      with_vec_width<T>(kernels == SwiGluKernels::Vectorized && fits_vec16<T>(f, {hp, gate}), [&](auto vec) {
        constexpr int kVec = decltype(vec)::value;
        launch("swiglu_forward_kernel", swiglu_forward_kernel<T, kVec>, blocks_for(count / kVec, kThreads), kThreads, 0,
               s, hp, gate, count, v);
      });
    } else {
      T* tmp = static_cast<T*>(scratch.ptr);
      launch("silu_kernel", silu_kernel<T>, blocks, kThreads, 0, s, tmp, f, gate, 2 * f, count, v);
      launch("mul_kernel", mul_kernel<T>, blocks, kThreads, 0, s, hp, f, tmp, f, gate + f, 2 * f, count, v);
    }
  });
}

void swiglu_backward(const Tensor& dgateup, const Tensor& dh, const Tensor& gateup, int64_t n, int f,
                     SwiGluKernels kernels, const Tensor& scratch, Stream s) {
  const int64_t count = n * f;
  const unsigned blocks = blocks_for(count, kThreads);
  const View2D v{f};
  TT_DISPATCH_ACT(dh.dtype, {
    T* dgu = static_cast<T*>(dgateup.ptr);
    const T* d = static_cast<const T*>(dh.ptr);
    const T* gate = static_cast<const T*>(gateup.ptr);
    if (kernels != SwiGluKernels::Unfused) {
      with_vec_width<T>(kernels == SwiGluKernels::Vectorized && fits_vec16<T>(f, {dgu, d, gate}), [&](auto vec) {
        constexpr int kVec = decltype(vec)::value;
        launch("swiglu_backward_kernel", swiglu_backward_kernel<T, kVec>, blocks_for(count / kVec, kThreads), kThreads,
               0, s, dgu, d, gate, count, v);
      });
    } else {
      T* tmp = static_cast<T*>(scratch.ptr);
      launch("silu_kernel", silu_kernel<T>, blocks, kThreads, 0, s, tmp, f, gate, 2 * f, count, v);
      launch("mul_kernel", mul_kernel<T>, blocks, kThreads, 0, s, dgu + f, 2 * f, d, f, tmp, f, count, v);   // dup
      launch("mul_kernel", mul_kernel<T>, blocks, kThreads, 0, s, tmp, f, d, f, gate + f, 2 * f, count, v);  // dsilu
      launch("silu_backward_kernel", silu_backward_kernel<T>, blocks, kThreads, 0, s, dgu, 2 * f, tmp, f, gate, 2 * f,
             count, v);
    }
  });
}

}  // namespace tt::cuda
