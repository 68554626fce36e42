// Data parallelism over several GPUs (label multigpu). Each test runs with 2 and with 4 ranks,
// and skips, saying so, where the machine has fewer GPUs than ranks:
//  - every version, fp32 and bf16, --zero 0 and 1: R ranks at batch 8/R give the losses of one
//    GPU at batch 8 step by step over 50 steps, and its final weights (fp32: relative 1e-5;
//    bf16: 2e-2); v4 the same under torchrun, mpirun and ranks started by hand;
//  - every job's processes are gone within 30 s of its last step (DistRun::ended);
//  - SIGKILL of rank 0 or of the last rank ends the job within 60 s with a line naming it, and
//    its last checkpoint resumes; SIGTERM ends it within 30 s with a checkpoint; an error on
//    rank 0 (its periodic checkpoint cannot be written) ends every rank within 30 s;
//  - a checkpoint of R ranks resumes on R/2 and theirs on one GPU, and the losses continue those
//    of an uninterrupted one-GPU run; one of ZeRO-1 in bf16 (sharded masters) resumes bit for bit;
//  - jobs started at the same moment all run (no race for the ranks' port);
//  - on four GPUs, two "nodes" of two over NCCL's sockets (torchrun --nnodes 2, Slurm's
//    variables) give one GPU's losses, and a killed node ends the job.
#include <cuda_runtime.h>
#include <signal.h>

#include <chrono>
#include <thread>

#include "gpu/dist_harness.h"

namespace tt::test {
namespace {

using Clock = std::chrono::steady_clock;

bool have(const char* tool) { return std::system(("command -v " + std::string(tool) + " >/dev/null 2>&1").c_str()) == 0; }

class MultiGpu : public DistRun, public ::testing::WithParamInterface<int> {
 protected:
  void SetUp() override {
    ranks = GetParam();
    int gpus = 0;
    if (cudaGetDeviceCount(&gpus) != cudaSuccess) gpus = 0;
    if (gpus < ranks) GTEST_SKIP() << ranks << " ranks need " << ranks << " GPUs; this machine has " << gpus;
    DistRun::SetUp();
  }
  std::string world() const { return " --nproc-per-node " + std::to_string(ranks); }
  std::string per_rank_batch() const { return " --batch-size " + std::to_string(8 / ranks); }

