// The GPU ranks' collectives through NCCL. The ranks meet through src/parallel/rendezvous.h (rank
// 0's unique id goes out over it, each rank's GPU comes in: two ranks on one GPU are refused),
// then build a non-blocking communicator: every NCCL call returns at once, and await() polls
// ncclCommGetAsyncError until the call is enqueued, with a time limit. The tensor collectives
// go on the backend's current stream (the stream behind the backward while the model finishes
// a bucket there), so that they run alongside the backward and are captured in the step's CUDA
// graph like any kernel. The host values of a step (the loss, the agreed stop) travel over the
// rendezvous' connections, summed at rank 0 in rank order.
//
// A rank that dies: the watchdog sees its connection close, and every other rank prints one line
// naming it, aborts its communicator (ncclCommAbort, which ends the NCCL kernels waiting for the
// lost rank's data) and exits. An asynchronous NCCL error ends the rank the same way.
// NVLink multicast (NVLS) stays off: NCCL_NVLS_ENABLE=0 is set before NCCL starts.
//
// The model's arena comes from ncclMemAlloc, and its parameters and gradients (the first bytes of
// every rank's arena, laid out alike) are one symmetric window: where every GPU reaches every
// other over NVLink, NCCL's all-reduce and reduce-scatter on them read and write the peers'
// buffers directly instead of passing chunks round a ring (NCCL_SYM_CTAS below sets their
// blocks). Elsewhere (sockets, PCIe without peer access) the registration is a no-op and the
// ring runs as before. Symmetric windows are NCCL 2.27's; with an older NCCL the arena is the
// backend's and nothing is registered.
#include <cuda_runtime.h>
#include <nccl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <thread>

#include "backend/backend.h"
#include "core/arena.h"
#include "core/cuda_check.h"
#include "core/error.h"
#include "parallel/comm.h"
#include "parallel/rendezvous.h"

namespace tt {

namespace {

ncclDataType_t type_of(const Tensor& t) {
  switch (t.dtype) {
    case DType::F32: return ncclFloat32;
    case DType::BF16: return ncclBfloat16;
    case DType::F64: return ncclFloat64;
    case DType::I32: return ncclInt32;  // gathers of token ids
    default: fail(std::string("NCCL collectives take fp32, bf16, fp64 or int32 tensors, not ") + dtype_name(t.dtype));
  }
}

// Counts of the ranks' parts, and whether they are all equal (NCCL's reduce-scatter and
// all-gather need that; unequal parts go as one reduce or broadcast per rank, grouped).
bool equal_parts(const std::vector<int64_t>& offsets) {
  for (size_t r = 1; r + 1 < offsets.size(); ++r)
    if (offsets[r + 1] - offsets[r] != offsets[1] - offsets[0]) return false;
  return true;
}

#define TT_NCCL_WINDOWS (NCCL_VERSION_CODE >= NCCL_VERSION(2, 27, 0))

#if TT_NCCL_WINDOWS
// Device memory from NCCL's allocator (CUDA's virtual memory, mappable by the other ranks' GPUs).
// Stateless: a block may outlive the communicator.
class NcclMemory final : public MemoryResource {
 public:
  void* allocate(size_t bytes, const std::string& breakdown) override {
    void* p = nullptr;
    const ncclResult_t rc = ncclMemAlloc(&p, bytes);
    if (rc == ncclSuccess) return p;
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    if (bytes > free_b) cuda::refuse_device_memory(bytes, breakdown);
    fail("ncclMemAlloc of " + std::to_string(bytes / 1000000) + " MB failed: " + ncclGetErrorString(rc));
  }
  void deallocate(void* p) override { ncclMemFree(p); }
};
#endif

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(const World& w, Backend& be, const std::string& init, int timeout_s)
      : be_(be), rank_(w.rank), size_(w.size), timeout_s_(timeout_s) {
    int gpu = 0;
    CUDA_CHECK(cudaGetDevice(&gpu));
    char bus[32] = {};
    CUDA_CHECK(cudaDeviceGetPCIBusId(bus, sizeof bus, gpu));
    rendezvous_ = std::make_unique<Rendezvous>(w, init, timeout_s);

    // Each rank's host and GPU at rank 0: two ranks on one GPU are refused on every rank.
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    const std::vector<std::string> places = rendezvous_->gather(std::string(host) + " GPU " + bus);
    std::string verdict;
    std::map<std::string, int> seen;
    for (size_t r = 0; r < places.size() && verdict.empty(); ++r) {
      if (seen.count(places[r]))
        verdict = "ranks " + std::to_string(seen[places[r]]) + " and " + std::to_string(r) + " both run on " +
                  places[r] + ": one GPU per rank (LOCAL_RANK picks it)";
      seen[places[r]] = int(r);
    }
    verdict = rendezvous_->broadcast(verdict);
    if (!verdict.empty()) usage_fail(verdict);

    ncclUniqueId id{};
    if (rank_ == 0) check(ncclGetUniqueId(&id), "ncclGetUniqueId");
    const std::string bytes = rendezvous_->broadcast(std::string(reinterpret_cast<const char*>(&id), sizeof id));
    std::memcpy(&id, bytes.data(), sizeof id);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    check(ncclCommInitRankConfig(&comm_, size_, id, rank_, &config), "ncclCommInitRankConfig");
    await("ncclCommInitRankConfig", std::chrono::seconds(timeout_s));
    int version = 0;
    ncclGetVersion(&version);
    version_ = std::to_string(version / 10000) + "." + std::to_string(version / 100 % 100) + "." +
               std::to_string(version % 100);

    rendezvous_->watch([this] { return async_error(); },
                       [this](const std::string& why) { stop(why); });
  }
  // After finish() there is no communicator left. Otherwise an error is ending the run on this
  // rank: the connections close (the others' watchdogs name this rank), NCCL's abort flag ends
  // its kernels that wait for the other ranks, the step's graph goes (the abort waits for it),
  // and the abort gets at most kAbortSeconds.
  ~NcclCommunicator() override {
    rendezvous_.reset();
    if (!comm_) return;
    const std::shared_ptr<std::atomic<bool>> aborted = abort_in_background(comm_);
    comm_ = nullptr;
    be_.graph_release();
    wait_for(*aborted);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "NCCL " + version_; }

