// The built-in launcher: `tiny_llama --nproc-per-node N ...` starts N local ranks of the same
// command. On the CPU the ranks talk through MPI, so it runs the command under Open MPI's
// mpirun (as root with the flags Open MPI asks for there); the GPU's ranks need NCCL, not in
// this build yet.
#pragma once
#include <string>
#include <vector>

namespace tt {

// Replaces the process with mpirun running `args` (the command line without the launcher's
// flag) on `nproc` ranks. Returns only on failure, with UsageError.
[[noreturn]] void launch_local_ranks(int nproc, const std::vector<std::string>& args, bool cuda);

// `args` without --nproc-per-node and its value (both spellings).
std::vector<std::string> without_launcher_flag(const std::vector<std::string>& args);

}  // namespace tt
