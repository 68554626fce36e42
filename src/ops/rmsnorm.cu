// RMSNorm on the GPU (see rmsnorm.h for the contract).
//
// Version 1 splits it the way eager PyTorch does, one kernel per step: a row reduction for
// rstd, then an elementwise scaling; backward: a row reduction for the coefficient, an
// elementwise kernel for dx, and a two-stage column reduction for dw (partial sums over fixed
// row chunks, then the chunks in order), which keeps the weight gradient deterministic
// without atomics. x is read twice forward, g and x three times backward.
//
// Version 3 (custom-rmsnorm): one kernel each way, one warp per row, 16-byte accesses when
// the row length and the pointers allow it (scalar ones otherwise).
//   forward:  the row is read once, kept in registers (the part beyond kCachedForward vectors
//             per lane is re-read from cache), rstd and out computed from it. Moves n*c*2
//             elements (x, out) + n rstd floats + c elements of w.
//   backward: per row, g and x are read once for the dot product and the dx of that row. dw
//             needs the opposite reduction, down the columns, and it is done one of two ways:
//             - few rows (n <= kDwColumnRows): extra blocks of the same kernel compute dw,
//               kVec columns each, over all rows, while the others compute dx. One launch, no
//               partial sums; g and x are read a second time, from cache.
//             - more rows: the pass over a row also adds g*x*rstd into the warp's column sums
//               in shared memory; each block (a fixed chunk of rows) writes its column sums to
//               one row of `partial`, and a second kernel adds the chunks in order into dw.
//               That second launch costs about 1.5 us on the H100, so few rows skip it; but
//               the column blocks' time grows with n (each of their threads adds n / 256 rows,
//               with a few loads in flight at a time), so many rows need it.
//             Moves n*c*3 elements (g, x, dx) + n rstd floats + c elements of w + c floats of
//             dw (+ 2*chunks*c floats of partial sums). Rows longer than kSmemFloats take
//             version 1's kernels.
// The way and the chunking depend only on n and c, so the weight gradient is the same bits
// every run. Both versions share the second dw stage.
//
// Version 4 (fused-residual-norm): version 3's kernels with the residual add inside. The
// forward reads a and b, writes their sum (the residual stream) and the normalized row: one
// pass instead of an add kernel (a, b read, sum written) and a norm reading sum again. The
// backward adds dx into the residual stream's gradient instead of writing it for an add kernel
// to add. Both round the sum to the element type exactly as the add kernel does.
//
// Version 5 (fp8-fused-norm): where the norm's output feeds an FP8 product, the forward writes
// it straight in its FP8 forms, as quantize_fp8 makes them from what version 3's kernel writes
// (the same bytes), instead of the bf16 copy that a quantizing pass read again. A block takes 32
// rows, each row by one warp as in version 3 (the same sums in the same order), so that the
// transpose's runs are whole sectors: one pass moves four bytes an element (x read, a byte
// written in each layout), where the norm and the cast moved eight.
//
// Version 5 (fp8-fused-norm-backward): the backward with the residual add writes the residual
// stream's new gradient, which the next products (the layer's output product, the layer
// below's down product) take in FP8, in its FP8 forms too: the bytes and amax of the quantizing
// pass over what it stores. Each warp puts its rows' bytes in a shared tile of the block's chunk
// of rows, from which the block writes the transpose's columns. The chunks stay as they are (the
// weight gradient's sums keep their order and bits), so a column's run is the chunk's rows, at
// any byte: it is written a byte a lane. The quantizing pass read dres again (2 bytes an
// element) and wrote its forms; now the backward writes them as it makes dres.
#include <algorithm>
#include <type_traits>

#include "ops/cuda_common.cuh"
#include "ops/quantize.cuh"
#include "ops/rmsnorm.cuh"
#include "ops/rmsnorm.h"

