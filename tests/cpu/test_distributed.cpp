// Data-parallel training on CPU ranks through Open MPI (the real mpirun): 2 and 3 ranks give
// the losses and final weights of one rank with the same global batch, with and without ZeRO-1;
// checkpoints resume on another number of ranks; a killed rank ends the job; ranks given
// different flags are refused. And the launchers' variables (torchrun, Slurm, Open MPI).
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>
#include <tuple>

#include "core/error.h"
#include "run_outputs.h"
#include "parallel/comm.h"
#include "parallel/rendezvous.h"
#include "parallel/world.h"

namespace tt::test {
namespace {

namespace fs = std::filesystem;

TEST(World, LaunchersVariables) {
  EXPECT_FALSE(detect_world({}).distributed());
  World t = detect_world({{"RANK", "3"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "2"},
                          {"MASTER_ADDR", "node0"}, {"MASTER_PORT", "29500"}});
  EXPECT_EQ(t.launcher, "torchrun");
  EXPECT_EQ(t.rank, 3);
  EXPECT_EQ(t.size, 8);
  EXPECT_EQ(t.local_rank, 1);
  EXPECT_EQ(t.master_addr, "node0");
  World s = detect_world({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "1"},
                          {"SLURM_TASKS_PER_NODE", "4(x2)"}, {"SLURM_JOB_NODELIST", "gpu[07-08],cpu1"}});
  EXPECT_EQ(s.launcher, "slurm");
  EXPECT_EQ(s.rank, 5);
  EXPECT_EQ(s.local_size, 4);
  EXPECT_EQ(s.master_addr, "gpu07");
  EXPECT_EQ(s.master_port, 29500);
  World m = detect_world({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"},
                          {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}});
  EXPECT_EQ(m.launcher, "mpirun");
  EXPECT_EQ(m.size, 2);
  EXPECT_EQ(first_slurm_host("node1,node2"), "node1");
  EXPECT_EQ(first_slurm_host("a[1,3-5]"), "a1");
  auto refusal = [](const std::map<std::string, std::string>& env) {
    try {
      detect_world(env);
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(refusal({{"RANK", "8"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "0"}, {"LOCAL_WORLD_SIZE", "8"},
                     {"MASTER_ADDR", "a"}, {"MASTER_PORT", "1"}})
                .find("RANK='8'"),
            std::string::npos);
  EXPECT_NE(refusal({{"RANK", "0"}, {"WORLD_SIZE", "2"}}).find("set only in part"), std::string::npos);
  EXPECT_NE(refusal({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}, {"LOCAL_WORLD_SIZE", "2"}})
                .find("MASTER_ADDR missing"),
            std::string::npos);
  // MASTER_ADDR and MASTER_PORT alone (a Slurm or mpirun job's, or a shell's) are no world.
  EXPECT_FALSE(detect_world({{"MASTER_ADDR", "node0"}, {"MASTER_PORT", "29500"}}).distributed());
  EXPECT_EQ(detect_world({{"MASTER_ADDR", "node0"}, {"MASTER_PORT", "29500"}}).launcher, "none");
  World mm = detect_world({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                           {"MASTER_ADDR", "node0"}, {"MASTER_PORT", "29500"}});
  EXPECT_EQ(mm.launcher, "mpirun");
  EXPECT_EQ(mm.master_addr, "node0");
  EXPECT_NE(refusal({{"SLURM_PROCID", "x"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "0"}}).find("not a number"),
            std::string::npos);
  EXPECT_EQ(split_offsets(10, 3), (std::vector<int64_t>{0, 4, 8, 10}));
  EXPECT_EQ(split_offsets(2, 3), (std::vector<int64_t>{0, 1, 2, 2}));
}

bool have_mpirun() { return std::system("command -v mpirun >/dev/null 2>&1") == 0; }

class Distributed : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_mpirun()) GTEST_SKIP() << "Open MPI's mpirun is not installed (scripts/install-deps.sh installs it)";
  }
  std::string p(const std::string& name) const { return (dir / name).string(); }
  // Runs the binary on `ranks` ranks (mpirun; 1: plain) with a small model.
  int run(int ranks, const std::string& args, std::string* err = nullptr) {
    const std::string mpi = ranks > 1 ? "mpirun -np " + std::to_string(ranks) + " --oversubscribe --bind-to none" +
                                            (::geteuid() == 0 ? " --allow-run-as-root " : " ")
                                      : "";
    const std::string cmd = "OMP_NUM_THREADS=1 " + mpi + TT_BINARY +
                            " --device cpu --hidden-dim 32 --num-layers 2 --num-heads 4 --seq-len 16"
                            " --learning-rate 1e-3 --log-every 1000 " + args + " >" + p("out.log") + " 2>" + p("err.log");
    const int status = std::system(cmd.c_str());
    std::ifstream e(p("err.log"));
    if (err) *err = std::string((std::istreambuf_iterator<char>(e)), std::istreambuf_iterator<char>());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  static std::vector<double> losses(const std::string& json) { return run_losses(json); }
  static std::vector<float> weights(const std::string& ckpt) { return run_weights(ckpt); }
  ScratchDir scratch_{"dist"};
  const fs::path dir = scratch_.path();
};

