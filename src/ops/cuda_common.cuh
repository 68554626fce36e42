// Shared pieces of the CUDA kernels: element-type conversions, vector accesses, warp and
// block reductions, and the dispatch from a tensor's dtype to the kernel instantiation for it.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <utility>

#include "core/cuda_check.h"
#include "core/error.h"
#include "core/stream.h"
#include "core/tensor.h"

namespace tt::cuda {

using bf16_t = __nv_bfloat16;

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(bf16_t x) { return __bfloat162float(x); }
template <class T> __device__ __forceinline__ T from_float(float x);
template <> __device__ __forceinline__ float from_float<float>(float x) { return x; }
template <> __device__ __forceinline__ bf16_t from_float<bf16_t>(float x) { return __float2bfloat16_rn(x); }

// The unsigned type of a plain access of kBytes bytes (at most 16: one vector instruction).
template <int kBytes> struct RawWord;
template <> struct RawWord<2> { using type = unsigned short; };
template <> struct RawWord<4> { using type = unsigned; };
template <> struct RawWord<8> { using type = uint2; };
template <> struct RawWord<16> { using type = uint4; };

// kN consecutive elements moved with the widest accesses their size allows: with
// kN = kVec16<T>, one 16-byte load or store (8 bf16 or 4 fp32); with kN = 1, the plain scalar
// access. load and store go through integer words, so that the compiler cannot split them
// into element accesses. The address must be a multiple of the vector's size.
template <class T, int kN>
struct alignas(sizeof(T) * kN) Vec {
  static constexpr int kBytes = int(sizeof(T)) * kN;
  using Word = typename RawWord<(kBytes < 16 ? kBytes : 16)>::type;
  static constexpr int kWords = kBytes / int(sizeof(Word));
  T v[kN];

  __device__ __forceinline__ static Vec load(const T* p) {
    Vec out;
#pragma unroll
    for (int i = 0; i < kWords; ++i) reinterpret_cast<Word*>(out.v)[i] = reinterpret_cast<const Word*>(p)[i];
    return out;
  }
  __device__ __forceinline__ void store(T* p) const {
#pragma unroll
    for (int i = 0; i < kWords; ++i) reinterpret_cast<Word*>(p)[i] = reinterpret_cast<const Word*>(v)[i];
  }
  // The same store marked streaming (evict first), for an output that nothing reads soon: it
  // then does not push out of L2 what the kernel is about to read again.
  __device__ __forceinline__ void store_streaming(T* p) const {
#pragma unroll
    for (int i = 0; i < kWords; ++i) __stcs(reinterpret_cast<Word*>(p) + i, reinterpret_cast<const Word*>(v)[i]);
  }
};
// Asks L2 to fetch the line that holds p, ahead of its load: a hint, which no register waits on.
__device__ __forceinline__ void prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }
__device__ __forceinline__ void prefetch_l1(const void* p) { asm volatile("prefetch.global.L1 [%0];" ::"l"(p)); }
// 2^x in one instruction of the special-function unit (ex2.approx.ftz): results below 2^-126
// flush to zero, as probabilities that small do in any case; exp2f adds a test and two
// multiplies for that range.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

template <class T>
constexpr int kVec16 = int(16 / sizeof(T));

inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Whether rows of `len` elements and the tensors at `ptrs` allow kVec16<T>-wide accesses: whole
// vectors in each row, and every tensor starting on a 16-byte boundary.
template <class T>
bool fits_vec16(int64_t len, std::initializer_list<const void*> ptrs) {
  if (len % kVec16<T> != 0) return false;
  for (const void* p : ptrs)
    if (!aligned16(p)) return false;
  return true;
}

// Calls f(std::integral_constant<int, K>{}) with K = kVec16<T> when `wide`, else K = 1: the
// launchers' choice between the vectorized instantiation of a kernel and its scalar fallback.
template <class T, class F>
void with_vec_width(bool wide, F&& f) {
  if (wide)
    f(std::integral_constant<int, kVec16<T>>{});
  else
    f(std::integral_constant<int, 1>{});
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over the block; every thread gets the result. `scratch` holds 32 floats. The order of
// the additions is fixed by the launch shape, so the result does not change between runs.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = (blockDim.x + 31) / 32;
  v = warp_sum(v);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : 0.0f;
  return warp_sum(v);
}
__device__ __forceinline__ float block_max(float v, float* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = (blockDim.x + 31) / 32;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : -INFINITY;
  return warp_max(v);
}

inline unsigned blocks_for(int64_t n, int threads) { return unsigned((n + threads - 1) / threads); }

// log2(e) and ln(2): the softmax kernels (attention, cross-entropy) take exponentials in base 2.
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// Calls f(std::integral_constant<int, D>{}) for an attention head size d, one of those our
// flash attention kernels are built for.
template <class F>
void with_head_dim(int d, F&& f) {
  switch (d) {
    case 32: f(std::integral_constant<int, 32>{}); break;
    case 64: f(std::integral_constant<int, 64>{}); break;
    case 128: f(std::integral_constant<int, 128>{}); break;
    default: fail("our flash attention supports head sizes 32, 64 and 128, not " + std::to_string(d));
  }
}

inline int blocks_of(int n, int per) { return (n + per - 1) / per; }

