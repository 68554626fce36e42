// The kernel-level trace behind --profile, collected through CUPTI's activity API: every
// kernel, memory copy and memset with its start, end, grid, block, registers and shared
// memory, each attributed to the innermost named model range that launched it.
//
// Attribution: while tracing is set up, a CUPTI callback notes the current range for every
// runtime and driver API call (by correlation id, which the kernel's record carries) and for
// every CUDA graph node created or cloned (by node id), so kernels replayed from a graph are
// attributed to the range they were captured in.
#pragma once
#include <memory>
#include <string>

#include "trace/trace.h"

namespace tt {

class KernelTrace {
 public:
  virtual ~KernelTrace() = default;
  // Subscribes the callbacks; collection starts with begin(). Throws UsageError when CUPTI
  // cannot be used (no GPU, or another tool holds the CUPTI subscription).
  static std::unique_ptr<KernelTrace> create();

  virtual void begin() = 0;     // start collecting records (tags them with step 0)
  virtual void end_step() = 0;  // waits for the device, flushes, moves on to the next step
  virtual TraceData finish() = 0;  // stops collecting and returns everything
};

// The backend reports its named ranges here; they reach the active trace, if any.
void trace_range_push(const char* name);
void trace_range_pop();

}  // namespace tt
