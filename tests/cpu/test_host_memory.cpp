// The host arena's refusal names the right limit, through the binary: with the machine's memory
// available but the process's address space limited (ulimit -v), the message compared the need
// with MemAvailable ("1823 MiB needed, 23000 MiB available") and left the user guessing.
#include <gtest/gtest.h>

#include "core/arena.h"
#include "run_outputs.h"

namespace tt::test {
namespace {

TEST(HostMemory, AProcessLimitIsNamedNotTheMachines) {
  if (available_host_bytes() < (size_t(4) << 30)) GTEST_SKIP() << "under 4 GiB available: the machine's limit comes first";
  ScratchDir scratch("hostmem");
  // The limit: what the program maps at start (its libraries) and 300 MB; the model needs 1 GB more.
  const long limit_kb = base_vm_kb() + 300 * 1024;
  ASSERT_GT(limit_kb, 300 * 1024);
  const Outcome r = run_binary("--device cpu --hidden-dim 1024 --num-layers 4 --num-heads 8 --num-steps 1", scratch.path(),
                               "ulimit -v " + std::to_string(limit_kb) + "; ");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("more than this process may take: its address space is limited to " +
                       std::to_string(limit_kb / 1024) + " MiB (ulimit -v)"),
            std::string::npos) << r.err;
}

}  // namespace
}  // namespace tt::test
