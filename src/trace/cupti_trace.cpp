#include "trace/cupti_trace.h"

#include <cuda_runtime.h>
#include <cupti.h>
#include <cxxabi.h>

#include <cstdlib>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/error.h"

namespace tt {
namespace {

#define CUPTI_CHECK(call)                                                                \
  do {                                                                                   \
    const CUptiResult r_ = (call);                                                       \
    if (r_ != CUPTI_SUCCESS) {                                                           \
      const char* s_ = nullptr;                                                          \
      cuptiGetResultString(r_, &s_);                                                     \
      fail(std::string(#call) + " failed: " + (s_ ? s_ : "unknown CUPTI error"));        \
    }                                                                                    \
  } while (0)

constexpr size_t kBufferBytes = size_t(8) << 20;
constexpr CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                         CUPTI_ACTIVITY_KIND_MEMSET};

std::string demangle(const char* name) {
  int status = 0;
  char* d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string s = status == 0 && d ? d : name;
  std::free(d);
  return short_kernel_name(s);
}

class CuptiTrace;
CuptiTrace* g_trace = nullptr;

class CuptiTrace final : public KernelTrace {
 public:
  CuptiTrace() {
    CUPTI_CHECK(cuptiSubscribe(&subscriber_, &CuptiTrace::on_callback, this));
    CUPTI_CHECK(cuptiEnableDomain(1, subscriber_, CUPTI_CB_DOMAIN_RUNTIME_API));
    CUPTI_CHECK(cuptiEnableDomain(1, subscriber_, CUPTI_CB_DOMAIN_DRIVER_API));
    CUPTI_CHECK(cuptiEnableCallback(1, subscriber_, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED));
    CUPTI_CHECK(cuptiEnableCallback(1, subscriber_, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED));
    CUPTI_CHECK(cuptiActivityRegisterCallbacks(&CuptiTrace::buffer_requested, &CuptiTrace::buffer_completed));
    g_trace = this;
  }
  ~CuptiTrace() override {
    if (collecting_) stop_collecting();
    cuptiUnsubscribe(subscriber_);
    g_trace = nullptr;
  }

  void push(const char* name) {
    std::lock_guard<std::mutex> lock(mu_);
    path_.push_back(name);
    current_ = region_index();
  }
  void pop() {
    std::lock_guard<std::mutex> lock(mu_);
    if (!path_.empty()) path_.pop_back();
    current_ = path_.empty() ? -1 : region_index();
  }

  void begin() override {
    for (CUpti_ActivityKind k : kKinds) CUPTI_CHECK(cuptiActivityEnable(k));
    collecting_ = true;
  }
  void end_step() override {
    if (cudaDeviceSynchronize() != cudaSuccess) fail("cudaDeviceSynchronize failed while profiling");
    CUPTI_CHECK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
    std::lock_guard<std::mutex> lock(mu_);
    data_.steps = ++step_;
  }
  TraceData finish() override {
    if (collecting_) stop_collecting();
    std::lock_guard<std::mutex> lock(mu_);
    data_.regions = regions_;
    return std::move(data_);
  }

 private:
  void stop_collecting() {
    cudaDeviceSynchronize();
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    for (CUpti_ActivityKind k : kKinds) cuptiActivityDisable(k);
    collecting_ = false;
  }

  int region_index() {  // of the current path; mu_ held
    std::string p;
    for (const std::string& s : path_) p += (p.empty() ? "" : "/") + s;
    auto it = region_of_path_.find(p);
    if (it != region_of_path_.end()) return it->second;
    regions_.push_back(p);
    return region_of_path_[p] = int(regions_.size() - 1);
  }

  int region_for(uint32_t correlation, uint64_t graph_node) {  // mu_ held
    if (graph_node) {
      auto it = node_region_.find(graph_node);
      if (it != node_region_.end()) return it->second;
    }
    auto it = call_region_.find(correlation);
    return it == call_region_.end() ? -1 : it->second;
  }

  void consume(uint8_t* buffer, size_t valid) {
    std::lock_guard<std::mutex> lock(mu_);
    CUpti_Activity* rec = nullptr;
    while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
      TraceRecord r;
      r.step = step_;
      if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || rec->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
        r.kind = TraceRecord::Kernel;
        r.name = demangle(k->name);
        r.start_ns = k->start, r.end_ns = k->end, r.stream = k->streamId;
        r.grid[0] = k->gridX, r.grid[1] = k->gridY, r.grid[2] = k->gridZ;
        r.block[0] = k->blockX, r.block[1] = k->blockY, r.block[2] = k->blockZ;
        r.registers = k->registersPerThread;
        r.static_smem = k->staticSharedMemory, r.dynamic_smem = k->dynamicSharedMemory;
        r.region = region_for(k->correlationId, k->graphNodeId);
      } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(rec);
        static const char* names[] = {"memcpy", "memcpy HtoD", "memcpy DtoH", "memcpy HtoA", "memcpy AtoH",
                                      "memcpy AtoA", "memcpy AtoD", "memcpy DtoA", "memcpy DtoD", "memcpy HtoH",
                                      "memcpy PtoP"};
        r.kind = TraceRecord::Memcpy;
        r.name = m->copyKind < 11 ? names[m->copyKind] : "memcpy";
        r.start_ns = m->start, r.end_ns = m->end, r.bytes = m->bytes, r.stream = m->streamId;
        r.region = region_for(m->correlationId, m->graphNodeId);
      } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(rec);
        r.kind = TraceRecord::Memset;
        r.name = "memset";
        r.start_ns = m->start, r.end_ns = m->end, r.bytes = m->bytes, r.stream = m->streamId;
        r.region = region_for(m->correlationId, m->graphNodeId);
      } else {
        continue;
      }
      data_.records.push_back(std::move(r));
    }
  }

  static void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
    *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
    *size = *buffer ? kBufferBytes : 0;
    *max_records = 0;
  }
  static void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
    if (g_trace && valid > 0) g_trace->consume(buffer, valid);
    std::free(buffer);
  }
  static void CUPTIAPI on_callback(void* user, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
    auto* self = static_cast<CuptiTrace*>(user);
    std::lock_guard<std::mutex> lock(self->mu_);
    if (domain == CUPTI_CB_DOMAIN_RUNTIME_API || domain == CUPTI_CB_DOMAIN_DRIVER_API) {
      const auto* info = static_cast<const CUpti_CallbackData*>(data);
      if (info->callbackSite == CUPTI_API_ENTER && self->current_ >= 0)
        self->call_region_[info->correlationId] = self->current_;
    } else if (domain == CUPTI_CB_DOMAIN_RESOURCE) {
      const auto* graph = static_cast<const CUpti_GraphData*>(static_cast<const CUpti_ResourceData*>(data)->resourceDescriptor);
      uint64_t id = 0;
      if (cuptiGetGraphNodeId(graph->node, &id) != CUPTI_SUCCESS) return;
      if (cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED) {
        if (self->current_ >= 0) self->node_region_[id] = self->current_;
      } else if (cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED) {
        uint64_t original = 0;
        if (cuptiGetGraphNodeId(graph->originalNode, &original) != CUPTI_SUCCESS) return;
        auto it = self->node_region_.find(original);
        if (it != self->node_region_.end()) self->node_region_[id] = it->second;
      }
    }
  }

  CUpti_SubscriberHandle subscriber_ = nullptr;
  std::mutex mu_;
  std::vector<std::string> path_;
  int current_ = -1;
  std::vector<std::string> regions_;
  std::unordered_map<std::string, int> region_of_path_;
  std::unordered_map<uint32_t, int> call_region_;
  std::unordered_map<uint64_t, int> node_region_;
  TraceData data_;
  int step_ = 0;
  bool collecting_ = false;
};

}  // namespace

std::unique_ptr<KernelTrace> KernelTrace::create() {
  std::string why;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) usage_fail("--profile: needs a CUDA device");
  try {
    return std::make_unique<CuptiTrace>();
  } catch (const Error& e) {
    usage_fail(std::string("--profile: CUPTI is not usable here (") + e.what() + ")");
  }
}

void trace_range_push(const char* name) {
  if (g_trace) g_trace->push(name);
}
void trace_range_pop() {
  if (g_trace) g_trace->pop();
}

}  // namespace tt