  // NCCL's teardown (ncclCommDestroy, and ncclCommAbort too) waits until every CUDA graph that
  // captured this communicator's collectives is destroyed: the step's graph goes first, or the
  // rank would wait forever after its last step.
  void finish() override {
    CUDA_CHECK(cudaDeviceSynchronize());
    be_.graph_release();
    rendezvous_->finish();
#if TT_NCCL_WINDOWS
    for (ncclWindow_t w : windows_) {
      check(ncclCommWindowDeregister(comm_, w), "ncclCommWindowDeregister");
      await("ncclCommWindowDeregister", std::chrono::seconds(timeout_s_));
    }
    windows_.clear();
#endif
    check(ncclCommFinalize(comm_), "ncclCommFinalize");
    await("ncclCommFinalize", std::chrono::seconds(timeout_s_));
    ncclCommDestroy(comm_);
    comm_ = nullptr;
  }

#if TT_NCCL_WINDOWS
  MemoryResource* memory() override {
    static NcclMemory memory;
    return &memory;
  }
  // Without symmetric support (NCCL_WIN_ENABLE=0, or GPUs that are not all peers over NVLink)
  // NCCL returns no window and the collectives take their usual kernels.
  void share(void* p, size_t bytes) override {
    ncclWindow_t w = nullptr;
    check(ncclCommWindowRegister(comm_, p, bytes, &w, NCCL_WIN_COLL_SYMMETRIC), "ncclCommWindowRegister");
    await("ncclCommWindowRegister", std::chrono::seconds(timeout_s_));
    if (w) windows_.push_back(w);
  }
#endif

  void all_reduce_sum(const Tensor& t) override {
    check(ncclAllReduce(t.ptr, t.ptr, size_t(t.numel), type_of(t), ncclSum, comm_, stream()), "ncclAllReduce");
    await("ncclAllReduce");
  }
  void reduce_scatter_sum(const Tensor& t, const std::vector<int64_t>& offsets) override {
    char* base = static_cast<char*>(t.ptr);
    const size_t bytes = dtype_size(t.dtype);
    if (equal_parts(offsets)) {  // in place: each rank's part of the sum lands where it is
      const size_t count = size_t(offsets[1] - offsets[0]);
      check(ncclReduceScatter(base, base + size_t(offsets[size_t(rank_)]) * bytes, count, type_of(t), ncclSum, comm_,
                              stream()),
            "ncclReduceScatter");
    } else {
      check(ncclGroupStart(), "ncclGroupStart");
      for (int r = 0; r < size_; ++r) {
        char* part = base + size_t(offsets[size_t(r)]) * bytes;
        check(ncclReduce(part, part, size_t(offsets[size_t(r) + 1] - offsets[size_t(r)]), type_of(t), ncclSum, r, comm_,
                         stream()),
              "ncclReduce");
      }
      check(ncclGroupEnd(), "ncclGroupEnd");
    }
    await("the reduce-scatter");
  }
  void all_gather(const Tensor& t, const std::vector<int64_t>& offsets) override {
    char* base = static_cast<char*>(t.ptr);
    const size_t bytes = dtype_size(t.dtype);
    if (equal_parts(offsets)) {
      const size_t count = size_t(offsets[1] - offsets[0]);
      check(ncclAllGather(base + size_t(offsets[size_t(rank_)]) * bytes, base, count, type_of(t), comm_, stream()),
            "ncclAllGather");
    } else {
      check(ncclGroupStart(), "ncclGroupStart");
      for (int r = 0; r < size_; ++r) {
        char* part = base + size_t(offsets[size_t(r)]) * bytes;
        check(ncclBroadcast(part, part, size_t(offsets[size_t(r) + 1] - offsets[size_t(r)]), type_of(t), r, comm_,
                            stream()),
              "ncclBroadcast");
      }
      check(ncclGroupEnd(), "ncclGroupEnd");
    }
    await("the all-gather");
  }
  void all_reduce_sum(std::vector<double>& host) override {
    const std::string mine(reinterpret_cast<const char*>(host.data()), host.size() * sizeof(double));
    std::string sum;
    if (rank_ == 0) {
      std::vector<double> total(host.size(), 0.0);
      for (const std::string& part : rendezvous_->gather(mine)) {
        TT_CHECK(part.size() == mine.size(), "all_reduce_sum: the ranks sent different lengths");
        const double* x = reinterpret_cast<const double*>(part.data());
        for (size_t i = 0; i < total.size(); ++i) total[i] += x[i];
      }
      sum.assign(reinterpret_cast<const char*>(total.data()), total.size() * sizeof(double));
    } else {
      rendezvous_->gather(mine);
    }
    sum = rendezvous_->broadcast(sum);
    std::memcpy(host.data(), sum.data(), mine.size());
  }
  void broadcast(std::string& host, int root) override {
    TT_CHECK(root == 0, "broadcast: from rank 0 only");
    host = rendezvous_->broadcast(host);
  }

