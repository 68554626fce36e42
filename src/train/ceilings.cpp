// The measured ceilings of train/ceilings.h, through the Backend interface: its product and its
// copy (convert between tensors of one type), timed with its marks.
#include "train/ceilings.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/arena.h"
#include "core/rng.h"
#include "ops/gemm.h"

namespace tt {

namespace {

// The median of five timings of `calls` calls each, in milliseconds a call, after three untimed.
template <class F>
double median_ms(Backend& be, F call, int calls) {
  for (int i = 0; i < 3; ++i) call();
  std::vector<double> ms;
  for (int r = 0; r < 5; ++r) {
    be.mark(0);
    for (int i = 0; i < calls; ++i) call();
    be.mark(1);
    ms.push_back(be.elapsed_ms(0, 1) / calls);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// Host values for a matrix of `dtype`: uniform in [-1, 1) as bf16 or fp32, or E4M3 codes of
// magnitude 2^-7 to 2^6 (never NaN).
std::vector<uint8_t> matrix_values(DType dtype, int64_t numel) {
  const CounterRng rng(0, kStreamTest);
  std::vector<uint8_t> bytes(size_t(numel) * dtype_size(dtype));
  for (int64_t i = 0; i < numel; ++i) {
    if (dtype == DType::F8E4M3) {
      bytes[size_t(i)] = uint8_t(rng.below(2 * uint64_t(i), 0x68)) | uint8_t(rng.bits(2 * uint64_t(i) + 1) & 0x80);
      continue;
    }
    const float v = float(rng.uniform(uint64_t(i)) * 2 - 1);
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    if (dtype == DType::BF16) {
      const uint16_t h = uint16_t(bits >> 16);
      std::memcpy(&bytes[size_t(i) * 2], &h, 2);
    } else {
      std::memcpy(&bytes[size_t(i) * 4], &bits, 4);
    }
  }
  return bytes;
}

}  // namespace

double measured_product_rate(Backend& be, DType in, DType out, int n) {
  Arena arena(be.memory());
  Gemm g;
  g.trans_b = true;
  g.m = g.n = g.k = n;
  g.lda = g.ldb = g.ldc = n;
  const int64_t numel = int64_t(n) * n;
  Tensor scales;
  arena.build([&](Arena& a) {
    be.layout_workspace(a, ModelShape{1, 2, 64, 1, 1, 64, 64, 64});
    g.a = a.take(Category::Workspace, in, numel);
    g.b = a.take(Category::Workspace, in, numel);
    g.c = a.take(Category::Workspace, out, numel);
    if (is_fp8(in)) scales = a.take(Category::Workspace, DType::F32, 4);
  });
  const std::vector<uint8_t> values = matrix_values(in, numel);
  be.upload(g.a, values.data());
  be.upload(g.b, values.data());
  if (is_fp8(in)) {
    const float ones[4] = {1, 1, 1, 1};
    be.upload(scales, ones);
    g.a_scale = g.b_scale = scales.slice(0, 1);
    g.fast_accumulation = true;
  }
  const double ms = median_ms(be, [&] { be.matmul(g); }, 5);
  return 2.0 * double(n) * n * n / (ms * 1e-3);
}

double measured_copy_ms(Backend& be, size_t bytes) {
  Arena arena(be.memory());
  Tensor src, dst;
  const int64_t numel = int64_t(bytes / 4);
  arena.build([&](Arena& a) {
    be.layout_workspace(a, ModelShape{1, 2, 64, 1, 1, 64, 64, 64});
    src = a.take(Category::Workspace, DType::F32, numel);
    dst = a.take(Category::Workspace, DType::F32, numel);
  });
  be.zero(src);
  return median_ms(be, [&] { be.convert(dst, src); }, bytes < (size_t(64) << 20) ? 50 : 5);
}

void measure_ceilings(Ceilings& c, int gpu) {
  Plan plan = plan_for_version(1);
  plan.amp = c.precision == "bf16";
  plan.tf32 = c.precision == "tf32";
  std::unique_ptr<Backend> be = make_backend({DeviceKind::Cuda, plan, gpu, false});
  if (!be->is_cuda()) return;
  const DType act = be->act_dtype();
  c.gemm = measured_product_rate(*be, act, act, 8192);
  c.fp8_gemm = measured_product_rate(*be, DType::F8E4M3, DType::BF16, 8192);
  const size_t hbm = size_t(256) << 20;
  c.hbm_copy = 2.0 * double(hbm) / (measured_copy_ms(*be, hbm) * 1e-3);
  // L2-resident: a copy of a quarter of the L2 against one of an eighth, so that what each call
  // costs whatever its size (its launch, the gap between two) drops out of the rate. Where the
  // launches set both times, their difference tells nothing: not measured.
  const size_t l2 = std::max<size_t>(device_info(true).l2_bytes, size_t(16) << 20), big = l2 / 4, small = l2 / 8;
  const double big_ms = measured_copy_ms(*be, big), small_ms = measured_copy_ms(*be, small);
  if (big_ms - small_ms > 0.2 * small_ms) c.l2_copy = 2.0 * double(big - small) / ((big_ms - small_ms) * 1e-3);
}

}  // namespace tt