// 1 rank at batch 6 against 2 ranks at 3 and 3 ranks at 2, with and without ZeRO-1.
TEST_F(Distributed, RanksComputeWhatOneRankComputes) {
  std::string err;
  ASSERT_EQ(run(1, "--batch-size 6 --num-steps 20 --json " + p("one.json") + " --save " + p("one.st"), &err), 0) << err;
  const std::vector<double> ref = losses(p("one.json"));
  const std::vector<float> ref_w = weights(p("one.st"));
  for (auto [ranks, zero] : {std::pair{2, 0}, {2, 1}, {3, 0}, {3, 1}}) {
    SCOPED_TRACE(testing::Message() << ranks << " ranks, ZeRO-" << zero);
    const std::string name = std::to_string(ranks) + "_" + std::to_string(zero);
    ASSERT_EQ(run(ranks, "--batch-size " + std::to_string(6 / ranks) + " --num-steps 20 --zero " + std::to_string(zero) +
                             " --json " + p(name + ".json") + " --save " + p(name + ".st"),
                  &err),
              0)
        << err;
    const std::vector<double> got = losses(p(name + ".json"));
    ASSERT_EQ(got.size(), ref.size());
    for (size_t i = 0; i < ref.size(); ++i) EXPECT_LE(std::fabs(got[i] - ref[i]) / ref[i], 1e-6) << "step " << i + 1;
    EXPECT_LE(relative_difference(weights(p(name + ".st")), ref_w), 1e-5) << "final weights";
  }
}

// The embedding's bucket either way: summed early with the lookup's part gathered from every rank
// (the default shapes above: 2 x 48 tokens against a vocabulary of 1000), and summed whole at the
// end where every rank's tokens outnumber the vocabulary (96 against 64); an untied head gathered
// too.
TEST_F(Distributed, TheEmbeddingsGradientGatheredOrSummedWhole) {
  std::string err;
  for (const std::string flags : {" --vocab-size 64", " --no-tie-embeddings"}) {
    SCOPED_TRACE(flags);
    ASSERT_EQ(run(1, "--batch-size 6 --num-steps 10 --json " + p("one.json") + " --save " + p("one.st") + flags, &err), 0)
        << err;
    for (int zero : {0, 1}) {
      ASSERT_EQ(run(2, "--batch-size 3 --num-steps 10 --zero " + std::to_string(zero) + " --json " + p("two.json") +
                           " --save " + p("two.st") + flags,
                    &err),
                0)
          << err;
      const std::vector<double> ref = losses(p("one.json")), got = losses(p("two.json"));
      ASSERT_EQ(got.size(), ref.size());
      for (size_t i = 0; i < ref.size(); ++i) EXPECT_LE(std::fabs(got[i] - ref[i]) / ref[i], 1e-6) << "step " << i + 1;
      EXPECT_LE(relative_difference(weights(p("two.st")), weights(p("one.st"))), 1e-5) << "final weights";
    }
  }
}

