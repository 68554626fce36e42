// Collectives over the ranks of a data-parallel world (src/parallel/world.h), on the memory of the
// backend the model runs on. One interface, an implementation per engine: Open MPI for the CPU
// backend's host memory (src/parallel/comm_mpi.cpp), NCCL for GPUs (src/parallel/comm_nccl.cpp, its
// ranks found through src/parallel/rendezvous.h); and a world of one process without a launcher,
// where every collective is the identity. Every rank calls the same collectives in the same
// order. On the GPU the tensor collectives are enqueued on the backend's current stream (the
// stream behind the backward pass, while the model finishes a bucket there) and return at once.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "parallel/world.h"

namespace tt {

class Backend;
struct MemoryResource;

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string name() const = 0;
  // The identity of a world of one process (no collective runs at all).
  virtual bool solo() const { return false; }
  // The job ends normally: wait for every rank to get here (after rank 0 has written its files),
  // so that no rank takes another's ending for a failure.
  virtual void finish() {}

  // Where a model's arena comes from when the engine's collectives run faster on memory of its
  // own; nullptr: the backend's. NCCL's comes from ncclMemAlloc, for its symmetric windows.
  virtual MemoryResource* memory() { return nullptr; }
  // Bytes [p, p + bytes) of a block from memory(), at the same offset of every rank's block and
  // laid out alike: the collectives on them may read and write the other ranks' copies directly
  // (NCCL: a symmetric window, whose kernels load the peers' buffers instead of passing chunks
  // round a ring). A collective: every rank calls it, before the first collective on those bytes.
  // The in-place reduce-scatter and all-gather name this rank's part at an offset of its own;
  // NCCL's symmetric kernels touch that part on this rank only (as of 2.28).
  virtual void share(void* /*p*/, size_t /*bytes*/) {}

  // t = the sum of every rank's t, in place.
  virtual void all_reduce_sum(const Tensor& t) = 0;
  // Elements [offsets[rank], offsets[rank + 1]) of t become those of the sum over the ranks of t,
  // in place; the others are left undefined (offsets: size() + 1 ascending element counts from 0
  // to t.numel).
  virtual void reduce_scatter_sum(const Tensor& t, const std::vector<int64_t>& offsets) = 0;
  // Elements [offsets[r], offsets[r + 1]) of t, as rank r holds them, to every rank (in place).
  virtual void all_gather(const Tensor& t, const std::vector<int64_t>& offsets) = 0;
  // Host values: the sum over the ranks (losses), and rank root's string to every rank.
  virtual void all_reduce_sum(std::vector<double>& host) = 0;
  virtual void broadcast(std::string& host, int root) = 0;
};

// The communicator of `world` for `backend`: GPU ranks talk through NCCL (a world of one GPU
// process that a launcher started too, so that one GPU runs the whole path), the CPU backend's
// ranks through MPI (launched by mpirun or srun), and a world of one otherwise gets the
// identity. `init` says where NCCL's ranks find rank 0 (see src/parallel/rendezvous.h), `timeout_s`
// how long they wait for each other. UsageError for a world or combination that cannot be.
std::unique_ptr<Communicator> make_communicator(const World& world, Backend& backend, const std::string& init = "env",
                                                int timeout_s = 60);

// Every rank's settings ("--batch-size=8", "plan=v4 bf16", ...: the same names in the same order
// on every rank) must equal rank 0's: else every rank stops with one line naming the first rank
// that differs, the setting, and rank 0's value.
void check_same_on_every_rank(Communicator& comm, const std::vector<std::string>& settings);

// Bucket [0, n) split among `ranks`: rank r holds [offsets[r], offsets[r + 1]), chunks of
// ceil(n / ranks), the last ones shorter or empty.
std::vector<int64_t> split_offsets(int64_t n, int ranks);

}  // namespace tt
