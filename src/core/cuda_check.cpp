#include "core/cuda_check.h"

namespace tt::cuda {

void throw_cuda(cudaError_t err, const char* call, const char* file, int line) {
  fail(std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " + cudaGetErrorName(err) + " (" +
       cudaGetErrorString(err) + ")");
}

void throw_cublas(cublasStatus_t st, const char* call, const char* file, int line) {
  fail(std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " + cublasGetStatusName(st) +
       " (" + cublasGetStatusString(st) + ")");
}

}  // namespace tt::cuda