// The recipe over ranks: 1 rank at batch 6 against 2 ranks of 3 micro-batches of 1 (ZeRO-1) and 3
// ranks of 2 micro-batches of 1, with clipping (the norm over every rank's part) and the norms and
// embedding exempt from decay.
TEST_F(Distributed, MicroBatchesAndClippingOverRanks) {
  const std::string recipe = " --num-steps 12 --grad-clip 0.5 --no-decay-norms --no-decay-embedding --weight-decay 0.1";
  std::string err;
  ASSERT_EQ(run(1, "--batch-size 6" + recipe + " --json " + p("one.json") + " --save " + p("one.st"), &err), 0) << err;
  const std::vector<double> ref = losses(p("one.json"));
  for (auto [ranks, accum, zero] : {std::tuple{2, 3, 1}, {3, 2, 0}}) {
    SCOPED_TRACE(testing::Message() << ranks << " ranks of " << accum << " micro-batches, ZeRO-" << zero);
    const std::string name = std::to_string(ranks);
    ASSERT_EQ(run(ranks, "--batch-size 1 --grad-accum-steps " + std::to_string(accum) + " --zero " +
                             std::to_string(zero) + recipe + " --json " + p(name + ".json") + " --save " + p(name + ".st"),
                  &err),
              0)
        << err;
    const std::vector<double> got = losses(p(name + ".json"));
    ASSERT_EQ(got.size(), ref.size());
    for (size_t i = 0; i < ref.size(); ++i) EXPECT_LE(std::fabs(got[i] - ref[i]) / ref[i], 1e-5) << "step " << i + 1;
    EXPECT_LE(relative_difference(weights(p(name + ".st")), weights(p("one.st"))), 1e-4) << "final weights";
  }
}