namespace tt::cuda {
namespace {

constexpr int kThreads = kNormThreads;
constexpr int kRowsPerBlock = kThreads / 32;  // one warp per row in the row reductions
constexpr int kDwChunks = 64;                 // row chunks of version 1's first dw stage
constexpr int kSumSlices = 16;                // warps of the second dw stage, see rms_dw_sum_kernel
// Version 3: vectors per lane kept in registers between the reduction and the writes (longer
// rows re-read the rest, from cache; the counts keep the kernels at 64 and 80 registers
// without spills, 4 and 3 blocks per SM; 110 at 2 where the backward loads the residual gradient
// early, see kEarlyResidual), the shared memory of the backward's per-warp column
// sums, and its row chunks: one row per warp while the rows last (a small batch needs every
// block it can get: at 1024 rows of 512, with two dw stages, 128 chunks of one row per warp took
// 5.4 us on the H100, 32 chunks of four rows 9.2 us), but at most kMaxFusedChunks, one wave of 3
// blocks on each of the H100's 132 SMs, so that the partial sums stay small next to the rows.
constexpr int kCachedForward = 4;
constexpr int kSmemFloats = 48 * 1024 / 4;

// ---- version 1 ----

// rstd[i] = 1 / sqrt(mean(x[i]^2) + eps), one warp per row.
template <class T>
__global__ void rms_kernel(Successor next, float* rstd, const T* x, int64_t n, int c, float eps) {
  await_previous_kernel(next);
  const int64_t row = int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  if (row >= n) return;
  const T* xr = x + row * c;
  float sum = 0.0f;
  for (int j = threadIdx.x % 32; j < c; j += 32) {
    const float v = to_float(xr[j]);
    sum += v * v;
  }
  sum = warp_sum(sum);
  if (threadIdx.x % 32 == 0) rstd[row] = rsqrtf(sum / c + eps);
}

// out = x * rstd[row] * w[col]
template <class T>
__global__ void rms_scale_kernel(Successor next, T* out, const T* x, const float* rstd, const T* w, int64_t n, int c) {
  await_previous_kernel(next);
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n * c) return;
  const int64_t row = i / c;
  out[i] = from_float<T>(to_float(x[i]) * rstd[row] * to_float(w[i - row * c]));
}

// coef[i] = rstd^3 * mean_j(w g x), one warp per row.
template <class T>
__global__ void rms_backward_coef_kernel(Successor next, float* coef, const T* dout, const T* x, const T* w,
                                         const float* rstd, int64_t n, int c) {
  await_previous_kernel(next);
  const int64_t row = int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  if (row >= n) return;
  float dot = 0.0f;
  for (int j = threadIdx.x % 32; j < c; j += 32)
    dot += to_float(w[j]) * to_float(dout[row * c + j]) * to_float(x[row * c + j]);
  dot = warp_sum(dot);
  const float r = rstd[row];
  if (threadIdx.x % 32 == 0) coef[row] = r * r * r * dot / c;
}

// dx = rstd * w * g - x * coef
template <class T>
__global__ void rms_backward_dx_kernel(Successor next, T* dx, const T* dout, const T* x, const T* w, const float* rstd,
                                       const float* coef, int64_t n, int c) {
  await_previous_kernel(next);
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n * c) return;
  const int64_t row = i / c;
  dx[i] = from_float<T>(rstd[row] * to_float(w[i - row * c]) * to_float(dout[i]) - to_float(x[i]) * coef[row]);
}

// partial[chunk, j] = sum over the chunk's rows of g x rstd, rows in order.
template <class T>
__global__ void rms_dw_partial_kernel(Successor next, float* partial, const T* dout, const T* x, const float* rstd,
                                      int64_t n, int c) {
  await_previous_kernel(next);
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= c) return;
  const int64_t rows = (n + kDwChunks - 1) / kDwChunks;
  const int64_t begin = blockIdx.y * rows, end = min(n, begin + rows);
  float acc = 0.0f;
  for (int64_t i = begin; i < end; ++i) acc += to_float(dout[i * c + j]) * to_float(x[i * c + j]) * rstd[i];
  partial[int64_t(blockIdx.y) * c + j] = acc;
}

// ---- both versions: the second dw stage ----

