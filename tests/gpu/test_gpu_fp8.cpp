// Version 5's FP8 pieces on the GPU: the quantizing kernel against the CPU quantizer (bytes and
// scales, both layouts, both formats, both scalings, every output written), the FP8 products
// against double references of their quantized and of their unquantized inputs (a bound derived
// from the formats' precision), and the model: its gradients against the CPU in double, the
// ladder (v5 where FP8 does not pay is v4 bit for bit), and training.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <cstdio>
#include <random>
#include <sstream>

#include "data/loader.h"
#include "data/safetensors.h"
#include "gpu_harness.h"
#include "model/llama.h"
#include "ops/gemm.h"
#include "ops/quantize.h"
#include "run_outputs.h"
#include "train/trainer.h"

namespace tt::test {
namespace {

Plan fp8_plan(bool delayed = false, bool e5m2 = false) {
  Plan p = plan_for_version(5);
  p.amp = true;
  p.fp8_delayed_scaling = delayed;
  p.fp8_e5m2_gradients = e5m2;
  return p;
}

std::vector<uint8_t> bytes_of(const Tensor& t) {
  cudaDeviceSynchronize();
  std::vector<uint8_t> out(t.bytes());
  cudaMemcpy(out.data(), t.ptr, out.size(), cudaMemcpyDeviceToHost);
  return out;
}
std::vector<float> floats_of(const Tensor& t) {
  cudaDeviceSynchronize();
  std::vector<float> out(size_t(t.numel));
  cudaMemcpy(out.data(), t.ptr, t.bytes(), cudaMemcpyDeviceToHost);
  return out;
}

// Values over many magnitudes (and some exact zeros), rounded to bf16 by the buffer.
std::vector<double> spread_values(int64_t n, uint32_t seed, double magnitude) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_int_distribution<int> exponent(-12, 2);
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) x = rng() % 17 == 0 ? 0.0 : magnitude * normal(rng) * std::ldexp(1.0, exponent(rng) / 4);
  return v;
}

// An FP8 matrix [r, c] in both layouts, poisoned (0xFF is a NaN in both formats, never a result
// of finite inputs), with its slot.
struct DeviceFp8 {
  DeviceBuffer rows, cols, slot;
  Fp8Matrix m;
  DeviceFp8(DType d, int64_t r, int64_t c) : rows(d, r * c), cols(d, r * c), slot(DType::F32, kFp8SlotFloats) {
    rows.poison();
    cols.poison();
    CUDA_CHECK(cudaMemset(slot.t().ptr, 0, slot.t().bytes()));
    CUDA_CHECK(cudaDeviceSynchronize());  // before the backend's stream writes it
    m = {rows.t(), cols.t(), c, r, slot.t()};
  }
  // The slot as current scaling leaves it for x [r, c] (a scale for delayed scaling to use), the
  // bytes poisoned again.
  void calibrate(Backend& be, const Tensor& x, int64_t r, int64_t c) {
    be.fp8_quantize(m, x, r, c, Fp8Scaling::Current);
    rows.poison();
    cols.poison();
  }
};

struct QuantizeCase {
  int64_t r, c;
};

class Fp8Quantize : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override { REQUIRE_GPU(); }
};

// Current scaling: the scale is fp8_scale(amax), the bytes ref::quantize_fp8's, the transpose
// the same bytes transposed; the slot holds amax, scale, its inverse and the format's largest.
TEST_P(Fp8Quantize, CurrentScalingGivesTheCpuQuantizersBytes) {
  const DType d = GetParam();
  const Fp8Format f = fp8_format(d);
  GpuBackend be(fp8_plan(), ModelShape{1, 16, 64, 1, 1, 64, 64, 16});
  uint32_t seed = 1;
  for (const QuantizeCase k : {QuantizeCase{64, 64}, {1, 8}, {37, 200}, {129, 72}, {1024, 512}, {2048, 2304}}) {
    SCOPED_TRACE(testing::Message() << k.r << " x " << k.c);
    const std::vector<double> x = spread_values(k.r * k.c, seed++, 3.0);
    DeviceBuffer xb(DType::BF16, x);
    const std::vector<double> xr = xb.get();  // as rounded to bf16
    DeviceFp8 out(d, k.r, k.c);
    be->fp8_quantize(out.m, xb, k.r, k.c, Fp8Scaling::Current);
    const float amax = float(ref::amax(xr.data(), int64_t(xr.size())));
    const float scale = fp8_scale(amax, f);
    std::vector<uint8_t> want(xr.size());
    ref::quantize_fp8(want.data(), xr.data(), int64_t(xr.size()), scale, f);
    const std::vector<uint8_t> rows = bytes_of(out.rows), cols = bytes_of(out.cols);
    int64_t bad_rows = 0, bad_cols = 0;
    for (int64_t i = 0; i < k.r; ++i)
      for (int64_t j = 0; j < k.c; ++j) {
        bad_rows += rows[size_t(i * k.c + j)] != want[size_t(i * k.c + j)];
        bad_cols += cols[size_t(j * k.r + i)] != want[size_t(i * k.c + j)];
      }
    EXPECT_EQ(bad_rows, 0);
    EXPECT_EQ(bad_cols, 0);
    const std::vector<float> slot = floats_of(out.slot);
    EXPECT_EQ(slot[0], 1.0f / scale);
    EXPECT_EQ(slot[1], scale);
    EXPECT_EQ(slot[2], amax);
    EXPECT_EQ(slot[3], float(fp8_spec(f).max_finite));
  }
}

// Delayed scaling: the slot's scale is used as it is (a scale twice too large saturates the
// largest values), the slot's amax grows to x's, and the update moves it into the history and
// sets the scale from the history's largest.
TEST_P(Fp8Quantize, DelayedScalingUsesTheSlotAndRecordsTheAmax) {
  const DType d = GetParam();
  const Fp8Format f = fp8_format(d);
  GpuBackend be(fp8_plan(true), ModelShape{1, 16, 64, 1, 1, 64, 64, 16});
  const int64_t r = 300, c = 96;
  const std::vector<double> x = spread_values(r * c, 7, 0.01);
  DeviceBuffer xb(DType::BF16, x);
  const std::vector<double> xr = xb.get();
  const float amax = float(ref::amax(xr.data(), int64_t(xr.size())));
  const float scale = 2.0f * fp8_scale(amax, f);
  DeviceFp8 out(d, r, c);
  std::vector<double> slot(kFp8SlotFloats, 0.0);
  slot[0] = 1.0 / scale, slot[1] = scale, slot[3] = fp8_spec(f).max_finite, slot[4] = 0.5 * amax;
  out.slot.set(slot);
  be->fp8_quantize(out.m, xb, r, c, Fp8Scaling::Delayed);
  std::vector<uint8_t> want(xr.size());
  ref::quantize_fp8(want.data(), xr.data(), int64_t(xr.size()), scale, f);
  EXPECT_EQ(bytes_of(out.rows), want);
  int saturated = 0;
  const uint8_t largest = f == Fp8Format::E4M3 ? 0x7E : 0x7B;
  for (uint8_t b : want) saturated += (b & 0x7F) == largest;
  EXPECT_GT(saturated, 0) << "a scale twice too large saturates the largest values";
  const std::vector<float> after = floats_of(out.slot);
  EXPECT_EQ(after[2], amax);
  EXPECT_EQ(after[1], scale);
  be->fp8_update_scales(out.slot, 1);
  const std::vector<float> updated = floats_of(out.slot);
  EXPECT_EQ(updated[2], 0.0f);
  EXPECT_EQ(updated[4], amax);
  EXPECT_EQ(updated[5], float(0.5 * amax));
  EXPECT_EQ(updated[1], fp8_scale(amax, f));
  EXPECT_EQ(updated[0], 1.0f / fp8_scale(amax, f));
}