// Every rank starts from rank 0's weights, as under DDP: two ranks given --init-from of the same
// name read different files (each runs in its own directory, an MPMD mpirun), and the job trains
// as the one whose ranks both read rank 0's.
TEST_F(Distributed, RanksStartFromRankZerosWeights) {
  std::string err;
  for (const auto& [name, seed] : {std::pair{"a", 1}, {"b", 2}}) {
    fs::create_directories(p(name));
    ASSERT_EQ(run(1, std::string("--batch-size 2 --num-steps 1 --seed ") + std::to_string(seed) + " --save " + p(name) + "/w.st", &err), 0) << err;
  }
  const std::string flags = std::string(" --device cpu --hidden-dim 32 --num-layers 2 --num-heads 4 --seq-len 16") +
                            " --learning-rate 1e-3 --log-every 1000 --batch-size 3 --num-steps 5 --init-from w.st";
  const std::string mpi = "OMP_NUM_THREADS=1 mpirun --oversubscribe --bind-to none" +
                          std::string(::geteuid() == 0 ? " --allow-run-as-root" : "");
  const auto job = [&](const std::string& second_dir, const std::string& out) {
    const std::string cmd = mpi + " -np 1 --wdir " + p("a") + " " + TT_BINARY + flags + " --json " + p(out) + " : -np 1 --wdir " +
                            p(second_dir) + " " + TT_BINARY + flags + " >" + p("out.log") + " 2>" + p("err.log");
    const int status = std::system(cmd.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  ASSERT_EQ(job("a", "same.json"), 0) << read_text(p("err.log"));
  ASSERT_EQ(job("b", "mixed.json"), 0) << read_text(p("err.log"));
  EXPECT_EQ(losses(p("mixed.json")), losses(p("same.json")));
}

// A checkpoint of 2 ranks resumes on 1 and on 3, and one of 1 on 2, ZeRO-1 or not: the losses
// continue as the uninterrupted run's.
TEST_F(Distributed, CheckpointsResumeOnAnyNumberOfRanks) {
  std::string err;
  ASSERT_EQ(run(1, "--batch-size 6 --num-steps 8 --json " + p("full.json"), &err), 0) << err;
  const std::vector<double> full = losses(p("full.json"));
  ASSERT_EQ(run(2, "--batch-size 3 --num-steps 4 --zero 1 --save " + p("two.st"), &err), 0) << err;
  ASSERT_EQ(run(1, "--batch-size 6 --num-steps 4 --save " + p("one.st"), &err), 0) << err;
  for (auto [ranks, ckpt] : {std::pair{1, "two.st"}, {3, "two.st"}, {2, "one.st"}}) {
    SCOPED_TRACE(testing::Message() << ckpt << " on " << ranks << " ranks");
    ASSERT_EQ(run(ranks, "--batch-size " + std::to_string(6 / ranks) + " --num-steps 8 --zero " +
                             std::to_string(ranks > 1 ? 1 : 0) + " --resume " + p(ckpt) + " --json " + p("r.json"),
                  &err),
              0)
        << err;
    const std::vector<double> got = losses(p("r.json"));
    ASSERT_EQ(got.size(), 4u);
    for (size_t i = 0; i < 4; ++i) EXPECT_LE(std::fabs(got[i] - full[4 + i]) / full[4 + i], 1e-6) << "step " << 5 + i;
  }
}

// --val-tokens: the validation loss is the mean over a set number of windows, the same at any
// --batch-size and on any number of ranks (the default, the split's first 4 batches, is not).
TEST_F(Distributed, ValidationOnSetTokensIgnoresBatchAndRanks) {
  std::ofstream(p("t.txt")) << [] {
    std::string s;
    for (int i = 0; i < 300; ++i) s += "the quick brown fox jumps over the lazy dog " + std::to_string(i) + ". ";
    return s;
  }();
  const std::string model = std::string(TT_BINARY) + " --device cpu --hidden-dim 16 --num-layers 1 --num-heads 2 "
                            "--seq-len 16 --num-steps 4 --log-every 2 --val-tokens 500 --data " + p("t.txt");
  auto validation = [&](const std::string& prefix, const std::string& args) {
    const std::string cmd = "OMP_NUM_THREADS=1 " + prefix + model + " " + args + " --json " + p("v.json") + " >" +
                            p("out.log") + " 2>" + p("err.log");
    EXPECT_EQ(std::system(cmd.c_str()), 0) << read_text(p("err.log"));
    std::ifstream in(p("v.json"));
    const nlohmann::json j = nlohmann::json::parse(in);
    std::vector<double> v;
    for (const auto& e : j["validation"]) v.push_back(e["loss"].get<double>());
    return v;
  };
  const std::string mpirun = "mpirun -np 2 --oversubscribe --bind-to none" +
                             std::string(::geteuid() == 0 ? " --allow-run-as-root " : " ");
  const std::vector<double> one = validation("", "--batch-size 8"), small = validation("", "--batch-size 3"),
                            two = validation(mpirun, "--batch-size 4");
  ASSERT_EQ(one.size(), 3u);
  EXPECT_NEAR(small[0], one[0], 1e-6 * one[0]) << "the same weights at step 0, batch 3 against 8 (fp32 products)";
  for (size_t i = 0; i < one.size(); ++i)
    EXPECT_NEAR(two[i], one[i], 1e-6 * one[i]) << "2 ranks at batch 4 against 1 at batch 8, evaluation " << i;
  const std::string cmd = model + " --batch-size 4 --val-tokens 100000 >" + p("out.log") + " 2>" + p("err.log");
  EXPECT_EQ(WEXITSTATUS(std::system(cmd.c_str())), 2);
  EXPECT_NE(read_text(p("err.log")).find("--val-tokens: 100000 tokens are 6250 windows"), std::string::npos)
      << read_text(p("err.log"));
}

// Ranks given different flags are refused before the first step: the model, and every flag that
// decides which collectives a rank calls (when it logs, evaluates and saves), which hung the job
// when they differed.
TEST_F(Distributed, RanksGivenDifferentFlagsAreRefused) {
  const std::string base = std::string(TT_BINARY) + " --device cpu --num-layers 1 --num-heads 2 --seq-len 8 --batch-size 2"
                                                    " --hidden-dim 32 --num-steps 20 --data " + p("t.txt");
  std::ofstream(p("t.txt")) << std::string(3000, 'a') + "some text";
  for (const auto& [mine, theirs, says] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"", " --hidden-dim 64", "in --hidden-dim (rank 0: 32)"},
           {" --log-every 5", " --log-every 7", "in --log-every (rank 0: 5)"},
           {" --eval-every 4", "", "in --eval-every (rank 0: 4)"},
           {" --save " + p("ck.st") + " --save-every 5", " --save " + p("ck.st"), "in --save-every (rank 0: 5)"},
           {"", " --save " + p("ck.st"), "in saving (rank 0: no)"},
           {" --init-std 0.01", "", "in --init-std (rank 0: 0.01)"},
           {" --val-tokens 64", "", "in --val-tokens (rank 0: 64)"}}) {
    SCOPED_TRACE(mine + " against" + theirs);
    const std::string cmd = "timeout 120 env OMP_NUM_THREADS=1 mpirun --oversubscribe" +
                            std::string(::geteuid() == 0 ? " --allow-run-as-root" : "") + " -np 1 " + base + mine +
                            " : -np 1 " + base + theirs + " >" + p("out.log") + " 2>" + p("err.log");
    const int status = std::system(cmd.c_str());
    EXPECT_NE(WEXITSTATUS(status), 0);
    EXPECT_NE(WEXITSTATUS(status), 124) << "the job hung";
    std::ifstream e(p("err.log"));
    const std::string err((std::istreambuf_iterator<char>(e)), std::istreambuf_iterator<char>());
    EXPECT_NE(err.find("rank 1 differs from rank 0 " + says), std::string::npos) << err;
    EXPECT_FALSE(fs::exists(p("ck.st")));
    for (const auto& f : fs::directory_iterator(dir))
      EXPECT_EQ(f.path().filename().string().find(".tmp."), std::string::npos) << "a temporary file is left: " << f.path();
  }
}

