// The real binary against bad input: exit code 2, one line naming the problem, and no output
// file left behind. And one good run, to show the same flags work when they are right.
#include <gtest/gtest.h>

#include <thread>
#include <sys/wait.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "backend/backend.h"
#include "run_outputs.h"

namespace tt::test {
namespace {

namespace fs = std::filesystem;

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(dir / "out");
  }

  std::string file(const std::string& name, const std::string& contents) {
    const fs::path p = dir / name;
    std::ofstream(p, std::ios::binary) << contents;
    return p.string();
  }

  // Runs tiny_llama on a small CPU model with the extra arguments; --json and --save point
  // into dir/out, which must stay empty when the run fails.
  Outcome run(const std::string& args, bool small = true) {
    const std::string base = small ? " --device cpu --hidden-dim 32 --num-layers 1 --num-heads 2 --batch-size 2"
                                     " --seq-len 8 --num-steps 2 --vocab-size 50"
                                   : "";
    const std::string outputs = " --json " + (dir / "out/r.json").string() + " --save " + (dir / "out/c.safetensors").string();
    return run_command(base + outputs + " " + args);
  }

  // Runs tiny_llama with exactly these arguments (a command other than train comes first).
  Outcome run_command(const std::string& args) { return run_binary(args, dir); }

  void expect_usage_error(const std::string& args, const std::string& mention) {
    check_usage_error(run(args), args, mention);
  }
  void expect_command_error(const std::string& args, const std::string& mention) {
    check_usage_error(run_command(args), args, mention);
  }
  void check_usage_error(const Outcome& r, const std::string& args, const std::string& mention) {
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << ": not one line:\n" << r.err;
    EXPECT_NE(r.err.find(mention), std::string::npos) << args << ": '" << mention << "' not in: " << r.err;
    EXPECT_TRUE(fs::is_empty(dir / "out")) << args << ": left a file behind";
  }

  ScratchDir scratch_{"cli"};
  const fs::path dir = scratch_.path();
};

// What selects CUDA kernels is refused on the CPU, or marked, never shown as if it ran there;
// a refused --profile leaves no directory behind.
TEST_F(Cli, CpuOnlyWhatAppliesThere) {
  expect_usage_error("--use-amp", "bf16 runs on the CUDA backend");
  expect_usage_error("--tf32", "--tf32");
  expect_usage_error("--profile " + (dir / "prof").string(), "they need a GPU");
  EXPECT_FALSE(fs::exists(dir / "prof"));
  expect_command_error("ablate --device cpu --hidden-dim 32 --num-layers 1 --num-heads 2 --num-steps 2", "ablate");
  expect_command_error("ablate --device cpu --num-steps 2 --repeats 0", "--repeats: must be positive");
  expect_command_error("bench --device cpu --levels v1,v2 --precisions fp32 --seq-lens 8 --hidden-dim 32 "
                       "--num-layers 1 --num-heads 2", "bench on the CPU");
  expect_command_error("bench --device cpu --levels v1 --precisions bf16 --seq-lens 8 --hidden-dim 32 "
                       "--num-layers 1 --num-heads 2", "bench on the CPU");
  const Outcome marked = run("--version v3");
  EXPECT_EQ(marked.exit_code, 0) << marked.err;
  EXPECT_NE(marked.out.find("CPU: v3 fp32 selects CUDA kernels"), std::string::npos) << marked.out;
  EXPECT_NE(marked.out.find("threads"), std::string::npos) << "the thread count is said: " << marked.out;
  const Outcome plain = run_command("bench --device cpu --seq-lens 8 --batch-sizes 2 --hidden-dim 32 --num-layers 1 "
                                    "--num-heads 2 --timing-warmup-steps 1 --steps 1 --repeats 1");
  EXPECT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_NE(plain.out.find("CPU: one row per shape"), std::string::npos) << plain.out;
  EXPECT_EQ(plain.out.find("bf16"), std::string::npos) << "no bf16 row on the CPU: " << plain.out;
}