// Many matrices at once (fp8_quantize_all with delayed scaling, a step's weights): the bytes of
// both layouts and the recorded amax of quantizing each alone. 70 matrices take two launches.
TEST_P(Fp8Quantize, AllAtOnceIsEachAlone) {
  const DType d = GetParam();
  GpuBackend be(fp8_plan(true), ModelShape{1, 16, 64, 1, 1, 64, 64, 16});
  const std::vector<QuantizeCase> shapes = {{64, 64}, {1, 8}, {37, 200}, {129, 72}, {300, 96}, {256, 768}, {8, 64}};
  std::vector<std::unique_ptr<DeviceBuffer>> xs;
  std::vector<std::unique_ptr<DeviceFp8>> alone, together;
  std::vector<Fp8Cast> casts;
  for (int i = 0; i < 70; ++i) {
    const QuantizeCase k = shapes[size_t(i) % shapes.size()];
    xs.push_back(std::make_unique<DeviceBuffer>(DType::BF16, spread_values(k.r * k.c, uint32_t(100 + i), 0.5 + i % 5)));
    alone.push_back(std::make_unique<DeviceFp8>(d, k.r, k.c));
    together.push_back(std::make_unique<DeviceFp8>(d, k.r, k.c));
    alone.back()->calibrate(*be.be, *xs.back(), k.r, k.c);
    const std::vector<float> calibrated = floats_of(alone.back()->slot);
    together.back()->slot.set(std::vector<double>(calibrated.begin(), calibrated.end()));
    be->fp8_quantize(alone.back()->m, *xs.back(), k.r, k.c, Fp8Scaling::Delayed);
    casts.push_back({together.back()->m, xs.back()->t(), k.r, k.c});
  }
  be->fp8_quantize_all(casts, Fp8Scaling::Delayed);
  for (size_t i = 0; i < casts.size(); ++i) {
    SCOPED_TRACE(testing::Message() << "matrix " << i << ", " << casts[i].r << " x " << casts[i].c);
    EXPECT_EQ(bytes_of(together[i]->rows), bytes_of(alone[i]->rows));
    EXPECT_EQ(bytes_of(together[i]->cols), bytes_of(alone[i]->cols));
    EXPECT_EQ(floats_of(together[i]->slot), floats_of(alone[i]->slot));
  }
}

// SwiGLU made straight in FP8 (fp8-fused-swiglu): the bytes of quantizing what the vectorized
// kernels store, forward (h) and backward (dgateup), with both scalings; every byte written.
TEST_P(Fp8Quantize, SwiGluMadeInFp8IsTheCastOfWhatItStores) {
  const DType d = GetParam();
  const int64_t n = 200, f = 136;
  GpuBackend be(fp8_plan(), ModelShape{1, 16, 64, 1, 1, 64, int(f), 16});
  DeviceBuffer gateup(DType::BF16, spread_values(n * 2 * f, 3, 2.0)), dh(DType::BF16, spread_values(n * f, 4, 1e-3));
  DeviceBuffer h(DType::BF16, n * f), dgateup(DType::BF16, n * 2 * f);
  be->swiglu_forward(h, gateup, n, int(f));
  be->swiglu_backward(dgateup, dh, gateup, n, int(f));
  for (Fp8Scaling scaling : {Fp8Scaling::Current, Fp8Scaling::Delayed}) {
    SCOPED_TRACE(scaling == Fp8Scaling::Current ? "current" : "delayed");
    DeviceFp8 h_cast(d, n, f), h_made(d, n, f), d_cast(d, n, 2 * f), d_made(d, n, 2 * f);
    if (scaling == Fp8Scaling::Delayed) {
      for (DeviceFp8* m : {&h_cast, &h_made}) m->calibrate(*be.be, h, n, f);
      for (DeviceFp8* m : {&d_cast, &d_made}) m->calibrate(*be.be, dgateup, n, 2 * f);
    }
    be->fp8_quantize(h_cast.m, h, n, f, scaling);
    be->fp8_swiglu_forward(h_made.m, gateup, n, int(f), scaling);
    be->fp8_quantize(d_cast.m, dgateup, n, 2 * f, scaling);
    be->fp8_swiglu_backward(d_made.m, dh, gateup, n, int(f), scaling);
    EXPECT_EQ(bytes_of(h_made.rows), bytes_of(h_cast.rows));
    EXPECT_EQ(bytes_of(h_made.cols), bytes_of(h_cast.cols));
    EXPECT_EQ(bytes_of(d_made.rows), bytes_of(d_cast.rows));
    EXPECT_EQ(bytes_of(d_made.cols), bytes_of(d_cast.cols));
    EXPECT_EQ(floats_of(h_made.slot), floats_of(h_cast.slot));
    EXPECT_EQ(floats_of(d_made.slot), floats_of(d_cast.slot));
  }
}

// RoPE's backward made straight in FP8 (fp8-fused-rope): the bytes of quantizing what the
// backward kernel leaves in place (custom-rope's one call for the queries and keys; the values'
// columns as they are), with both scalings; the gradient itself left unrotated.
TEST_P(Fp8Quantize, RopeBackwardMadeInFp8IsTheCastOfWhatItRotates) {
  const DType d = GetParam();
  const int B = 3, T = 70, H = 4, KVH = 2, D = 64;
  const int64_t n = int64_t(B) * T, ld = int64_t(H + 2 * KVH) * D;
  GpuBackend be(fp8_plan(), ModelShape{B, T, H * D, H, KVH, D, 64, 16});
  const RopeShape shape{n, T, H + KVH, D, 0, ld};
  const std::vector<double> table = rope_table(T, D, 10000.0);
  DeviceBuffer tb(DType::F32, table), dqkv(DType::BF16, spread_values(n * ld, 8, 1e-3)), rotated(DType::BF16, n * ld);
  cudaMemcpy(rotated.t().ptr, dqkv.t().ptr, dqkv.t().bytes(), cudaMemcpyDeviceToDevice);
  be->rope_backward(rotated, tb, shape);
  const std::vector<uint8_t> before = bytes_of(dqkv);
  for (Fp8Scaling scaling : {Fp8Scaling::Current, Fp8Scaling::Delayed}) {
    SCOPED_TRACE(scaling == Fp8Scaling::Current ? "current" : "delayed");
    DeviceFp8 cast(d, n, ld), made(d, n, ld);
    if (scaling == Fp8Scaling::Delayed)  // the slots as current scaling leaves them
      for (DeviceFp8* m : {&cast, &made}) be->fp8_quantize(m->m, rotated, n, ld, Fp8Scaling::Current);
    be->fp8_quantize(cast.m, rotated, n, ld, scaling);
    be->fp8_rope_backward(made.m, dqkv, tb, shape, scaling);
    EXPECT_EQ(bytes_of(made.rows), bytes_of(cast.rows));
    EXPECT_EQ(bytes_of(made.cols), bytes_of(cast.cols));
    EXPECT_EQ(floats_of(made.slot), floats_of(cast.slot));
  }
  EXPECT_EQ(bytes_of(dqkv), before);
}

