// FP8 quantization of a stored matrix, and the delayed scales' update (see quantize.h; the pass
// itself is quantize.cuh's, shared with the kernels that quantize what they make).
#include "ops/quantize.cuh"

namespace tt::cuda {
namespace {

// The values of a stored [r, c] matrix (rows contiguous, on a 16-byte boundary).
template <class T>
struct StoredMatrix {
  const T* x;
  int64_t c;
  __device__ __forceinline__ void load(int64_t row, int64_t col, float (&v)[kQuantizeChunk]) const {
    const Vec<T, kQuantizeChunk> chunk = Vec<T, kQuantizeChunk>::load(x + row * c + col);
#pragma unroll
    for (int k = 0; k < kQuantizeChunk; ++k) v[k] = to_float(chunk.v[k]);
  }
};

__global__ void update_scales_kernel(Successor next, float* slots, int count) {
  await_previous_kernel(next);
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < count) fp8_roll_slot(slots + int64_t(i) * kFp8SlotFloats);
}

}  // namespace

void quantize_fp8(const Fp8Matrix& out, const Tensor& x, int64_t r, int64_t c, Fp8Scaling scaling,
                  const Tensor& partials, Stream s) {
  TT_CHECK(x.numel == r * c && aligned16(x.ptr), "quantize_fp8: x must be [r, c], on a 16-byte boundary");
  TT_DISPATCH_ACT(x.dtype,
                  { quantize_from(out, StoredMatrix<T>{static_cast<const T*>(x.ptr), c}, r, c, scaling, partials, s); });
}

void fp8_update_scales(const Tensor& slots, int count, Stream s) {
  TT_CHECK(slots.dtype == DType::F32 && slots.numel >= int64_t(count) * kFp8SlotFloats, "fp8_update_scales: slots");
  if (count == 0) return;
  launch("fp8_update_scales_kernel", update_scales_kernel, blocks_for(count, 128), 128, 0, s,
         static_cast<float*>(slots.ptr), count);
}

}  // namespace tt::cuda
