// The real binary on the GPU: running out of memory at start is a clear error, not a crash; the
// debug stages and the kernel benchmark run to the end.
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "gpu_harness.h"
#include "run_outputs.h"

namespace tt::test {
namespace {

TEST(GpuCli, OutOfMemoryAtStartIsAClearError) {
  REQUIRE_GPU();
  const ScratchDir scratch("gpu_oom");
  const std::filesystem::path err = scratch.path() / "stderr";
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
}

// Runs tiny_llama with `args` in a scratch directory; returns the exit code, stdout in `out`,
// stderr in `err`.
int run_binary(const std::string& args, std::string& out, std::string& err) {
  const ScratchDir scratch("gpu_cli");
  const Outcome r = tt::test::run_binary(args, scratch.path());
  out = r.out, err = r.err;
  return r.exit_code;
}

TEST(GpuCli, DebugStagesRun) {
  REQUIRE_GPU();
  std::string out, err;
  const int code = run_binary("debug all --repeats 3 --hidden-dim 128 --num-layers 2 --num-steps 2", out, err);
  ASSERT_EQ(code, 0) << err << out;
  for (const char* stage : {"Stage 1, broken", "Stages 2 and 3, slow and better", "Stage 4, the same",
                            "Stage 5, optimal", "bitwise equal", "The journey", "5 optimal"})
    EXPECT_NE(out.find(stage), std::string::npos) << stage << " not in: " << out;
  size_t lessons = 0;
  for (size_t at = out.find("Lesson:"); at != std::string::npos; at = out.find("Lesson:", at + 1)) ++lessons;
  EXPECT_EQ(lessons, 4u) << out;
}

TEST(GpuCli, KernelBenchRunsV2AndWritesJson) {
  REQUIRE_GPU();
  const ScratchDir scratch("gpu_kernels");
  const std::filesystem::path json = scratch.path() / "kernels.json";
  std::string out, err;
  const int code = run_binary("kernels --levels v1,v2,v3 --seq-lens 1024 --repeats 3 --json " + json.string(), out, err);
  ASSERT_EQ(code, 0) << err << out;
  std::ifstream in(json);
  const nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_GT(j["ceilings"]["gemm_bf16_tflops"].get<double>(), 0);
  EXPECT_GT(j["ceilings"]["copy_gbps"].get<double>(), 0);
  int v2_rows = 0;
  for (const nlohmann::json& r : j["rows"]) {
    const std::string status = r["status"];
    if (r["version"] != 3) EXPECT_EQ(status, "ok") << r.dump();  // v3 rows may be "not implemented" yet
    if (r["version"] == 2) {
      ++v2_rows;
      EXPECT_GT(r["ms_median"].get<double>(), 0) << r.dump();
      // The clock it ran at, from NVML (the driver's): a plausible SM clock, a share in [0, 1].
      EXPECT_GT(r["sm_mhz"].get<int>(), 100) << r.dump();
      EXPECT_LT(r["sm_mhz"].get<int>(), 4000) << r.dump();
      EXPECT_GE(r["clock_limited"].get<double>(), 0) << r.dump();
      EXPECT_LE(r["clock_limited"].get<double>(), 1) << r.dump();
    }
  }
  EXPECT_EQ(v2_rows, 2 * (2 * 4 + 1));  // 2 shapes x (fwd, bwd of 4 ops + attention fwd+bwd)
}

// --programmatic: the calls launched programmatically, as v5's and v6's steps launch them (v6's QKV
// kernel asks for its weights before its wait); the rows run and the files say how each was launched.
TEST(GpuCli, KernelBenchTimesProgrammaticLaunches) {
  REQUIRE_GPU();
  const ScratchDir scratch("gpu_kernels_programmatic");
  const std::filesystem::path json = scratch.path() / "kernels.json", csv = scratch.path() / "kernels.csv";
  std::string out, err;
  const int code = run_binary("kernels --programmatic --levels v5,v6 --ops qkv_rope --seq-lens 1024 --repeats 3 --json " +
                                  json.string() + " --csv " + csv.string(),
                              out, err);
  ASSERT_EQ(code, 0) << err << out;
  EXPECT_NE(out.find("the calls launched programmatically"), std::string::npos) << out;
  std::ifstream in(json);
  const nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_EQ(j["timing"]["programmatic"], true);
  int timed = 0;
  for (const nlohmann::json& r : j["rows"])
    if (r["status"] == "ok") {
      ++timed;
      EXPECT_GT(r["ms_median"].get<double>(), 0) << r.dump();
      EXPECT_EQ(r["launch"], "programmatic") << r.dump();  // v5 and v6 launch so in a step
    }
  EXPECT_EQ(timed, 4) << j.dump();  // v5 and v6, forward, at two shapes
  std::ifstream rows(csv);
  std::string header, first;
  std::getline(rows, header), std::getline(rows, first);
  EXPECT_EQ(header.substr(header.rfind(',') + 1), "launch");
  EXPECT_EQ(first.substr(first.rfind(',') + 1), "programmatic");
}

// Generation on the GPU (fp32): greedy decoding gives the CPU's tokens, with the cache, for a
// batch of prompts, and without the cache.
TEST(GpuCli, GenerationGivesTheCpusTokens) {
  REQUIRE_GPU();
  const ScratchDir scratch("gpu_gen");
  const std::filesystem::path& dir = scratch.path();
  std::ofstream(dir / "text.txt") << std::string(600, 'a') + "the quick brown fox jumps over the lazy dog. the lazy dog sleeps. ";
  std::ofstream(dir / "prompts.txt") << "the quick\nbrown\nover the la\n";
  const std::string ckpt = (dir / "m.st").string();
  std::string out, err;
  ASSERT_EQ(run_binary("--device cpu --data " + (dir / "text.txt").string() + " --vocab-size 256 --hidden-dim 64 "
                       "--num-layers 2 --num-heads 4 --seq-len 64 --batch-size 4 --num-steps 30 --save " + ckpt,
                       out, err),
            0)
      << err;
  const std::vector<std::string> ways = {"--prompt 'the quick'", "--prompts-file " + (dir / "prompts.txt").string(),
                                        "--prompt 'over the' --no-cache",
                                        "--prompt 'the quick' --max-new-tokens 100"};  // past the context of 64: the window slides
  for (const std::string& how : ways) {
    SCOPED_TRACE(how);
    std::string cpu, gpu;
    ASSERT_EQ(run_binary("generate " + ckpt + " --max-new-tokens 20 " + how + " --temperature 0 --device cpu", cpu, err), 0)
        << err;
    ASSERT_EQ(run_binary("generate " + ckpt + " --max-new-tokens 20 " + how + " --temperature 0 --device cuda", gpu, err), 0)
        << err;
    EXPECT_EQ(gpu.substr(0, gpu.find("\n[")), cpu.substr(0, cpu.find("\n[")));
    EXPECT_NE(gpu.find("tokens/s on the GPU"), std::string::npos) << gpu;
  }
}

}  // namespace
}  // namespace tt::test