// SIGKILL to one rank: the job ends (mpirun takes the others down) well within 60 s.
TEST_F(Distributed, AKilledRankEndsTheJob) {
  const std::string marker = p("marker.json");
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const std::string cmd = "exec env OMP_NUM_THREADS=1 mpirun -np 2 --oversubscribe --bind-to none" +
                            std::string(::geteuid() == 0 ? " --allow-run-as-root " : " ") + TT_BINARY +
                            " --device cpu --hidden-dim 32 --num-layers 2 --num-heads 4 --seq-len 16 --batch-size 2"
                            " --num-steps 1000000 --log-every 10 --json " + marker + " >" + p("out.log") + " 2>" + p("err.log");
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // Wait for training, then kill one rank (a tiny_llama process with the marker in its command line).
  pid_t victim = 0;
  for (int i = 0; i < 3000 && !victim; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::ifstream log(p("out.log"));
    const std::string out((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
    if (out.find("Step  10/") == std::string::npos) continue;
    for (const auto& e : fs::directory_iterator("/proc")) {
      std::ifstream cmdline(e.path() / "cmdline");
      std::string c((std::istreambuf_iterator<char>(cmdline)), std::istreambuf_iterator<char>());
      if (c.find(marker) != std::string::npos && c.find("tiny_llama") != std::string::npos && c.rfind("mpirun", 0) != 0 &&
          c.find("sh") != 0) {
        victim = pid_t(std::stol(e.path().filename().string()));
        break;
      }
    }
  }
  ASSERT_NE(victim, 0) << "no rank found";
  const auto start = std::chrono::steady_clock::now();
  ::kill(victim, SIGKILL);
  int status = 0;
  pid_t done = 0;
  while ((done = ::waitpid(pid, &status, WNOHANG)) == 0 &&
         std::chrono::steady_clock::now() - start < std::chrono::seconds(60))
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  if (done == 0) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    FAIL() << "the job was still running 60 s after a rank died";
  }
  EXPECT_TRUE(!WIFEXITED(status) || WEXITSTATUS(status) != 0) << "the job must fail";
  std::ifstream e(p("err.log"));
  const std::string err((std::istreambuf_iterator<char>(e)), std::istreambuf_iterator<char>());
  EXPECT_NE(err.find("signal 9"), std::string::npos) << "mpirun names the lost rank: " << err;
}

// The built-in launcher of two CPU ranks training until stopped, its checkpoint at ck.st; returns
// its process once the log shows step 20.
pid_t start_launcher(const fs::path& dir) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    const std::string cmd = "exec env OMP_NUM_THREADS=1 " + std::string(TT_BINARY) +
                            " --device cpu --hidden-dim 16 --num-layers 1 --num-heads 2 --seq-len 8 --batch-size 2"
                            " --num-steps 1000000 --log-every 10 --nproc-per-node 2 --save " + (dir / "ck.st").string() +
                            " >" + (dir / "out.log").string() + " 2>" + (dir / "err.log").string();
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  for (int i = 0; pid > 0 && i < 3000 && read_text(dir / "out.log").find("Step  20/") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return pid;
}

// The job's wait status once it ends; a failure (and the job killed) after `seconds`.
int wait_for_job(pid_t pid, int seconds) {
  int status = 0;
  const auto start = std::chrono::steady_clock::now();
  pid_t done = 0;
  while ((done = ::waitpid(pid, &status, WNOHANG)) == 0 &&
         std::chrono::steady_clock::now() - start < std::chrono::seconds(seconds))
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (done == 0) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    ADD_FAILURE() << "the job did not end within " << seconds << " s of the signal";
  }
  return status;
}

