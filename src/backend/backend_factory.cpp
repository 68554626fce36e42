// Chooses the backend: the CUDA backend when asked or, with --device auto, when a GPU is
// present; otherwise the CPU reference.
#include <iostream>

#include "backend/backend.h"

#ifdef TT_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace tt {

std::unique_ptr<Backend> make_cpu_backend(const Plan& plan);
#ifdef TT_HAVE_CUDA
std::unique_ptr<Backend> make_cuda_backend(const Plan& plan, bool nvtx);
#endif

bool cuda_available(std::string* why) {
#ifdef TT_HAVE_CUDA
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    if (why) *why = std::string("no usable CUDA device (") + cudaGetErrorString(err) + ")";
    cudaGetLastError();  // clear the sticky error of a failed probe
    return false;
  }
  if (count == 0) {
    if (why) *why = "no CUDA device found";
    return false;
  }
  return true;
#else
  if (why) *why = "this build has no CUDA backend (nvcc was not found at build time)";
  return false;
#endif
}

std::unique_ptr<Backend> make_backend(const BackendOptions& options) {
  std::string why;
  switch (options.device) {
    case DeviceKind::Cpu:
      return make_cpu_backend(options.plan);
    case DeviceKind::Cuda:
      if (!cuda_available(&why)) usage_fail("--device cuda: " + why);
      break;
    case DeviceKind::Auto:
      if (!cuda_available(&why)) {
        std::cout << "Running on the CPU reference backend: " << why << "\n";
        return make_cpu_backend(options.plan);
      }
      break;
  }
#ifdef TT_HAVE_CUDA
  return make_cuda_backend(options.plan, options.nvtx);
#else
  usage_fail("--device cuda: this build has no CUDA backend");
#endif
}

}  // namespace tt