// dw[j] = sum over the chunks k of partial[k, j] (added to dw with add_dw). A block covers 32 columns; its warp s adds
// chunks s, s + kSumSlices, ... in order, then the warps' sums are added in warp order: a
// fixed order, so the same bits every run.
__global__ void __launch_bounds__(32 * kSumSlices)
    rms_dw_sum_kernel(Successor next, float* dw, const float* partial, int c, int chunks, bool add_dw) {
  await_previous_kernel(next);
  __shared__ float slice_sum[kSumSlices][32];
  const int lane = threadIdx.x % 32, slice = threadIdx.x / 32, j = blockIdx.x * 32 + lane;
  float acc = 0.0f;
  if (j < c)
    for (int k = slice; k < chunks; k += kSumSlices) acc += partial[int64_t(k) * c + j];
  slice_sum[slice][lane] = acc;
  __syncthreads();
  if (slice != 0 || j >= c) return;
  float total = 0.0f;
  for (int s = 0; s < kSumSlices; ++s) total += slice_sum[s][lane];
  dw[j] = add_dw ? dw[j] + total : total;
}

// ---- version 3 ----

// One warp per row: x read once (the first kCachedForward vectors of each lane stay in
// registers), rstd and out written. Lane l takes the vectors l, l + 32, ... of the row. With
// kResidual (the fused-residual-norm switch) the row is x + b, written to `sum` as it is
// formed: the residual add and the norm after it in one pass.
template <class T, int kVec, bool kResidual>
__global__ void __launch_bounds__(kThreads, 4)
    rmsnorm_fused_forward_kernel(Successor next, T* out, float* rstd, T* sum, const T* x, const T* b, const T* w,
                                 int64_t n, int c, float eps) {
  await_previous_kernel(next);
  using V = Vec<T, kVec>;
  const int64_t row = int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  if (row >= n) return;
  const int lane = threadIdx.x % 32, nv = c / kVec;
  const T* xr = x + row * c;
  T* outr = out + row * c;
  auto row_vector = [&](int j) {  // element j on: x, or x + b, written to sum
    if (!kResidual) return V::load(xr + j);
    const V v = added(V::load(xr + j), V::load(b + row * c + j));
    v.store(sum + row * c + j);
    return v;
  };
  constexpr int kCached = kResidual ? kCachedForward - 1 : kCachedForward;  // the add's loads need registers too
  V cached[kCached];
  float sq = 0.0f;
#pragma unroll
  for (int k = 0; k < kCached; ++k)
    if (lane + 32 * k < nv) {
      cached[k] = row_vector((lane + 32 * k) * kVec);
      sq += sum_squares(cached[k]);
    }
  for (int v = lane + 32 * kCached; v < nv; v += 32) sq += sum_squares(row_vector(v * kVec));
  const float r = row_rstd(sq, c, eps);
  if (lane == 0) rstd[row] = r;
#pragma unroll
  for (int k = 0; k < kCached; ++k) {
    const int j = (lane + 32 * k) * kVec;
    if (j < c) scaled(cached[k], r, V::load(w + j)).store(outr + j);
  }
  const T* again = kResidual ? sum + row * c : xr;  // this lane's own writes, read back
  for (int j = (lane + 32 * kCached) * kVec; j < c; j += 32 * kVec)
    scaled(V::load(again + j), r, V::load(w + j)).store(outr + j);
}

// ---- version 5 ----

// Rows a block: the transpose's runs are 32 bytes, a whole sector, and the 512 blocks of
// gpt2-small's 16384 rows all fit the SMs at once. (64 rows made 256 blocks, two uneven waves,
// and saved 0.04 ms of an H200 step where 32 save 0.31: docs/versions/v5.md.)
constexpr int kFp8NormRows = 32;