// Ctrl-C to the built-in launcher of CPU ranks: every rank stops after the same step and the
// checkpoint is written; the job exits with 130, as one process does (mpirun's own code was 1).
TEST_F(Distributed, CtrlCToCpuRanksExits130WithACheckpoint) {
  const pid_t pid = start_launcher(dir);
  ASSERT_GT(pid, 0);
  ::kill(pid, SIGINT);
  const int status = wait_for_job(pid, 60);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 130);
  EXPECT_TRUE(fs::exists(p("ck.st")));
  EXPECT_NE(read_text(dir / "out.log").find("Saved checkpoint"), std::string::npos);
  EXPECT_EQ(read_text(dir / "err.log").find("-----"), std::string::npos) << "an error box: " << read_text(dir / "err.log");
}

// A second Ctrl-C stops at once, through the launcher too: the ranks, in a long accumulated first
// step (seconds), end before it ends, with no checkpoint; the first signal alone waits for the
// step's end (CtrlCToCpuRanksExits130WithACheckpoint).
TEST_F(Distributed, ASecondSignalStopsCpuRanksAtOnce) {
  const std::string cmd = "exec " + std::string(TT_BINARY) + " --nproc-per-node 2 --device cpu --hidden-dim 64 "
                          "--num-layers 2 --num-heads 2 --seq-len 64 --batch-size 4 --vocab-size 64 --log-every 1 "
                          "--grad-accum-steps 4000 --num-steps 1000 --save " + p("ck.st") + " >" + p("out.log") +
                          " 2>" + p("err.log");
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  for (int i = 0; i < 3000 && read_text(dir / "out.log").find("Checkpoints: ") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // the header: the first step begins
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ::kill(pid, SIGINT);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ::kill(pid, SIGINT);
  const int status = wait_for_job(pid, 20);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 130);
  EXPECT_EQ(read_text(dir / "out.log").find("Step   1/"), std::string::npos) << "the first step ended: not at once";
  EXPECT_FALSE(fs::exists(p("ck.st")));
}

// A rank stopped with SIGSTOP never acted on the forwarded signal, and held the other at its next
// collective: the job never ended. The launcher continues every rank after the signal (and kills
// them 30 s later if they still run): the job stops as it would have, checkpoint included.
TEST_F(Distributed, AStoppedRankStillStopsTheJob) {
  const pid_t pid = start_launcher(dir);
  ASSERT_GT(pid, 0);
  pid_t rank = 0;  // a tiny_llama below mpirun: the launcher's command line has --nproc-per-node, the ranks' not
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string c = read_text(e.path() / "cmdline");
    if (c.find(p("ck.st")) != std::string::npos && c.find("nproc-per-node") == std::string::npos &&
        c.rfind("mpirun", 0) != 0 && c.find("tiny_llama") != std::string::npos && c.rfind("sh", 0) != 0)
      rank = pid_t(std::stol(e.path().filename().string()));
  }
  ASSERT_NE(rank, 0) << "no rank found";
  ::kill(rank, SIGSTOP);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ::kill(pid, SIGTERM);
  const int status = wait_for_job(pid, 25);  // within the launcher's grace: continued, not killed
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 143) << read_text(dir / "err.log");
  EXPECT_TRUE(fs::exists(p("ck.st")));
}

// The GPU ranks' rendezvous (src/parallel/rendezvous.h), ranks as threads of this process: rank 0's
// bytes reach everyone, everyone's reach rank 0, and a rank that goes away without finishing is
// named by the others' watchdogs; a bad address or a missing rank is refused.
World world_of(int rank, int size, int port) {
  World w;
  w.rank = rank, w.size = size, w.local_rank = rank, w.local_size = size;
  w.launcher = "test";
  w.master_addr = "127.0.0.1";
  w.master_port = port;
  return w;
}

