// NVML, loaded at run time (see gpu_clocks.h). The few entry points used are declared here by
// their C signatures: the handle is an opaque pointer, statuses are ints (0 is success).
#include "bench/gpu_clocks.h"

#include <dlfcn.h>

#ifdef TT_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace tt {

namespace {

constexpr int kNvmlSuccess = 0;
constexpr int kNvmlClockSm = 1;
// Clock-limit reasons that mean "power or heat": the software power cap (0x4), a hardware
// slowdown (0x8), software and hardware thermal slowdowns (0x20, 0x40), the power brake (0x80).
constexpr unsigned long long kPowerOrHeat = 0x4 | 0x8 | 0x20 | 0x40 | 0x80;

template <class F>
F symbol(void* library, const char* name) {
  return reinterpret_cast<F>(dlsym(library, name));
}

}  // namespace

GpuClocks::GpuClocks() {
  char bus_id[32] = {};
#ifdef TT_HAVE_CUDA
  if (cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, 0) != cudaSuccess) return;
#else
  return;  // a build without CUDA times no GPU
#endif
  library_ = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!library_) return;
  auto init = symbol<int (*)()>(library_, "nvmlInit_v2");
  auto by_bus = symbol<int (*)(const char*, void**)>(library_, "nvmlDeviceGetHandleByPciBusId_v2");
  clock_info_ = symbol<int (*)(void*, int, unsigned*)>(library_, "nvmlDeviceGetClockInfo");
  clock_reasons_ = symbol<int (*)(void*, unsigned long long*)>(library_, "nvmlDeviceGetCurrentClocksEventReasons");
  if (!clock_reasons_)  // drivers before the rename
    clock_reasons_ = symbol<int (*)(void*, unsigned long long*)>(library_, "nvmlDeviceGetCurrentClocksThrottleReasons");
  shutdown_ = symbol<int (*)()>(library_, "nvmlShutdown");
  if (!init || !by_bus || !clock_info_ || !clock_reasons_ || !shutdown_ || init() != kNvmlSuccess) {
    shutdown_ = nullptr;  // nothing to shut down
    return;
  }
  void* device = nullptr;
  if (by_bus(bus_id, &device) == kNvmlSuccess) device_ = device;
}

GpuClocks::~GpuClocks() {
  if (shutdown_) shutdown_();
  if (library_) dlclose(library_);
}

GpuClocks::Sample GpuClocks::sample() const {
  Sample s;
  unsigned mhz = 0;
  unsigned long long reasons = 0;
  if (!device_ || clock_info_(device_, kNvmlClockSm, &mhz) != kNvmlSuccess) return s;
  s.sm_mhz = int(mhz);
  s.limited = clock_reasons_(device_, &reasons) == kNvmlSuccess && (reasons & kPowerOrHeat) != 0;
  return s;
}

}  // namespace tt
