// The SM clock of device 0 while timed work runs, and whether the GPU is holding it below
// its maximum for power or heat. Under a long compute-heavy load an H100 can reach its power
// limit (700 W), and its power controller then lowers the clock: two kernels timed a second
// apart can run at different clocks, and a kernel that spends more energy per FLOP runs at a
// lower one. `tiny_llama kernels` samples the clock once per repetition, while the GPU runs it,
// so each row says at which clock it was measured. The reading is the clock NVML reports: on
// an H100 a kernel's repetitions were seen to slow by 7% at a reported 1980 MHz before the
// reported clock fell (docs/data/2026-11-22-h100-experiments-4/), so a row at full clock can
// still have been held back by power.
//
// Read through NVML, which comes with the NVIDIA driver (not the toolkit): it is loaded at run
// time, and where it is missing (or in a build without CUDA) `available()` is false and the
// rows report no clock.
#pragma once

namespace tt {

class GpuClocks {
 public:
  GpuClocks();  // device 0, the device the backends use
  ~GpuClocks();
  GpuClocks(const GpuClocks&) = delete;
  GpuClocks& operator=(const GpuClocks&) = delete;

  bool available() const { return device_ != nullptr; }

  struct Sample {
    int sm_mhz = 0;        // 0 when unavailable
    bool limited = false;  // held down by the power cap, power brake or a thermal slowdown
  };
  Sample sample() const;

 private:
  void* library_ = nullptr;
  void* device_ = nullptr;  // nvmlDevice_t
  int (*clock_info_)(void*, int, unsigned*) = nullptr;
  int (*clock_reasons_)(void*, unsigned long long*) = nullptr;
  int (*shutdown_)() = nullptr;
};

}  // namespace tt
