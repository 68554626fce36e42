#include "core/cuda_check.h"

#include <cstdio>

namespace tt::cuda {

void throw_cuda(cudaError_t err, const char* call, const char* file, int line) {
  fail(std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " + cudaGetErrorName(err) + " (" +
       cudaGetErrorString(err) + ")");
}

void throw_cublas(cublasStatus_t st, const char* call, const char* file, int line) {
  fail(std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " + cublasGetStatusName(st) +
       " (" + cublasGetStatusString(st) + ")");
}

void refuse_device_memory(size_t bytes, const std::string& breakdown) {
  cudaGetLastError();
  size_t free_b = 0, total_b = 0;
  cudaMemGetInfo(&free_b, &total_b);
  char msg[512];
  std::snprintf(msg, sizeof msg,
                "out of GPU memory: the run needs %.1f MB (%s) but %.1f MB of %.1f MB are free; lower "
                "--batch-size or --seq-len (or use --use-amp, or a later --version)",
                bytes / 1e6, breakdown.c_str(), free_b / 1e6, total_b / 1e6);
  usage_fail(msg);
}

}  // namespace tt::cuda
