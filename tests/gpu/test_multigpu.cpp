// Data parallelism over two GPUs (label multigpu; skipped with a message on fewer): a 2-GPU run
// and a 1-GPU run of the same global batch give the same losses step by step and the same final
// weights (fp32: relative 1e-5 over 50 steps; bf16: 2e-2), with and without ZeRO-1, under the
// built-in launcher, torchrun and mpirun. A rank killed mid-run makes the other exit within
// 60 s with one line naming it, and the run resumes from its last checkpoint on 2 GPUs and on 1.
#include <cuda_runtime.h>
#include <signal.h>

#include <chrono>
#include <thread>

#include "gpu/dist_harness.h"

namespace tt::test {
namespace {

class MultiGpu : public DistRun {
 protected:
  void SetUp() override {
    int gpus = 0;
    if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus < 2) GTEST_SKIP() << "needs 2 GPUs, this machine has " << gpus;
    DistRun::SetUp();
  }
};

bool have(const char* tool) { return std::system(("command -v " + std::string(tool) + " >/dev/null 2>&1").c_str()) == 0; }

TEST_F(MultiGpu, TwoGpusComputeWhatOneComputes) {
  std::string err;
  struct Launcher {
    std::string name, prefix, flags;
  };
  std::vector<Launcher> launchers = {{"built-in", "", "--nproc-per-node 2"}};
  if (have("torchrun")) launchers.push_back({"torchrun", "torchrun --standalone --nproc-per-node 2 --no-python", ""});
  if (have("mpirun")) launchers.push_back({"mpirun", "mpirun -np 2 --bind-to none -x NCCL_NVLS_ENABLE=0" + as_root(), ""});
  for (const std::string precision : {"fp32", "bf16"}) {
    SCOPED_TRACE(precision);
    const std::string base = "--version v4 " + std::string(precision == "bf16" ? "--use-amp " : "") + "--num-steps 50";
    const double bound = precision == "bf16" ? 2e-2 : 1e-5;
    ASSERT_EQ(run("", base + " --batch-size 8 --json " + p("one.json") + " --save " + p("one.st"), &err), 0) << err;
    const std::vector<double> ref = losses(p("one.json"));
    const std::vector<float> ref_w = weights(p("one.st"));
    for (const Launcher& l : launchers) {
      if (precision == "bf16" && l.name != "built-in") continue;  // the launchers differ in the start only
      for (int zero : {0, 1}) {
        SCOPED_TRACE(l.name + ", ZeRO-" + std::to_string(zero));
        ASSERT_EQ(run(l.prefix, base + " --batch-size 4 " + l.flags + " --zero " + std::to_string(zero) + " --json " +
                                    p("two.json") + " --save " + p("two.st"),
                      &err),
                  0)
            << err;
        EXPECT_NE(read(p("out.log")).find("Data parallel: 2 processes"), std::string::npos) << read(p("out.log"));
        expect_same_losses(losses(p("two.json")), ref, bound);
        EXPECT_LE(rel(weights(p("two.st")), ref_w), bound) << "final weights";
      }
    }
  }
}

TEST_F(MultiGpu, AKilledRankStopsTheOtherAndTheRunResumes) {
  std::string err;
  const std::string base = "--version v4 --use-amp --batch-size 4";
  // The uninterrupted run, for the losses the resumed ones must continue with.
  ASSERT_EQ(run("", base + " --nproc-per-node 2 --num-steps 400 --json " + p("full.json"), &err), 0) << err;
  const std::vector<double> full = losses(p("full.json"));

  const pid_t job = ::fork();
  ASSERT_GE(job, 0);
  if (job == 0) {
    const std::string cmd = "exec env NCCL_NVLS_ENABLE=0 " + std::string(TT_BINARY) +
                            " --device cuda --hidden-dim 128 --num-layers 2 --num-heads 4 --seq-len 64 " + base +
                            " --nproc-per-node 2 --num-steps 1000000 --log-every 10 --save-every 50 --save " + p("ck.st") +
                            " >" + p("out.log") + " 2>" + p("err.log");
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // Once a checkpoint is written, SIGKILL to rank 1 (the child of the launcher whose RANK is 1).
  pid_t victim = 0;
  for (int i = 0; i < 6000 && !victim; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (!fs::exists(p("ck.st"))) continue;
    for (const auto& e : fs::directory_iterator("/proc")) {
      const std::string env = read((e.path() / "environ").string());
      if (env.find(p("ck.st")) == std::string::npos && read((e.path() / "cmdline").string()).find(p("ck.st")) == std::string::npos)
        continue;
      if (env.find(std::string("RANK=1") + '\0') != std::string::npos && env.find("LOCAL_RANK=1") != std::string::npos) {
        victim = pid_t(std::stol(e.path().filename().string()));
        break;
      }
    }
  }
  ASSERT_NE(victim, 0) << "rank 1 not found: " << read(p("err.log"));
  const auto start = std::chrono::steady_clock::now();
  ::kill(victim, SIGKILL);
  int status = 0;
  pid_t done = 0;
  while ((done = ::waitpid(job, &status, WNOHANG)) == 0 &&
         std::chrono::steady_clock::now() - start < std::chrono::seconds(60))
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  if (done == 0) {
    ::kill(job, SIGKILL);
    ::waitpid(job, &status, 0);
    FAIL() << "the job was still running 60 s after a rank died";
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "[ killed  ] the job ended " << seconds << " s after rank 1 was killed\n";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) != 0);
  const std::string log = read(p("err.log"));
  EXPECT_NE(log.find("rank 1 of 2 was lost"), std::string::npos) << log;

  // Resume from the last checkpoint on 2 GPUs and on 1 (twice the batch): the losses continue
  // as the uninterrupted run's.
  ASSERT_EQ(run("", base + " --nproc-per-node 2 --num-steps 400 --resume " + p("ck.st") + " --json " + p("r2.json"), &err), 0)
      << err;
  ASSERT_EQ(run("", "--version v4 --use-amp --batch-size 8 --num-steps 400 --resume " + p("ck.st") + " --json " +
                        p("r1.json"),
                &err),
            0)
      << err;
  for (const char* r : {"r2.json", "r1.json"}) {
    SCOPED_TRACE(r);
    const std::vector<double> got = losses(p(r));
    ASSERT_FALSE(got.empty());
    const size_t first = full.size() - got.size();
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_LE(std::fabs(got[i] - full[first + i]) / full[first + i], 2e-2) << "step " << first + i + 1;
  }
}

}  // namespace
}  // namespace tt::test