// Every kernel of the CUDA backend is launched through launch() (or launch_plainly()) and
// begins with await_previous_kernel() (AdamW and our product tiles do work before it: see
// src/ops/adamw.cu and src/ops/tile_product.cuh).
// The self-contained kernels of `tiny_llama debug` (src/bench/debug_gpu.cu) run on their own
// stream, outside any step, and are launched the ordinary way.
//
// Between two kernels of one stream the GPU normally waits for the first to finish and its
// writes to land before it places the second one's blocks, which then start on idle SMs: a
// fraction of a microsecond to a few per kernel, which adds up when a step is hundreds of
// kernels of a few microseconds each (v3 bf16 at B8 T128 on an H100: 1.56 ms a step plain,
// 1.49 ms programmatic; docs/versions/v3.md, "Programmatic launch"). Under
// programmatic launch (Stream::programmatic, Hopper's programmatic stream serialization) the
// second kernel's blocks may be placed as soon as every block of the first has started; they
// then wait on chip, in await_previous_kernel(), until the first kernel has finished and its
// writes are visible (griddepcontrol.wait). So nothing the first kernel writes is read early
// (what a kernel reads before its wait must not be written by the kernel before it: AdamW's and
// the product tiles' early loads), and the placement of the next kernel overlaps the end of this
// one. Once past the wait, a kernel lets
// its own successor be placed (griddepcontrol.launch_dependents): the successor's blocks take
// only the SM room this kernel's blocks leave, since all of them have started by then.
//
// It does so only under programmatic launch, which launch() tells every kernel in its first
// argument. cuBLAS launches its own kernels programmatically, so a kernel that let its
// successor in regardless would, without the switch, have the next GEMM's blocks placed and
// waiting beside its own: version 1 at B1 T8192 ran 88.1 ms a step that way against 70.2 ms,
// and version 2 at B8 T128 1.94 against 1.90 ms. Launched the ordinary way, the wait does
// nothing.
struct Successor {
  bool early;  // let the next kernel of the stream be placed once this one's blocks all run
};
__device__ __forceinline__ void await_previous_kernel(Successor next) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  if (next.early) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

// kernel<<<grid, block, smem, handle>>>(Successor{early}, args...), with the programmatic
// attribute when `programmatic`, in clusters of `cluster` blocks along x when more than 1; a
// launch error throws, naming `name`.
template <class... Params, class... Args>
void launch_kernel(const char* name, void (*kernel)(Successor, Params...), dim3 grid, dim3 block, size_t smem,
                   CUstream_st* handle, bool programmatic, bool early, unsigned cluster, Args&&... args) {
  cudaLaunchAttribute attributes[2]{};
  unsigned count = 0;
  if (programmatic) {
    attributes[count].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attributes[count++].val.programmaticStreamSerializationAllowed = 1;
  }
  if (cluster > 1) {
    attributes[count].id = cudaLaunchAttributeClusterDimension;
    attributes[count++].val.clusterDim = {cluster, 1, 1};
  }
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = handle;
  config.attrs = attributes;
  config.numAttrs = count;
  const cudaError_t err = cudaLaunchKernelEx(&config, kernel, Successor{early}, std::forward<Args>(args)...);
  if (err != cudaSuccess) throw_cuda(err, (std::string("launch of ") + name).c_str(), __FILE__, __LINE__);
}
// A kernel of ours on stream s: programmatic, and letting its successor in early, when
// s.programmatic.
template <class... Params, class... Args>
void launch(const char* name, void (*kernel)(Successor, Params...), dim3 grid, dim3 block, size_t smem, Stream s,
            Args&&... args) {
  launch_kernel(name, kernel, grid, block, smem, s.handle, s.programmatic, s.programmatic, 1u, std::forward<Args>(args)...);
}
// The same, but placed the ordinary way even when s.programmatic (it still lets its successor
// in early then): for the flash attention kernels, see flash_attention.cu. launch_plainly_in
// launches in clusters of `cluster` consecutive blocks, launch_plainly with none.
template <class... Params, class... Args>
void launch_plainly_in(const char* name, void (*kernel)(Successor, Params...), dim3 grid, dim3 block, size_t smem,
                       Stream s, int cluster, Args&&... args) {
  launch_kernel(name, kernel, grid, block, smem, s.handle, false, s.programmatic, unsigned(cluster),
                std::forward<Args>(args)...);
}
template <class... Params, class... Args>
void launch_plainly(const char* name, void (*kernel)(Successor, Params...), dim3 grid, dim3 block, size_t smem,
                    Stream s, Args&&... args) {
  launch_plainly_in(name, kernel, grid, block, smem, s, 1, std::forward<Args>(args)...);
}

}  // namespace tt::cuda

// Calls BODY with `T` bound to the element type of an activation tensor (fp32 or bf16).
#define TT_DISPATCH_ACT(dtype, ...)                                                   \
  do {                                                                                \
    if ((dtype) == ::tt::DType::F32) {                                                \
      using T = float;                                                                \
      __VA_ARGS__;                                                                    \
    } else if ((dtype) == ::tt::DType::BF16) {                                        \
      using T = ::tt::cuda::bf16_t;                                                   \
      __VA_ARGS__;                                                                    \
    } else {                                                                          \
      ::tt::fail(std::string("no CUDA kernel for dtype ") + ::tt::dtype_name(dtype)); \
    }                                                                                 \
  } while (0)
