// Outputs never destroy inputs, interrupted runs lose nothing: through the real binary.
//   - an output that is an input or another output is refused before any work;
//   - a symbolic link is written through, a device or FIFO is never replaced, an empty path is
//     refused, a write over the file-size limit fails cleanly, stale temporary files go;
//   - SIGINT finishes the step, writes the checkpoint, exits 130, and resuming from it gives
//     the bytes of an uninterrupted run; --save-every leaves a checkpoint a SIGKILL cannot take.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "run_outputs.h"
#include "train/checkpoint.h"

namespace tt::test {
namespace {

namespace fs = std::filesystem;

class Reliability : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(dir / "corpus.txt") << std::string(2000, 'x') + "some text to learn from, again and again. ";
  }
  std::string p(const std::string& name) const { return (dir / name).string(); }
  static std::string slurp(const fs::path& f) {
    std::ifstream in(f, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  // A tiny model on the corpus.
  std::string model() const {
    return std::string(TT_BINARY) + " --device cpu --hidden-dim 16 --num-layers 1 --num-heads 2 --batch-size 2"
           " --seq-len 8 --data " + p("corpus.txt") + " ";
  }
  // The tiny model with `args`; returns the exit code, stderr in err.
  int run(const std::string& args, std::string* err = nullptr, const std::string& prefix = "") {
    const std::string cmd = prefix + model() + args + " >" + p("out.log") + " 2>" + p("err.log");
    const int status = std::system(cmd.c_str());
    if (err) *err = slurp(dir / "err.log");
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  // The tiny model with `args` in the background, stdout into `log` and stderr into err.log;
  // returns its process once `text` is in the log (or after 20 s).
  pid_t start(const std::string& args, const std::string& log, const std::string& text) {
    fs::remove(p(log));
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::freopen(p(log).c_str(), "w", stdout);
      ::freopen(p("err.log").c_str(), "w", stderr);
      ::execl("/bin/sh", "sh", "-c", ("exec " + model() + args).c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    for (int i = 0; pid > 0 && i < 4000 && slurp(dir / log).find(text) == std::string::npos; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return pid;
  }

  ScratchDir scratch_{"rel"};
  const fs::path dir = scratch_.path();
};

TEST_F(Reliability, OutputsNeverReplaceInputsOrEachOther) {
  const std::string corpus = slurp(dir / "corpus.txt");
  std::string err;
  EXPECT_EQ(run("--num-steps 1 --save " + p("corpus.txt"), &err), 2);
  EXPECT_NE(err.find("the same file as --data"), std::string::npos) << err;
  EXPECT_EQ(run("--num-steps 1 --json " + p("corpus.txt"), &err), 2);
  fs::create_symlink(p("corpus.txt"), p("link.txt"));  // the same file by another name
  EXPECT_EQ(run("--num-steps 1 --save " + p("link.txt"), &err), 2);
  EXPECT_EQ(slurp(dir / "corpus.txt"), corpus) << "the training text must be untouched";
  EXPECT_EQ(run("--num-steps 1 --json " + p("r") + " --save " + p("r"), &err), 2);
  EXPECT_NE(err.find("one output would replace the other"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(p("r")));
}

TEST_F(Reliability, PathsThatAreNotPlainFiles) {
  std::string err;
  EXPECT_EQ(run("--num-steps 1 --resume ''", &err), 2);
  EXPECT_NE(err.find("--resume: empty value"), std::string::npos) << err;
  EXPECT_EQ(run("--num-steps 1 --json /dev/null", &err), 2);  // as root this replaced /dev/null once
  EXPECT_NE(err.find("not a regular file"), std::string::npos) << err;
  ASSERT_EQ(::mkfifo(p("fifo").c_str(), 0600), 0);
  EXPECT_EQ(run("--num-steps 1 --save " + p("fifo"), &err), 2);
  EXPECT_NE(err.find("not a regular file"), std::string::npos) << err;
  // A symbolic link is written through: the link stays, its target gets the report.
  std::ofstream(p("target.json")) << "old";
  fs::create_symlink(p("target.json"), p("link.json"));
  ASSERT_EQ(run("--num-steps 1 --json " + p("link.json"), &err), 0) << err;
  EXPECT_TRUE(fs::is_symlink(p("link.json")));
  EXPECT_NE(slurp(p("target.json")).find("\"steps\""), std::string::npos);
  // A stale temporary file of a dead run is removed; a write over the file-size limit fails
  // with one line and leaves no temporary file.
  std::ofstream(p("ck.safetensors.tmp.999999999")) << "left by a run that died";
  ASSERT_EQ(run("--num-steps 1 --save " + p("ck.safetensors"), &err), 0) << err;
  EXPECT_FALSE(fs::exists(p("ck.safetensors.tmp.999999999")));
  EXPECT_EQ(run("--num-steps 1 --save " + p("big.safetensors"), &err, "ulimit -f 8; "), 1);
  EXPECT_NE(err.find("file-size limit"), std::string::npos) << err;
  for (const auto& e : fs::directory_iterator(dir))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
}

// The bit-exact resume: SIGINT at some step writes the checkpoint of the steps done and exits
// 130; resuming to the end gives every later step's loss and the final checkpoint, byte for
// byte, of a run that was never interrupted.
TEST_F(Reliability, InterruptedRunResumesBitForBit) {
  const int steps = 3000;
  std::string err;
  ASSERT_EQ(run("--num-steps " + std::to_string(steps) + " --log-every 100000 --save " + p("full.safetensors") +
                    " --json " + p("full.json"),
                &err),
            0)
      << err;
  const pid_t pid = start("--num-steps " + std::to_string(steps) + " --log-every 1 --save " + p("part.safetensors"),
                          "part.log", "Step  50/");
  ASSERT_GT(pid, 0);
  ::kill(pid, SIGINT);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 130) << slurp(dir / "part.log");
  const std::string log = slurp(dir / "part.log");
  EXPECT_NE(log.find("Stopped by signal 2 after step"), std::string::npos) << log;
  ASSERT_TRUE(fs::exists(p("part.safetensors"))) << log;
  ASSERT_EQ(run("--num-steps " + std::to_string(steps) + " --log-every 100000 --resume " + p("part.safetensors") +
                    " --save " + p("resumed.safetensors") + " --json " + p("resumed.json"),
                &err),
            0)
      << err;
  auto losses = [&](const std::string& json) {  // step -> loss
    const nlohmann::json j = nlohmann::json::parse(slurp(json));
    std::map<int, double> out;
    for (const auto& s : j["steps"]) out[s["step"].get<int>()] = s["loss"].get<double>();
    return out;
  };
  const std::map<int, double> full = losses(p("full.json")), resumed = losses(p("resumed.json"));
  ASSERT_FALSE(resumed.empty());
  EXPECT_GT(resumed.begin()->first, 1) << "the resumed run starts after the interrupted one's steps";
  for (const auto& [step, loss] : resumed) EXPECT_EQ(loss, full.at(step)) << "step " << step;
  // Byte for byte, but for the run identities: the resumed run keeps the interrupted one's.
  EXPECT_TRUE(checkpoint_bytes_without_run(dir / "resumed.safetensors") == checkpoint_bytes_without_run(dir / "full.safetensors"));
  EXPECT_EQ(read_checkpoint_info(p("resumed.safetensors")).run_id, read_checkpoint_info(p("part.safetensors")).run_id);
  EXPECT_NE(read_checkpoint_info(p("resumed.safetensors")).run_id, read_checkpoint_info(p("full.safetensors")).run_id);
}

// --save-every: after a SIGKILL (no chance to write) the last periodic checkpoint is whole.
TEST_F(Reliability, PeriodicCheckpointsSurviveAKill) {
  std::string err;
  EXPECT_EQ(run("--num-steps 5 --save-every 2", &err), 2);
  EXPECT_NE(err.find("--save-every: needs --save"), std::string::npos) << err;
  const pid_t pid = start("--num-steps 100000 --log-every 1 --save-every 20 --save " + p("ck.safetensors"), "run.log",
                          "Step  65/");
  ASSERT_GT(pid, 0);
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  ASSERT_TRUE(fs::exists(p("ck.safetensors")));
  EXPECT_EQ(run("--num-steps 100 --log-every 1000 --resume " + p("ck.safetensors"), &err), 0) << err;
  EXPECT_NE(slurp(dir / "out.log").find("Resumed from"), std::string::npos);
}

// A run that diverges never writes its weights: the last good checkpoint stays, and the message
// names what diverged and the setting to look at (the initial weights, the weight decay, or the
// learning rate). The model is written before the report, and a signal writes the report too.
TEST_F(Reliability, ADivergedRunKeepsTheLastGoodCheckpoint) {
  std::string err;
  ASSERT_EQ(run("--num-steps 2 --save " + p("ck.safetensors"), &err), 0) << err;
  const std::string good = slurp(dir / "ck.safetensors");
  // The weights overflow at the first update; the loss would say so only a step later.
  EXPECT_EQ(run("--num-steps 1 --learning-rate 1e39 --save " + p("ck.safetensors"), &err), 1);
  EXPECT_NE(err.find("training diverged: tensor '"), std::string::npos) << err;
  EXPECT_NE(err.find("is not written (the last one stays)"), std::string::npos) << err;
  EXPECT_EQ(run("--num-steps 6 --learning-rate 1e39 --save-every 1 --save " + p("ck.safetensors"), &err), 1);
  EXPECT_NE(err.find("training diverged"), std::string::npos) << err;
  EXPECT_EQ(slurp(dir / "ck.safetensors"), good) << "the last good checkpoint is replaced";
  EXPECT_EQ(run("--num-steps 3 --init-std 1e30", &err), 1);
  EXPECT_NE(err.find("the initial weights (--init-std 1e+30; 0.02 is usual)"), std::string::npos) << err;
  EXPECT_EQ(run("--num-steps 60 --weight-decay 1e6", &err), 1);
  EXPECT_NE(err.find("--weight-decay 1e+06 at --learning-rate 0.0003"), std::string::npos) << err;
  EXPECT_EQ(run("--num-steps 60 --learning-rate 1e20", &err), 1);
  EXPECT_NE(err.find("try a lower --learning-rate than 1e+20"), std::string::npos) << err;
}

// The report comes after the model, and a run stopped by a signal writes it too: SIGTERM to a
// run whose --json folder was removed mid-run (a report that cannot be written) still leaves its
// checkpoint; SIGTERM to a run with a writable --json leaves both.
TEST_F(Reliability, TheModelIsWrittenBeforeTheReport) {
  for (const bool report_gone : {true, false}) {
    SCOPED_TRACE(report_gone ? "--json unwritable" : "--json writable");
    fs::remove(p("ck.safetensors"));
    fs::create_directories(p("report"));
    const pid_t pid = start("--num-steps 100000 --log-every 1 --save " + p("ck.safetensors") + " --json " +
                                p("report/r.json"),
                            "run.log", "Step  20/");
    ASSERT_GT(pid, 0);
    if (report_gone) fs::remove_all(p("report"));
    ::kill(pid, SIGTERM);
    int status = 0;
    ::waitpid(pid, &status, 0);
    EXPECT_TRUE(fs::exists(p("ck.safetensors"))) << slurp(dir / "err.log");
    if (report_gone) {
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << slurp(dir / "err.log");
    } else {
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGTERM) << slurp(dir / "err.log");
      EXPECT_NE(slurp(dir / "report" / "r.json").find("\"steps\""), std::string::npos) << "the stopped run's report";
    }
  }
}

// --metrics: a JSON line at every log step, each complete, also when SIGINT stops the run.
TEST_F(Reliability, MetricsAreWrittenAsTheRunGoes) {
  std::string err;
  ASSERT_EQ(run("--num-steps 6 --log-every 2 --lr-schedule cosine --metrics " + p("m.jsonl"), &err), 0) << err;
  std::istringstream lines(slurp(dir / "m.jsonl"));
  int n = 0;
  for (std::string line; std::getline(lines, line); ++n) {
    const nlohmann::json j = nlohmann::json::parse(line);
    EXPECT_EQ(j["step"], 2 * n);  // the validation before the first step, then every log step
    EXPECT_EQ(j["tokens"], 2 * n * 2 * 8);
    EXPECT_TRUE(j["validation_loss"].is_number()) << line;
    if (n == 0) continue;
    for (const char* key : {"loss", "lr", "grad_norm", "step_ms", "tokens_per_sec", "elapsed_s"})
      EXPECT_TRUE(j[key].is_number()) << key << " in " << line;
    EXPECT_TRUE(j["mfu"].is_null()) << "no peak rate on the CPU";
  }
  EXPECT_EQ(n, 4);
  const pid_t pid = start("--num-steps 100000 --log-every 5 --metrics " + p("live.jsonl"), "run.log", "Step 100/");
  ASSERT_GT(pid, 0);
  ::kill(pid, SIGINT);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 130);
  std::istringstream live(slurp(dir / "live.jsonl"));
  int count = 0;
  for (std::string line; std::getline(live, line); ++count) EXPECT_NO_THROW(nlohmann::json::parse(line)) << line;
  EXPECT_GE(count, 20);
}

}  // namespace
}  // namespace tt::test
