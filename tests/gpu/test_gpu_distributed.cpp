// Data parallelism on one GPU: a one-rank NCCL world (the built-in launcher with one process)
// runs the whole path (communicator, buckets reduced behind the backward, ZeRO-1 over one rank,
// the collectives inside the step's CUDA graph, checkpoints) and trains with the plain run's
// losses; its checkpoint resumes in a plain run. Bad worlds are refused with exit code 2.
#include <cuda_runtime.h>

#include "gpu/dist_harness.h"

namespace tt::test {
namespace {

using GpuDistributed = DistRun;

TEST_F(GpuDistributed, OneRankNcclWorldTrainsLikeThePlainRun) {
  std::string err;
  for (const char* flags : {"--version v1", "--version v3 --use-amp", "--version v4 --use-amp"}) {
    SCOPED_TRACE(flags);
    const std::string base = std::string(flags) + " --batch-size 4 --num-steps 12";
    ASSERT_EQ(run("", base + " --json " + p("plain.json") + " --save " + p("plain.st"), &err), 0) << err;
    for (int zero : {0, 1}) {
      SCOPED_TRACE(zero);
      ASSERT_EQ(run("", base + " --nproc-per-node 1 --zero " + std::to_string(zero) + " --json " + p("nccl.json") +
                            " --save " + p("nccl.st"),
                    &err),
                0)
          << err;
      EXPECT_NE(read(p("out.log")).find("Data parallel: 1 processes (built-in, NCCL"), std::string::npos)
          << read(p("out.log"));
      expect_same_losses(losses(p("nccl.json")), losses(p("plain.json")), 1e-6);
      EXPECT_LE(rel(weights(p("nccl.st")), weights(p("plain.st"))), 1e-6);
    }
    // The one-rank world's checkpoint continues in a plain run as the plain run continues its own.
    ASSERT_EQ(run("", std::string(flags) + " --batch-size 4 --num-steps 16 --resume " + p("nccl.st") + " --json " +
                          p("a.json"),
                  &err),
              0)
        << err;
    ASSERT_EQ(run("", std::string(flags) + " --batch-size 4 --num-steps 16 --resume " + p("plain.st") + " --json " +
                          p("b.json"),
                  &err),
              0)
        << err;
    expect_same_losses(losses(p("a.json")), losses(p("b.json")), 1e-6);
  }
}

// Two ranks on one GPU (two "nodes" of one process that are the same host): refused by both,
// exit code 2, before any training. More ranks on a node than it has GPUs: likewise.
TEST_F(GpuDistributed, BadWorldsAreRefused) {
  const std::string port = std::to_string(20000 + ::getpid() % 20000);
  const std::string env = "MASTER_ADDR=127.0.0.1 MASTER_PORT=" + port + " WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 ";
  const std::string args = " --device cuda --hidden-dim 64 --num-layers 1 --num-heads 2 --seq-len 16 --num-steps 2";
  const std::string cmd = "(" + env + "RANK=1 " + TT_BINARY + args + " 2>" + p("r1.log") + " & " + env + "RANK=0 " +
                          TT_BINARY + args + " 2>" + p("r0.log") + "; echo $? >" + p("rc0") + "; wait $!; echo $? >" +
                          p("rc1") + ") >/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  for (const char* r : {"0", "1"}) {
    EXPECT_EQ(read(p(std::string("rc") + r)), "2\n") << read(p(std::string("r") + r + ".log"));
    EXPECT_NE(read(p(std::string("r") + r + ".log")).find("ranks 0 and 1 both run on"), std::string::npos)
        << read(p(std::string("r") + r + ".log"));
  }
  int gpus = 0;
  cudaGetDeviceCount(&gpus);
  std::string err;
  EXPECT_EQ(run("", "--nproc-per-node " + std::to_string(gpus + 1) + " --num-steps 2", &err), 2) << err;
  EXPECT_NE(err.find("GPU(s): one GPU per process"), std::string::npos) << err;
  EXPECT_EQ(run("MASTER_ADDR='no such host.invalid' MASTER_PORT=1 RANK=1 WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1",
                "--num-steps 2 --dist-timeout 5", &err),
            2);
  EXPECT_NE(err.find("does not resolve"), std::string::npos) << err;
}

}  // namespace
}  // namespace tt::test
