// The built-in launcher: `tiny_llama --nproc-per-node N ...` starts N local ranks of the same
// command. On the CPU the ranks talk through MPI, so it runs the command under Open MPI's
// mpirun (as root with the flags Open MPI asks for there) and waits for it. On GPUs it starts the ranks itself,
// the way torchrun does: each a child with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
// MASTER_ADDR=127.0.0.1 and MASTER_PORT, a port the launcher listens on before it starts them
// and hands to rank 0 (src/parallel/rendezvous.h: no other process can take it between); when one fails the others are stopped
// (SIGTERM, then SIGKILL after 30 s), and a signal to the launcher goes to every rank, followed
// by SIGCONT (a stopped rank acts on it too); ranks still running 30 s later are killed.
#pragma once
#include <string>
#include <vector>

namespace tt {

// Set in the environment of the CPU ranks the launcher starts: a rank stopped by a signal then
// exits 0 after its checkpoint, and the launcher reports the signal (128 + it), so that mpirun,
// seeing no rank fail, prints none of its error boxes.
constexpr const char* kLaunchedRank = "TT_LAUNCHED_RANK";

// Runs `args` (the command line without the launcher's flag) on `nproc` local ranks and
// returns the exit code for the job: 0, or the first failed rank's (128 + signal for a
// killed one; 128 + the signal when one stopped the job). CPU ranks run under mpirun.
int launch_local_ranks(int nproc, const std::vector<std::string>& args, bool cuda);

// The value of --nproc-per-node in `args` (either spelling), 0 without it; UsageError for a
// value that is not a count of 1 to 64.
int launcher_ranks(const std::vector<std::string>& args);
// `args` without --nproc-per-node and its value (both spellings).
std::vector<std::string> without_launcher_flag(const std::vector<std::string>& args);

// This program's path (for starting ranks of it).
std::string self_path();

}  // namespace tt