  // A job in the background, in its own process group, for the fault tests: the built-in
  // launcher's pid is the job's.
  pid_t start(const std::string& args) {
    fs::remove(p("out.log"));  // none of the last job's lines may be read as this one's
    fs::remove(p("err.log"));
    const pid_t job = ::fork();
    if (job == 0) {
      ::setpgid(0, 0);
      const std::string cmd = "exec env NCCL_NVLS_ENABLE=0 " + std::string(TT_BINARY) + " " + kModel + " " + args +
                              " >" + p("out.log") + " 2>" + p("err.log");
      ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    return job;
  }
  // Waits up to `limit_s` for `file` to hold `text`.
  bool wait_for_text(const std::string& file, const std::string& text, int limit_s = 120) {
    const auto deadline = Clock::now() + std::chrono::seconds(limit_s);
    while (Clock::now() < deadline) {
      if (read(file).find(text) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }
  // The job's exit code once it has ended, and in *seconds how long that took; -1 if it was
  // still running after `limit_s` (then its process group is killed).
  int wait_job(pid_t job, int limit_s, double* seconds) {
    const auto begin = Clock::now();
    int status = 0;
    pid_t done = 0;
    while ((done = ::waitpid(job, &status, WNOHANG)) == 0 && Clock::now() - begin < std::chrono::seconds(limit_s))
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    *seconds = std::chrono::duration<double>(Clock::now() - begin).count();
    if (done == 0) {
      ::kill(-job, SIGKILL);
      ::waitpid(job, &status, 0);
      return -1;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  int ranks = 0;
};

TEST_P(MultiGpu, EveryVersionComputesWhatOneGpuComputes) {
  std::string err;
  for (const char* version : {"v1", "v2", "v3", "v4", "v5", "v6"}) {
    for (const std::string precision : {"fp32", "bf16"}) {
      SCOPED_TRACE(std::string(version) + " " + precision);
      const std::string base = std::string("--version ") + version + (precision == "bf16" ? " --use-amp" : "") +
                               " --num-steps 50";
      const double bound = precision == "bf16" ? 2e-2 : 1e-5;
      ASSERT_EQ(run("", base + " --batch-size 8 --json " + p("one.json") + " --save " + p("one.st"), &err), 0) << err;
      const std::vector<double> ref = losses(p("one.json"));
      const std::vector<float> ref_w = weights(p("one.st"));
      std::vector<std::string> variants = {" --zero 0", " --zero 1"};
      if (precision == "bf16" && std::string(version) == "v4") variants.push_back(" --zero 1 --reduce-dtype bf16");
      // v6's opt-in block kernel takes each rank's 8 / R sequences of 128 tokens.
      if (precision == "bf16" && std::string(version) == "v6")
        variants.push_back(" --zero 1 --enable blocks-forward-in-one-launch");
      for (const std::string& variant : variants) {
        SCOPED_TRACE(std::to_string(ranks) + " ranks," + variant);
        ASSERT_EQ(run("", base + per_rank_batch() + world() + variant + " --json " + p("n.json") + " --save " + p("n.st"),
                      &err),
                  0)
            << err;
        EXPECT_TRUE(ended());
        EXPECT_NE(read(p("out.log")).find("Data parallel: " + std::to_string(ranks) + " processes"), std::string::npos)
            << read(p("out.log"));
        expect_same_losses(losses(p("n.json")), ref, bound);
        EXPECT_LE(rel(weights(p("n.st")), ref_w), bound) << "final weights";
      }
    }
  }
}

// The training recipe over ranks (v4, fp32 and bf16): a warmed-up cosine schedule, clipping (the
// norm summed over the ranks' parts with ZeRO-1), decay exemptions, shuffled data, and each rank
// in 2 micro-batches of 4 / R: the losses and weights of one GPU at batch 8.
TEST_P(MultiGpu, TheRecipeComputesWhatOneGpuComputes) {
  std::string err;
  const std::string recipe = " --version v4 --num-steps 40 --lr-schedule cosine --lr-warmup-steps 5 --learning-rate 1e-3"
                             " --grad-clip 1 --no-decay-norms --no-decay-embedding --shuffle --log-every 5";
  for (const std::string precision : {"fp32", "bf16"}) {
    SCOPED_TRACE(precision);
    const std::string base = recipe + (precision == "bf16" ? " --use-amp" : "");
    const double bound = precision == "bf16" ? 2e-2 : 1e-5;
    ASSERT_EQ(run("", base + " --batch-size 8 --json " + p("one.json") + " --save " + p("one.st"), &err), 0) << err;
    EXPECT_NE(read(p("out.log")).find("| Norm: "), std::string::npos) << read(p("out.log"));
    const std::vector<double> ref = losses(p("one.json"));
    const std::vector<float> ref_w = weights(p("one.st"));
    for (const std::string zero : {" --zero 0", " --zero 1"}) {
      SCOPED_TRACE(std::to_string(ranks) + " ranks of 2 micro-batches," + zero);
      ASSERT_EQ(run("", base + " --batch-size " + std::to_string(4 / ranks) + " --grad-accum-steps 2" + world() + zero +
                            " --json " + p("n.json") + " --save " + p("n.st"),
                    &err),
                0)
          << err;
      EXPECT_TRUE(ended());
      expect_same_losses(losses(p("n.json")), ref, bound);
      EXPECT_LE(rel(weights(p("n.st")), ref_w), bound) << "final weights";
    }
  }
}

TEST_P(MultiGpu, LaunchersComputeWhatOneGpuComputes) {
  std::string err;
  const std::string base = "--version v4 --num-steps 50";
  ASSERT_EQ(run("", base + " --batch-size 8 --json " + p("one.json"), &err), 0) << err;
  const std::vector<double> ref = losses(p("one.json"));
  const std::string n = std::to_string(ranks);
  // Ranks started by hand with the launcher variables: rank 0 last, in the foreground.
  const std::string by_hand = "WORLD_SIZE=" + n + " LOCAL_WORLD_SIZE=" + n + " MASTER_ADDR=127.0.0.1 MASTER_PORT=" +
                              std::to_string(21000 + ::getpid() % 20000) +
                              " sh -c 'pids=; for r in $(seq 1 " + std::to_string(ranks - 1) +
                              "); do RANK=$r LOCAL_RANK=$r \"$0\" \"$@\" & pids=\"$pids $!\"; done; "
                              "RANK=0 LOCAL_RANK=0 \"$0\" \"$@\"; rc=$?; for q in $pids; do wait $q || rc=1; done; exit $rc'";
  struct Launcher {
    std::string name, prefix;
  };
  std::vector<Launcher> launchers = {{"by hand", by_hand}};
  if (have("torchrun")) launchers.push_back({"torchrun", "torchrun --standalone --nproc-per-node " + n + " --no-python"});
  else std::cout << "[ skipped ] torchrun is not installed\n";
  if (have("mpirun")) launchers.push_back({"mpirun", "mpirun -np " + n + " --bind-to none -x NCCL_NVLS_ENABLE=0" + as_root()});
  else std::cout << "[ skipped ] mpirun is not installed\n";
  for (const Launcher& l : launchers) {
    for (int zero : {0, 1}) {
      SCOPED_TRACE(l.name + ", ZeRO-" + std::to_string(zero));
      ASSERT_EQ(run(l.prefix, base + per_rank_batch() + " --zero " + std::to_string(zero) + " --json " + p("n.json"), &err),
                0)
          << err;
      EXPECT_TRUE(ended());
      EXPECT_NE(read(p("out.log")).find("Data parallel: " + n + " processes"), std::string::npos) << read(p("out.log"));
      expect_same_losses(losses(p("n.json")), ref, 1e-5);
    }
  }
}

TEST_P(MultiGpu, SignalsKillsAndErrorsEndTheJob) {
  const std::string base = "--version v4 --use-amp" + per_rank_batch() + world() + " --num-steps 1000000 --log-every 10";
  double seconds = 0;
  std::string err;
  // SIGTERM to the launcher: every rank stops after the same step, the checkpoint is written.
  {
    const pid_t job = start(base + " --save " + p("term.st"));
    ASSERT_TRUE(wait_for_text(p("out.log"), "Step  10/")) << read(p("err.log"));
    ::kill(job, SIGTERM);
    const int rc = wait_job(job, kExitS, &seconds);
    std::cout << "[ signal  ] " << ranks << " ranks: SIGTERM ended the job in " << seconds << " s (exit " << rc << ")\n";
    EXPECT_EQ(rc, 128 + SIGTERM) << read(p("err.log"));
    EXPECT_NE(read(p("out.log")).find("Saved checkpoint"), std::string::npos) << read(p("out.log"));
    EXPECT_TRUE(leftovers().empty());
  }
  // An error on rank 0 mid-run (its periodic checkpoint's folder is gone): every rank ends.
  {
    fs::create_directories(p("gone"));
    const pid_t job = start(base + " --save-every 3000 --save " + p("gone/ck.st"));
    ASSERT_TRUE(wait_for_text(p("out.log"), "Step 100/")) << read(p("err.log"));
    fs::remove_all(p("gone"));
    const int rc = wait_job(job, 120, &seconds);
    std::cout << "[ error   ] " << ranks << " ranks: an error on rank 0 ended the job in " << seconds << " s (exit " << rc
              << ")\n";
    EXPECT_NE(rc, 0);
    EXPECT_NE(rc, -1) << "the job was still running 120 s later";
    EXPECT_NE(read(p("err.log")).find("ck.st"), std::string::npos) << read(p("err.log"));
    EXPECT_TRUE(leftovers().empty());
  }
  // SIGKILL of rank 0, then of the last rank, once a checkpoint is written.
  for (int victim : {0, ranks - 1}) {
    SCOPED_TRACE("SIGKILL of rank " + std::to_string(victim));
    fs::remove(p("ck.st"));
    const pid_t job = start(base + " --save-every 50 --save " + p("ck.st"));
    ASSERT_TRUE(wait_for_text(p("out.log"), "Step  60/")) << read(p("err.log"));
    const pid_t pid = rank_pid(victim);
    ASSERT_NE(pid, 0) << "rank " << victim << " not found";
    ::kill(pid, SIGKILL);
    const int rc = wait_job(job, 60, &seconds);
    std::cout << "[ killed  ] " << ranks << " ranks: the job ended " << seconds << " s after rank " << victim
              << " was killed (exit " << rc << ")\n";
    ASSERT_NE(rc, -1) << "the job was still running 60 s after a rank died";
    EXPECT_NE(rc, 0);
    EXPECT_NE(read(p("err.log")).find("rank " + std::to_string(victim) + " of " + std::to_string(ranks)),
              std::string::npos)
        << read(p("err.log"));
    EXPECT_TRUE(leftovers().empty());
  }
  // The last checkpoint of the killed job continues, on one GPU.
  ASSERT_EQ(run("", "--version v4 --use-amp --batch-size 8 --num-steps 120 --resume " + p("ck.st"), &err), 0) << err;
  EXPECT_NE(err.find("Resumed from"), std::string::npos) << err;
}

// Jobs started at the same moment on one machine all run, half of them under the built-in
// launcher, half under torchrun. The built-in launcher listens on the ranks' port before it
// starts them and hands the socket to rank 0 (it used to pick a free port, close it, and let
// rank 0 bind it later: "Address already in use"); under torchrun rank 0 listens on a port the
// kernel picks and tells the others through torchrun's store (it used to take MASTER_PORT + 1,
// which nothing reserved).
TEST_P(MultiGpu, JobsStartedTogetherAllRun) {
  const int jobs = have("torchrun") ? 6 : 3;
  const std::string n = std::to_string(ranks);
  std::string script = "rc=0; pids=; for i in $(seq 1 " + std::to_string(jobs) + "); do " +
                       "if [ $i -gt 3 ]; then l=\"torchrun --standalone --nproc-per-node " + n + " --no-python\"; w=; " +
                       "else l=; w=\"" + world() + "\"; fi; $l " + std::string(TT_BINARY) + " " + kModel +
                       " --version v4 --num-steps 5" + per_rank_batch() + " $w --json " + p("job") + "$i.json >" + p("job") +
                       "$i.log 2>&1 & pids=\"$pids $!\"; done; for q in $pids; do wait $q || rc=1; done; exit $rc";
  const int status = std::system(("timeout -k 5 150 env NCCL_NVLS_ENABLE=0 sh -c '" + script + "'").c_str());
  for (int i = 1; i <= jobs; ++i)
    EXPECT_TRUE(fs::exists(p("job" + std::to_string(i) + ".json"))) << read(p("job" + std::to_string(i) + ".log"));
  EXPECT_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 0);
  EXPECT_TRUE(leftovers().empty());
}

// Two "nodes" of two GPUs each on one machine of four, started separately as on two machines,
// with NCCL kept off NVLink and shared memory between them (its socket transport, as between
// machines without InfiniBand): under torchrun (--nnodes 2, once per node) and under Slurm's
// variables set by hand as srun sets them with --gpus-per-task 1 (each task sees one GPU). The
// losses are one GPU's; a killed node ends the job on the other.
class TwoNodes : public DistRun {
 protected:
  void SetUp() override {
    int gpus = 0;
    if (cudaGetDeviceCount(&gpus) != cudaSuccess) gpus = 0;
    if (gpus < 4) GTEST_SKIP() << "two nodes of two GPUs need 4 GPUs; this machine has " << gpus;
    DistRun::SetUp();
    port_ = std::to_string(21000 + (::getpid() * 7) % 20000);
  }
  static constexpr const char* kSockets = "NCCL_NVLS_ENABLE=0 NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1";
  const std::string& port() const { return port_; }  // the same in a forked child
  // Node `node`'s command under torchrun.
  std::string torchrun_node(int node, const std::string& args) const {
    return std::string("CUDA_VISIBLE_DEVICES=") + (node == 0 ? "0,1" : "2,3") + " torchrun --nnodes 2 --node-rank " +
           std::to_string(node) + " --nproc-per-node 2 --master-addr 127.0.0.1 --master-port " + port() +
           " --no-python " + TT_BINARY + " " + kModel + " " + args;
  }
  // Task `task` of 4 as srun starts it (2 a node, one GPU each).
  std::string slurm_task(int task, const std::string& args) const {
    return "SLURM_PROCID=" + std::to_string(task) + " SLURM_NTASKS=4 SLURM_LOCALID=" + std::to_string(task % 2) +
           " SLURM_NODEID=" + std::to_string(task / 2) + " SLURM_NTASKS_PER_NODE=2 SLURM_JOB_NODELIST=localhost" +
           " MASTER_PORT=" + port() + " CUDA_VISIBLE_DEVICES=" + std::to_string(task) + " " + TT_BINARY + " " + kModel +
           " " + args;
  }
  // Runs `commands` side by side (the first's output in out.log and err.log), waits for all: 0
  // when every one exited 0.
  int together(const std::vector<std::string>& commands) {
    std::string script = "rc=0; pids=;";
    for (size_t i = 1; i < commands.size(); ++i)
      script += " " + commands[i] + " >" + p("part" + std::to_string(i) + ".log") + " 2>&1 & pids=\"$pids $!\";";
    script += " " + commands[0] + " >" + p("out.log") + " 2>" + p("err.log") + " || rc=1; for q in $pids; do wait $q || rc=1; done; exit $rc";
    const int status = std::system(("timeout -k 5 300 env " + std::string(kSockets) + " sh -c '" + script + "'").c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  std::string port_;
};

TEST_F(TwoNodes, TorchrunAndSlurmOverSocketsComputeWhatOneGpuComputes) {
  std::string err;
  const std::string base = "--log-every 1000 --version v4 --num-steps 50";
  ASSERT_EQ(run("", base + " --batch-size 8 --json " + p("one.json"), &err), 0) << err;
  const std::vector<double> ref = losses(p("one.json"));
  const std::string args = base + " --batch-size 2 --json " + p("n.json");
  struct Launcher {
    std::string name;
    std::vector<std::string> commands;  // rank 0's first
  };
  const std::vector<Launcher> launchers = {
      {"torchrun", {torchrun_node(0, args), torchrun_node(1, args)}},
      {"slurm", {slurm_task(0, args), slurm_task(1, args), slurm_task(2, args), slurm_task(3, args)}}};
  for (const Launcher& l : launchers) {
    SCOPED_TRACE(l.name);
    fs::remove(p("n.json"));
    ASSERT_EQ(together(l.commands), 0) << read(p("err.log")) << read(p("part1.log"));
    EXPECT_NE(read(p("out.log")).find("Data parallel: 4 processes"), std::string::npos) << read(p("out.log"));
    EXPECT_NE(read(p("out.log")).find("NCCL"), std::string::npos);
    expect_same_losses(losses(p("n.json")), ref, 1e-5);
    EXPECT_TRUE(leftovers().empty());
  }
}

TEST_F(TwoNodes, AKilledNodeEndsTheJob) {
  const std::string args = "--log-every 10 --version v4 --batch-size 2 --num-steps 1000000";
  const pid_t job = ::fork();
  if (job == 0) {
    ::setpgid(0, 0);
    std::_Exit(together({slurm_task(0, args), slurm_task(1, args), slurm_task(2, args), slurm_task(3, args)}));
  }
  const auto deadline = Clock::now() + std::chrono::seconds(120);
  while (read(p("out.log")).find("Step  20/") == std::string::npos && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  if (read(p("out.log")).find("Step  20/") == std::string::npos) leftovers(), ::kill(-job, SIGKILL), ::waitpid(job, nullptr, 0);
  ASSERT_NE(read(p("out.log")).find("Step  20/"), std::string::npos) << read(p("err.log"));
  // Node 1: the processes of tasks 2 and 3.
  int killed = 0;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string env = '\0' + read((e.path() / "environ").string());
    using namespace std::string_literals;
    if (read((e.path() / "cmdline").string()).find(TT_BINARY) != std::string::npos && env.find("\0SLURM_NODEID=1\0"s) != std::string::npos &&
        env.find("MASTER_PORT=" + port() + '\0') != std::string::npos)
      killed += ::kill(pid_t(std::stol(name)), SIGKILL) == 0;
  }
  EXPECT_EQ(killed, 2);
  const auto begin = Clock::now();
  int status = 0;
  pid_t done = 0;
  while ((done = ::waitpid(job, &status, WNOHANG)) == 0 && Clock::now() - begin < std::chrono::seconds(60))
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const double seconds = std::chrono::duration<double>(Clock::now() - begin).count();
  if (done == 0) {  // every process of the job (timeout runs its command in a group of its own)
    leftovers();
    ::kill(-job, SIGKILL);
    ::waitpid(job, &status, 0);
  }
  std::cout << "[ killed  ] node 1 (2 of 4 ranks, over sockets): the job ended " << seconds << " s later\n";
  ASSERT_NE(done, 0) << "node 0 was still running 60 s after node 1 died";
  EXPECT_NE(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 0);
  EXPECT_NE(read(p("err.log")).find(" of 4"), std::string::npos) << read(p("err.log"));
  EXPECT_TRUE(leftovers().empty());
}

// R ranks (ZeRO-1) to step 10, R/2 ranks to step 20, one GPU to step 30: the losses of one
// uninterrupted GPU run.
TEST_P(MultiGpu, ACheckpointResumesOnFewerGpus) {
  std::string err;
  const std::string base = "--version v4";
  ASSERT_EQ(run("", base + " --batch-size 8 --num-steps 30 --json " + p("full.json"), &err), 0) << err;
  const std::vector<double> full = losses(p("full.json"));
  struct Leg {
    int ranks, steps;
  };
  const std::vector<Leg> legs = {{ranks, 10}, {ranks / 2, 20}, {1, 30}};
  std::string from;
  for (size_t i = 0; i < legs.size(); ++i) {
    const Leg& leg = legs[i];
    SCOPED_TRACE(std::to_string(leg.ranks) + " rank(s) to step " + std::to_string(leg.steps));
    const std::string world_flags = leg.ranks > 1 ? " --nproc-per-node " + std::to_string(leg.ranks) + " --zero " +
                                                        std::to_string(i == 0 ? 1 : 0)
                                                  : "";
    const std::string ckpt = p("leg" + std::to_string(i) + ".st");
    ASSERT_EQ(run("", base + " --batch-size " + std::to_string(8 / leg.ranks) + world_flags + " --num-steps " +
                          std::to_string(leg.steps) + (from.empty() ? "" : " --resume " + from) + " --save " + ckpt +
                          " --json " + p("leg.json"),
                  &err),
              0)
        << err;
    EXPECT_TRUE(ended());
    const std::vector<double> got = losses(p("leg.json"));
    ASSERT_EQ(got.size(), 10u);
    for (size_t s = 0; s < got.size(); ++s) {
      const size_t step = size_t(leg.steps) - 10 + s;
      EXPECT_LE(std::fabs(got[s] - full[step]) / full[step], 1e-5) << "step " << step + 1;
    }
    from = ckpt;
  }
}

// ZeRO-1 in bf16 gathers the bf16 weights only, and each rank's fp32 masters are current in its
// own parts alone: a checkpoint gathers them first, every time (the steps between two saves
// replay a CUDA graph). One that did not would save stale masters, and the resumed run would
// leave the uninterrupted one.
TEST_P(MultiGpu, AShardedBf16RunResumesBitForBit) {
  std::string err;
  const std::string base = "--version v4 --use-amp --zero 1" + world() + per_rank_batch();
  ASSERT_EQ(run("", base + " --num-steps 20 --json " + p("full.json") + " --save " + p("full.st"), &err), 0) << err;
  ASSERT_EQ(run("", base + " --num-steps 10 --save-every 5 --save " + p("half.st"), &err), 0) << err;
  ASSERT_EQ(run("", base + " --num-steps 20 --resume " + p("half.st") + " --json " + p("rest.json") + " --save " +
                        p("rest.st"),
                &err),
            0)
      << err;
  EXPECT_TRUE(ended());
  const std::vector<double> full = losses(p("full.json")), rest = losses(p("rest.json"));
  ASSERT_EQ(full.size(), 20u);
  ASSERT_EQ(rest.size(), 10u);
  for (size_t s = 0; s < rest.size(); ++s) EXPECT_EQ(rest[s], full[10 + s]) << "step " << 11 + s;
  EXPECT_EQ(weights(p("rest.st")), weights(p("full.st")));
}

INSTANTIATE_TEST_SUITE_P(Ranks, MultiGpu, ::testing::Values(2, 4),
                         [](const ::testing::TestParamInfo<int>& info) { return std::to_string(info.param) + "Gpus"; });

}  // namespace
}  // namespace tt::test
