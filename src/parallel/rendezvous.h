// How the processes of a GPU job find each other before NCCL can, and notice when one of them
// is gone. Rank 0 listens on a TCP port; every other rank connects to it twice, and both
// connections last the whole job:
//   - the control connection carries the NCCL unique id out from rank 0, each rank's host and
//     GPU in (two ranks on one GPU are refused), and the host-side collectives of a step (the
//     loss, the agreed stop): gathered at rank 0, combined there in rank order, sent back;
//   - the liveness connection carries nothing while all is well. When a process ends, the
//     kernel closes its connections: rank 0 sees which rank it was and tells the others, and
//     every rank stops with one line naming it (the watchdog, watch()).
// Where rank 0 listens (init):
//   "env"        MASTER_ADDR:MASTER_PORT (torchrun, Slurm, the built-in launcher, which listens
//                there itself before it starts the ranks and hands rank 0 the socket). Under
//                torchrun its agent's own store holds MASTER_PORT: rank 0 listens on a free
//                port and sets its number in that store, where the others wait for it.
//   "file:PATH"  a port rank 0 picks, written with its host name to PATH on a shared path.
//   "mpi"        a port rank 0 picks, sent to the others over MPI (mpirun without MASTER_ADDR).
#pragma once
#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "parallel/world.h"

namespace tt {

class Rendezvous {
 public:
  // Connects the world, waiting up to timeout_s for every rank. UsageError (exit 2) for a
  // malformed or unreachable address, a rank that never comes, two processes with one rank.
  Rendezvous(const World& world, const std::string& init, int timeout_s);
  ~Rendezvous();
  Rendezvous(const Rendezvous&) = delete;
  Rendezvous& operator=(const Rendezvous&) = delete;

  int rank() const { return world_.rank; }
  int size() const { return world_.size; }
  // Rank 0's bytes to every rank.
  std::string broadcast(const std::string& bytes);
  // Every rank's bytes, in rank order, at rank 0 (an empty list elsewhere).
  std::vector<std::string> gather(const std::string& bytes);

  // Starts the watchdog: every 100 ms it checks the liveness connections, and `check` (an
  // error text, or empty while all is well); on a lost rank or an error it calls `stop` with
  // the line to print, once, from its own thread. Until then (while the ranks meet) every read
  // waits timeout_s at most; after, a read waits for its rank as long as the rank lives.
  void watch(std::function<std::string()> check, std::function<void(const std::string&)> stop);
  // The job ends normally: the watchdog stops, then every rank waits for all the others to get
  // here, so that none takes another's ending for a loss.
  void finish();

 private:
  void send(int fd, const std::string& bytes);
  std::string receive(int fd, int from_rank) { return receive(fd, from_rank, deadline_); }
  std::string receive(int fd, int from_rank, std::chrono::steady_clock::time_point deadline);
  void watchdog();
  void meet_ranks(int listener, std::chrono::steady_clock::time_point deadline);  // rank 0: every rank's two connections

  static constexpr int kHelloSeconds = 5;  // a rank says who it is as soon as it connects
  static constexpr const char* kHello = "tt-hello";  // the first word of a rank's hello
  static constexpr uint64_t kMaxHelloBytes = 64;
  static constexpr size_t kMaxPending = 256;  // connections that have not said who they are, at once
  static constexpr uint64_t kMaxMessageBytes = uint64_t(1) << 20;  // the largest message: refused, not allocated, beyond
  World world_;
  int timeout_s_;
  std::chrono::steady_clock::time_point deadline_;  // of every read while the ranks meet; then none
  // init file:PATH at rank 0: removed when the rendezvous ends, whichever way (a member, so that
  // a constructor that throws removes it too).
  struct RemovedAtEnd {
    std::string path;
    ~RemovedAtEnd();
  } file_;
  std::vector<int> control_;    // rank 0: one per rank (its own unused); others: [0] to rank 0
  std::vector<int> liveness_;   // likewise
  std::function<std::string()> check_;
  std::function<void(const std::string&)> stop_;
  std::atomic<bool> watching_{false};
  std::thread thread_;
};

// A socket listening on `port` of every interface (0: a free one, its number in *bound_port), as
// rank 0 listens; UsageError naming `what` when it cannot.
int listen_for_ranks(int port, int* bound_port, const std::string& what);
// The environment variable that gives rank 0 the built-in launcher's listening socket (its file
// descriptor, inherited): rank 0 checks that it listens on MASTER_PORT and uses it.
constexpr const char* kRank0Listener = "TT_RANK0_LISTENER";

// Rank 0's string to every rank through MPI (src/parallel/comm_mpi.cpp): MPI initialized on first use.
std::string mpi_broadcast_from_rank0(const World& world, const std::string& bytes);

}  // namespace tt