// RMSNorm's output made straight in FP8 (fp8-fused-norm): rstd and the bytes of quantizing what
// the one-kernel forward writes, through the slot as delayed scaling finds it; row counts that end
// inside a block of 32, widths from one vector to the largest.
TEST_P(Fp8Quantize, NormMadeInFp8IsTheCastOfWhatItStores) {
  const DType d = GetParam();
  GpuBackend be(fp8_plan(), ModelShape{1, 16, 64, 1, 1, 64, 64, 16});
  uint32_t seed = 20;
  for (const QuantizeCase k : {QuantizeCase{64, 8}, {1, 768}, {37, 512}, {1000, 768}, {130, 6144}}) {
    SCOPED_TRACE(testing::Message() << k.r << " x " << k.c);
    DeviceBuffer x(DType::BF16, spread_values(k.r * k.c, seed++, 3.0)), w(DType::BF16, spread_values(k.c, seed++, 1.0)),
        out(DType::BF16, k.r * k.c), rstd(DType::F32, k.r), rstd8(DType::F32, k.r);
    be->rmsnorm_forward(out, rstd, x, w, k.r, int(k.c), 1e-5);
    DeviceFp8 cast(d, k.r, k.c), made(d, k.r, k.c);
    for (DeviceFp8* m : {&cast, &made}) m->calibrate(*be.be, out, k.r, k.c);
    rstd8.poison();
    be->fp8_quantize(cast.m, out, k.r, k.c, Fp8Scaling::Delayed);
    be->fp8_rmsnorm_forward(made.m, rstd8, x, w, k.r, int(k.c), 1e-5);
    EXPECT_EQ(bytes_of(rstd8), bytes_of(rstd));
    EXPECT_EQ(bytes_of(made.rows), bytes_of(cast.rows));
    EXPECT_EQ(bytes_of(made.cols), bytes_of(cast.cols));
    EXPECT_EQ(floats_of(made.slot), floats_of(cast.slot));
  }
}

// The residual stream's gradient made in FP8 by RMSNorm's backward (fp8-fused-norm-backward),
// added to (the layers' norms) and written (the final norm): its bf16 values and the weight
// gradient are those of the plain backward, the FP8 forms the bytes and amax of quantizing them.
// Rows from one chunk of 8 to chunks of 14 that end early (the partial sums' path), and a width
// whose tile does not fit (the backend's quantizing pass after the norm).
TEST_P(Fp8Quantize, ResidualGradientMadeInFp8IsTheCastOfWhatItStores) {
  const DType d = GetParam();
  uint32_t seed = 60;
  for (const QuantizeCase k : {QuantizeCase{8, 64}, {1000, 512}, {2048, 768}, {5000, 1024}, {2000, 6144}}) {
    GpuBackend be(fp8_plan(true), ModelShape{1, int(k.r), int(k.c), 1, 1, int(k.c), 64, 16});
    for (const bool add : {true, false}) {
      SCOPED_TRACE(testing::Message() << k.r << " x " << k.c << (add ? ", added to" : ", written"));
      const std::vector<double> dres0 = spread_values(k.r * k.c, seed++, 1e-3);
      DeviceBuffer x(DType::BF16, spread_values(k.r * k.c, seed++, 3.0)), w(DType::BF16, spread_values(k.c, seed++, 1.0)),
          dout(DType::BF16, spread_values(k.r * k.c, seed++, 1e-2)), out(DType::BF16, k.r * k.c), rstd(DType::F32, k.r),
          dres(DType::BF16, dres0), dres_too(DType::BF16, dres0), dw(DType::F32, k.c), dw_too(DType::F32, k.c);
      be->rmsnorm_forward(out, rstd, x, w, k.r, int(k.c), 1e-5);
      if (add) be->rmsnorm_backward_add(dres, dres, dw, dout, x, w, rstd, k.r, int(k.c), false);
      else be->rmsnorm_backward(dres, dw, dout, x, w, rstd, k.r, int(k.c), false);
      DeviceFp8 cast(d, k.r, k.c), made(d, k.r, k.c);
      for (DeviceFp8* m : {&cast, &made}) m->calibrate(*be.be, dres, k.r, k.c);
      dw_too.poison();
      be->fp8_quantize(cast.m, dres, k.r, k.c, Fp8Scaling::Delayed);
      be->fp8_rmsnorm_backward(made.m, dres_too, dw_too, dout, x, w, rstd, k.r, int(k.c), add, false);
      EXPECT_EQ(bytes_of(dres_too), bytes_of(dres));
      EXPECT_EQ(bytes_of(dw_too), bytes_of(dw));
      EXPECT_EQ(bytes_of(made.rows), bytes_of(cast.rows));
      EXPECT_EQ(bytes_of(made.cols), bytes_of(cast.cols));
      EXPECT_EQ(floats_of(made.slot), floats_of(cast.slot));
    }
  }
}

// The attention's output made in FP8 by our flash attention (fp8-fused-attention): the bf16 output
// and log-sum-exp it stores are those of the plain kernel, and its FP8 forms the bytes and amax of
// quantizing that output. Sequences that end inside a tile, lengths off 16 (the transpose's narrow
// runs), every head size, a grid of two warpgroups a block.
TEST_P(Fp8Quantize, AttentionOutputMadeInFp8IsTheCastOfWhatItStores) {
  const DType d = GetParam();
  uint32_t seed = 40;
  for (const AttnShape s : {AttnShape{2, 128, 4, 2, 64}, {3, 200, 2, 1, 64}, {1, 7, 2, 2, 32}, {2, 300, 2, 2, 128},
                            {44, 64, 4, 2, 64}}) {
    SCOPED_TRACE(testing::Message() << "B" << s.B << " T" << s.T << " H" << s.H << " KVH" << s.KVH << " D" << s.D);
    const int64_t n = int64_t(s.B) * s.T, hd = int64_t(s.H) * s.D;
    GpuBackend be(fp8_plan(true), ModelShape{s.B, s.T, int(hd), s.H, s.KVH, s.D, 64, 16});
    ASSERT_EQ(be->attention_kind().rfind("our flash attention (", 0), 0u) << be->attention_kind();
    const TensorSpec saved = be->attention_saved(s);
    DeviceBuffer qkv(DType::BF16, spread_values(n * s.ld(), seed++, 2.0)), att(DType::BF16, n * hd),
        att_too(DType::BF16, n * hd), lse(saved.dtype, saved.numel), lse_too(saved.dtype, saved.numel);
    be->attention_forward(att, lse, qkv, s);
    DeviceFp8 cast(d, n, hd), made(d, n, hd);
    for (DeviceFp8* m : {&cast, &made}) m->calibrate(*be.be, att, n, hd);
    att_too.poison();
    lse_too.poison();
    be->fp8_quantize(cast.m, att, n, hd, Fp8Scaling::Delayed);
    be->fp8_attention_forward(made.m, att_too, lse_too, qkv, s);
    EXPECT_EQ(bytes_of(att_too), bytes_of(att));
    EXPECT_EQ(bytes_of(lse_too), bytes_of(lse));
    EXPECT_EQ(bytes_of(made.rows), bytes_of(cast.rows));
    EXPECT_EQ(bytes_of(made.cols), bytes_of(cast.cols));
    EXPECT_EQ(floats_of(made.slot), floats_of(cast.slot));
  }
}

