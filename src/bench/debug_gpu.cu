// The GPU stages of `tiny_llama debug` (see debug_stages.h): small, self-contained kernels and
// cuBLAS calls on their own stream, timed with CUDA events (warm-up, then the median).
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <vector>

#include "core/cuda_check.h"
#include "bench/debug_stages.h"
#include "bench/event_timer.h"
#include "core/rng.h"

namespace tt {
namespace {

template <class T>
class DeviceArray {
 public:
  explicit DeviceArray(size_t n) : n_(n) { CUDA_CHECK(cudaMalloc(&p_, n * sizeof(T))); }
  ~DeviceArray() { cudaFree(p_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  T* get() const { return p_; }
  void upload(const std::vector<T>& h) {
    CUDA_CHECK(cudaMemcpy(p_, h.data(), n_ * sizeof(T), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaDeviceSynchronize());  // the stages' stream does not wait for the legacy stream
  }
  std::vector<T> download() const {
    std::vector<T> h(n_);
    CUDA_CHECK(cudaMemcpy(h.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
  }

 private:
  T* p_ = nullptr;
  size_t n_;
};

// A stream, a cuBLAS handle bound to it, and an event timer on it.
class Gpu {
 public:
  Gpu() {
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    CUBLAS_CHECK(cublasCreate(&blas));
    CUBLAS_CHECK(cublasSetStream(blas, stream));
    timer = std::make_unique<EventTimer>(stream);
  }
  ~Gpu() {
    timer.reset();
    cublasDestroy(blas);
    cudaStreamDestroy(stream);
  }
  Gpu(const Gpu&) = delete;
  Gpu& operator=(const Gpu&) = delete;

  // Median milliseconds of `launch` between two events, after two untimed calls.
  template <class F>
  double median_ms(F launch, int repeats) {
    return timer->median_ms(launch, 2, repeats);
  }

  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  std::unique_ptr<EventTimer> timer;
};

std::vector<float> random_values(size_t n, uint64_t stream) {
  const CounterRng rng(42, kStreamTest + stream);
  std::vector<float> v(n);
#pragma omp parallel for
  for (int64_t i = 0; i < int64_t(n); ++i) v[size_t(i)] = float(2 * rng.uniform(uint64_t(i)) - 1);
  return v;
}

// ---- layout ---------------------------------------------------------------------------

// y[r, c] = silu(x[r, c]) with x read at r * row_stride + c * col_stride. Thread i writes
// element i of y (row-major): with a contiguous x (strides cols, 1) neighbouring threads read
// neighbouring addresses; with a transposed view (strides 1, rows) they read `rows` apart.
__global__ void silu_kernel(float* y, const float* x, int rows, int cols, int64_t row_stride, int64_t col_stride) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= int64_t(rows) * cols) return;
  const int64_t r = i / cols, c = i % cols;
  const float v = x[r * row_stride + c * col_stride];
  y[i] = v / (1.0f + __expf(-v));
}

// out[c, r] = in[r, c] for in [rows, cols] row-major, through a 32 x 32 tile in shared memory so
// that both the reads and the writes of a warp are contiguous. Blocks of 32 x 8 threads.
__global__ void transpose_kernel(float* out, const float* in, int rows, int cols) {
  __shared__ float tile[32][33];  // one column of padding: no bank conflicts on the transposed read
  const int c = blockIdx.x * 32 + threadIdx.x;
  for (int j = threadIdx.y; j < 32; j += 8) {
    const int r = blockIdx.y * 32 + j;
    if (r < rows && c < cols) tile[j][threadIdx.x] = in[int64_t(r) * cols + c];
  }
  __syncthreads();
  const int r = blockIdx.y * 32 + threadIdx.x;
  for (int j = threadIdx.y; j < 32; j += 8) {
    const int oc = blockIdx.x * 32 + j;
    if (oc < cols && r < rows) out[int64_t(oc) * rows + r] = tile[threadIdx.x][j];
  }
}

// ---- gemm -----------------------------------------------------------------------------

// C[m, n] = A[m, k] B[k, n], row-major fp32: one thread per element of C, every operand read
// from global memory.
__global__ void gemm_naive(float* C, const float* A, const float* B, int m, int n, int k) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x, row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= m || col >= n) return;
  float sum = 0;
  for (int i = 0; i < k; ++i) sum += A[int64_t(row) * k + i] * B[int64_t(i) * n + col];
  C[int64_t(row) * n + col] = sum;
}

// The same product through 32 x 32 tiles of A and B staged in shared memory: each element is
// read from global memory once per tile instead of once per product term.
constexpr int kTile = 32;
__global__ void gemm_tiled(float* C, const float* A, const float* B, int m, int n, int k) {
  __shared__ float As[kTile][kTile], Bs[kTile][kTile];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int col = blockIdx.x * kTile + tx, row = blockIdx.y * kTile + ty;
  float sum = 0;
  for (int t = 0; t < k; t += kTile) {
    As[ty][tx] = row < m && t + tx < k ? A[int64_t(row) * k + t + tx] : 0.0f;
    Bs[ty][tx] = t + ty < k && col < n ? B[int64_t(t + ty) * n + col] : 0.0f;
    __syncthreads();
    for (int i = 0; i < kTile; ++i) sum += As[ty][i] * Bs[i][tx];
    __syncthreads();
  }
  if (row < m && col < n) C[int64_t(row) * n + col] = sum;
}

// Row-major C = A B through column-major cuBLAS: C^T = B^T A^T. fp32 accumulation; C is fp32.
void cublas_gemm(const Gpu& g, float* C, const void* A, const void* B, cudaDataType_t ab, int m, int n, int k) {
  const float alpha = 1, beta = 0;
  CUBLAS_CHECK(cublasGemmEx(g.blas, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha, B, ab, n, A, ab, k, &beta, C,
                            CUDA_R_32F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

double max_error(const std::vector<float>& c, const std::vector<float>& ref) {
  double err = 0, scale = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    err = std::max(err, std::fabs(double(c[i]) - ref[i]));
    scale = std::max(scale, std::fabs(double(ref[i])));
  }
  return scale > 0 ? err / scale : err;
}

}  // namespace

LayoutTimes measure_layout(int rows, int cols, int repeats) {
  Gpu g;
  const size_t n = size_t(rows) * cols;
  DeviceArray<float> xt(n), x(n), y_fast(n), y_slow(n);
  xt.upload(random_values(n, 1));  // xt: the data stored transposed, [cols, rows]
  const int threads = 256;
  const unsigned blocks = unsigned((n + threads - 1) / threads);
  const dim3 tgrid((rows + 31) / 32, (cols + 31) / 32), tblock(32, 8);
  auto transpose = [&] {
    transpose_kernel<<<tgrid, tblock, 0, g.stream>>>(x.get(), xt.get(), cols, rows);
    CUDA_CHECK_LAUNCH("transpose_kernel");
  };
  auto contiguous = [&] {
    silu_kernel<<<blocks, threads, 0, g.stream>>>(y_fast.get(), x.get(), rows, cols, cols, 1);
    CUDA_CHECK_LAUNCH("silu_kernel");
  };
  auto strided = [&] {
    silu_kernel<<<blocks, threads, 0, g.stream>>>(y_slow.get(), xt.get(), rows, cols, 1, rows);
    CUDA_CHECK_LAUNCH("silu_kernel");
  };
  LayoutTimes t;
  t.rows = rows, t.cols = cols;
  t.transpose_ms = g.median_ms(transpose, repeats);
  t.contiguous_ms = g.median_ms(contiguous, repeats);
  t.strided_ms = g.median_ms(strided, repeats);
  CUDA_CHECK(cudaStreamSynchronize(g.stream));
  t.same_result = y_fast.download() == y_slow.download();
  return t;
}

SyncTimes measure_sync(int size, int gemms, int repeats) {
  Gpu g;
  const size_t n = size_t(size) * size;
  DeviceArray<float> a(n), b(n), c(n);
  a.upload(random_values(n, 2));
  b.upload(random_values(n, 3));
  auto launch_all = [&] {
    for (int i = 0; i < gemms; ++i) cublas_gemm(g, c.get(), a.get(), b.get(), CUDA_R_32F, size, size, size);
  };
  using clock = std::chrono::steady_clock;
  auto ms_since = [](clock::time_point t0) { return std::chrono::duration<double, std::milli>(clock::now() - t0).count(); };
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  };
  SyncTimes t;
  t.gemms = gemms, t.size = size;
  launch_all();  // warm-up: cuBLAS picks its kernel and loads it
  CUDA_CHECK(cudaStreamSynchronize(g.stream));
  std::vector<double> no_sync, host_sync;
  for (int r = 0; r < repeats; ++r) {
    clock::time_point t0 = clock::now();
    launch_all();
    no_sync.push_back(ms_since(t0));  // the launches only: the GPU is still working
    CUDA_CHECK(cudaStreamSynchronize(g.stream));
    t0 = clock::now();
    launch_all();
    CUDA_CHECK(cudaStreamSynchronize(g.stream));
    host_sync.push_back(ms_since(t0));
  }
  t.no_sync_ms = median(no_sync);
  t.host_sync_ms = median(host_sync);
  t.events_ms = g.median_ms(launch_all, repeats);
  return t;
}

GemmTimes measure_gemm(int m, int n, int k, int repeats) {
  Gpu g;
  const std::vector<float> a = random_values(size_t(m) * k, 4), b = random_values(size_t(k) * n, 5);
  std::vector<__nv_bfloat16> a16(a.size()), b16(b.size());
  for (size_t i = 0; i < a.size(); ++i) a16[i] = __float2bfloat16(a[i]);
  for (size_t i = 0; i < b.size(); ++i) b16[i] = __float2bfloat16(b[i]);
  DeviceArray<float> da(a.size()), db(b.size()), c_ref(size_t(m) * n), c(size_t(m) * n);
  DeviceArray<__nv_bfloat16> da16(a16.size()), db16(b16.size());
  da.upload(a), db.upload(b), da16.upload(a16), db16.upload(b16);

  GemmTimes t;
  t.m = m, t.n = n, t.k = k;
  t.cublas_fp32_ms = g.median_ms([&] { cublas_gemm(g, c_ref.get(), da.get(), db.get(), CUDA_R_32F, m, n, k); }, repeats);
  const std::vector<float> ref = c_ref.download();
  t.cublas_bf16_ms = g.median_ms([&] { cublas_gemm(g, c.get(), da16.get(), db16.get(), CUDA_R_16BF, m, n, k); }, repeats);
  t.bf16_error = max_error(c.download(), ref);
  const dim3 naive_block(16, 16), naive_grid((n + 15) / 16, (m + 15) / 16);
  t.naive_ms = g.median_ms(
      [&] {
        gemm_naive<<<naive_grid, naive_block, 0, g.stream>>>(c.get(), da.get(), db.get(), m, n, k);
        CUDA_CHECK_LAUNCH("gemm_naive");
      },
      repeats);
  t.naive_error = max_error(c.download(), ref);
  const dim3 tiled_block(kTile, kTile), tiled_grid((n + kTile - 1) / kTile, (m + kTile - 1) / kTile);
  t.tiled_ms = g.median_ms(
      [&] {
        gemm_tiled<<<tiled_grid, tiled_block, 0, g.stream>>>(c.get(), da.get(), db.get(), m, n, k);
        CUDA_CHECK_LAUNCH("gemm_tiled");
      },
      repeats);
  t.tiled_error = max_error(c.download(), ref);
  return t;
}

}  // namespace tt
