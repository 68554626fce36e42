// Helpers for the data-parallel GPU tests: run the binary (plain, or under a launcher) with a
// small model into a fresh directory, and read back its losses and final weights.
#pragma once
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "run_outputs.h"

namespace tt::test {

namespace fs = std::filesystem;

class DistRun : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = fs::temp_directory_path() / ("tt_gpu_dist_" + std::to_string(::getpid()) + "_" +
                                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  void TearDown() override { fs::remove_all(dir); }
  std::string p(const std::string& name) const { return (dir / name).string(); }

  // `prefix` is a launcher (or nothing); the model is the default's shape, smaller.
  int run(const std::string& prefix, const std::string& args, std::string* err = nullptr) {
    const std::string cmd = "NCCL_NVLS_ENABLE=0 " + prefix + " " + TT_BINARY +
                            " --device cuda --hidden-dim 128 --num-layers 2 --num-heads 4 --seq-len 64 --log-every 1000 " +
                            args + " >" + p("out.log") + " 2>" + p("err.log");
    const int status = std::system(cmd.c_str());
    if (err) *err = read(p("err.log")) + read(p("out.log"));
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  static std::string read(const std::string& path) { return read_text(path); }
  static std::vector<double> losses(const std::string& json) { return run_losses(json); }
  static std::vector<float> weights(const std::string& ckpt) { return run_weights(ckpt); }
  static double rel(const std::vector<float>& a, const std::vector<float>& b) { return relative_difference(a, b); }
  static void expect_same_losses(const std::vector<double>& got, const std::vector<double>& ref, double bound) {
    ASSERT_EQ(got.size(), ref.size());
    for (size_t i = 0; i < ref.size(); ++i) EXPECT_LE(std::fabs(got[i] - ref[i]) / ref[i], bound) << "step " << i + 1;
  }
  static std::string as_root() { return ::geteuid() == 0 ? " --allow-run-as-root" : ""; }

  fs::path dir;
};

}  // namespace tt::test
