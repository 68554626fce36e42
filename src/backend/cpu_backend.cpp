// The CPU reference backend: every operation is the plain reference of src/ops/<op>.h, in one
// precision T (fp32 for training, fp64 for gradient checks), matrix products through OpenBLAS.
// It ignores the optimization plan's implementation switches: whatever the plan, it computes
// the same function the plain way.
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "ops/convert.h"
#include "ops/attention_decode.h"
#include "ops/cross_entropy.h"
#include "ops/embedding.h"
#include "ops/quantize.h"
#include "ops/residual.h"
#include "ops/rmsnorm.h"
#include "ops/swiglu.h"

namespace tt {
namespace {

// The threads: OpenMP's (all cores, or OMP_NUM_THREADS) for the element-wise operations, and
// one for each OpenBLAS product unless OPENBLAS_NUM_THREADS says otherwise. OpenBLAS's own pool
// beside OpenMP's fights it for the cores: on two cores a small v1 step ran 17.5 ms (spread 4%)
// this way and 49.9 ms (spread 68%) with OpenBLAS's default threads.
void set_threads() {
  if (!std::getenv("OPENBLAS_NUM_THREADS")) openblas_set_num_threads(1);
}

template <class T>
class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const Plan& plan) : plan_(plan) { set_threads(); }

  std::string name() const override {
    return std::string("cpu ") + dtype_name(kT) + ", " + std::to_string(omp_get_max_threads()) + " threads";
  }
  bool is_cuda() const override { return false; }
  DType master_dtype() const override { return kT; }
  DType act_dtype() const override { return kT; }
  DType acc_dtype() const override { return kT; }
  const Plan& plan() const override { return plan_; }

  MemoryResource& memory() override { return memory_; }
  void layout_workspace(Arena&, const ModelShape&) override {}
  TensorSpec attention_saved(const AttnShape& s) const override {
    return {kT, int64_t(s.B) * s.H * s.T * s.T};  // the probabilities
  }

  void upload(const Tensor& dst, const void* host) override {
    std::memcpy(dst.ptr, host, dst.bytes());
  }
  void download(void* host, const Tensor& src) override {
    std::memcpy(host, src.ptr, src.bytes());
  }
  void zero(const Tensor& t) override { std::memset(t.ptr, 0, t.bytes()); }
  void convert(const Tensor& dst, const Tensor& src) override {
    TT_CHECK(dst.numel == src.numel, "convert: sizes differ");
    if (dst.dtype == src.dtype) return (void)std::memmove(dst.ptr, src.ptr, dst.bytes());
    if (dst.dtype == DType::F32 && src.dtype == DType::F64)
      ref::convert(dst.data<float>(), src.data<double>(), dst.numel);
    else if (dst.dtype == DType::F64 && src.dtype == DType::F32)
      ref::convert(dst.data<double>(), src.data<float>(), dst.numel);
    else
      fail(std::string("cpu backend cannot convert ") + dtype_name(src.dtype) + " to " +
           dtype_name(dst.dtype));
  }
  void synchronize() override {}

  void mark(int slot) override { marks_[slot] = Clock::now(); }
  double elapsed_ms(int from, int to) override {
    return std::chrono::duration<double, std::milli>(marks_[to] - marks_[from]).count();
  }

