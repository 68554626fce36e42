#include "dist/launch.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace tt {

std::vector<std::string> without_launcher_flag(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--nproc-per-node") {
      ++i;
      continue;
    }
    if (args[i].rfind("--nproc-per-node=", 0) == 0) continue;
    out.push_back(args[i]);
  }
  return out;
}

void launch_local_ranks(int nproc, const std::vector<std::string>& args, bool cuda) {
  if (cuda)
    usage_fail("--nproc-per-node: GPU ranks need NCCL, which this build does not use yet; on the CPU add --device cpu");
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) usage_fail("--nproc-per-node: cannot find this program's path");
  self[n] = '\0';
  std::vector<std::string> argv = {"mpirun", "-np", std::to_string(nproc), "--oversubscribe", "--bind-to", "none"};
  if (::geteuid() == 0) argv.push_back("--allow-run-as-root");
  argv.push_back(self);
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> c;
  for (std::string& a : argv) c.push_back(a.data());
  c.push_back(nullptr);
  ::execvp("mpirun", c.data());
  usage_fail("--nproc-per-node: cannot start mpirun (" + std::string(std::strerror(errno)) +
             "): install Open MPI (scripts/install-deps.sh)");
}

}  // namespace tt
