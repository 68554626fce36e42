// Builds without CUDA have no kernel trace: --profile says so.
#include "core/error.h"
#include "trace/cupti_trace.h"

namespace tt {

std::unique_ptr<KernelTrace> KernelTrace::create() {
  usage_fail("--profile: this build has no CUDA backend (nvcc was not found at build time)");
}
void trace_range_push(const char*) {}
void trace_range_pop() {}

}  // namespace tt
