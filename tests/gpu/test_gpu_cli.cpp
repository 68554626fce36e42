// The real binary on the GPU: running out of memory at start is a clear error, not a crash.
#include <sys/wait.h>

#include <filesystem>
#include <fstream>

#include "gpu_harness.h"

namespace tt::test {
namespace {

TEST(GpuCli, OutOfMemoryAtStartIsAClearError) {
  REQUIRE_GPU();
  const std::filesystem::path err = std::filesystem::temp_directory_path() / "tt_oom_stderr";
  // v1 keeps the [B, H, T, T] probabilities of every layer: far more than any GPU holds.
  const std::string cmd = std::string(TT_BINARY) +
                          " --device cuda --version v1 --batch-size 64 --seq-len 8192 --num-steps 1 >/dev/null 2>" +
                          err.string();
  const int status = std::system(cmd.c_str());
  std::ifstream in(err);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << text;
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;
  for (const char* part : {"out of GPU memory", "activations", "are free", "--batch-size"})
    EXPECT_NE(text.find(part), std::string::npos) << part << " not in: " << text;
  std::filesystem::remove(err);
}

}  // namespace
}  // namespace tt::test
