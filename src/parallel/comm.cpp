#include "parallel/comm.h"

#include <algorithm>

#include "backend/backend.h"
#include "core/error.h"

namespace tt {

namespace {

class SoloCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string name() const override { return "none (one process)"; }
  bool solo() const override { return true; }
  void all_reduce_sum(const Tensor&) override {}
  void reduce_scatter_sum(const Tensor&, const std::vector<int64_t>&) override {}
  void all_gather(const Tensor&, const std::vector<int64_t>&) override {}
  void all_reduce_sum(std::vector<double>&) override {}
  void broadcast(std::string&, int) override {}
};

}  // namespace

#ifdef TT_HAVE_MPI
std::unique_ptr<Communicator> make_mpi_communicator(const World& world);
#endif
#ifdef TT_HAVE_NCCL
std::unique_ptr<Communicator> make_nccl_communicator(const World& world, Backend& backend, const std::string& init,
                                                     int timeout_s);
#endif

std::unique_ptr<Communicator> make_communicator(const World& world, Backend& backend, const std::string& init,
                                                int timeout_s) {
  if (backend.is_cuda() && world.launcher != "none") {
#ifdef TT_HAVE_NCCL
    return make_nccl_communicator(world, backend, init, timeout_s);
#else
    usage_fail("GPU ranks need NCCL, which this build has not found");
#endif
  }
  if (!world.distributed()) return std::make_unique<SoloCommunicator>();
#ifdef TT_HAVE_MPI
  return make_mpi_communicator(world);
#else
  usage_fail("a world of " + std::to_string(world.size) + " CPU processes needs MPI, which this build has not found");
#endif
}

void check_same_on_every_rank(Communicator& comm, const std::string& what, const std::string& description) {
  std::string root = what;
  comm.broadcast(root, 0);
  std::vector<double> differs(size_t(comm.size()), 0.0);
  differs[size_t(comm.rank())] = root == what ? 0.0 : 1.0;
  comm.all_reduce_sum(differs);
  for (int r = 0; r < comm.size(); ++r)
    if (differs[size_t(r)] != 0)
      usage_fail("rank " + std::to_string(r) + " runs another " + description + " than rank 0 (every rank must be given "
                 "the same flags)");
}

std::vector<int64_t> split_offsets(int64_t n, int ranks) {
  const int64_t chunk = (n + ranks - 1) / ranks;
  std::vector<int64_t> offsets(size_t(ranks) + 1);
  for (int r = 0; r <= ranks; ++r) offsets[size_t(r)] = std::min<int64_t>(n, int64_t(r) * chunk);
  return offsets;
}

}  // namespace tt
