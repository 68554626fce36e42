// A practitioner's long job, through the real binary: a resume from a save directory keeps saving
// there at the stored cadence and continues its metrics as one series; a checkpoint restores the
// recipe's numbers and choices, never a path or an output; a shared save directory never loses
// another run's files; recipes in a file; a signal between micro-batches; the validation the same
// at any batch size; a mistyped flag named with the nearest real one.
#include <gtest/gtest.h>

#include <cmath>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "data/safetensors.h"
#include "run_outputs.h"
#include "train/checkpoint.h"

namespace tt::test {
namespace {

namespace fs = std::filesystem;

const std::string kModel = "--device cpu --hidden-dim 16 --num-layers 1 --num-heads 2 --seq-len 8 --batch-size 2 "
                           "--vocab-size 64 ";

std::vector<int64_t> metric_steps(const std::string& path) {
  std::istringstream lines(read_text(path));
  std::vector<int64_t> steps;
  for (std::string line; std::getline(lines, line);) steps.push_back(nlohmann::json::parse(line)["step"].get<int64_t>());
  return steps;
}

std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// --resume DIR alone: the run goes on saving in DIR at the stored --save-every and --keep-last,
// and its metrics (DIR/metrics.jsonl) continue after the step it resumes from, the lines of a
// killed run's later steps dropped.
TEST(LongJob, AResumedSaveDirectoryKeepsSavingAndItsMetricsGoOn) {
  ScratchDir dir("long");
  const std::string ck = dir.file("ck");
  Outcome r = run_binary(kModel + "--num-steps 10 --save-every 5 --keep-last 2 --log-every 1 --save-dir " + ck, dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // A killed run would have logged past its last checkpoint: steps 11 and 12 are not in it.
  std::ofstream(dir.file("ck/metrics.jsonl"), std::ios::app) << R"({"step":11,"loss":1})" "\n" R"({"step":12,"loss":1})" "\n";
  r = run_binary("--device cpu --resume " + ck + " --num-steps 20", dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Checkpoints: every 5 steps and at the end, step files in " + ck + " (this run's newest 2 kept)"),
            std::string::npos) << r.out;
  EXPECT_EQ(files_in(ck), (std::vector<std::string>{"metrics.jsonl", "step_00000015.safetensors", "step_00000020.safetensors"}));
  std::vector<int64_t> expected;
  for (int64_t s = 1; s <= 20; ++s) expected.push_back(s);
  EXPECT_EQ(metric_steps(dir.file("ck/metrics.jsonl")), expected) << "one increasing series, steps 11 and 12 the resumed run's";
  // tools/plot_loss.py draws it: one training curve over the 20 steps, axes labelled 0 to 20.
  const std::string plot = "python3 " + std::string(TT_SOURCE_DIR) + "/tools/plot_loss.py " + dir.file("ck/metrics.jsonl") +
                           " " + dir.file("loss.svg") + " >" + dir.file("plot.log") + " 2>&1";
  ASSERT_EQ(std::system(plot.c_str()), 0) << read_text(dir.file("plot.log"));
  const std::string svg = read_text(dir.file("loss.svg"));
  EXPECT_NE(svg.find("<polyline"), std::string::npos) << svg;
  EXPECT_NE(svg.find(">20</text>"), std::string::npos) << svg;
  EXPECT_NE(svg.find("training (mean of 2 steps)"), std::string::npos) << svg;
  // A run that saves nothing says so at its start.
  r = run_binary(kModel + "--num-steps 1", dir.path());
  EXPECT_NE(r.out.find("Checkpoints: none (no --save or --save-dir: this run saves nothing)"), std::string::npos) << r.out;
}

// A checkpoint's recipe holds numbers and choices as typed values: a crafted one that names an
// output (--save) or holds a wrong type is refused, and nothing is written.
TEST(LongJob, ACheckpointNeverChoosesWhereFilesGo) {
  ScratchDir dir("long");
  Outcome r = run_binary(kModel + "--num-steps 2 --save " + dir.file("ck.st"), dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The same file with its recipe rewritten (a header of the same length keeps the offsets).
  auto craft = [&](const std::string& name, const std::string& from, const std::string& to) {
    std::string bytes = read_text(dir.file("ck.st"));
    const size_t at = bytes.find(from);
    ASSERT_NE(at, std::string::npos);
    ASSERT_EQ(from.size(), to.size());
    bytes.replace(at, from.size(), to);
    std::ofstream(dir.file(name), std::ios::binary) << bytes;
  };
  craft("save.st", R"(\"--log-every\":10)", R"(\"--save\":\"v.t\")");
  craft("type.st", R"(\"--shuffle\":false)", R"(\"--shuffle\":12345)");
  craft("rule.st", R"(\"--log-every\":10)", R"(\"--log-every\":-1)");
  for (const auto& [file, says] : {std::pair{"save.st", "its recipe holds '--save', not a stored flag of this build"},
                                   {"type.st", "the stored --shuffle is not true or false (got 12345)"},
                                   {"rule.st", "--log-every: must be a positive integer (got -1)"}}) {
    r = run_binary("--device cpu --num-steps 4 --resume " + dir.file(file), dir.path());
    EXPECT_EQ(r.exit_code, 2) << file;
    EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
  }
  EXPECT_FALSE(fs::exists(dir.file("v.t")));
}

// Version 5's delayed scales in a checkpoint (fp8/scale_state, F32 of one dimension) are read as
// untrusted input: another shape, or a value that is not finite, is refused naming the tensor; a sound
// one is kept aside by a run without FP8 (the CPU here), which resumes.
TEST(LongJob, AStoredFp8ScaleStateIsChecked) {
  ScratchDir dir("long");
  Outcome r = run_binary(kModel + "--num-steps 2 --save " + dir.file("ck.st"), dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const SafetensorsFile f = read_safetensors(dir.file("ck.st"), "test");
  auto with_scales = [&](const std::string& name, std::vector<float> scales, std::vector<int64_t> shape) {
    std::vector<TensorOut> out;
    for (const SafetensorInfo& t : f.tensors) out.push_back({t.name, t.shape, read_tensor_f32(f, t)});
    out.push_back({"fp8/scale_state", shape, scales});
    write_safetensors(dir.file(name), out, f.metadata, false);
  };
  with_scales("good.st", std::vector<float>(40, 1.0f), {40});
  with_scales("nan.st", {1.0f, std::nanf("")}, {2});
  with_scales("2d.st", std::vector<float>(40, 1.0f), {2, 20});
  r = run_binary("--device cpu --num-steps 3 --resume " + dir.file("good.st"), dir.path());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (const auto& [file, says] : {std::pair{"nan.st", "tensor 'fp8/scale_state' holds a value that is not finite"},
                                   {"2d.st", "tensor 'fp8/scale_state' is not F32 of one dimension"}}) {
    r = run_binary("--device cpu --num-steps 3 --resume " + dir.file(file), dir.path());
    EXPECT_EQ(r.exit_code, 2) << file;
    EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
  }
}

// A run removes only its own step files; a new run refuses a directory that holds another run's
// (or a user's file of that name), and --resume DIR refuses to guess between two runs.
TEST(LongJob, ASharedSaveDirectoryNeverLosesARun) {
  ScratchDir dir("long");
  const std::string ck = dir.file("ck");
  Outcome r = run_binary(kModel + "--num-steps 20 --save-every 10 --save-dir " + ck, dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_binary(kModel + "--num-steps 5 --keep-last 1 --save-dir " + ck, dir.path());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("holds step files that are not this run's (step_00000010.safetensors (run "), std::string::npos)
      << r.err;
  EXPECT_EQ(files_in(ck), (std::vector<std::string>{"metrics.jsonl", "step_00000010.safetensors", "step_00000020.safetensors"}));
  // A user's file named like a step file is never deleted, and a resume will not take it.
  const std::string mine = dir.file("mine");
  fs::create_directories(mine);
  std::ofstream(mine + "/step_00000001.safetensors") << "my notes";
  r = run_binary(kModel + "--num-steps 3 --keep-last 1 --save-dir " + mine, dir.path());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("step_00000001.safetensors (not a checkpoint of this build)"), std::string::npos) << r.err;
  EXPECT_EQ(read_text(mine + "/step_00000001.safetensors"), "my notes");
  fs::copy_file(ck + "/step_00000020.safetensors", mine + "/step_00000030.safetensors");
  r = run_binary("--device cpu --num-steps 40 --resume " + mine, dir.path());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("holds the step files of more than one run or files that are not checkpoints"), std::string::npos)
      << r.err;
  // Past step 99,999,999 a step file has nine digits, and is found as the latest.
  fs::create_directories(dir.file("big"));
  fs::copy_file(ck + "/step_00000020.safetensors", dir.file("big/step_100000000.safetensors"));
  fs::copy_file(ck + "/step_00000010.safetensors", dir.file("big/step_99999999.safetensors"));
  EXPECT_EQ(latest_step_checkpoint(dir.file("big")), dir.file("big/step_100000000.safetensors"));
}

// --write-config writes the recipe; --config reads it back (flags given win), refusing a path or
// a name it does not know; a mistyped flag is named with the nearest real one.
TEST(LongJob, RecipesInAFile) {
  ScratchDir dir("long");
  const std::string recipe = dir.file("r.toml");
  Outcome r = run_binary(kModel + "--num-steps 4 --beta2 0.95 --shuffle --lr-schedule cosine --write-config " + recipe,
                         dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(read_text(recipe).find("beta2 = 0.95\n"), std::string::npos) << read_text(recipe);
  // The command line wins over the file (--num-steps 3 against its 4): the run of the flags alone.
  r = run_binary("--device cpu --config " + recipe + " --num-steps 3 --json " + dir.file("a.json"), dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Settings: --beta2 0.95 --shuffle"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("steps 1..3, lr cosine"), std::string::npos) << r.out;
  r = run_binary(kModel + "--num-steps 3 --beta2 0.95 --shuffle --lr-schedule cosine --json " + dir.file("b.json"),
                 dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(run_losses(dir.file("a.json")), run_losses(dir.file("b.json")));
  // The ready recipes (configs/) load, and write back the same recipe.
  auto recipe_lines = [](const std::string& path) {  // without comments
    std::istringstream in(read_text(path));
    std::string kept;
    for (std::string line; std::getline(in, line);)
      if (line.rfind("#", 0) != 0) kept += line + "\n";
    return kept;
  };
  for (const auto& e : fs::directory_iterator(std::string(TT_SOURCE_DIR) + "/configs")) {
    r = run_binary("--config " + e.path().string() + " --save-dir " + dir.file("ck") + " --write-config " +
                       dir.file("back.toml"),
                   dir.path());
    ASSERT_EQ(r.exit_code, 0) << e.path() << ": " << r.err;
    EXPECT_EQ(recipe_lines(dir.file("back.toml")), recipe_lines(e.path().string())) << e.path();
  }
  for (const auto& [line, says] : {std::pair{"save-dir = \"x\"\n", "--config: save-dir names a path"},
                                   {"max-steps = 3\n", "--config: 'max-steps' is not a flag of this command"}}) {
    std::ofstream(dir.file("bad.toml")) << line;
    r = run_binary("--device cpu --config " + dir.file("bad.toml"), dir.path());
    EXPECT_EQ(r.exit_code, 2) << line;
    EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
  }
  for (const auto& [flag, says] : {std::pair{"--max-steps 3", "--max-steps: no such flag; did you mean --num-steps?"},
                                   {"--warmup-iters 3", "did you mean --lr-warmup-steps?"},
                                   {"--lr-warmup 3", "did you mean --lr-warmup-steps?"},
                                   {"--num-step 3", "did you mean --num-steps?"}}) {
    r = run_binary(kModel + flag, dir.path());
    EXPECT_EQ(r.exit_code, 2) << flag;
    EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
  }
}

// The validation without --val-tokens is the split's first 32 windows at any batch size: the same
// model gives the same loss at batch 2 and 8 (to the fp32 products' rounding).
TEST(LongJob, TheDefaultValidationDoesNotMoveWithTheBatch) {
  ScratchDir dir("long");
  {
    std::ofstream f(dir.file("t.txt"));
    for (int i = 0; i < 400; ++i) f << "some text to validate on, line " << i << ". ";
  }
  double first[2];
  for (int i : {0, 1}) {
    const Outcome r = run_binary("--device cpu --hidden-dim 16 --num-layers 1 --num-heads 2 --seq-len 8 --num-steps 1 "
                                 "--batch-size " + std::string(i ? "8" : "2") + " --data " + dir.file("t.txt") +
                                     " --json " + dir.file("v.json"),
                                 dir.path());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    first[i] = nlohmann::json::parse(read_text(dir.file("v.json")))["validation"][0]["loss"].get<double>();
  }
  EXPECT_NEAR(first[0], first[1], 1e-6 * first[1]);
}

// A stop signal during an accumulated step stops between its micro-batches: the step is not taken,
// its checkpoint is the last whole step's, and the resumed run trains as the uninterrupted one.
TEST(LongJob, AStopSignalEndsAnAccumulatedStepBetweenMicroBatches) {
  ScratchDir dir("long");
  const std::string model = "--device cpu --hidden-dim 64 --num-layers 2 --num-heads 2 --seq-len 64 --batch-size 4 "
                            "--vocab-size 64 --grad-accum-steps 400 --log-every 1 ";
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::freopen(dir.file("run.log").c_str(), "w", stdout);
    ::execl("/bin/sh", "sh", "-c", ("exec " + std::string(TT_BINARY) + " " + model + "--num-steps 3 --save " + dir.file("ck.st")).c_str(),
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  for (int i = 0; i < 600 && read_text(dir.file("run.log")).find("Step   1/") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ::kill(pid, SIGINT);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 130) << read_text(dir.file("run.log"));
  const std::string log = read_text(dir.file("run.log"));
  EXPECT_NE(log.find("Stopped by signal 2 during step 2, between its micro-batches (not taken), after step 1"),
            std::string::npos) << log;
  EXPECT_EQ(read_checkpoint_info(dir.file("ck.st")).step, 1);
  Outcome r = run_binary(model + "--resume " + dir.file("ck.st") + " --num-steps 2 --json " + dir.file("rest.json"),
                         dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_binary(model + "--num-steps 2 --json " + dir.file("full.json"), dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(run_losses(dir.file("rest.json")).back(), run_losses(dir.file("full.json")).back());
}

// --eval-task scores a multiple-choice task with every validation (the log line's Acc, the
// metrics' task_acc and task_acc_norm), and --tensorboard writes an event file a run, a resume
// adding its own.
TEST(LongJob, ATaskAndTensorBoardGoWithTheValidation) {
  ScratchDir dir("long");
  {
    std::ofstream f(dir.file("t.txt"));
    for (int i = 0; i < 200; ++i) f << "some text to train on, line " << i << ".\n";
  }
  const std::string run = "--device cpu --hidden-dim 32 --num-layers 1 --num-heads 2 --seq-len 128 --batch-size 4 "
                          "--log-every 3 --data " + dir.file("t.txt") + " --eval-task " + std::string(TT_TESTS_DIR) +
                          "/data/multiple_choice.jsonl --tensorboard " + dir.file("tb") + " --metrics " +
                          dir.file("m.jsonl") + " ";
  Outcome r = run_binary(run + "--num-steps 3 --save " + dir.file("ck.st"), dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("| Val: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| Acc: "), std::string::npos) << r.out;
  r = run_binary(run + "--num-steps 6 --resume " + dir.file("ck.st"), dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream lines(read_text(dir.file("m.jsonl")));
  int scored = 0;
  for (std::string line; std::getline(lines, line);) scored += nlohmann::json::parse(line)["task_acc_norm"].is_number();
  EXPECT_EQ(scored, 3) << "steps 0, 3 and 6";
  EXPECT_EQ(files_in(dir.file("tb")).size(), 2u);
}

// With --grad-accum-steps the step's time is split per micro-batch: the last micro-batch's
// forward and backward, the update, and the micro-batches before the last; the parts add up to the
// step (the log line shows tokens/s, and the summary names the split).
TEST(LongJob, TheStepIsSplitPerMicroBatch) {
  ScratchDir dir("long");
  const Outcome r = run_binary(kModel + "--num-steps 7 --grad-accum-steps 3 --json " + dir.file("r.json"), dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(" tokens/sec | "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Average time of the micro-batches before the last: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(2 of them, forward and backward)"), std::string::npos) << r.out;
  for (const auto& s : nlohmann::json::parse(read_text(dir.file("r.json")))["steps"]) {
    const double parts = s["forward_ms"].get<double>() + s["backward_ms"].get<double>() +
                         s["optimizer_ms"].get<double>() + s["earlier_micro_batches_ms"].get<double>();
    EXPECT_NEAR(parts, s["ms"].get<double>(), 1e-6 * s["ms"].get<double>()) << s.dump();
    EXPECT_GT(s["earlier_micro_batches_ms"].get<double>(), 0) << s.dump();
  }
}

// A text file for --data is held whole in memory: above the limit it is refused, naming the
// tokenize command that turns it into token files (read as training goes).
TEST(LongJob, ALargeTextFileIsRefusedWithItsRemedy) {
  ScratchDir dir("long");
  std::ofstream(dir.file("big.txt")) << "text";
  fs::resize_file(dir.file("big.txt"), (size_t(300) << 20));  // sparse: no disk used
  const Outcome r = run_binary("--device cpu --data " + dir.file("big.txt"), dir.path());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("holds 300 MiB of text; a text file is read whole into memory (at most 256 MiB): convert it once, "
                       "tiny_llama tokenize '" + dir.file("big.txt") + "' --tokenizer bytes --out DIR"),
            std::string::npos) << r.err;
}

// A --metrics file that cannot be written (a full disk: here the file-size limit, which the
// metrics pass and the checkpoint does not) costs the metrics, never the model.
TEST(LongJob, AFailedMetricsWriteNeverCostsTheModel) {
  ScratchDir dir("long");
  const std::string cmd = "ulimit -f 100; exec " + std::string(TT_BINARY) + " " + kModel +
                          "--num-steps 600 --log-every 1 --metrics " + dir.file("m.jsonl") + " --save " +
                          dir.file("ck.st") + " >" + dir.file("out.log") + " 2>&1";
  const int status = std::system(("bash -c '" + cmd + "'").c_str());
  const std::string out = read_text(dir.file("out.log"));
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
  EXPECT_NE(out.find("Warning: --metrics: cannot write '" + dir.file("m.jsonl") + "' (disk full?): the run goes on "
                     "without metrics"),
            std::string::npos) << out;
  EXPECT_LT(fs::file_size(dir.file("m.jsonl")), 600u * 200) << "the metrics stopped";
  EXPECT_EQ(read_checkpoint_info(dir.file("ck.st")).step, 600);
}

}  // namespace
}  // namespace tt::test
