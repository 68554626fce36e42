// The CPU backend's collectives through MPI (Open MPI here): MPI_Init at the first world of
// several processes, MPI_Finalize at exit. A rank that dies ends the job: mpirun (or srun)
// kills the others, which is what a data-parallel step that cannot finish calls for.
// The C interface only: Open MPI would add its deprecated C++ bindings, and their library.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "parallel/comm.h"
#include "parallel/rendezvous.h"

namespace tt {

namespace {

void check(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  fail(std::string(call) + " failed: " + std::string(text, size_t(len)));
}

MPI_Datatype type_of(const Tensor& t) {
  if (t.dtype == DType::F32) return MPI_FLOAT;
  if (t.dtype == DType::F64) return MPI_DOUBLE;
  if (t.dtype == DType::I32) return MPI_INT;  // gathers of token ids
  fail(std::string("MPI collectives take fp32, fp64 or int32 tensors, not ") + dtype_name(t.dtype));
}

std::vector<int> counts_of(const std::vector<int64_t>& offsets, std::vector<int>* displs) {
  std::vector<int> counts;
  for (size_t r = 0; r + 1 < offsets.size(); ++r) {
    TT_CHECK(offsets[r + 1] - offsets[r] <= INT_MAX && offsets[r + 1] <= INT_MAX, "MPI: a bucket over 2^31 elements");
    counts.push_back(int(offsets[r + 1] - offsets[r]));
    displs->push_back(int(offsets[r]));
  }
  return counts;
}

void broadcast_string(std::string& s, int root) {
  int n = int(s.size());
  check(MPI_Bcast(&n, 1, MPI_INT, root, MPI_COMM_WORLD), "MPI_Bcast");
  s.resize(size_t(n));
  check(MPI_Bcast(s.data(), n, MPI_CHAR, root, MPI_COMM_WORLD), "MPI_Bcast");
}

// MPI_Init at the first use, MPI_Finalize at exit; MPI's world must be the launcher's.
void init_mpi(const World& w) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    check(MPI_Init(nullptr, nullptr), "MPI_Init");
    std::atexit([] {
      int finalized = 0;
      MPI_Finalized(&finalized);
      if (!finalized) MPI_Finalize();
    });
  }
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (rank != w.rank || size != w.size)
    usage_fail("MPI sees rank " + std::to_string(rank) + " of " + std::to_string(size) + " where the launcher (" +
               w.launcher + ") said " + std::to_string(w.rank) + " of " + std::to_string(w.size) +
               ": start the ranks with mpirun or srun");
}

class MpiCommunicator final : public Communicator {
 public:
  explicit MpiCommunicator(const World& w) {
    init_mpi(w);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(version, &len);
    library_ = std::string(version, size_t(len));
    library_ = library_.substr(0, library_.find(','));
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "MPI (" + library_ + ")"; }

  void all_reduce_sum(const Tensor& t) override {
    const int64_t chunk = int64_t(1) << 30;
    for (int64_t at = 0; at < t.numel; at += chunk) {
      const Tensor part = t.slice(at, std::min(chunk, t.numel - at));
      check(MPI_Allreduce(MPI_IN_PLACE, part.ptr, int(part.numel), type_of(t), MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
    }
  }
  void reduce_scatter_sum(const Tensor& t, const std::vector<int64_t>& offsets) override {
    std::vector<int> displs;
    const std::vector<int> counts = counts_of(offsets, &displs);
    const size_t bytes = size_t(counts[size_t(rank_)]) * dtype_size(t.dtype);
    part_.resize(std::max(part_.size(), bytes));  // MPI's result lands at the start of a buffer
    check(MPI_Reduce_scatter(t.ptr, part_.data(), counts.data(), type_of(t), MPI_SUM, MPI_COMM_WORLD),
          "MPI_Reduce_scatter");
    std::memcpy(static_cast<char*>(t.ptr) + size_t(offsets[size_t(rank_)]) * dtype_size(t.dtype), part_.data(), bytes);
  }
  void all_gather(const Tensor& t, const std::vector<int64_t>& offsets) override {
    std::vector<int> displs;
    const std::vector<int> counts = counts_of(offsets, &displs);
    check(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, t.ptr, counts.data(), displs.data(), type_of(t),
                         MPI_COMM_WORLD),
          "MPI_Allgatherv");
  }
  void all_reduce_sum(std::vector<double>& host) override {
    check(MPI_Allreduce(MPI_IN_PLACE, host.data(), int(host.size()), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
  }
  void broadcast(std::string& host, int root) override { broadcast_string(host, root); }

 private:
  int rank_ = 0, size_ = 1;
  std::string library_;
  std::vector<char> part_;  // this rank's part of a reduce-scatter
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator(const World& world) { return std::make_unique<MpiCommunicator>(world); }

std::string mpi_broadcast_from_rank0(const World& world, const std::string& bytes) {
  init_mpi(world);
  std::string s = bytes;
  broadcast_string(s, 0);
  return s;
}

}  // namespace tt