// Fp8Quantize.CrossEntropyGradientMadeInFp8IsTheCastOfWhatItStores at one shape.
void expect_fp8_cross_entropy_is_the_cast(DType d, int64_t n, int64_t ld, int v) {
  const Fp8Format f = fp8_format(d);
  GpuBackend be(fp8_plan(true), ModelShape{1, 16, 64, 1, 1, 64, 64, 16});
  std::vector<double> logits = spread_values(n * ld, 5, 4.0);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ids[size_t(i)] = int32_t((i * 7919) % v);
  DeviceBuffer x(DType::BF16, logits), targets(DType::I32, n), losses(DType::F32, n), losses8(DType::F32, n),
      lse(DType::F32, n), dlogits(DType::BF16, n * ld);
  cudaMemcpy(targets.t().ptr, ids.data(), ids.size() * sizeof(int32_t), cudaMemcpyHostToDevice);
  const double scale = 1.0 / double(n);
  be->cross_entropy_forward(losses, x, targets, n, v, ld);
  be->cross_entropy_backward(dlogits, x, targets, n, v, ld, scale);
  const std::vector<uint8_t> logits_before = bytes_of(x);
  DeviceFp8 cast(d, n, ld), made(d, n, ld);
  std::vector<double> slot(kFp8SlotFloats, 0.0);
  const float s = fp8_scale(float(scale), f);
  slot[0] = 1.0 / s, slot[1] = s, slot[3] = fp8_spec(f).max_finite;
  cast.slot.set(slot);
  made.slot.set(slot);
  be->fp8_quantize(cast.m, dlogits, n, ld, Fp8Scaling::Delayed);
  be->fp8_cross_entropy_fused(made.m, lse, losses8, x, targets, n, v, ld, scale);
  EXPECT_EQ(bytes_of(losses8), bytes_of(losses));
  EXPECT_EQ(bytes_of(made.rows), bytes_of(cast.rows));
  EXPECT_EQ(bytes_of(made.cols), bytes_of(cast.cols));
  EXPECT_EQ(floats_of(made.slot), floats_of(cast.slot));
  EXPECT_EQ(bytes_of(x), logits_before);
  const std::vector<uint8_t> rows = bytes_of(made.rows);
  int64_t padding = 0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = v; j < ld; ++j) padding += rows[size_t(i * ld + j)] != 0;
  EXPECT_EQ(padding, 0) << "padding columns not zero";
}