 private:
  cudaStream_t stream() { return static_cast<cudaStream_t>(be_.stream()); }

  void check(ncclResult_t rc, const char* call) {
    if (rc == ncclSuccess || rc == ncclInProgress) return;
    const char* last = comm_ ? ncclGetLastError(comm_) : nullptr;
    fail(std::string(call) + " failed: " + ncclGetErrorString(rc) + (last && *last ? std::string(" (") + last + ")" : ""));
  }
  // Polls the communicator until the last call is done or failed, for at most `limit`.
  void await(const char* what, std::chrono::seconds limit = std::chrono::seconds(60)) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    for (int polls = 0;; ++polls) {
      ncclResult_t state = ncclSuccess;
      ncclCommGetAsyncError(comm_, &state);
      if (state == ncclSuccess) return;
      if (state != ncclInProgress) check(state, what);
      if (std::chrono::steady_clock::now() > deadline)
        fail(std::string(what) + ": NCCL did not finish within " + std::to_string(limit.count()) + " s");
      if (polls > 1000) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  std::string async_error() {
    ncclResult_t state = ncclSuccess;
    if (ncclCommGetAsyncError(comm_, &state) != ncclSuccess || state == ncclSuccess || state == ncclInProgress) return "";
    return std::string("NCCL error on rank ") + std::to_string(rank_) + ": " + ncclGetErrorString(state);
  }
  // From the watchdog's thread: one line, the communicator aborted, exit. The main thread may be
  // replaying the step's graph, so the graph stays, and the abort (which sets NCCL's abort flag
  // at once: its kernels waiting for the lost rank end) cannot finish its teardown; the process
  // exits after kAbortSeconds at most, which frees the rest.
  void stop(const std::string& why) {
    std::cerr << "tiny_llama: " << why << std::endl;
    wait_for(*abort_in_background(comm_));
    std::_Exit(1);
  }
  static constexpr int kAbortSeconds = 3;
  static std::shared_ptr<std::atomic<bool>> abort_in_background(ncclComm_t comm) {
    auto done = std::make_shared<std::atomic<bool>>(false);
    std::thread([comm, done] {
      ncclCommAbort(comm);
      *done = true;
    }).detach();
    return done;
  }
  static void wait_for(const std::atomic<bool>& done) {
    for (int i = 0; i < kAbortSeconds * 10 && !done; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }

  Backend& be_;
  int rank_, size_, timeout_s_;
  std::unique_ptr<Rendezvous> rendezvous_;
  ncclComm_t comm_ = nullptr;
#if TT_NCCL_WINDOWS
  std::vector<ncclWindow_t> windows_;  // share()'s, deregistered by finish()
#endif
  std::string version_;
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(const World& world, Backend& backend, const std::string& init,
                                                     int timeout_s) {
  ::setenv("NCCL_NVLS_ENABLE", "0", 1);  // never NVLink multicast
  ::setenv("NCCL_RUNTIME_CONNECT", "0", 0);  // every connection at init, none inside a graph capture
  // The symmetric kernels' blocks (every symmetric collective's, the small ones' too). NCCL's model picks the fewest that reach the links' rate (7 on
  // two H200s), but beside the backward those ran the all-reduce at 142 GB/s and slowed the
  // backward by 20% (medium); with 16 and 24 blocks it took 9.6% and 9.3%, the ring 13.5%.
  ::setenv("NCCL_SYM_CTAS", "24", 0);
  return std::make_unique<NcclCommunicator>(world, backend, init, timeout_s);
}

}  // namespace tt