  void matmul(const Gemm& g) override {
    if (!g.c_in.empty() && g.c_in.ptr != g.c.ptr)  // C = ... + beta c_in: start C from c_in
      for (int i = 0; i < g.m; ++i)
        std::copy_n(g.c_in.data<T>() + i * g.ldc, g.n, g.c.data<T>() + i * g.ldc);
    if (is_fp8(g.a.dtype)) return fp8_matmul(g);
    ref::gemm(g, static_cast<T*>(nullptr), g.a.data<T>(), g.b.data<T>(), g.c.data<T>());
  }
  // FP8 operands (linear_gemm's form, see gemm.h): the product of their dequantized values in T.
  void fp8_matmul(const Gemm& g) {
    TT_CHECK(is_fp8(g.b.dtype) && !g.trans_a && g.trans_b, "matmul: FP8 products take linear_gemm's form");
    auto values = [](const Tensor& q, int64_t rows, int64_t cols, int64_t ld, const Tensor& factor) {
      std::vector<T> v(size_t(rows * cols));
      const Fp8Format f = fp8_format(q.dtype);
      const double s = double(factor.data<float>()[0]);
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j)
          v[size_t(i * cols + j)] = T(double(fp8_to_float(static_cast<const uint8_t*>(q.ptr)[i * ld + j], f)) * s);
      return v;
    };
    std::vector<T> a = values(g.a, g.m, g.k, g.lda, g.a_scale), b = values(g.b, g.n, g.k, g.ldb, g.b_scale);
    Gemm d = g;
    d.lda = d.ldb = g.k;
    ref::gemm(d, static_cast<T*>(nullptr), a.data(), b.data(), g.c.data<T>());
  }
  void fp8_quantize(const Fp8Matrix& out, const Tensor& x, int64_t r, int64_t c, Fp8Scaling scaling) override {
    ref::quantize_fp8(out, x.data<T>(), r, c, scaling);
  }
  void fp8_update_scales(const Tensor& slots, int count) override {
    ref::fp8_update_scales(slots.data<float>(), count);
  }
  void fp8_swiglu_forward(const Fp8Matrix& h8, const Tensor& gateup, int64_t n, int f, Fp8Scaling scaling) override {
    std::vector<T> h(size_t(n * f));
    ref::swiglu_forward(h.data(), gateup.data<T>(), n, f);
    ref::quantize_fp8(h8, h.data(), n, f, scaling);
  }
  void fp8_swiglu_backward(const Fp8Matrix& dgateup8, const Tensor& dh, const Tensor& gateup, int64_t n, int f,
                           Fp8Scaling scaling) override {
    std::vector<T> d(size_t(n * 2 * f));
    ref::swiglu_backward(d.data(), dh.data<T>(), gateup.data<T>(), n, f);
    ref::quantize_fp8(dgateup8, d.data(), n, 2 * int64_t(f), scaling);
  }
  void embedding_forward(const Tensor& out, const Tensor& tokens, const Tensor& wte, int64_t n,
                         int c) override {
    ref::embedding_forward(out.data<T>(), tokens.data<int32_t>(), wte.data<T>(), n, c);
  }
  void embedding_backward(const Tensor& dwte, const Tensor& dout, const Tensor& tokens,
                          int64_t n, int c, int) override {
    ref::embedding_backward(dwte.data<T>(), dout.data<T>(), tokens.data<int32_t>(), n, c);
  }
  void rmsnorm_forward(const Tensor& out, const Tensor& rstd, const Tensor& x, const Tensor& w,
                       int64_t n, int c, double eps) override {
    ref::rmsnorm_forward(out.data<T>(), rstd.data<T>(), x.data<T>(), w.data<T>(), n, c, eps);
  }
  void fp8_rmsnorm_forward(const Fp8Matrix& out8, const Tensor& rstd, const Tensor& x, const Tensor& w, int64_t n,
                           int c, double eps) override {
    std::vector<T> out(size_t(n * c));
    ref::rmsnorm_forward(out.data(), rstd.data<T>(), x.data<T>(), w.data<T>(), n, c, eps);
    ref::quantize_fp8(out8, out.data(), n, c, Fp8Scaling::Delayed);
  }
  void rmsnorm_backward(const Tensor& dx, const Tensor& dw, const Tensor& dout, const Tensor& x,
                        const Tensor& w, const Tensor& rstd, int64_t n, int c, bool add_dw) override {
    ref::rmsnorm_backward(dx.data<T>(), dw.data<T>(), dout.data<T>(), x.data<T>(), w.data<T>(),
                          rstd.data<T>(), n, c, false, add_dw);
  }
  void fp8_rmsnorm_backward(const Fp8Matrix& dx8, const Tensor& dx, const Tensor& dw, const Tensor& dout,
                            const Tensor& x, const Tensor& w, const Tensor& rstd, int64_t n, int c, bool add,
                            bool add_dw) override {
    ref::rmsnorm_backward(dx.data<T>(), dw.data<T>(), dout.data<T>(), x.data<T>(), w.data<T>(), rstd.data<T>(), n, c,
                          add, add_dw);
    ref::quantize_fp8(dx8, dx.data<T>(), n, c, Fp8Scaling::Delayed);
  }
  void add_rmsnorm_forward(const Tensor& sum, const Tensor& out, const Tensor& rstd, const Tensor& a, const Tensor& b,
                           const Tensor& w, int64_t n, int c, double eps) override {
    ref::add_rmsnorm_forward(sum.data<T>(), out.data<T>(), rstd.data<T>(), a.data<T>(), b.data<T>(), w.data<T>(), n, c,
                             eps);
  }
  void rmsnorm_backward_add(const Tensor& dres, const Tensor& dres_in, const Tensor& dw, const Tensor& dout,
                            const Tensor& x, const Tensor& w, const Tensor& rstd, int64_t n, int c, bool add_dw) override {
    if (dres_in.ptr != dres.ptr) std::copy(dres_in.data<T>(), dres_in.data<T>() + n * c, dres.data<T>());
    ref::rmsnorm_backward(dres.data<T>(), dw.data<T>(), dout.data<T>(), x.data<T>(), w.data<T>(), rstd.data<T>(), n, c,
                          true, add_dw);
  }
  void rope_forward(const Tensor& x, const Tensor& table, const RopeShape& s) override {
    ref::rope(x.data<T>(), table.data<T>(), s, false);
  }
  void rope_backward(const Tensor& dx, const Tensor& table, const RopeShape& s) override {
    ref::rope(dx.data<T>(), table.data<T>(), s, true);
  }
  void fp8_rope_backward(const Fp8Matrix& dx8, const Tensor& dx, const Tensor& table, const RopeShape& s,
                         Fp8Scaling scaling) override {
    std::vector<T> d(dx.data<T>(), dx.data<T>() + s.tokens * s.ld);
    ref::rope(d.data(), table.data<T>(), s, true);
    ref::quantize_fp8(dx8, d.data(), s.tokens, s.ld, scaling);
  }
  void attention_forward(const Tensor& att, const Tensor& saved, const Tensor& qkv,
                         const AttnShape& s) override {
    ref::attention_forward(att.data<T>(), saved.data<T>(), qkv.data<T>(), s);
  }
  void fp8_attention_forward(const Fp8Matrix& att8, const Tensor& att, const Tensor& saved, const Tensor& qkv,
                             const AttnShape& s) override {
    attention_forward(att, saved, qkv, s);
    ref::quantize_fp8(att8, att.data<T>(), int64_t(s.B) * s.T, int64_t(s.H) * s.D, Fp8Scaling::Delayed);
  }
  void attention_backward(const Tensor& dqkv, const Tensor& datt, const Tensor& qkv,
                          const Tensor&, const Tensor& saved, const AttnShape& s) override {
    ref::attention_backward(dqkv.data<T>(), datt.data<T>(), qkv.data<T>(), saved.data<T>(), s);
  }
  void attention_decode(const Tensor& out, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, int64_t len,
                        int64_t ld, const AttnShape& s) override {
    ref::attention_decode(out.data<T>(), q.data<T>(), k_cache.data<T>(), v_cache.data<T>(), len, ld, s);
  }
  void swiglu_forward(const Tensor& h, const Tensor& gateup, int64_t n, int f) override {
    ref::swiglu_forward(h.data<T>(), gateup.data<T>(), n, f);
  }
  void swiglu_backward(const Tensor& dgateup, const Tensor& dh, const Tensor& gateup, int64_t n,
                       int f) override {
    ref::swiglu_backward(dgateup.data<T>(), dh.data<T>(), gateup.data<T>(), n, f);
  }
  void add(const Tensor& out, const Tensor& a, const Tensor& b) override {
    TT_CHECK(a.numel == out.numel && b.numel == out.numel, "add: sizes differ");
    ref::add(out.data<T>(), a.data<T>(), b.data<T>(), out.numel);
  }
  void cross_entropy_forward(const Tensor& losses, const Tensor& logits, const Tensor& targets,
                             int64_t n, int v, int64_t ld) override {
    ref::cross_entropy_forward(losses.data<T>(), logits.data<T>(), targets.data<int32_t>(), n, v, ld);
  }
  void cross_entropy_backward(const Tensor& dlogits, const Tensor& logits, const Tensor& targets,
                              int64_t n, int v, int64_t ld, double scale) override {
    ref::cross_entropy_backward(dlogits.data<T>(), logits.data<T>(), targets.data<int32_t>(), n,
                                v, ld, scale);
  }
  void cross_entropy_fused(const Tensor& losses, const Tensor& logits, const Tensor& targets, int64_t n, int v,
                           int64_t ld, double scale) override {
    ref::cross_entropy_fused(losses.data<T>(), logits.data<T>(), targets.data<int32_t>(), n, v, ld, scale);
  }
  void fp8_cross_entropy_fused(const Fp8Matrix& dlogits8, const Tensor&, const Tensor& losses, const Tensor& logits,
                               const Tensor& targets, int64_t n, int v, int64_t ld, double scale) override {
    ref::cross_entropy_forward(losses.data<T>(), logits.data<T>(), targets.data<int32_t>(), n, v, ld);
    std::vector<T> d(size_t(n * ld));
    ref::cross_entropy_backward(d.data(), logits.data<T>(), targets.data<int32_t>(), n, v, ld, scale);
    ref::quantize_fp8(dlogits8, d.data(), n, ld, Fp8Scaling::Delayed);
  }
  void set_adamw_step(const AdamWStep& s) override { adamw_step_ = s; }
  void adamw(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v, const Tensor& p_act, bool decay,
             const Tensor& grad_sumsq) override {
    TT_CHECK(p_act.empty(), "cpu backend keeps no separate copy of the weights");
    ref::adamw(p.data<T>(), g.data<T>(), m.data<T>(), v.data<T>(), p.numel, adamw_step_, decay,
               grad_sumsq.empty() ? nullptr : grad_sumsq.data<T>());
  }
  void sum_squares(const Tensor& sumsq, const Tensor& g, bool accumulate) override {
    ref::sum_squares(sumsq.data<T>(), g.data<T>(), g.numel, accumulate);
  }
  std::string attention_kind() const override { return "reference (materialized, double loops)"; }

 private:
  using Clock = std::chrono::steady_clock;
  static constexpr DType kT = dtype_of<T>::value;
  Plan plan_;
  AdamWStep adamw_step_;
  HostMemory memory_;
  Clock::time_point marks_[kMaxMarks];
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(const Plan& plan) {
  return std::make_unique<CpuBackend<float>>(plan);
}

std::unique_ptr<Backend> make_cpu_backend_f64(const Plan& plan) {
  return std::make_unique<CpuBackend<double>>(plan);
}

}  // namespace tt