// The head's gradient made in FP8 (fp8-head): the losses of the bf16 pass, and the bytes of
// quantizing the gradient the bf16 kernel stores, through the fixed scale of its bound (the slot
// as Llama sets it); every byte written, the padding columns zero, the logits left as they were.
// At a vocabulary of 1000 every pass takes blocks of 64 threads; at gpt2-small's the loss passes
// take blocks of 256 holding two lanes each, the gradient's blocks of 512: one order of sums.
TEST_P(Fp8Quantize, CrossEntropyGradientMadeInFp8IsTheCastOfWhatItStores) {
  for (auto [n, ld, v] : {std::tuple<int64_t, int64_t, int>{200, 1088, 1000}, {48, 50304, 50257}}) {
    SCOPED_TRACE(testing::Message() << "vocabulary " << v);
    expect_fp8_cross_entropy_is_the_cast(GetParam(), n, ld, v);
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, Fp8Quantize, ::testing::Values(DType::F8E4M3, DType::F8E5M2),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// Frobenius norm of a matrix, and the bound on ||A_q / s - A|| that the format's precision gives:
// each normal value within u |a| (u = 2^-(mantissa bits + 1)), each subnormal within half the
// smallest subnormal, over the scale.
double norm(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x * x;
  return std::sqrt(s);
}
double quantization_bound(const std::vector<double>& a, Fp8Format f, double scale) {
  const Fp8Spec s = fp8_spec(f);
  const double u = std::ldexp(1.0, -(s.mantissa_bits + 1));
  const double half_subnormal = std::ldexp(1.0, 1 - s.bias - s.mantissa_bits - 1);
  return u * norm(a) + std::sqrt(double(a.size())) * half_subnormal / scale;
}

// C[m, n] = A[m, k] B[n, k]^T in double.
std::vector<double> product(const std::vector<double>& a, const std::vector<double>& b, int m, int n, int k) {
  std::vector<double> c(size_t(m) * n, 0.0);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double s = 0;
      for (int p = 0; p < k; ++p) s += a[size_t(i) * k + p] * b[size_t(j) * k + p];
      c[size_t(i) * n + j] = s;
    }
  return c;
}

std::vector<double> dequantized(const std::vector<uint8_t>& q, Fp8Format f, float inverse) {
  std::vector<double> v(q.size());
  for (size_t i = 0; i < q.size(); ++i) v[i] = double(fp8_to_float(q[i], f)) * double(inverse);
  return v;
}

// The three products of a layer in FP8, through linear_gemm's form: y = x W^T, dx = dy W
// (W's columns), dW = dy^T x (both as columns), E4M3 activations and weights, the gradient in
// E4M3 or E5M2. Against the double product of the dequantized operands: within the output's
// rounding (bf16 for y and dx) or the tensor cores' FP8 accumulation (dW, written in fp32:
// measured 1.6e-4 at k = 256); against the double product of
// the unquantized operands: within the bound ||dA|| ||B_q|| + ||A|| ||dB|| (times 1.01).
TEST(Fp8Gemm, ProductsMatchTheQuantizedAndTheExactReference) {
  REQUIRE_GPU();
  const int N = 256, in = 192, out = 320;
  for (DType grad : {DType::F8E4M3, DType::F8E5M2}) {
    SCOPED_TRACE(dtype_name(grad));
    GpuBackend be(fp8_plan(), ModelShape{1, 16, 64, 1, 1, 64, 64, 16});
    DeviceBuffer x(DType::BF16, spread_values(int64_t(N) * in, 11, 1.0)), w(DType::BF16, spread_values(int64_t(out) * in, 12, 0.05)),
        dy(DType::BF16, spread_values(int64_t(N) * out, 13, 1e-4));
    DeviceFp8 x8(DType::F8E4M3, N, in), w8(DType::F8E4M3, out, in), dy8(grad, N, out);
    be->fp8_quantize(x8.m, x, N, in, Fp8Scaling::Current);
    be->fp8_quantize(w8.m, w, out, in, Fp8Scaling::Current);
    be->fp8_quantize(dy8.m, dy, N, out, Fp8Scaling::Current);
    DeviceBuffer y(DType::BF16, int64_t(N) * out), dx(DType::BF16, int64_t(N) * in), dw(DType::F32, int64_t(out) * in);
    for (DeviceBuffer* b : {&y, &dx, &dw}) b->poison();
    be->matmul(fp8_linear_gemm(y, out, x8.m, w8.m, N, in, out));
    be->matmul(fp8_linear_dx_gemm(dx, in, dy8.m, w8.m, N, in, out, 0.0f));
    be->matmul(fp8_linear_dw_gemm(dw, dy8.m, x8.m, N, in, out));
    be->synchronize();

    auto deq = [&](const DeviceFp8& t, const Tensor& layout) {
      return dequantized(bytes_of(layout), fp8_format(t.rows.t().dtype), floats_of(t.slot)[0]);
    };
    const std::vector<double> xq = deq(x8, x8.rows), wq = deq(w8, w8.rows), wtq = deq(w8, w8.cols),
                              dyq = deq(dy8, dy8.rows), dytq = deq(dy8, dy8.cols), xtq = deq(x8, x8.cols);
    const std::vector<double> xe = x.get(), we = w.get(), dye = dy.get();
    auto transpose = [](const std::vector<double>& a, int r, int c) {
      std::vector<double> t(a.size());
      for (int i = 0; i < r; ++i)
        for (int j = 0; j < c; ++j) t[size_t(j) * r + i] = a[size_t(i) * c + j];
      return t;
    };
    struct Check {
      const char* name;
      std::vector<double> got, a_q, b_q, a, b;
      int m, n, k;
      Fp8Format fa, fb;
      float scale_a, scale_b;
      double output_rounding;
    };
    const float sx = floats_of(x8.slot)[1], sw = floats_of(w8.slot)[1], sdy = floats_of(dy8.slot)[1];
    const Fp8Format fg = fp8_format(grad);
    const Check checks[] = {
        {"y = x W^T", y.get(), xq, wq, xe, we, N, out, in, Fp8Format::E4M3, Fp8Format::E4M3, sx, sw, 0x1p-8},
        {"dx = dy W", dx.get(), dyq, wtq, dye, transpose(we, out, in), N, in, out, fg, Fp8Format::E4M3, sdy, sw, 0x1p-8},
        {"dW = dy^T x", dw.get(), dytq, xtq, transpose(dye, N, out), transpose(xe, N, in), out, in, N, fg,
         Fp8Format::E4M3, sdy, sx, 5e-4},
    };
    for (const Check& c : checks) {
      SCOPED_TRACE(c.name);
      ASSERT_TRUE(all_finite(c.got)) << "unwritten (NaN) elements";
      const std::vector<double> quantized_ref = product(c.a_q, c.b_q, c.m, c.n, c.k);
      const double tight = rel_error(c.got, quantized_ref);
      EXPECT_LT(tight, 2 * c.output_rounding);
      const std::vector<double> exact = product(c.a, c.b, c.m, c.n, c.k);
      const double da = quantization_bound(c.a, c.fa, c.scale_a), db = quantization_bound(c.b, c.fb, c.scale_b);
      const double bound = (da * (norm(c.b) + db) + norm(c.a) * db) * 1.01 + c.output_rounding * norm(exact);
      std::vector<double> diff(exact.size());
      for (size_t i = 0; i < diff.size(); ++i) diff[i] = c.got[i] - exact[i];
      const double err = norm(diff);
      EXPECT_LT(err, bound);
      std::printf("[fp8 %s, gradient %s] vs quantized inputs %.2e; vs exact inputs %.3e of ||A|| ||B||, bound %.3e\n",
                  c.name, dtype_name(grad), tight, err / (norm(c.a) * norm(c.b)), bound / (norm(c.a) * norm(c.b)));
    }
  }
}

// fp8-timed-products chooses each FP8 product's algorithm by timing, so that choice must not show:
// every candidate it takes from gives the same bytes, for the three products of a layer at shapes
// of gpt2-small's (the forward with the fast accumulation) and an awkward one, and for the input
// gradient also with beta 1 (added into C, as into the residual stream's gradient).
TEST(Fp8Gemm, EveryTimedCandidateGivesTheSameBytes) {
  REQUIRE_GPU();
  struct Shape {
    int n, in, out;
  };
  for (const Shape& sh : {Shape{1024, 768, 2304}, Shape{1024, 2048, 768}, Shape{512, 768, 4096}, Shape{256, 192, 320}}) {
    SCOPED_TRACE(std::to_string(sh.n) + " x " + std::to_string(sh.in) + " -> " + std::to_string(sh.out));
    const int N = sh.n, in = sh.in, out = sh.out;
    GpuBackend be(fp8_plan(), ModelShape{1, 16, 64, 1, 1, 64, 64, 16});
    DeviceBuffer x(DType::BF16, spread_values(int64_t(N) * in, 21, 1.0)),
        w(DType::BF16, spread_values(int64_t(out) * in, 22, 0.05)), dy(DType::BF16, spread_values(int64_t(N) * out, 23, 1e-4));
    DeviceFp8 x8(DType::F8E4M3, N, in), w8(DType::F8E4M3, out, in), dy8(DType::F8E4M3, N, out);
    be->fp8_quantize(x8.m, x, N, in, Fp8Scaling::Current);
    be->fp8_quantize(w8.m, w, out, in, Fp8Scaling::Current);
    be->fp8_quantize(dy8.m, dy, N, out, Fp8Scaling::Current);
    be->synchronize();
    const std::vector<double> residual = spread_values(int64_t(N) * in, 24, 1.0);
    DeviceBuffer y(DType::BF16, int64_t(N) * out), dx(DType::BF16, int64_t(N) * in), dw(DType::F32, int64_t(out) * in);
    struct Product {
      const char* name;
      Gemm g;
      DeviceBuffer* c;
      bool add;  // beta 1: C holds `residual` before each candidate
    };
    Gemm dx_added = fp8_linear_dx_gemm(dx, in, dy8.m, w8.m, N, in, out, 1.0f);
    const Product products[] = {
        {"y = x W^T", fp8_linear_gemm(y, out, x8.m, w8.m, N, in, out), &y, false},
        {"dx = dy W", fp8_linear_dx_gemm(dx, in, dy8.m, w8.m, N, in, out, 0.0f), &dx, false},
        {"dx += dy W", dx_added, &dx, true},
        {"dW = dy^T x", fp8_linear_dw_gemm(dw, dy8.m, x8.m, N, in, out), &dw, false},
    };
    cuda::LtProducts lt;
    for (const Product& p : products) {
      SCOPED_TRACE(p.name);
      std::vector<uint8_t> first;
      if (p.add) p.c->set(residual);
      else p.c->poison();
      const int count = lt.each_timed_candidate(p.g, Tensor{}, Stream{}, [&](int i) {
        const std::vector<uint8_t> got = bytes_of(p.c->t());
        if (i == 0) first = got;
        else EXPECT_TRUE(got == first) << "candidate " << i << " differs from the first";
        if (p.add) p.c->set(residual);
        else p.c->poison();
      });
      EXPECT_GE(count, 1);
      std::printf("[timed candidates] %d x %d -> %d, %s: %d, the same bytes\n", N, in, out, p.name, count);
    }
  }
}

ModelConfig fp8_model() {
  ModelConfig c;  // the default model, a vocabulary of 1000
  return c;
}

// The model on one batch of B x T synthetic tokens, against the CPU in double: the loss and every
// gradient, under each of `plans` (every product in FP8, fp8-every-shape), the CPU's computed once.
// With delayed scaling a step without an update first fills the history (same weights, same
// batch). Returns the global relative errors of the gradients, in the order of the plans.
std::vector<double> fp8_gradient_errors(const ModelConfig& c, int B, int T, const std::vector<Plan>& plans,
                                        double loss_tol, double tensor_tol) {
  auto cpu = make_cpu_backend_f64();
  Llama ref(c, *cpu, B, T);
  ref.init_weights(11);
  auto data = make_data_source("synthetic", c.vocab_size, B, T, 5);
  Batch batch;
  data->next_batch(batch);
  ref.set_batch(batch.tokens.data(), batch.targets.data());
  ref.forward();
  ref.backward();
  const double loss_ref = ref.mean_loss();
  const std::vector<double> g_ref = ref.read(ref.grads());
  std::vector<double> errors;
  for (const Plan& p : plans) {
    SCOPED_TRACE(describe(p));
    auto gpu = make_backend({DeviceKind::Cuda, p});
    Llama m(c, *gpu, B, T);
    EXPECT_TRUE(m.uses_fp8());
    m.init_weights(11);
    m.set_batch(batch.tokens.data(), batch.targets.data());
    if (p.fp8_delayed_scaling) {
      m.forward();
      m.backward();
      AdamWStep none;
      none.lr = 0;
      none.weight_decay = 0;
      m.optimizer_step(none);
    }
    m.write(m.grads(), std::vector<float>(size_t(m.grads().numel), std::nanf("")));
    m.forward();
    const double loss = m.mean_loss();
    EXPECT_LT(std::fabs(loss - loss_ref) / loss_ref, loss_tol) << loss << " vs " << loss_ref;
    m.backward();
    const std::vector<double> g = m.read(m.grads());
    EXPECT_TRUE(all_finite(g));
    double worst = 0;
    for (const ParamEntry& e : param_table(c)) {
      const std::vector<double> a(g.begin() + e.offset, g.begin() + e.offset + e.numel);
      const std::vector<double> r(g_ref.begin() + e.offset, g_ref.begin() + e.offset + e.numel);
      EXPECT_LT(rel_error(a, r), tensor_tol) << e.name;
      worst = std::max(worst, rel_error(a, r));
    }
    errors.push_back(rel_error(g, g_ref));
    std::printf("[fp8 model, hidden %d, %d tokens, %s] loss %.6f vs %.6f; gradients' global relative error %.3e, "
                "largest of a tensor %.3e\n",
                c.hidden, B * T, describe(p).c_str(), loss, loss_ref, errors.back(), worst);
  }
  return errors;
}

// The default model at the default shape, B 8 x T 128: the loss within 0.1%, the gradients
// within 30% each and 25% over all of them, for both gradient formats and both scalings, and
// with the head in bf16. Measured on an H200 (2026-11-28): the loss within 9.4e-5 (3.4e-5 with
// the head in bf16); the global error 0.160 with E4M3 gradients (0.159 with the head in bf16),
// 0.176 with E5M2 (bf16 alone: 3e-3). At initialization on random tokens a weight gradient is a sum
// over the tokens of nearly unrelated terms that cancel to about 1/sqrt(N) of their size, while
// each term's quantization error stays: so the relative error of a product grows with N (Fp8Gemm:
// 2e-3 of ||A|| ||B|| at k 256 whatever the sum).
TEST(Fp8Model, LossAndGradientsWithinTheBoundOfTheCpuInDouble) {
  REQUIRE_GPU();
  std::vector<Plan> plans;
  for (bool e5m2 : {false, true})
    for (bool delayed : {false, true}) {
      plans.push_back(fp8_plan(delayed, e5m2));
      plans.back().fp8_every_shape = true;
    }
  plans.push_back(plans[1]);  // delayed, E4M3, the head in bf16: what the head in FP8 adds
  plans.back().fp8_head = false;
  for (double global : fp8_gradient_errors(fp8_model(), 8, 128, plans, 1e-3, 0.3)) EXPECT_LT(global, 0.25);
}

// GPT-2 small's matrices (hidden 768, 12 layers, vocabulary 50257) on a short batch (2 x 64), the
// preset of v5 (delayed scaling, E4M3 gradients) with every product in FP8, against the CPU in
// double: the loss within 0.3%, the gradients within 40% each and 25% over all of them. Measured
// on an H200 (2026-11-28, the head in FP8): the loss 11.036980 against 11.025612 (1.0e-3), the
// global error 0.167, the largest of a tensor 0.305.
TEST(Fp8Model, Gpt2SmallWithinTheBoundOfTheCpuInDouble) {
  REQUIRE_GPU();
  Plan p = fp8_plan(true);
  p.fp8_every_shape = true;
  for (double global : fp8_gradient_errors(find_preset("gpt2-small").model, 2, 64, {p}, 3e-3, 0.4))
    EXPECT_LT(global, 0.25);
}

// Five training steps at the default shape (B 8 x T 128, or T given) under `plan`: each step's
// loss, then the weights.
struct FiveSteps {
  std::vector<double> losses;
  std::vector<float> params;
  bool fp8 = false;
  std::string products;   // the header's Products: line
  std::string attention;  // and its Attention: line
};
FiveSteps five_steps(const Plan& plan, int T = 128, StepOptions options = {}) {
  const ModelConfig c = fp8_model();
  const int B = 8;
  auto be = make_backend({DeviceKind::Cuda, plan});
  Llama m(c, *be, B, T, {}, options);
  m.init_weights(3);
  auto data = make_data_source("synthetic", c.vocab_size, B, T, 9);
  Batch b;
  AdamWStep s;
  s.max_grad_norm = options.clip ? 1.0 : 0.0;
  FiveSteps r;
  r.fp8 = m.uses_fp8();
  r.products = m.products_kind();
  r.attention = be->attention_kind();
  for (int step = 1; step <= 5; ++step) {
    std::vector<int32_t> tokens, targets;
    for (int i = 0; i < options.micro_batches; ++i) {
      data->next_batch(b);
      tokens.insert(tokens.end(), b.tokens.begin(), b.tokens.end());
      targets.insert(targets.end(), b.targets.begin(), b.targets.end());
    }
    m.set_batch(tokens.data(), targets.data(), options.micro_batches);
    s.t = step;
    m.train_step(s);
    r.losses.push_back(m.mean_loss());
  }
  r.params = m.read_f32(m.params());
  return r;
}

// A kernel that makes its output straight in FP8 changes no bit of training: five steps of v5 with
// every product in FP8 (the first step fills the history of the delayed scales), with and without
// `writer` (on in v5's preset, or opt-in), the same losses and weights.
void expect_the_same_bits_without(bool Plan::*writer) {
  Plan p = fp8_plan(true);
  p.fp8_every_shape = true;
  p.*writer = true;
  const FiveSteps fused = five_steps(p);
  p.*writer = false;
  const FiveSteps separate = five_steps(p);
  EXPECT_TRUE(fused.fp8);
  EXPECT_EQ(fused.losses, separate.losses);
  EXPECT_TRUE(fused.params == separate.params);
}

// The products' algorithms chosen by timing (fp8-timed-products): a choice that may differ from
// run to run, among candidates that give the same bytes.
TEST(Fp8Model, TimedProductsChangeNoBit) {
  REQUIRE_GPU();
  expect_the_same_bits_without(&Plan::fp8_timed_products);
}

// SwiGLU's output and input gradient (fp8-fused-swiglu).
TEST(Fp8Model, FusedSwiGluChangesNoBit) {
  REQUIRE_GPU();
  expect_the_same_bits_without(&Plan::fp8_fused_swiglu);
}

// RoPE's backward, the QKV gradient (fp8-fused-rope).
TEST(Fp8Model, FusedRopeChangesNoBit) {
  REQUIRE_GPU();
  expect_the_same_bits_without(&Plan::fp8_fused_rope);
}

// RMSNorm's output, the QKV and gate/up products' input (fp8-fused-norm).
TEST(Fp8Model, FusedNormChangesNoBit) {
  REQUIRE_GPU();
  expect_the_same_bits_without(&Plan::fp8_fused_norm);
}

// The attention's output, the output product's input (fp8-fused-attention).
TEST(Fp8Model, FusedAttentionChangesNoBit) {
  REQUIRE_GPU();
  expect_the_same_bits_without(&Plan::fp8_fused_attention);
}

// The residual stream's gradient, the output and down products' gradient input
// (fp8-fused-norm-backward).
TEST(Fp8Model, FusedNormBackwardChangesNoBit) {
  REQUIRE_GPU();
  expect_the_same_bits_without(&Plan::fp8_fused_norm_backward);
}

// Where FP8 does not pay (the default shape without fp8-every-shape), v5 is v4: the same losses
// and weights, bit for bit.
TEST(Fp8Model, WhereFp8DoesNotPayVersion5IsVersion4BitForBit) {
  REQUIRE_GPU();
  Plan v4 = plan_for_version(4), v5 = plan_for_version(5);
  v4.amp = v5.amp = true;
  const FiveSteps a = five_steps(v4), b = five_steps(v5);
  EXPECT_FALSE(b.fp8);
  EXPECT_EQ(a.losses, b.losses);
  EXPECT_TRUE(a.params == b.params);
}

// A switch of v5's preset in bf16 that changes no bit at B 8 x T: five steps with and without it
// give the same losses and weights, and the header's Products: line says that it is used (`used`).
void expect_v5_bf16_the_same_bits_without(bool Plan::*piece, const std::string& used, int T = 128) {
  Plan on = plan_for_version(5);
  on.amp = true;
  ASSERT_TRUE(on.*piece);
  Plan off = on;
  off.*piece = false;
  const FiveSteps a = five_steps(off, T), b = five_steps(on, T);
  EXPECT_FALSE(b.fp8);
  EXPECT_NE(b.products.find(used), std::string::npos) << b.products;
  EXPECT_EQ(a.losses, b.losses);
  EXPECT_TRUE(a.params == b.params);
}

// v6's preset in bf16, and the same with `piece` off.
std::pair<Plan, Plan> v6_bf16_with_and_without(bool Plan::*piece) {
  Plan on = plan_for_version(6);
  on.amp = true;
  Plan off = on;
  off.*piece = false;
  return {on, off};
}

// grouped-weight-gradients (v5): at the default shape, at the training default's 8 x 256 and at
// 8 x 512 (tiles of 256 rows past 2048 tokens) each layer's four weight gradients wait for the end
// of its backward and are made in one launch of our kernel, with cuBLAS's bytes (GpuWeightGradients).
TEST(Fp8Model, GroupedWeightGradientsChangeNoBit) {
  REQUIRE_GPU();
  for (int T : {128, 256, 512}) {
    SCOPED_TRACE(testing::Message() << "T " << T);
    expect_v5_bf16_the_same_bits_without(&Plan::grouped_weight_gradients, "a layer's four in one launch", T);
  }
}

// weight-gradients-behind (v6): each layer's group of weight gradients runs on a lane of its own
// beside the layer below's FFN, its inputs in buffers that the layer below does not write until it
// has waited for the group. Five steps give the bits of v6 without it: at the default shape, with
// two micro-batches and clipping (the next forward, and the updates after the norm, wait for the
// lane), and at 8 x 256 and 8 x 512. Past 4096 tokens, where it did not pay, the header says so.
// With the lane, SwiGLU's backward is a kernel of its own (swiglu-in-down-gradient's rule): the
// same bits again.
TEST(Fp8Model, WeightGradientsBehindChangeNoBit) {
  REQUIRE_GPU();
  const auto [on, off] = v6_bf16_with_and_without(&Plan::weight_gradients_behind);
  ASSERT_TRUE(on.weight_gradients_behind);
  StepOptions two;
  two.micro_batches = 2;
  two.clip = true;
  for (const auto& [T, step] : std::vector<std::pair<int, StepOptions>>{{128, {}}, {128, two}, {256, {}}, {512, {}}}) {
    SCOPED_TRACE(testing::Message() << "T " << T << ", micro-batches " << step.micro_batches);
    const FiveSteps a = five_steps(off, T, step), b = five_steps(on, T, step);
    EXPECT_NE(b.products.find("beside the layers below (weight-gradients-behind)"), std::string::npos) << b.products;
    EXPECT_EQ(a.products.find("weight-gradients-behind"), std::string::npos) << a.products;
    if (T == 128)
      EXPECT_NE(b.products.find("SwiGLU's backward a kernel of its own (1024 tokens beside the weight gradients' "
                                "lane (weight-gradients-behind), more than 512)"),
                std::string::npos) << b.products;
    EXPECT_EQ(a.losses, b.losses);
    EXPECT_TRUE(a.params == b.params);
  }
  EXPECT_NE(five_steps(on, 1024).products.find("on the main stream (8192 tokens, more than 4096)"), std::string::npos);
}

// swiglu-in-gate-up (v5): at the default shape SwiGLU is made in the epilogue of our gate/up
// product, with cuBLAS's and the SwiGLU kernel's bytes (GpuGatedProduct). At 8 x 256, where it does
// not pay, the header says so.
TEST(Fp8Model, SwigluInGateUpChangesNoBit) {
  REQUIRE_GPU();
  expect_v5_bf16_the_same_bits_without(&Plan::swiglu_in_gate_up, "SwiGLU in the gate/up product's epilogue");
  Plan v5 = plan_for_version(5);
  v5.amp = true;
  EXPECT_NE(five_steps(v5, 256).products.find("SwiGLU a kernel of its own (2048 tokens, more than 1024)"),
            std::string::npos);
}

// rope-in-qkv-product (v6): at the default shape RoPE is made in the epilogue of our QKV product,
// with cuBLAS's and the RoPE kernel's bytes (GpuRopeProduct): five steps of v6 with it give the
// bits of v6 without it. At 8 x 256 the header says why it does not run.
TEST(Fp8Model, RopeInQkvProductChangesNoBit) {
  REQUIRE_GPU();
  const auto [on, off] = v6_bf16_with_and_without(&Plan::rope_in_qkv_product);
  ASSERT_TRUE(on.rope_in_qkv_product);
  const FiveSteps a = five_steps(off, 128), b = five_steps(on, 128);
  EXPECT_NE(b.products.find("RoPE in the QKV product's epilogue (rope-in-qkv-product)"), std::string::npos) << b.products;
  EXPECT_EQ(a.products.find("RoPE"), std::string::npos) << a.products;
  EXPECT_EQ(a.losses, b.losses);
  EXPECT_TRUE(a.params == b.params);
  EXPECT_NE(five_steps(on, 256).products.find("RoPE a kernel of its own (2048 tokens, more than 1024)"),
            std::string::npos);
}

// blocks-forward-in-one-launch (v6, opt-in): at the default shape every layer's forward is one
// persistent launch (ops/block_forward.h). Its tasks run the kernels' own tiles (the QKV product with
// RoPE, the attention, gate/up with SwiGLU, the norms' arithmetic), and its output and down tiles sum
// in cuBLAS's order and add the residual before the one rounding as cuBLAS's beta = 1 does: five
// steps give the bits of v6 without it, and two launches the same. At 8 x 256 and 8 x 64 the
// header says why not.
TEST(Fp8Model, BlocksForwardInOneLaunchChangesNoBit) {
  REQUIRE_GPU();
  Plan off = plan_for_version(6);
  off.amp = true;
  Plan on = off;
  on.blocks_forward_in_one_launch = true;
  const FiveSteps a = five_steps(off, 128), b = five_steps(on, 128), again = five_steps(on, 128);
  EXPECT_NE(b.products.find("the layers' forward in one launch (blocks-forward-in-one-launch)"), std::string::npos)
      << b.products;
  EXPECT_EQ(a.products.find("the layers' forward"), std::string::npos) << a.products;
  EXPECT_EQ(a.losses, b.losses);
  EXPECT_TRUE(a.params == b.params);
  EXPECT_EQ(again.losses, b.losses);
  EXPECT_TRUE(again.params == b.params);
  EXPECT_NE(five_steps(on, 256).products.find("the layers' forward a kernel an operation (RoPE not in the QKV product)"),
            std::string::npos);
  const std::string at64 = five_steps(on, 64).products;
  EXPECT_NE(at64.find("the layers' forward a kernel an operation (sequences of 64 tokens, not 128)"), std::string::npos)
      << at64;
}

// swiglu-in-down-gradient (v5): at the default shape SwiGLU's backward is made in the epilogue of
// our product for down's input gradient, with cuBLAS's and the SwiGLU kernel's bytes
// (GpuGatedProduct).
TEST(Fp8Model, SwigluInDownGradientChangesNoBit) {
  REQUIRE_GPU();
  expect_v5_bf16_the_same_bits_without(&Plan::swiglu_in_down_gradient,
                                       "SwiGLU's backward in down's input gradient's epilogue");
}

// Version 6 (attention-backward-in-one-block; rope-in-qkv-product changes no bit): at the default
// shape, and at 100 tokens (a partial query tile), the attention's backward is one kernel, a block
// a sequence and query head. It sums dQ, dK and dV in other orders (GpuAttention.OneBlockBackward...)
// and turns dQ and dK back through RoPE before rounding them to bf16, so five steps keep to v5's
// losses (the two kernels and RoPE's backward kernel) within what bf16 roundings of them move them,
// and repeat their own bits. At 8 x 256 the header says why the two kernels run.
TEST(Fp8Model, Version6TracksVersion5AndRepeatsItsBits) {
  REQUIRE_GPU();
  Plan v5 = plan_for_version(5), v6 = plan_for_version(6);
  v5.amp = v6.amp = true;
  ASSERT_FALSE(v5.attention_backward_in_one_block);
  ASSERT_TRUE(v6.attention_backward_in_one_block);
  for (int T : {128, 100}) {
    SCOPED_TRACE(testing::Message() << "T " << T);
    const FiveSteps a = five_steps(v5, T), b = five_steps(v6, T);
    EXPECT_NE(b.attention.find("the backward one block a sequence and query head, RoPE's backward in it"),
              std::string::npos)
        << b.attention;
    EXPECT_EQ(a.attention.find("one block"), std::string::npos) << a.attention;
    ASSERT_EQ(a.losses.size(), b.losses.size());
    for (size_t i = 0; i < a.losses.size(); ++i) EXPECT_NEAR(b.losses[i], a.losses[i], 2e-3) << "step " << i + 1;
    const FiveSteps again = five_steps(v6, T);
    EXPECT_EQ(again.losses, b.losses);
    EXPECT_TRUE(again.params == b.params);
  }
  const std::string at256 = five_steps(v6, 256).attention;
  EXPECT_NE(at256.find("the backward in two kernels: sequences of 256, more than 128"), std::string::npos) << at256;
}

// A checkpoint keeps delayed scaling's history (the tensor fp8/scale_state), so a resumed v5 run
// scales as the uninterrupted one and continues bit for bit, as v1 to v4 do: the default model
// with every product in FP8, 8 steps against 4, saved, and 4 more; the checkpoints byte for byte
// but for the run identity. A checkpoint resumed by v4 leaves the history aside.
TEST(Fp8Model, AResumedRunContinuesBitForBit) {
  REQUIRE_GPU();
  ScratchDir dir{"fp8_resume"};
  std::ostringstream log;
  TrainOptions o;
  o.batch = 8, o.seq_len = 128, o.timing_warmup = 1, o.log_every = 100;
  o.backend.device = DeviceKind::Cuda;
  o.backend.plan = fp8_plan(true);
  o.backend.plan.fp8_every_shape = true;
  o.steps = 8;
  const TrainResult full = expect_resume_continues_bit_for_bit(o, dir, log);
  EXPECT_FALSE(full.products.empty());
  EXPECT_NE(read_safetensors(dir.file("half.safetensors"), "test").find("fp8/scale_state"), nullptr);
  TrainOptions v4 = o;
  v4.backend.plan = plan_for_version(4);
  v4.backend.plan.amp = true;
  v4.resume_path = dir.file("half.safetensors");
  v4.save_path = dir.file("v4.safetensors");
  EXPECT_EQ(train(v4, log).steps.size(), 4u);
}

// Thirty steps of v5 with every product in FP8, in a CUDA graph, against v4 bf16 from the same
// weights on one batch, learned by heart: the loss falls as v4's, to under a tenth of where it
// started, within 0.3 nats of it at every step and 0.05 at the end, for both scalings. Memorizing
// runs part ways on the steep part of the curve: measured on an H100, v4 went from 7.00 to 0.186,
// v5 to 0.208 (current scaling, 0.224 apart at most) and 0.200 (delayed, 0.134). The real test of
// the loss is the long run on text (docs/versions/v5.md).
TEST(Fp8Model, ThirtyStepsTrackVersion4) {
  REQUIRE_GPU();
  const ModelConfig c = fp8_model();
  const int B = 8, T = 128, steps = 30;
  auto run = [&](Plan p) {
    auto be = make_backend({DeviceKind::Cuda, p});
    Llama m(c, *be, B, T);
    m.init_weights(5);
    auto data = make_data_source("synthetic", c.vocab_size, B, T, 21);
    Batch b;
    data->next_batch(b);
    AdamWStep s;
    s.lr = 3e-4;
    std::vector<double> losses;
    for (int step = 1; step <= steps; ++step) {
      m.set_batch(b.tokens.data(), b.targets.data());
      s.t = step;
      m.train_step(s);
      losses.push_back(m.mean_loss());
    }
    return losses;
  };
  Plan v4 = plan_for_version(4);
  v4.amp = true;
  const std::vector<double> base = run(v4);
  ASSERT_LT(base.back(), 0.1 * base.front()) << "v4 learns the batch";
  for (bool delayed : {false, true}) {
    SCOPED_TRACE(delayed ? "delayed" : "current");
    Plan p = fp8_plan(delayed);
    p.fp8_every_shape = true;
    const std::vector<double> fp8 = run(p);
    EXPECT_LT(fp8.back(), 0.1 * fp8.front());
    EXPECT_LT(std::fabs(fp8.back() - base.back()), 0.05);
    double worst = 0;
    for (int i = 0; i < steps; ++i) {
      EXPECT_LT(std::fabs(fp8[size_t(i)] - base[size_t(i)]), 0.3) << "step " << i + 1;
      worst = std::max(worst, std::fabs(fp8[size_t(i)] - base[size_t(i)]));
    }
    std::printf("[fp8 %s] step 1: %.4f vs v4 %.4f; step %d: %.4f vs v4 %.4f; largest difference %.4f\n",
                delayed ? "delayed" : "current", fp8[0], base[0], steps, fp8.back(), base.back(), worst);
  }
}

}  // namespace
}  // namespace tt::test
