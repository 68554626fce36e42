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

void check_same_on_every_rank(Communicator& comm, const std::vector<std::string>& settings) {
  std::string mine;
  for (const std::string& s : settings) mine += s + "\n";
  std::string root = mine;
  comm.broadcast(root, 0);
  // Each rank's first differing setting, counted from 1 (0: none), summed into its own slot.
  std::vector<double> differs(size_t(comm.size()), 0.0);
  std::vector<std::string> root_settings;
  for (size_t at = 0, end; (end = root.find('\n', at)) != std::string::npos; at = end + 1)
    root_settings.push_back(root.substr(at, end - at));
  for (size_t i = 0; i < std::max(settings.size(), root_settings.size()) && differs[size_t(comm.rank())] == 0; ++i)
    if (i >= settings.size() || i >= root_settings.size() || settings[i] != root_settings[i])
      differs[size_t(comm.rank())] = double(i + 1);
  comm.all_reduce_sum(differs);
  for (int r = 0; r < comm.size(); ++r) {
    if (differs[size_t(r)] == 0) continue;
    const size_t i = size_t(differs[size_t(r)]) - 1;
    const std::string setting = i < root_settings.size() ? root_settings[i] : "(a setting rank 0 lacks)";
    usage_fail("rank " + std::to_string(r) + " differs from rank 0 in " + setting.substr(0, setting.find('=')) +
               " (rank 0: " + setting.substr(setting.find('=') + 1) + "): every rank must be given the same flags");
  }
}

std::vector<int64_t> split_offsets(int64_t n, int ranks) {
  const int64_t chunk = (n + ranks - 1) / ranks;
  std::vector<int64_t> offsets(size_t(ranks) + 1);
  for (int r = 0; r <= ranks; ++r) offsets[size_t(r)] = std::min<int64_t>(n, int64_t(r) * chunk);
  return offsets;
}

}  // namespace tt