// A port nobody listens on now, the kernel's pick (ctest runs test processes side by side: ports
// counted from a process id collided between them).
int unused_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}


TEST(Rendezvous, BroadcastGatherFinish) {
  for (const std::string init : {"env", "file"}) {
    SCOPED_TRACE(init);
    const int port = unused_port();
    const std::string file = (fs::temp_directory_path() / ("tt_rdzv_" + std::to_string(port))).string();
    const std::string how = init == "env" ? "env" : "file:" + file;
    std::vector<std::string> got(3);
    std::vector<std::thread> ranks;
    for (int r = 0; r < 3; ++r)
      ranks.emplace_back([&, r] {
        Rendezvous z(world_of(r, 3, port), how, 20);
        got[size_t(r)] = z.broadcast(r == 0 ? "id from 0" : "");
        const std::vector<std::string> all = z.gather("rank " + std::to_string(r));
        if (r == 0) got[0] += " | " + all[0] + "," + all[1] + "," + all[2];
        z.finish();
      });
    for (std::thread& t : ranks) t.join();
    EXPECT_EQ(got[0], "id from 0 | rank 0,rank 1,rank 2");
    EXPECT_EQ(got[1], "id from 0");
    EXPECT_EQ(got[2], "id from 0");
    EXPECT_FALSE(fs::exists(file));
  }
}

