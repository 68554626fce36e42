// Status checks for every CUDA runtime, cuBLAS and kernel-launch call: a failure throws
// tt::Error naming the call, where it was made, and the library's own explanation.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

#include "core/error.h"

namespace tt::cuda {

[[noreturn]] void throw_cuda(cudaError_t err, const char* call, const char* file, int line);
[[noreturn]] void throw_cublas(cublasStatus_t st, const char* call, const char* file, int line);
// A device allocation of `bytes` (for `breakdown`) that failed: UsageError saying how much is free
// and which flags to lower.
[[noreturn]] void refuse_device_memory(size_t bytes, const std::string& breakdown);

}  // namespace tt::cuda

#define CUDA_CHECK(call)                                                               \
  do {                                                                                 \
    const cudaError_t tt_err_ = (call);                                                \
    if (tt_err_ != cudaSuccess) ::tt::cuda::throw_cuda(tt_err_, #call, __FILE__, __LINE__); \
  } while (0)

#define CUBLAS_CHECK(call)                                                                    \
  do {                                                                                        \
    const cublasStatus_t tt_st_ = (call);                                                     \
    if (tt_st_ != CUBLAS_STATUS_SUCCESS) ::tt::cuda::throw_cublas(tt_st_, #call, __FILE__, __LINE__); \
  } while (0)

// After every kernel launch: catches bad launch configurations at once (and, in a
// synchronizing debug run, faults inside the kernel).
#define CUDA_CHECK_LAUNCH(kernel_name)                                                        \
  do {                                                                                        \
    const cudaError_t tt_err_ = cudaGetLastError();                                           \
    if (tt_err_ != cudaSuccess) ::tt::cuda::throw_cuda(tt_err_, "launch of " kernel_name, __FILE__, __LINE__); \
  } while (0)