// Without a GPU, the reason is said once a run, however many backends the run builds.
TEST_F(Cli, NoGpuIsSaidOnce) {
  std::string why;
  if (cuda_available(&why)) GTEST_SKIP() << "a GPU is present";
  const Outcome r = run_command("bench --batch-sizes 2,3 --seq-lens 8 --hidden-dim 32 --num-layers 1 --num-heads 2 "
                                "--timing-warmup-steps 1 --steps 1 --repeats 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  size_t count = 0;
  for (size_t at = r.out.find("no NVIDIA GPU or driver found"); at != std::string::npos;
       at = r.out.find("no NVIDIA GPU or driver found", at + 1))
    ++count;
  EXPECT_EQ(count, 1u) << r.out;
}

TEST_F(Cli, HiddenNotDivisibleByHeads) { expect_usage_error("--hidden-dim 30 --num-heads 4", "--num-heads"); }
TEST_F(Cli, HeadsNotDivisibleByKvHeads) { expect_usage_error("--num-heads 4 --num-kv-heads 3", "--num-kv-heads"); }
TEST_F(Cli, OddHeadSize) { expect_usage_error("--hidden-dim 18 --num-heads 2", "even"); }
TEST_F(Cli, ZeroBatch) { expect_usage_error("--batch-size 0", "--batch-size"); }
TEST_F(Cli, NegativeSeqLen) { expect_usage_error("--seq-len -4", "--seq-len"); }
TEST_F(Cli, ZeroSteps) { expect_usage_error("--num-steps 0", "--num-steps"); }
TEST_F(Cli, ZeroLayers) { expect_usage_error("--num-layers 0", "--num-layers"); }
TEST_F(Cli, NanLearningRate) { expect_usage_error("--learning-rate nan", "--learning-rate"); }
TEST_F(Cli, NegativeLearningRate) { expect_usage_error("--learning-rate -0.001", "--learning-rate"); }
TEST_F(Cli, InfiniteLearningRate) { expect_usage_error("--learning-rate inf", "--learning-rate"); }
TEST_F(Cli, NonNumericValue) { expect_usage_error("--batch-size eight", "--batch-size"); }
TEST_F(Cli, ZeroNormEps) { expect_usage_error("--norm-eps 0", "--norm-eps"); }
TEST_F(Cli, NegativeWarmup) { expect_usage_error("--timing-warmup-steps -1", "--timing-warmup-steps"); }
TEST_F(Cli, UnknownFlag) { expect_usage_error("--num-epochs 3", "--num-epochs"); }
TEST_F(Cli, UnknownDevice) { expect_usage_error("--device tpu", "--device"); }
TEST_F(Cli, UnknownVersion) { expect_usage_error("--version v7", "--level: the optimization level"); }
// Small refusals, each one line and exit code 2 before any work, none a raw library error.
TEST_F(Cli, UnreadableSpecialFileAsData) { expect_usage_error("--data /proc/self/mem", "--data: '/proc/self/mem'"); }
TEST_F(Cli, HeaderlessTokenFileIsNotText) {  // nanoGPT's prepare.py: uint16 tokens, no header
  std::string raw;
  for (uint16_t t = 0; t < 3000; ++t) raw.append(reinterpret_cast<const char*>(&t), 2);
  expect_usage_error("--vocab-size 256 --data " + file("train.bin", raw), "a headerless .bin of uint16 tokens (nanoGPT's)");
}
TEST_F(Cli, HiddenSizeTooLargeNamesItsFlag) { expect_usage_error("--hidden-dim 1073741824", "--hidden-dim"); }
TEST_F(Cli, OutputInAFileSystemThatTakesNone) { expect_usage_error("--json /proc/r.json", "--json: cannot create a file"); }
TEST_F(Cli, DistInitIsChecked) {
  expect_usage_error("--dist-init tcp://x", "--dist-init: env, mpi or file:PATH");
  expect_usage_error("--dist-init file:" + dir.string(), "is a directory");
  expect_usage_error("--dist-init env", "CPU ranks meet through MPI");
}
TEST_F(Cli, ValidateAsksTheCpuForWhatItCanCheck) {
  expect_command_error("validate --device cpu --levels v3 --precisions bf16", "v3 bf16 runs on the CUDA backend");
}
TEST_F(Cli, TokenizeRefusesNothingToTokenizeAndAnUnwritableOutput) {
  expect_command_error("tokenize --out " + (dir / "o").string() + " " + file("empty.txt", ""), "hold no text");
  EXPECT_FALSE(fs::exists(dir / "o"));
  expect_command_error("tokenize --out /proc/tokens " + file("t.txt", "some text"), "--out: cannot create a file");
}
// A file whose name holds glob characters is read as that file; a pattern with one match reads
// the match, not the pattern.
TEST_F(Cli, GlobCharactersInNames) {
  const std::string text = std::string(3000, 'a') + "some text";
  const std::string literal = file("a[1].txt", text);
  Outcome r = run("--vocab-size 256 --data '" + literal + "'");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("text file " + literal), std::string::npos) << r.out;
  fs::remove_all(dir / "out");
  fs::create_directories(dir / "out");
  r = run("--vocab-size 256 --data '" + (dir / "a*.txt").string() + "'");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("text file " + literal), std::string::npos) << r.out;
}
TEST_F(Cli, NprocPerNodeOutOfRange) {
  for (const char* n : {"0", "-1", "100000"}) expect_usage_error(std::string("--nproc-per-node ") + n, "--nproc-per-node");
}
// MASTER_ADDR and MASTER_PORT in the environment alone (as Slurm and mpirun jobs, or a shell,
// leave them) make no world: a plain run trains.
TEST_F(Cli, MasterAddressAloneIsNoWorld) {
  ::setenv("MASTER_ADDR", "127.0.0.1", 1);
  ::setenv("MASTER_PORT", "29500", 1);
  const Outcome r = run("");
  ::unsetenv("MASTER_ADDR");
  ::unsetenv("MASTER_PORT");
  EXPECT_EQ(r.exit_code, 0) << r.err;
}
TEST_F(Cli, UnreadableDataFile) { expect_usage_error("--data " + (dir / "missing.txt").string(), "--data"); }
TEST_F(Cli, EmptyDataFile) { expect_usage_error("--data " + file("empty.txt", ""), "empty"); }
TEST_F(Cli, TooShortDataFile) { expect_usage_error("--data " + file("short.txt", "just a few bytes"), "too short"); }
TEST_F(Cli, VocabularyThatDoesNotFitTextData) {
  // The small model above sets --vocab-size 50: a text file needs 256.
  expect_usage_error("--data " + file("text.txt", std::string(4000, 'a')), "--vocab-size");
}
TEST_F(Cli, JsonIntoMissingDirectory) {
  expect_usage_error("--json " + (dir / "no/such/dir/r.json").string(), "--json");
}
TEST_F(Cli, MalformedCheckpoint) {
  expect_usage_error("--resume " + file("bad.safetensors", std::string("\x10\0\0\0\0\0\0\0{not json at all", 24)),
                     "--resume");
}
TEST_F(Cli, TruncatedCheckpoint) { expect_usage_error("--resume " + file("tiny.safetensors", "abc"), "--resume"); }

