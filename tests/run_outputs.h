// The binary run by the tests, and what it leaves behind: its exit code, output and peak memory, a file's
// text, the losses of its --json, the weights of its --save, and the relative difference of two
// weight sets; the scratch directory each test works in; and the message of a refusal.
#pragma once
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/safetensors.h"
#include "train/trainer.h"

namespace tt::test {

// A fresh directory for the running test, <temp>/tt_<prefix>_<pid>_<test name> (a parametrized
// test's "/" as "_"): made empty when the object is built, removed with it. Every test that
// writes files, on the CPU and on the GPU, keeps one.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& prefix) : path_(std::filesystem::temp_directory_path() / name(prefix)) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  static std::string name(const std::string& prefix) {
    std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    for (char& c : test) c = c == '/' ? '_' : c;
    return "tt_" + prefix + "_" + std::to_string(::getpid()) + "_" + test;
  }
  std::filesystem::path path_;
};

// The message of the UsageError `f` throws ("" when it throws none).
template <class F>
std::string refusal(F&& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

struct Outcome {
  int exit_code;
  std::string out, err;
  long peak_kb = 0;  // the largest resident memory of the command's processes
};

// tiny_llama with `args` (a command other than train first), its output kept in dir/stdout and
// dir/stderr; `prefix` goes before the binary in the shell's command line (a `timeout 3 `, a
// `ulimit -v N; `, a pipe into it).
inline Outcome run_binary(const std::string& args, const std::filesystem::path& dir, const std::string& prefix = "") {
  const std::string cmd = prefix + std::string(TT_BINARY) + " " + args + " >" + (dir / "stdout").string() + " 2>" +
                          (dir / "stderr").string();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  rusage usage{};
  ::wait4(pid, &status, 0, &usage);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_text(dir / "stdout"), read_text(dir / "stderr"), usage.ru_maxrss};
}

// The address space tiny_llama maps before it does any work (its libraries), in kB: a limit on
// it (ulimit -v) must leave that much for the program to start at all.
inline long base_vm_kb() {
  const std::string cmd = std::string(TT_BINARY) + " --device cpu --hidden-dim 16 --num-layers 1 --num-heads 2 "
                          "--seq-len 8 --vocab-size 64 --num-steps 100000000 >/dev/null 2>&1 & pid=$!; sleep 1; "
                          "grep VmPeak /proc/$pid/status | tr -dc 0-9; kill $pid";
  FILE* f = ::popen(cmd.c_str(), "r");
  long kb = 0;
  if (f && std::fscanf(f, "%ld", &kb) != 1) kb = 0;
  if (f) ::pclose(f);
  return kb;
}

inline std::vector<double> run_losses(const std::string& json) {
  std::ifstream in(json);
  const nlohmann::json j = nlohmann::json::parse(in);  // kept: a range-for over a temporary's member dangles
  std::vector<double> out;
  for (const auto& s : j["steps"]) out.push_back(s["loss"].get<double>());
  return out;
}

// A checkpoint's bytes with its run identity blanked: the same training resumed or run at once
// writes the same bytes but for it (a resumed run keeps the identity of the run it continues).
inline std::string checkpoint_bytes_without_run(const std::filesystem::path& path) {
  std::string bytes = read_text(path);
  const std::string key = "\"run\":\"";
  const size_t at = bytes.find(key);
  if (at != std::string::npos && at < 65536) bytes.replace(at + key.size(), 16, 16, '-');
  return bytes;
}

// A run of o.steps, one of half of them saved to dir's half.safetensors, and that one resumed to
// o.steps: the resumed steps' losses are the whole run's, and its checkpoint is the whole run's
// byte for byte but for the run identity (not EXPECT_EQ, which would print two checkpoints).
// Returns the whole run's result.
inline TrainResult expect_resume_continues_bit_for_bit(TrainOptions o, const ScratchDir& dir, std::ostream& log) {
  const int steps = o.steps, half = o.steps / 2;
  o.save_path = dir.file("full.safetensors");
  const TrainResult full = train(o, log);
  o.steps = half;
  o.save_path = dir.file("half.safetensors");
  train(o, log);
  o.steps = steps;
  o.resume_path = dir.file("half.safetensors");
  o.save_path = dir.file("resumed.safetensors");
  const TrainResult resumed = train(o, log);
  EXPECT_EQ(resumed.steps.size(), size_t(steps - half));
  for (size_t i = 0; i < resumed.steps.size() && half + i < full.steps.size(); ++i)
    EXPECT_EQ(resumed.steps[i].loss, full.steps[half + i].loss) << "step " << resumed.steps[i].step;
  EXPECT_TRUE(checkpoint_bytes_without_run(dir.file("resumed.safetensors")) ==
              checkpoint_bytes_without_run(dir.file("full.safetensors")));
  return full;
}

// Every tensor of a checkpoint but the optimizer's and the tokenizer's files, in file order.
inline std::vector<float> run_weights(const std::string& ckpt) {
  const SafetensorsFile f = read_safetensors(ckpt, "test");
  std::vector<float> all;
  for (const SafetensorInfo& t : f.tensors)
    if (t.name.rfind("optimizer.", 0) != 0 && t.dtype != "U8") {
      const std::vector<float> v = read_tensor_f32(f, t);
      all.insert(all.end(), v.begin(), v.end());
    }
  return all;
}

// ||a - b|| / ||b|| in the 2-norm (a huge number when the sizes differ).
inline double relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return 1e30;
  double err = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) err += (double(a[i]) - b[i]) * (double(a[i]) - b[i]), norm += double(b[i]) * b[i];
  return std::sqrt(err / norm);
}

}  // namespace tt::test
