// Helpers for the data-parallel GPU tests: run the binary (plain, or under a launcher) with a
// small model into a fresh directory, and read back its losses and final weights.
#pragma once
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/safetensors.h"

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
  static std::string read(const std::string& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  static std::vector<double> losses(const std::string& json) {
    std::ifstream in(json);
    const nlohmann::json j = nlohmann::json::parse(in);  // kept: a range-for over a temporary's member dangles
    std::vector<double> out;
    for (const auto& s : j["steps"]) out.push_back(s["loss"].get<double>());
    return out;
  }
  static std::vector<float> weights(const std::string& ckpt) {
    const SafetensorsFile f = read_safetensors(ckpt, "test");
    std::vector<float> all;
    for (const SafetensorInfo& t : f.tensors)
      if (t.name.rfind("optimizer.", 0) != 0) {
        const std::vector<float> v = read_tensor_f32(f, t);
        all.insert(all.end(), v.begin(), v.end());
      }
    return all;
  }
  // The relative difference of two weight sets, in the 2-norm.
  static double rel(const std::vector<float>& a, const std::vector<float>& b) {
    double err = 0, norm = 0;
    for (size_t i = 0; i < a.size() && i < b.size(); ++i)
      err += (double(a[i]) - b[i]) * (double(a[i]) - b[i]), norm += double(b[i]) * b[i];
    return a.size() == b.size() ? std::sqrt(err / norm) : 1e30;
  }
  static void expect_same_losses(const std::vector<double>& got, const std::vector<double>& ref, double bound) {
    ASSERT_EQ(got.size(), ref.size());
    for (size_t i = 0; i < ref.size(); ++i) EXPECT_LE(std::fabs(got[i] - ref[i]) / ref[i], bound) << "step " << i + 1;
  }
  static std::string as_root() { return ::geteuid() == 0 ? " --allow-run-as-root" : ""; }

  fs::path dir;
};

}  // namespace tt::test
