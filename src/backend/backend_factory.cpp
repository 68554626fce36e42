// Chooses the backend: the CUDA backend when asked or, with --device auto, when a GPU is
// present; otherwise the CPU reference.
#include <fstream>
#include <iostream>
#include <thread>

#include "backend/backend.h"

#ifdef TT_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace tt {


bool cuda_available(std::string* why) {
#ifdef TT_HAVE_CUDA
  // Probed once: the answer and its reason do not change during a run.
  static const std::string reason = [] {
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    cudaGetLastError();  // clear the sticky error of a failed probe
    if (err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver || (err == cudaSuccess && count == 0))
      return std::string("no NVIDIA GPU or driver found");
    if (err != cudaSuccess) return std::string("no usable CUDA device (") + cudaGetErrorString(err) + ")";
    cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, 0) != cudaSuccess) return std::string("cannot read the GPU's properties");
    if (p.major != 9)
      return std::string("the GPU is ") + p.name + " (compute capability " + std::to_string(p.major) + "." +
             std::to_string(p.minor) + "); this build's kernels are for Hopper (compute capability 9.0: H100, H200): "
             "they use its wgmma and programmatic launch";
    return std::string();
  }();
  if (why) *why = reason;
  return reason.empty();
#else
  if (why) *why = "this build has no CUDA backend (nvcc was not found at build time)";
  return false;
#endif
}

int cuda_device_count() {
  int n = 0;
#ifdef TT_HAVE_CUDA
  if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
#endif
  return n;
}

DeviceInfo device_info(bool cuda) {
  DeviceInfo d;
#ifdef TT_HAVE_CUDA
  if (cuda) {
    cudaDeviceProp p;
    int v = 0, gpu = 0;
    cudaGetDevice(&gpu);  // the one a data-parallel rank took, else the first
    if (cudaGetDeviceProperties(&p, gpu) == cudaSuccess) {
      d.name = p.name;
      d.multiprocessors = p.multiProcessorCount;
      d.l2_bytes = size_t(p.l2CacheSize);
      d.sm_threads = p.maxThreadsPerMultiProcessor;
      d.sm_registers = p.regsPerMultiprocessor;
      d.sm_blocks = p.maxBlocksPerMultiProcessor;
      d.sm_shared_bytes = p.sharedMemPerMultiprocessor;
      d.block_reserved_shared_bytes = p.reservedSharedMemPerBlock;
    }
    if (cudaDeviceGetAttribute(&v, cudaDevAttrClockRate, gpu) == cudaSuccess) d.sm_clock_mhz = v / 1000;
    if (cudaDeviceGetAttribute(&v, cudaDevAttrMemoryClockRate, gpu) == cudaSuccess) d.memory_clock_mhz = v / 1000;
    auto version = [](int x) { return std::to_string(x / 1000) + "." + std::to_string(x % 1000 / 10); };
    if (cudaDriverGetVersion(&v) == cudaSuccess) d.driver = version(v);
    if (cudaRuntimeGetVersion(&v) == cudaSuccess) d.runtime = version(v);
    cudaMemGetInfo(&d.memory_free, &d.memory_total);
    return d;
  }
#endif
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);)
    if (line.rfind("model name", 0) == 0) {
      d.name = line.substr(line.find(':') + 2);
      break;
    }
  d.multiprocessors = int(std::thread::hardware_concurrency());
  return d;
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
        static bool said = false;  // once a run, not once a backend
        if (!said) std::cout << "Running on the CPU reference backend: " << why << "\n";
        said = true;
        return make_cpu_backend(options.plan);
      }
      break;
  }
#ifdef TT_HAVE_CUDA
  return make_cuda_backend(options.plan, options.nvtx, options.gpu);
#else
  usage_fail("--device cuda: this build has no CUDA backend");
#endif
}

}  // namespace tt
