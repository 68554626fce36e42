// Collectives over the ranks of a data-parallel world (src/dist/world.h), on the memory of the
// backend the model runs on. One interface, an implementation per engine: Open MPI for the CPU
// backend's host memory (src/dist/comm_mpi.cpp); a world of one, where every collective is the
// identity. Every rank calls the same collectives in the same order.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "dist/world.h"

namespace tt {

class Backend;

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string name() const = 0;

  // t = the sum of every rank's t, in place.
  virtual void all_reduce_sum(const Tensor& t) = 0;
  // out = elements [offsets[rank], offsets[rank + 1]) of the sum over the ranks of `in`
  // (offsets: size() + 1 ascending element counts from 0 to in.numel).
  virtual void reduce_scatter_sum(const Tensor& in, const Tensor& out, const std::vector<int64_t>& offsets) = 0;
  // Elements [offsets[r], offsets[r + 1]) of t, as rank r holds them, to every rank (in place).
  virtual void all_gather(const Tensor& t, const std::vector<int64_t>& offsets) = 0;
  // Host values: the sum over the ranks (losses), and rank root's string to every rank.
  virtual void all_reduce_sum(std::vector<double>& host) = 0;
  virtual void broadcast(std::string& host, int root) = 0;
};

// The communicator of `world` for `backend`: a world of one needs none (it gets the identity);
// the CPU backend's ranks talk through MPI (launched by mpirun or srun). UsageError for a
// combination this build cannot serve.
std::unique_ptr<Communicator> make_communicator(const World& world, Backend& backend);

// Every rank's `what` must equal rank 0's (the model, the batch, the plan): else every rank
// stops with one line naming the first rank that differs and what differs.
void check_same_on_every_rank(Communicator& comm, const std::string& what, const std::string& description);

// Bucket [0, n) split among `ranks`: rank r holds [offsets[r], offsets[r + 1]), chunks of
// ceil(n / ranks), the last ones shorter or empty.
std::vector<int64_t> split_offsets(int64_t n, int ranks);

}  // namespace tt