TEST_F(Cli, MismatchedCheckpoint) {
  ASSERT_EQ(run("").exit_code, 0);  // writes out/c.safetensors from the small model
  const fs::path ck = dir / "ck.safetensors";
  fs::rename(dir / "out/c.safetensors", ck);
  fs::remove(dir / "out/r.json");
  expect_usage_error("--num-steps 4 --hidden-dim 64 --resume " + ck.string(), "--hidden-dim");
  expect_usage_error("--num-steps 4 --seed 7 --resume " + ck.string(), "--resume");
  expect_usage_error("--num-steps 2 --resume " + ck.string(), "--num-steps");
}

TEST_F(Cli, CudaDeviceWithoutGpu) {
  std::string why;
  if (cuda_available(&why)) GTEST_SKIP() << "a GPU is present: --device cuda is valid here";
  expect_usage_error("--device cuda", "--device cuda");
}

TEST_F(Cli, GoodRunWritesJsonAndCheckpoint) {
  const Outcome r = run("--log-every 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Step   1/2 | Loss: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("=== Performance Summary ==="), std::string::npos) << r.out;
  std::ifstream f(dir / "out/r.json");
  const nlohmann::json j = nlohmann::json::parse(f);
  ASSERT_EQ(j["steps"].size(), 2u);
  EXPECT_NEAR(j["steps"][0]["loss"].get<double>(), std::log(49.0), 0.1);
  EXPECT_TRUE(fs::exists(dir / "out/c.safetensors"));
  // Nothing but the two outputs: no temporary files remain.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir / "out"), fs::directory_iterator()), 2);
}

TEST_F(Cli, ZeroInitStd) { expect_usage_error("--init-std 0", "--init-std"); }
TEST_F(Cli, InfiniteInitStd) { expect_usage_error("--init-std inf", "--init-std"); }

TEST_F(Cli, KernelBenchWithoutGpu) {
  std::string why;
  if (cuda_available(&why)) GTEST_SKIP() << "a GPU is present: the kernel benchmark runs here";
  expect_command_error("kernels --json " + (dir / "out/k.json").string(), "needs a CUDA GPU");
  expect_command_error("kernels --ops attention,rmsnorm", "needs a CUDA GPU");  // valid: on to the device
}
TEST_F(Cli, KernelBenchBadFlags) {
  expect_command_error("kernels --precision fp16", "--precision");
  expect_command_error("bench --pytorch " + (dir / "no/such.json").string(), "--pytorch");
  expect_command_error("kernels --levels v2,v9", "--levels");
  expect_command_error("kernels --seq-lens 1024,-1", "--seq-lens");
  expect_command_error("kernels --num-heads 8 --num-kv-heads 3", "--num-kv-heads");
  expect_command_error("kernels --head-dim 63", "--head-dim");
  expect_command_error("kernels --repeats 0", "--repeats");
  expect_command_error("kernels --check --programmatic", "--programmatic: it changes how calls are timed");
  expect_command_error("kernels --ops attention,softmax", "--ops: the operations are attention, rmsnorm");
  expect_command_error("kernels --csv " + (dir / "no/such/dir/k.csv").string(), "--csv");
}

TEST_F(Cli, DebugBadStage) {
  expect_command_error("debug", "stage");
  expect_command_error("debug warp", "warp");
  expect_command_error("debug broken --init-std 1", "--init-std");  // the stage chooses the two
  expect_command_error("debug broken --repeats 0", "--repeats");
}
TEST_F(Cli, DebugGpuStageWithoutGpu) {
  std::string why;
  if (cuda_available(&why)) GTEST_SKIP() << "a GPU is present: the GPU stages run here";
  expect_command_error("debug slow", "needs a CUDA GPU");
}
TEST_F(Cli, DebugJourneyOnTheCpu) {
  const Outcome r = run_command("debug all --device cpu --hidden-dim 32 --num-layers 1 --num-heads 2 --batch-size 2"
                                " --seq-len 8 --num-steps 2 --vocab-size 50");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string why;
  const bool gpu = cuda_available(&why);  // with one, the GPU stages run instead of being named as skipped
  for (const char* part : {"Stage 1, broken", "Symptom:", "Fix:", "Lesson:", "ln(50)", "The journey", "1 broken"})
    EXPECT_NE(r.out.find(part), std::string::npos) << part << " not in: " << r.out;
  if (!gpu) EXPECT_NE(r.out.find("Stage slow: needs a CUDA GPU"), std::string::npos) << r.out;
}

// Rough edges: an unquoted --data pattern, expanded by the shell, is named as such; bench on the
// CPU names the CPU (no empty GPU fields); the built-in launcher gives each CPU rank its share of
// the cores for its threads.
TEST_F(Cli, ShellExpandedPatternBenchOnCpuAndRankThreads) {
  const fs::path a = dir / "train_a.bin", b = dir / "train_b.bin";
  std::ofstream(a) << "x";
  std::ofstream(b) << "y";
  Outcome r = run("--device cpu --data " + a.string() + " " + b.string(), false);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--data: 2 files follow it"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("quote it, --data 'dir/*.bin'"), std::string::npos) << r.err;
  r = run_binary("bench --device cpu --steps 2 --timing-warmup-steps 1 --batch-sizes 2 --seq-lens 16 --hidden-dim 32 "
                 "--num-layers 1 --num-heads 2",
                 dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(" cores) | commit"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("SM clock"), std::string::npos) << r.out;
  if (std::system("command -v mpirun >/dev/null 2>&1") != 0) return;
  r = run_binary("--device cpu --nproc-per-node 2 --hidden-dim 32 --num-layers 1 --num-heads 2 --seq-len 16 --batch-size 1 "
                 "--num-steps 2",
                 dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const int threads = std::max(1, int(std::thread::hardware_concurrency()) / 2);
  EXPECT_NE(r.out.find("Backend: cpu fp32, " + std::to_string(threads) + " threads"), std::string::npos) << r.out;
}

// bench --nproc-per-node: the one-process baseline runs on each GPU (here each CPU process) at
// once, and the efficiency is given against their mean and the slowest; a run without timed
// steps is refused, and the runs' files go either way.
TEST_F(Cli, ScalingBenchRunsTheBaselineOnEveryProcessAtOnce) {
  const fs::path tmp = dir / "tmp";  // the bench's scratch folder goes here (TMPDIR)
  fs::create_directories(tmp);
  const std::string env = "TMPDIR=" + tmp.string() + " ";
  const std::string model = " --device cpu --hidden-dim 32 --num-layers 1 --num-heads 2 --seq-len 16 --batch-size 1";
  Outcome r = run_binary("bench --nproc-per-node 2 --num-steps 2 --timing-warmup-steps 2" + model, dir, env);
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.out.find("no timed steps: --num-steps must exceed --timing-warmup-steps"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::is_empty(tmp));
  r = run_binary("bench --nproc-per-node 2 --num-steps 4" + model + " --num-heads 3", dir, env);
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.out.find("1 process (1) failed (exit 2)"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::is_empty(tmp));
  if (std::system("command -v mpirun >/dev/null 2>&1") != 0) GTEST_SKIP() << "no mpirun for the 2-process runs";
  const fs::path json = dir / "scaling.json";
  r = run_binary("bench --nproc-per-node 2 --num-steps 4 --timing-warmup-steps 1 --json " + json.string() + model, dir, env);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  for (const char* row : {"| 1 process (0) |", "| 1 process (1) |", "| 2 processes, all-reduce (--zero 0) |",
                          "| 2 processes, ZeRO-1 (--zero 1) |", "against the slowest process"})
    EXPECT_NE(r.out.find(row), std::string::npos) << row << "\n" << r.out;
  std::ifstream in(json);
  const nlohmann::json j = nlohmann::json::parse(in);
  ASSERT_EQ(j["runs"].size(), 4u);
  double mean = 0, slowest = 1e300;
  for (int g = 0; g < 2; ++g) {
    const double t = j["runs"][g]["tokens_per_sec"].get<double>();
    mean += t / 2, slowest = std::min(slowest, t);
  }
  const nlohmann::json& zero1 = j["runs"][3];
  const double t = zero1["tokens_per_sec"].get<double>();
  EXPECT_DOUBLE_EQ(zero1["scaling_efficiency"].get<double>(), t / (2 * mean));
  EXPECT_DOUBLE_EQ(zero1["scaling_efficiency_vs_slowest"].get<double>(), t / (2 * slowest));
  EXPECT_TRUE(fs::is_empty(tmp));
}

// --version alone prints the program's version (CMakeLists.txt's); the optimization level is
// --level (or --version with a level after it).
TEST_F(Cli, VersionPrintsTheProgramsVersionAndLevelChoosesTheLevel) {
  Outcome r = run_binary("--version", dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("tiny_llama 0.4.0 (commit ", 0), 0u) << r.out;
  r = run("--level v9");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--level: the optimization level is one of v1, v2, v3, v4, v5, v6 (got 'v9')"),
            std::string::npos)
      << r.err;
  r = run("--version v9");
  EXPECT_NE(r.err.find("--level: the optimization level is one of"), std::string::npos) << r.err;
  EXPECT_EQ(run("--level v1").exit_code, 0);
}

TEST_F(Cli, HelpExitsZero) {
  const Outcome r = run("--help", false);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("--batch-size"), std::string::npos);
  // Every command main() dispatches is listed, each with what it does.
  for (const char* command : {"generate", "export", "tokenizer-train", "tokenize", "bench", "ablate", "validate", "kernels",
                              "debug"})
    EXPECT_NE(r.out.find(std::string("\n  ") + command + " "), std::string::npos) << command << " not in: " << r.out;
}

}  // namespace
}  // namespace tt::test