// Rows r0 .. r0 + kFp8NormRows - 1 normalized as rmsnorm_fused_forward_kernel<bf16_t, 8, false>
// normalizes them (one warp a row, lane l summing vectors l, l + 32, ...: the same rstd, the same
// bf16 values), then each value times the slot's scale into FP8: the row-major bytes (f8.rows, if
// any), and a shared tile written out transposed in 4 x 4 blocks (f8.cols, if any; quantize.cuh's
// store_transposed: 19.5 -> 18.9 us at gpt2-small against each lane gathering a 16-byte run a
// byte at a time, docs/versions/v5.md). The
// amax of the bf16 values joins the slot's, as the quantizing pass records it.
__global__ void __launch_bounds__(kThreads)
    rmsnorm_fp8_kernel(Successor next, Fp8Out f8, float* rstd, const bf16_t* x, const bf16_t* w, int64_t n, int c,
                       float eps) {
  extern __shared__ __align__(16) uint8_t tile[];  // [kFp8NormRows][fp8_transpose_pitch(c)]
  __shared__ float scratch[32];
  await_previous_kernel(next);
  using V = Vec<bf16_t, 8>;
  const int pitch = fp8_transpose_pitch(c), lane = threadIdx.x % 32, nv = c / 8;
  const int64_t r0 = int64_t(blockIdx.x) * kFp8NormRows;
  const float scale = f8.slot[1];
  float amax = 0.0f;
  for (int i = threadIdx.x / 32; i < kFp8NormRows && r0 + i < n; i += kThreads / 32) {
    const int64_t row = r0 + i;
    const bf16_t* xr = x + row * c;
    float sq = 0.0f;
    for (int v = lane; v < nv; v += 32) sq += sum_squares(V::load(xr + v * 8));
    const float r = row_rstd(sq, c, eps);
    if (lane == 0) rstd[row] = r;
    for (int v = lane; v < nv; v += 32) {
      const uint2 bytes = fp8_chunk(scaled(V::load(xr + v * 8), r, V::load(w + v * 8)).v, scale, f8.format, amax);
      if (f8.rows) *reinterpret_cast<uint2*>(f8.rows + row * f8.ld + v * 8) = bytes;
      uint32_t* at = reinterpret_cast<uint32_t*>(tile + i * pitch + v * 8);  // 4-byte aligned
      at[0] = bytes.x;
      at[1] = bytes.y;
    }
  }
  if (f8.cols) {
    __syncthreads();
    store_transposed<kThreads, kFp8NormRows>(f8.cols + r0, f8.ld_t, f8.wide_t, tile, pitch, c,
                                             n - r0 < kFp8NormRows ? int(n - r0) : kFp8NormRows);
  }
  amax = block_max(amax, scratch);
  if (threadIdx.x == 0) atomicMax(reinterpret_cast<unsigned*>(f8.slot + 2), __float_as_uint(amax));  // >= 0: ordered as bits
}

// The one-kernel backward, a block each (rmsnorm.cuh).
template <class T, int kVec, bool kPartialDw, bool kAddDx, bool kFp8>
__global__ void __launch_bounds__(kThreads, kEarlyResidual<kPartialDw, kAddDx> ? 2 : 3)
    rmsnorm_fused_backward_kernel(Successor next, T* dx, const T* dx_in, float* dw_or_partial, const T* dout,
                                  const T* x, const T* w, const float* rstd, int64_t n, int c, int64_t rows_per_chunk,
                                  int chunks, bool add_dw, Fp8Out f8) {
  extern __shared__ float warp_dw[];
  await_previous_kernel(next);
  rmsnorm_fused_backward_block<T, kVec, kPartialDw, kAddDx, kFp8>(dx, dx_in, dw_or_partial, dout, x, w, rstd, n, c,
                                                                 rows_per_chunk, chunks, add_dw, f8, int(blockIdx.x),
                                                                 warp_dw);
}

// The fused backward keeps c floats of column sums per warp in 48 KB of shared memory: 8
// warps up to c = 1536, fewer above, and version 1's kernels beyond c = kSmemFloats.
bool fused_backward_fits(int c) { return c <= kSmemFloats; }
int fused_backward_warps(int c) { return std::min(kThreads / 32, kSmemFloats / c); }

void launch_dw_sum(const Tensor& dw, const float* partial, int c, int chunks, bool add_dw, Stream s) {
  launch("rms_dw_sum_kernel", rms_dw_sum_kernel, blocks_for(c, 32), 32 * kSumSlices, 0, s, dw.data<float>(), partial, c,
         chunks, add_dw);
}

}  // namespace

int64_t rmsnorm_scratch_numel(int64_t n, int c, bool fused) {
  if (fused && fused_backward_fits(c)) return n > kDwColumnRows ? int64_t(kMaxFusedChunks) * c : 0;
  return n + int64_t(kDwChunks) * c;
}

