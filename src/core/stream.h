// The stream our kernels run on, declared without CUDA's headers so that the op headers can
// declare their CUDA launchers for code compiled without nvcc.
#pragma once

struct CUstream_st;

namespace tt {

// `handle` is the cudaStream_t. With `programmatic` (the programmatic-launch switch) our
// kernels are launched with Hopper's programmatic stream serialization: each may be placed on
// the GPU while the kernel before it still runs, and waits on chip for it, and each lets the
// kernel after it be placed early in turn; without it they do neither (see launch() in
// src/ops/cuda_common.cuh). Library calls (cuBLAS, cuDNN) use the handle alone.
struct Stream {
  CUstream_st* handle = nullptr;
  bool programmatic = false;
};

}  // namespace tt