TEST(Rendezvous, ALostRankIsNamed) {
  const int port = unused_port();
  std::vector<std::string> lines(3);
  std::atomic<int> stopped{0};
  std::vector<std::thread> ranks;
  for (int r = 0; r < 3; ++r)
    ranks.emplace_back([&, r] {
      Rendezvous z(world_of(r, 3, port), "env", 20);
      z.watch([] { return std::string(); }, [&, r](const std::string& why) { lines[size_t(r)] = why, ++stopped; });
      z.gather("ready");  // everyone watches before rank 2 goes
      if (r == 2) return;  // gone, without finish()
      for (int i = 0; i < 100 && !lines[size_t(r)].size(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    });
  for (std::thread& t : ranks) t.join();
  EXPECT_EQ(stopped.load(), 2);
  EXPECT_NE(lines[0].find("rank 2 of 3 was lost"), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find("rank 2 of 3 was lost"), std::string::npos) << lines[1];
}

// A client of the rendezvous that is no rank: connected to 127.0.0.1:port (tried for 2 s, a fresh
// socket each try: one whose connect failed is spent), `bytes` sent; the socket, or -1.
int connect_loopback(int port, const std::string& bytes) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  for (int i = 0; i < 200; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
      if (!bytes.empty()) ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      return fd;
    }
    ::close(fd);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return -1;
}

// Rank 0 is never held by a process that is not one of its ranks: one that connects and says
// nothing, or announces a huge message (refused before anything is allocated), is dropped, and
// rank 0 ends at its --dist-timeout naming the rank that did not join; the file of --dist-init
// file: goes when rank 0 fails.
TEST(Rendezvous, StrayClientsAndFailuresReleaseRankZero) {
  auto connect_to = [](int port) { return connect_loopback(port, ""); };
  for (const bool announce_huge : {false, true}) {
    SCOPED_TRACE(announce_huge ? "a client announcing 1 GiB" : "a silent client");
    const int port = unused_port();
    std::string error;
    const auto start = std::chrono::steady_clock::now();
    std::thread rank0([&] {
      try {
        Rendezvous z(world_of(0, 2, port), "env", 2);
      } catch (const std::exception& e) {
        error = e.what();
      }
    });
    const int fd = connect_to(port);
    if (announce_huge) {
      const uint64_t n = uint64_t(1) << 30;
      ASSERT_EQ(::send(fd, &n, sizeof n, 0), ssize_t(sizeof n));
    }
    rank0.join();
    ::close(fd);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(seconds, 5.0);
    EXPECT_NE(error.find("rank(s) 1 did not join within 2 s"), std::string::npos) << error;
  }
  const std::string file = (fs::temp_directory_path() / ("tt_rdzv_fail_" + std::to_string(::getpid()))).string();
  EXPECT_NE(refusal([&] { Rendezvous(world_of(0, 2, 0), "file:" + file, 1); }).find("rank(s) 1 did not join"),
            std::string::npos);
  EXPECT_FALSE(fs::exists(file)) << "the rendezvous file outlived a failed rank 0";
}

// Hellos are read side by side, and what is not a rank's is dropped: stray clients that send a few
// bytes, junk or nothing at all, connected before rank 1, neither end the rendezvous (a few bytes
// used to read as "a process of a world of -1 joined") nor cost the ranks their time (silent
// clients were served one at a time, 5 s each: three of them failed a 12 s rendezvous).
TEST(Rendezvous, StrayClientsNeverCostTheRanks) {
  const int port = unused_port();
  std::string error, got;
  const auto start = std::chrono::steady_clock::now();
  std::thread rank0([&] {
    try {
      Rendezvous z(world_of(0, 2, port), "env", 12);
      z.broadcast("from 0");
      got = z.gather("0")[1];
      z.finish();
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  auto stray = [&](const std::string& bytes) { return connect_loopback(port, bytes); };
  const uint64_t three = 3;
  const std::vector<int> strays = {stray(""), stray(""), stray(""), stray("hello"),
                                   stray(std::string(reinterpret_cast<const char*>(&three), 8) + "abc"),
                                   stray("GET / HTTP/1.1\r\nHost: x\r\n\r\n")};
  std::thread rank1([&] {
    Rendezvous z(world_of(1, 2, port), "env", 12);
    z.broadcast("");
    z.gather("1");
    z.finish();
  });
  rank1.join();
  rank0.join();
  for (int fd : strays) ::close(fd);
  EXPECT_EQ(error, "");
  EXPECT_EQ(got, "1");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 4.0);
}

// The built-in launcher listens before it starts the ranks and hands the socket to rank 0
// (TT_RANK0_LISTENER): the port is never free between, so another job cannot take it, and ranks
// that come before rank 0 wait in its queue. A value that is not such a socket is refused.
TEST(Rendezvous, TheLaunchersSocketLeavesNoRace) {
  int port = 0;
  const int listener = listen_for_ranks(0, &port, "a free port");
  const int other = ::socket(AF_INET6, SOCK_STREAM, 0);
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_any;
  a.sin6_port = htons(uint16_t(port));
  EXPECT_NE(::bind(other, reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << "another job took the port";
  ::close(other);
  std::vector<std::string> got(3);
  std::vector<std::thread> ranks;
  for (int r = 1; r < 3; ++r)  // before rank 0
    ranks.emplace_back([&, r] {
      Rendezvous z(world_of(r, 3, port), "env", 20);
      got[size_t(r)] = z.broadcast("");
      z.finish();
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ::setenv("TT_RANK0_LISTENER", std::to_string(listener).c_str(), 1);
  {
    Rendezvous z(world_of(0, 3, port), "env", 20);
    EXPECT_EQ(std::getenv("TT_RANK0_LISTENER"), nullptr) << "rank 0 took it";
    got[0] = z.broadcast("id from 0");
    z.finish();
  }
  for (std::thread& t : ranks) t.join();
  EXPECT_EQ(got, (std::vector<std::string>{"id from 0", "id from 0", "id from 0"}));
  ::setenv("TT_RANK0_LISTENER", "0", 1);  // standard input: no socket
  EXPECT_NE(refusal([&] { Rendezvous(world_of(0, 2, unused_port()), "env", 1); }).find("is not a socket listening on MASTER_PORT"),
            std::string::npos);
  ::unsetenv("TT_RANK0_LISTENER");
}

TEST(Rendezvous, BadWorldsAreRefused) {
  World w = world_of(1, 2, unused_port());
  w.master_addr = "no such host.invalid";
  EXPECT_NE(refusal([&] { Rendezvous(w, "env", 5); }).find("does not resolve"), std::string::npos);
  w.master_addr = "127.0.0.1";  // nobody listens there
  EXPECT_NE(refusal([&] { Rendezvous(w, "env", 1); }).find("was not reachable within 1 s"), std::string::npos);
  EXPECT_NE(refusal([&] { Rendezvous(world_of(0, 2, unused_port()), "env", 1); }).find("rank(s) 1 did not join"),
            std::string::npos);
  EXPECT_NE(refusal([&] { Rendezvous(world_of(0, 2, 1), "tcp", 1); }).find("--dist-init"), std::string::npos);
}

}  // namespace
}  // namespace tt::test