namespace {

// The one-kernel forward, with the residual add (sum = x + b) or without (sum, b empty).
void launch_fused_forward(const Tensor& out, const Tensor& rstd, const Tensor& sum, const Tensor& x, const Tensor& b,
                          const Tensor& w, int64_t n, int c, float eps, Stream s) {
  TT_DISPATCH_ACT(x.dtype, {
    with_vec_width<T>(fits_vec16<T>(c, {out.ptr, x.ptr, w.ptr, sum.ptr, b.ptr}), [&](auto vec) {
      constexpr int kVec = decltype(vec)::value;
      auto go = [&](auto kernel) {
        launch("rmsnorm_fused_forward_kernel", kernel, blocks_for(n, kRowsPerBlock), kThreads, 0, s,
               static_cast<T*>(out.ptr), rstd.data<float>(), static_cast<T*>(sum.ptr), static_cast<const T*>(x.ptr),
               static_cast<const T*>(b.ptr), static_cast<const T*>(w.ptr), n, c, eps);
      };
      if (sum.empty()) go(rmsnorm_fused_forward_kernel<T, kVec, false>);
      else go(rmsnorm_fused_forward_kernel<T, kVec, true>);
    });
  });
}

// How the one-kernel backward splits n rows of c: row chunks of blocks with `warps` warps, and
// with partial_dw the column sums a chunk (more rows than kDwColumnRows), else column blocks.
struct BackwardChunks {
  bool partial_dw;
  int warps, chunks;
  int64_t rows_per_chunk;
  size_t smem;  // the column sums (partial_dw)
};
BackwardChunks backward_chunks(int64_t n, int c) {
  BackwardChunks b{};
  b.partial_dw = n > kDwColumnRows;
  b.warps = b.partial_dw ? fused_backward_warps(c) : kThreads / 32;
  b.chunks = norm_row_chunks(n, b.warps);
  b.rows_per_chunk = (n + b.chunks - 1) / b.chunks;
  b.smem = b.partial_dw ? size_t(b.warps) * c * sizeof(float) : 0;
  return b;
}
// The FP8 tile's bytes (fp8-fused-norm-backward), after the column sums; and the most that
// three blocks an SM may take together.
size_t fp8_backward_tile_bytes(const BackwardChunks& b, int c) {
  return std::max(size_t(b.rows_per_chunk) * fp8_tile_pitch(c), kThreads / 32 * sizeof(float));  // block_max's scratch too
}
constexpr size_t kFp8BackwardSmem = 72 * 1024;

// The one-kernel backward (c <= kSmemFloats), dx written (with add_dx: dx_in + dx, dx_in dx itself
// or a tensor apart) and dw written or, with add_dw, added to; with dx8, dx also in its FP8 forms.
void launch_fused_backward(const Tensor& dx, const Tensor& dx_in, const Tensor& dw, const Tensor& dout,
                           const Tensor& x, const Tensor& w, const Tensor& rstd, int64_t n, int c, bool add_dx,
                           bool add_dw, const Tensor& scratch, Stream s, const Fp8Matrix& dx8 = {}) {
  const BackwardChunks b = backward_chunks(n, c);
  auto go = [&](auto kernel, auto* dxp, unsigned blocks, size_t smem, float* dw_or_partial, Fp8Out f8) {
    using T = std::remove_pointer_t<decltype(dxp)>;
    if (smem > 48 * 1024)
      CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    launch("rmsnorm_fused_backward_kernel", kernel, blocks, 32 * b.warps, smem, s, dxp,
           static_cast<const T*>(dx_in.ptr), dw_or_partial, static_cast<const T*>(dout.ptr),
           static_cast<const T*>(x.ptr), static_cast<const T*>(w.ptr), rstd.data<float>(), n, c, b.rows_per_chunk,
           b.chunks, add_dw, f8);
  };
  // The kernel for (partial_dw, add_dx): pick(partial, add) gives its instantiation, kVec wide.
  auto run = [&](auto pick, auto* dxp, int vec, Fp8Out f8, size_t smem) {
    if (b.partial_dw) {
      float* partial = scratch.data<float>();
      if (add_dx) go(pick(std::true_type{}, std::true_type{}), dxp, b.chunks, smem, partial, f8);
      else go(pick(std::true_type{}, std::false_type{}), dxp, b.chunks, smem, partial, f8);
      launch_dw_sum(dw, partial, c, b.chunks, add_dw, s);
    } else if (add_dx) {
      go(pick(std::false_type{}, std::true_type{}), dxp, b.chunks + c / vec, smem, dw.data<float>(), f8);
    } else {
      go(pick(std::false_type{}, std::false_type{}), dxp, b.chunks + c / vec, smem, dw.data<float>(), f8);
    }
  };
  if (!dx8.slot.empty()) {
    TT_CHECK(!dx8.rows.empty() && !dx8.cols.empty(), "rmsnorm_backward_fp8: both FP8 layouts");
    const Fp8Out f8 = fp8_out(dx8, n, c);
    auto pick = [](auto partial, auto add) {
      return rmsnorm_fused_backward_kernel<bf16_t, 8, decltype(partial)::value, decltype(add)::value, true>;
    };
    return run(pick, static_cast<bf16_t*>(dx.ptr), 8, f8, b.smem + fp8_backward_tile_bytes(b, c));
  }
  TT_DISPATCH_ACT(x.dtype, {
    T* dxp = static_cast<T*>(dx.ptr);
    with_vec_width<T>(fits_vec16<T>(c, {dxp, dout.ptr, x.ptr, w.ptr}), [&](auto vec) {
      constexpr int kVec = decltype(vec)::value;
      auto pick = [](auto partial, auto add) {
        return rmsnorm_fused_backward_kernel<T, kVec, decltype(partial)::value, decltype(add)::value, false>;
      };
      run(pick, dxp, kVec, Fp8Out{}, b.smem);
    });
  });
}

}  // namespace

