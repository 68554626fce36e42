// Helpers for the data-parallel GPU tests: run the binary (plain, or under a launcher) with a
// small model into a fresh directory, check that the job ended whole, and read back its losses
// and final weights.
#pragma once
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
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
  std::string p(const std::string& name) const { return scratch_.file(name); }

  // `prefix` is a launcher (or nothing); the model is the default's shape, smaller. A job that
  // does not end is ended after kJobLimitS (exit code 124). Afterwards, ended() says whether
  // every process of the job is gone and the job ended within kExitS of rank 0's --json (written
  // after its last step).
  static constexpr int kJobLimitS = 150, kExitS = 30;
  int run(const std::string& prefix, const std::string& args, std::string* err = nullptr) {
    const std::string cmd = "timeout -k 5 " + std::to_string(kJobLimitS) + " env NCCL_NVLS_ENABLE=0 " + prefix + " " +
                            TT_BINARY + " " + kModel + " --log-every 1000 " + args + " >" + p("out.log") + " 2>" +
                            p("err.log");
    const int status = std::system(cmd.c_str());
    if (err) *err = read(p("err.log")) + read(p("out.log"));
    last_ = {cmd, after_json(args), leftovers()};
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  static constexpr const char* kModel = "--device cuda --hidden-dim 128 --num-layers 2 --num-heads 4 --seq-len 64";

  // The last job's processes all exited, within kExitS of its --json (when it wrote one).
  ::testing::AssertionResult ended() const {
    if (!last_.leftovers.empty())
      return ::testing::AssertionFailure() << last_.leftovers.size() << " process(es) outlived the job: " << last_.cmd;
    if (last_.after_json_s > kExitS)
      return ::testing::AssertionFailure() << "the job ended " << last_.after_json_s << " s after its --json: " << last_.cmd;
    return ::testing::AssertionSuccess();
  }

  // The processes whose command line or environment names this test's directory (a job's
  // ranks), each killed with SIGKILL so that none outlives the test.
  std::vector<pid_t> leftovers() const {
    std::vector<pid_t> found;
    for (const auto& e : fs::directory_iterator("/proc")) {
      const std::string name = e.path().filename().string();
      if (name.find_first_not_of("0123456789") != std::string::npos || std::stol(name) == ::getpid()) continue;
      if (read((e.path() / "cmdline").string()).find(dir.string()) == std::string::npos) continue;
      found.push_back(pid_t(std::stol(name)));
      ::kill(found.back(), SIGKILL);
    }
    return found;
  }
  // The process of `rank` under the built-in launcher (0 while it is not there yet).
  pid_t rank_pid(int rank) const {
    for (const auto& e : fs::directory_iterator("/proc")) {
      const std::string name = e.path().filename().string();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      if (read((e.path() / "cmdline").string()).find(dir.string()) == std::string::npos) continue;
      const std::string env = '\0' + read((e.path() / "environ").string());
      using namespace std::string_literals;  // literals that begin with '\0'
      if (env.find("\0TT_LAUNCHER=built-in\0"s) != std::string::npos &&
          env.find("\0RANK="s + std::to_string(rank) + '\0') != std::string::npos)
        return pid_t(std::stol(name));
    }
    return 0;
  }

  ScratchDir scratch_{"gpu_dist"};
  const fs::path dir = scratch_.path();  // named in every command line of a job: how its processes are found

 private:
  // Seconds from the last write of the --json in `args` to now (0 without one, or if none was written).
  double after_json(const std::string& args) const {
    const size_t at = args.find("--json ");
    if (at == std::string::npos) return 0;
    const std::string path = args.substr(at + 7, args.find(' ', at + 7) - at - 7);
    std::error_code ec;
    const auto written = fs::last_write_time(path, ec);
    if (ec) return 0;
    return std::chrono::duration<double>(fs::file_time_type::clock::now() - written).count();
  }
  struct Job {
    std::string cmd;
    double after_json_s = 0;
    std::vector<pid_t> leftovers;
  };
  Job last_;

 protected:
  static std::string read(const std::string& path) { return read_text(path); }
  static std::vector<double> losses(const std::string& json) { return run_losses(json); }
  static std::vector<float> weights(const std::string& ckpt) { return run_weights(ckpt); }
  static double rel(const std::vector<float>& a, const std::vector<float>& b) { return relative_difference(a, b); }
  static void expect_same_losses(const std::vector<double>& got, const std::vector<double>& ref, double bound) {
    ASSERT_EQ(got.size(), ref.size());
    for (size_t i = 0; i < ref.size(); ++i) EXPECT_LE(std::fabs(got[i] - ref[i]) / ref[i], bound) << "step " << i + 1;
  }
  static std::string as_root() { return ::geteuid() == 0 ? " --allow-run-as-root" : ""; }
};

}  // namespace tt::test