bool rmsnorm_fp8_fits(const Tensor& x, const Tensor& w, int c) {
  return x.dtype == DType::BF16 && fp8_norm_width_fits(c) && aligned16(x.ptr) && aligned16(w.ptr);
}

void rmsnorm_forward_fp8(const Fp8Matrix& out8, const Tensor& rstd, const Tensor& x, const Tensor& w, int64_t n, int c,
                         float eps, Stream s) {
  TT_CHECK(rmsnorm_fp8_fits(x, w, c), "rmsnorm_forward_fp8: bf16 rows of a multiple of 8 elements, up to 6144, on "
                                      "16-byte boundaries");
  const Fp8Out f8 = fp8_out(out8, n, c);
  const size_t smem = size_t(kFp8NormRows) * fp8_transpose_pitch(c);
  CUDA_CHECK(cudaFuncSetAttribute(rmsnorm_fp8_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  launch("rmsnorm_fp8_kernel", rmsnorm_fp8_kernel, blocks_for(n, kFp8NormRows), kThreads, smem, s, f8,
         rstd.data<float>(), static_cast<const bf16_t*>(x.ptr), static_cast<const bf16_t*>(w.ptr), n, c, eps);
}

void rmsnorm_forward(const Tensor& out, const Tensor& rstd, const Tensor& x, const Tensor& w, int64_t n, int c,
                     float eps, bool fused, Stream s) {
  if (fused) return launch_fused_forward(out, rstd, Tensor{}, x, Tensor{}, w, n, c, eps, s);
  TT_DISPATCH_ACT(x.dtype, {
    launch("rms_kernel", rms_kernel<T>, blocks_for(n, kRowsPerBlock), kThreads, 0, s, rstd.data<float>(),
           static_cast<const T*>(x.ptr), n, c, eps);
    launch("rms_scale_kernel", rms_scale_kernel<T>, blocks_for(n * c, kThreads), kThreads, 0, s,
           static_cast<T*>(out.ptr), static_cast<const T*>(x.ptr), rstd.data<float>(), static_cast<const T*>(w.ptr), n,
           c);
  });
}

void add_rmsnorm_forward(const Tensor& sum, const Tensor& out, const Tensor& rstd, const Tensor& a, const Tensor& b,
                         const Tensor& w, int64_t n, int c, float eps, Stream s) {
  launch_fused_forward(out, rstd, sum, a, b, w, n, c, eps, s);
}

bool residual_rmsnorm_fits(int c) { return fused_backward_fits(c); }

void rmsnorm_backward(const Tensor& dx, const Tensor& dw, const Tensor& dout, const Tensor& x, const Tensor& w,
                      const Tensor& rstd, int64_t n, int c, bool add_dw, bool fused, const Tensor& scratch, Stream s) {
  fused = fused && fused_backward_fits(c);
  TT_CHECK(scratch.numel >= rmsnorm_scratch_numel(n, c, fused), "rmsnorm scratch too small");
  if (fused) return launch_fused_backward(dx, dx, dw, dout, x, w, rstd, n, c, false, add_dw, scratch, s);
  TT_DISPATCH_ACT(x.dtype, {
    T* dxp = static_cast<T*>(dx.ptr);
    const T* g = static_cast<const T*>(dout.ptr);
    const T* xp = static_cast<const T*>(x.ptr);
    const T* wp = static_cast<const T*>(w.ptr);
    float* coef = scratch.data<float>();
    float* partial = coef + n;
    launch("rms_backward_coef_kernel", rms_backward_coef_kernel<T>, blocks_for(n, kRowsPerBlock), kThreads, 0, s, coef,
           g, xp, wp, rstd.data<float>(), n, c);
    launch("rms_backward_dx_kernel", rms_backward_dx_kernel<T>, blocks_for(n * c, kThreads), kThreads, 0, s, dxp, g, xp,
           wp, rstd.data<float>(), coef, n, c);
    launch("rms_dw_partial_kernel", rms_dw_partial_kernel<T>, dim3(blocks_for(c, kThreads), kDwChunks), kThreads, 0, s,
           partial, g, xp, rstd.data<float>(), n, c);
    launch_dw_sum(dw, partial, c, kDwChunks, add_dw, s);
  });
}

void rmsnorm_backward_add(const Tensor& dres, const Tensor& dres_in, const Tensor& dw, const Tensor& dout,
                          const Tensor& x, const Tensor& w, const Tensor& rstd, int64_t n, int c, bool add_dw,
                          const Tensor& scratch, Stream s) {
  TT_CHECK(fused_backward_fits(c) && scratch.numel >= rmsnorm_scratch_numel(n, c, true), "rmsnorm scratch too small");
  TT_CHECK(dres_in.dtype == dres.dtype && dres_in.numel >= n * c,
           "rmsnorm_backward_add: dres_in of dres's type and size");
  launch_fused_backward(dres, dres_in, dw, dout, x, w, rstd, n, c, true, add_dw, scratch, s);
}

bool rmsnorm_backward_fp8_fits(const Tensor& dx, const Tensor& dout, const Tensor& x, const Tensor& w, int64_t n,
                               int c) {
  if (dx.dtype != DType::BF16 || !fused_backward_fits(c) || !fits_vec16<bf16_t>(c, {dx.ptr, dout.ptr, x.ptr, w.ptr}))
    return false;
  const BackwardChunks b = backward_chunks(n, c);
  return b.smem + fp8_backward_tile_bytes(b, c) <= kFp8BackwardSmem;
}

void rmsnorm_backward_fp8(const Fp8Matrix& dx8, const Tensor& dx, const Tensor& dw, const Tensor& dout,
                          const Tensor& x, const Tensor& w, const Tensor& rstd, int64_t n, int c, bool add_dx,
                          bool add_dw, const Tensor& scratch, Stream s) {
  TT_CHECK(rmsnorm_backward_fp8_fits(dx, dout, x, w, n, c) && scratch.numel >= rmsnorm_scratch_numel(n, c, true),
           "rmsnorm_backward_fp8: bf16 rows of a multiple of 8 elements on 16-byte boundaries whose tile fits");
  TT_CHECK(!dx8.slot.empty(), "rmsnorm_backward_fp8: no FP8 output");
  launch_fused_backward(dx, dx, dw, dout, x, w, rstd, n, c, add_dx, add_dw, scratch, s, dx8);
}

}  // namespace tt::cuda
