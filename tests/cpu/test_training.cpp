// Training end to end on the CPU: learning on a text file, checkpoints and bit-exact resume.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "bench/debug_stages.h"
#include "core/rng.h"
#include "model/llama.h"
#include "model/param_state.h"
#include "train/checkpoint.h"
#include "data/loader.h"
#include "train/schedule.h"
#include "train/report.h"
#include "train/trainer.h"
#include "data/safetensors.h"
#include "data/token_file.h"
#include "run_outputs.h"
#include <cmath>
#include <map>

namespace tt::test {
namespace {

namespace fs = std::filesystem;

// A test's scratch directory, with its files by name.
struct TempDir : ScratchDir {
  TempDir() : ScratchDir("test") {}
};

TrainOptions small_options() {
  TrainOptions o;
  o.model.vocab_size = 64;
  o.model.hidden = 32;
  o.model.layers = 2;
  o.model.heads = 4;
  o.model.kv_heads = 2;
  o.model.intermediate = 64;
  o.batch = 4;
  o.seq_len = 16;
  o.timing_warmup = 1;
  o.backend.device = DeviceKind::Cpu;
  return o;
}

// The options of a two-step run that resumes from the checkpoint of a one-step run (written in dir).
TrainOptions resume_after_one_step(const TempDir& dir, std::ostream& log) {
  TrainOptions o = small_options();
  o.steps = 1;
  o.save_path = dir.file("ck.safetensors");
  train(o, log);
  o.steps = 2;
  o.save_path.clear();
  o.resume_path = dir.file("ck.safetensors");
  return o;
}

TEST(Training, ValidationLossFallsOnRepeatedText) {
  TempDir dir;
  const std::string path = dir.file("phrase.txt");
  {
    std::ofstream f(path);
    for (int i = 0; i < 120; ++i) f << "the quick brown fox jumps over the lazy dog. ";
  }
  TrainOptions o = small_options();
  o.data = path;
  o.model.vocab_size = 256;
  o.model.hidden = 64;
  o.model.intermediate = 128;
  o.batch = 8;
  o.seq_len = 32;
  o.steps = 300;
  o.log_every = 100;
  o.learning_rate = 1e-3;
  std::ostringstream log;
  const TrainResult r = train(o, log);
  ASSERT_EQ(r.validation.size(), 4u);  // at start, then steps 100, 200, 300
  EXPECT_EQ(r.validation.front().first, 0);
  EXPECT_NEAR(r.validation.front().second, std::log(256.0), 0.1);
  EXPECT_LT(r.validation.back().second, 0.25 * r.validation.front().second) << log.str();
}

// The init stage of `tiny_llama debug`: N(0, 1) weights start far above ln(vocab), the
// project's N(0, 0.02) starts at it.
TEST(Training, BrokenInitialisationStartsFarAboveLnVocab) {
  TrainOptions o = small_options();
  o.steps = 2;
  std::ostringstream log;
  const InitStageResult r = run_init_stage(o, log);
  EXPECT_NEAR(r.ln_vocab, std::log(64.0), 1e-12);
  EXPECT_NEAR(r.fixed_first, r.ln_vocab, 0.1) << log.str();
  EXPECT_GT(r.broken_first, 2 * r.ln_vocab) << log.str();
  EXPECT_NE(log.str().find("Lesson:"), std::string::npos) << log.str();
}

// --shuffle: each pass is a permutation of the training windows (every window once), another for
// each pass, spread over the ranks as one global batch; a shuffled run resumes bit for bit.
TEST(Shuffle, EveryWindowOncePerPassAndResumedExactly) {
  const CounterRng rng(7, kStreamShuffle);
  for (uint64_t n : {1u, 2u, 3u, 7u, 100u, 1000u, 4097u}) {
    for (uint64_t epoch : {0u, 1u, 5u}) {
      std::vector<bool> seen(n, false);
      for (uint64_t i = 0; i < n; ++i) {
        const uint64_t j = permuted_index(i, n, rng, epoch);
        ASSERT_LT(j, n);
        ASSERT_FALSE(seen[j]) << "n " << n << ": " << j << " twice";
        seen[j] = true;
      }
    }
  }
  int moved = 0;
  for (uint64_t i = 0; i < 1000; ++i) moved += permuted_index(i, 1000, rng, 0) != permuted_index(i, 1000, rng, 1);
  EXPECT_GT(moved, 900) << "two passes in nearly the same order";
  // Synthetic data, 1000 windows: a pass of 100 batches of 10 holds each window once, also when
  // two ranks of 5 read it.
  for (int ranks : {1, 2}) {
    std::set<std::vector<int32_t>> windows;
    std::vector<std::unique_ptr<DataSource>> data;
    for (int r = 0; r < ranks; ++r) {
      data.push_back(make_data_source("synthetic", 64, 10 / ranks, 8, 3));
      data.back()->set_shard(r, ranks);
      data.back()->set_shuffle(3);
    }
    Batch b;
    for (int step = 0; step < 100; ++step)
      for (auto& d : data) {
        d->next_batch(b);
        for (int i = 0; i < 10 / ranks; ++i)
          windows.insert(std::vector<int32_t>(b.tokens.begin() + i * 8, b.tokens.begin() + (i + 1) * 8));
      }
    EXPECT_EQ(windows.size(), 1000u) << ranks << " rank(s)";
    EXPECT_EQ(data[0]->epoch(), 1);
    EXPECT_EQ(data[0]->position(), 0);
  }
  TempDir dir;
  const std::string base = "--device cpu --hidden-dim 16 --num-layers 1 --num-heads 2 --seq-len 8 --batch-size 4 "
                           "--vocab-size 64 --shuffle";
  Outcome r = run_binary(base + " --num-steps 300 --json " + dir.file("full.json"), dir.path());  // past a pass
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_binary(base + " --num-steps 280 --save " + dir.file("ck.st"), dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(read_checkpoint_info(dir.file("ck.st")).data_epoch, 1);
  r = run_binary(base + " --num-steps 300 --resume " + dir.file("ck.st") + " --json " + dir.file("rest.json"), dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<double> full = run_losses(dir.file("full.json")), rest = run_losses(dir.file("rest.json"));
  ASSERT_EQ(rest.size(), 20u);
  for (size_t i = 0; i < rest.size(); ++i) EXPECT_EQ(rest[i], full[280 + i]) << "step " << 281 + i;
  r = run_binary("--device cpu --hidden-dim 16 --num-layers 1 --num-heads 2 --seq-len 8 --batch-size 4 --vocab-size 64 "
                 "--num-steps 300 --json " + dir.file("ordered.json"), dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(run_losses(dir.file("ordered.json")), full) << "the shuffle changed nothing";
}

// A checkpoint holds its run's recipe: a resume given only --resume and what changes trains as
// the uninterrupted run, bit for bit; a flag given wins over the recipe's.
TEST(Checkpoint, AResumeNeedsOnlyWhatChanges) {
  TempDir dir;
  {
    std::ofstream f(dir.file("t.txt"));
    for (int i = 0; i < 80; ++i) f << "some text to train on, again. ";
  }
  const std::string recipe = "--device cpu --data " + dir.file("t.txt") + " --hidden-dim 24 --num-layers 2 --num-heads 4 "
                             "--num-kv-heads 2 --intermediate-size 40 --seq-len 8 --batch-size 3 --learning-rate 1e-3 "
                             "--beta2 0.95 --weight-decay 0.1 --shuffle --seed 7 --lr-schedule linear --lr-schedule-steps 8";
  Outcome r = run_binary(recipe + " --num-steps 8 --json " + dir.file("full.json"), dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_binary(recipe + " --num-steps 4 --save " + dir.file("ck.st"), dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // A checkpoint never names the files a run reads: --data is given again.
  r = run_binary("--device cpu --resume " + dir.file("ck.st") + " --num-steps 8", dir.path());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("the checkpoint trained on --data \"" + dir.file("t.txt") + "\": give --data"), std::string::npos)
      << r.err;
  r = run_binary("--device cpu --data " + dir.file("t.txt") + " --resume " + dir.file("ck.st") + " --num-steps 8 --json " +
                     dir.file("rest.json"),
                 dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("Resuming with changed settings"), std::string::npos) << r.out;
  const std::vector<double> full = run_losses(dir.file("full.json")), rest = run_losses(dir.file("rest.json"));
  ASSERT_EQ(rest.size(), 4u);
  for (size_t i = 0; i < rest.size(); ++i) EXPECT_EQ(rest[i], full[4 + i]) << "step " << 5 + i;
  r = run_binary("--device cpu --data " + dir.file("t.txt") + " --resume " + dir.file("ck.st") +
                     " --num-steps 8 --learning-rate 2e-3 --no-shuffle --beta2 0.99",
                 dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Resuming with changed settings: --learning-rate 0.001 -> 0.002, --beta2 0.95 -> 0.99, "
                       "--shuffle true -> false"),
            std::string::npos)
      << r.out;
}

// --save-dir: step-numbered checkpoints at --save-every and at the end, the newest --keep-last
// kept; --resume DIR continues from the latest.
TEST(Checkpoint, StepCheckpointsInADirectory) {
  TempDir dir;
  const std::string base = "--device cpu --hidden-dim 16 --num-layers 1 --num-heads 2 --seq-len 8 --batch-size 2 "
                           "--vocab-size 64";
  Outcome r = run_binary(base + " --num-steps 7 --save-every 2 --keep-last 2 --save-dir " + dir.file("ck/run"), dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir.file("ck/run"))) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"metrics.jsonl", "step_00000006.safetensors", "step_00000007.safetensors"}));
  EXPECT_NE(r.out.find("Saved checkpoint: " + dir.file("ck/run/step_00000007.safetensors")), std::string::npos) << r.out;
  r = run_binary("--device cpu --num-steps 9 --resume " + dir.file("ck/run"), dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Resumed from " + dir.file("ck/run/step_00000007.safetensors") + " at step 7"), std::string::npos)
      << r.out;
  fs::create_directories(dir.file("empty"));
  r = run_binary("--device cpu --num-steps 9 --resume " + dir.file("empty"), dir.path());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("holds no step checkpoint"), std::string::npos) << r.err;
  r = run_binary(base + " --num-steps 2 --keep-last 2", dir.path());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--keep-last"), std::string::npos) << r.err;
}

// Each schedule against a hand computation at chosen steps (peak 1e-3, minimum 1e-4, 100 steps).
TEST(LrSchedule, EachKindAgainstAHandComputation) {
  const double pi = 3.14159265358979323846;
  LrSchedule s{"constant", 1e-3, 0.0, 10, 0, 100};
  EXPECT_DOUBLE_EQ(s.at(1), 1e-4);  // warmup: step / 10 of the peak
  EXPECT_DOUBLE_EQ(s.at(5), 5e-4);
  EXPECT_DOUBLE_EQ(s.at(10), 1e-3);
  EXPECT_DOUBLE_EQ(s.at(57), 1e-3);
  s = {"cosine", 1e-3, 1e-4, 10, 0, 100};
  EXPECT_DOUBLE_EQ(s.at(10), 1e-3);
  EXPECT_NEAR(s.at(55), 1e-4 + 0.5 * (1 + std::cos(pi * 0.5)) * 9e-4, 1e-15);  // halfway: the mean
  EXPECT_NEAR(s.at(40), 1e-4 + 0.5 * (1 + std::cos(pi * 30.0 / 90.0)) * 9e-4, 1e-15);
  EXPECT_NEAR(s.at(100), 1e-4, 1e-15);
  s = {"linear", 1e-3, 1e-4, 0, 0, 100};
  EXPECT_NEAR(s.at(1), 1e-3 - 0.01 * 9e-4, 1e-15);
  EXPECT_NEAR(s.at(50), 1e-3 - 0.5 * 9e-4, 1e-15);
  EXPECT_NEAR(s.at(100), 1e-4, 1e-15);
  s = {"wsd", 1e-3, 0.0, 10, 20, 100};  // stable to step 80, then down to 0 at 100
  EXPECT_DOUBLE_EQ(s.at(50), 1e-3);
  EXPECT_DOUBLE_EQ(s.at(80), 1e-3);
  EXPECT_NEAR(s.at(90), 5e-4, 1e-15);
  EXPECT_NEAR(s.at(100), 0.0, 1e-15);
  s = {"wsd", 1e-3, 1e-4, 0, 0, 4};  // a run shorter than five steps still decays, in its last step
  EXPECT_DOUBLE_EQ(s.at(3), 1e-3);
  EXPECT_DOUBLE_EQ(s.at(4), 1e-4);
  s = {"wsd", 1e-3, 0.0, 0, 0, 100};  // the decay defaults to a fifth of the run
  EXPECT_DOUBLE_EQ(s.at(80), 1e-3);
  EXPECT_NEAR(s.at(90), 5e-4, 1e-15);
}

// Through the binary: the steps' learning rates in --json follow the schedule, a resumed run
// continues it bit for bit, and what cannot be is refused naming its flag.
TEST(LrSchedule, FollowedResumedAndChecked) {
  TempDir dir;
  {
    std::ofstream f(dir.file("t.txt"));
    for (int i = 0; i < 80; ++i) f << "some text to train on. ";
  }
  const std::string base = "--device cpu --hidden-dim 16 --num-layers 1 --num-heads 2 --seq-len 8 --batch-size 2 --data " +
                           dir.file("t.txt") + " --num-steps 8 --lr-schedule cosine --lr-warmup-steps 2 --min-lr 1e-5";
  Outcome r = run_binary(base + " --json " + dir.file("full.json"), dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const LrSchedule s{"cosine", 3e-4, 1e-5, 2, 0, 8};
  std::ifstream in(dir.file("full.json"));
  const nlohmann::json j = nlohmann::json::parse(in);
  ASSERT_EQ(j["steps"].size(), 8u);
  for (const auto& step : j["steps"]) EXPECT_DOUBLE_EQ(step["lr"].get<double>(), s.at(step["step"].get<int64_t>()));
  EXPECT_NE(r.out.find("lr cosine from 0.0003 to 1e-05 over 8 steps, after 2 warmup steps"), std::string::npos) << r.out;
  // A first leg that stops at step 4 of the 8-step schedule, then the resume: the same losses.
  r = run_binary(base + " --num-steps 4 --lr-schedule-steps 8 --save " + dir.file("ck.st"), dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_binary(base + " --resume " + dir.file("ck.st") + " --json " + dir.file("rest.json"), dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<double> full = run_losses(dir.file("full.json")), rest = run_losses(dir.file("rest.json"));
  ASSERT_EQ(rest.size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(rest[i], full[4 + i]) << "step " << 5 + i;
  EXPECT_EQ(r.out.find("Resuming with changed settings"), std::string::npos) << r.out;
  // A resume onto another schedule says so.
  r = run_binary(base + " --num-steps 10 --lr-schedule-steps 10 --resume " + dir.file("ck.st"), dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Resuming with changed settings: --lr-schedule-steps 8 -> 10"), std::string::npos)
      << r.out;
  for (const auto& [flags, says] : std::vector<std::pair<std::string, std::string>>{
           {"--lr-schedule step", "--lr-schedule: constant, cosine, linear or wsd"},
           {"--lr-schedule cosine --lr-warmup-steps 8", "--lr-warmup-steps"},
           {"--lr-schedule cosine --min-lr 1", "--min-lr"},
           {"--lr-schedule cosine --lr-decay-steps 3", "--lr-decay-steps"},
           {"--min-lr 1e-5", "--min-lr"},
           {"--warmup-steps 3", "--timing-warmup-steps N leaves steps out of the timing, --lr-warmup-steps"},
           {"--beta1 1", "--beta1: must be in [0, 1)"},
           {"--beta2 nan", "--beta2: must be in [0, 1)"},
           {"--adam-eps 0", "--adam-eps"}}) {
    r = run_binary("--device cpu --hidden-dim 16 --num-layers 1 --num-heads 2 --seq-len 8 --num-steps 8 " + flags, dir.path());
    EXPECT_EQ(r.exit_code, 2) << flags;
    EXPECT_NE(r.err.find(says), std::string::npos) << flags << ": " << r.err;
  }
}

TEST(Training, InitStdScalesTheNormalWeights) {
  ModelConfig c;
  c.vocab_size = 64, c.hidden = 32, c.layers = 1, c.heads = 4, c.kv_heads = 2, c.intermediate = 64;
  const std::vector<float> a = initial_params(c, 5), b = initial_params(c, 5, 1.0);
  const std::vector<ParamEntry> table = param_table(c);
  for (const ParamEntry& e : table)
    for (int64_t j = 0; j < e.numel; ++j) {
      const size_t i = size_t(e.offset + j);
      if (e.init == Init::Ones) ASSERT_EQ(a[i], b[i]) << e.name;
      else ASSERT_NEAR(b[i], a[i] / kInitStd, 1e-5 * (1 + std::fabs(b[i]))) << e.name;
    }
  // A model writes them a tensor at a time (no host copy of all the weights): the same values.
  auto be = make_backend({DeviceKind::Cpu, plan_for_version(1)});
  Llama m(c, *be, 1, 4);
  m.init_weights(5);
  EXPECT_EQ(m.read_f32(m.params()), a);
}

TEST(Checkpoint, RoundTripRestoresEveryBuffer) {
  TempDir dir;
  const TrainOptions o = small_options();
  auto be = make_backend(o.backend);
  Llama a(o.model, *be, o.batch, o.seq_len);
  a.init_weights(3);
  auto data = make_data_source("synthetic", o.model.vocab_size, o.batch, o.seq_len, 3);
  Batch b;
  for (int step = 1; step <= 2; ++step) {
    data->next_batch(b);
    a.set_batch(b.tokens.data(), b.targets.data());
    a.forward();
    a.backward();
    AdamWStep s;
    s.t = step;
    a.optimizer_step(s);
  }
  const std::string path = dir.file("ck.safetensors");
  save_checkpoint(path, a, CheckpointInfo{o.model, 2, data->position(), data->epoch(), data->identity(), 3});

  const CheckpointInfo info = read_checkpoint_info(path);
  EXPECT_TRUE(info.config == o.model);
  EXPECT_EQ(info.step, 2);
  EXPECT_EQ(info.data_position, 2 * o.batch);
  EXPECT_EQ(info.data_identity, data->identity());
  EXPECT_EQ(info.seed, 3u);

  Llama c(o.model, *be, o.batch, o.seq_len);
  c.init_weights(4);  // different values, all overwritten by the load
  load_checkpoint(path, c);
  EXPECT_EQ(c.read_f32(c.params()), a.read_f32(a.params()));
  EXPECT_EQ(c.read_f32(c.adam_m()), a.read_f32(a.adam_m()));
  EXPECT_EQ(c.read_f32(c.adam_v()), a.read_f32(a.adam_v()));
}

TEST(Checkpoint, RefusesAnotherModel) {
  TempDir dir;
  std::ostringstream log;
  TrainOptions o = resume_after_one_step(dir, log);
  o.model.hidden = 64;
  try {
    train(o, log);
    FAIL() << "resume into a different model must fail";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--hidden-dim"), std::string::npos) << e.what();
  }
}

TEST(Data, SyntheticBatchesShiftLabelsOnce) {
  auto data = make_data_source("synthetic", 100, 2, 8, 42);
  Batch a, b;
  data->next_batch(a);
  for (int i = 0; i < 2 * 8; ++i) {
    EXPECT_GE(a.tokens[i], 1);
    EXPECT_LT(a.tokens[i], 100);
  }
  for (int s = 0; s < 2; ++s)
    for (int t = 0; t + 1 < 8; ++t) EXPECT_EQ(a.targets[s * 8 + t], a.tokens[s * 8 + t + 1]);
  // The walk wraps around the 1000 fixed sequences.
  data->set_position(kSyntheticSequences);
  data->next_batch(b);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.targets, b.targets);
}

}  // namespace
}  // namespace tt::test

namespace tt::test {
namespace {

// A recorded data position is reduced once, at load: the largest one resumes, on a text file and
// on token files, through the binary, and every later batch lies in the data (before, the
// position overflowed on the first step: reads outside the text, SIGSEGV on token files).
TEST(Checkpoint, AnyRecordedDataPositionResumes) {
  TempDir dir;
  {
    std::ofstream f(dir.file("t.txt"));
    for (int i = 0; i < 50; ++i) f << "some text to train on. ";
  }
  std::unique_ptr<DataSource> data = make_data_source(dir.file("t.txt"), 256, 4, 16, 1);
  data->set_position(INT64_MAX);
  Batch batch;
  for (int i = 0; i < 5; ++i) {
    data->next_batch(batch);
    EXPECT_GE(data->position(), 0);
  }
  std::vector<int32_t> tokens(3000);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int32_t(i * 7 % 64);
  write_token_file(dir.file("train_000000.bin"), tokens);
  write_token_file(dir.file("val_000000.bin"), std::vector<int32_t>(tokens.begin(), tokens.begin() + 500));
  const std::string model = " --device cpu --hidden-dim 32 --num-layers 1 --num-heads 2 --seq-len 16 --batch-size 4";
  for (const std::string spec : {"--data " + dir.file("t.txt"), "--data '" + dir.file("*.bin") + "' --vocab-size 64"}) {
    SCOPED_TRACE(spec);
    Outcome r = run_binary(spec + model + " --num-steps 1 --save " + dir.file("ck.st"), dir.path());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const SafetensorsFile f = read_safetensors(dir.file("ck.st"), "test");
    std::vector<TensorOut> tensors;
    for (const SafetensorInfo& t : f.tensors) tensors.push_back({t.name, t.shape, read_tensor_f32(f, t)});
    std::map<std::string, std::string> meta = f.metadata;
    meta["data_position"] = "9223372036854775807";
    write_safetensors(dir.file("far.st"), tensors, meta, false);
    r = run_binary(spec + model + " --num-steps 8 --resume " + dir.file("far.st"), dir.path());
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("Step   8/8"), std::string::npos) << r.out;
  }
}

// A checkpoint is untrusted input: a non-finite weight is refused naming its tensor, and any
// data position it records is a valid place in the data (here the largest one, on a text file).
TEST(Checkpoint, UntrustedValuesAreRefusedOrSafe) {
  TempDir dir;
  std::ostringstream log;
  TrainOptions o = small_options();
  {
    std::ofstream f(dir.file("t.txt"));
    for (int i = 0; i < 50; ++i) f << "some text to train on. ";
  }
  o.data = dir.file("t.txt");
  o.model.vocab_size = 256;
  o.steps = 1;
  o.save_path = dir.file("ck.safetensors");
  train(o, log);
  // Rewrite it with a NaN in one tensor and the largest data position.
  const SafetensorsFile f = read_safetensors(o.save_path, "test");
  std::vector<TensorOut> tensors;
  for (const SafetensorInfo& t : f.tensors) tensors.push_back({t.name, t.shape, read_tensor_f32(f, t)});
  std::map<std::string, std::string> meta = f.metadata;
  meta["data_position"] = "9223372036854775807";
  write_safetensors(dir.file("far.safetensors"), tensors, meta, false);
  tensors[3].values[1] = std::nanf("");
  write_safetensors(dir.file("nan.safetensors"), tensors, meta, false);
  o.steps = 3;
  o.save_path.clear();
  o.resume_path = dir.file("nan.safetensors");
  try {
    train(o, log);
    FAIL() << "a NaN weight must be refused";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(tensors[3].name), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("not finite"), std::string::npos) << e.what();
  }
  o.resume_path = dir.file("far.safetensors");
  const TrainResult r = train(o, log);
  EXPECT_EQ(r.steps.size(), 2u);
  EXPECT_TRUE(std::isfinite(r.final_loss));
  // A configuration number that does not fit its field is refused, not narrowed.
  std::map<std::string, std::string> wide = f.metadata;
  const std::string cfg = wide["config"], key = "\"vocab_size\":256";
  ASSERT_NE(cfg.find(key), std::string::npos) << cfg;
  wide["config"] = cfg.substr(0, cfg.find(key)) + "\"vocab_size\":4294967552" + cfg.substr(cfg.find(key) + key.size());
  std::vector<TensorOut> clean;
  for (const SafetensorInfo& t : f.tensors) clean.push_back({t.name, t.shape, read_tensor_f32(f, t)});
  write_safetensors(dir.file("wide.safetensors"), clean, wide, false);
  try {
    read_checkpoint_info(dir.file("wide.safetensors"));
    FAIL() << "a vocabulary of 2^32 + 256 must not narrow to 256";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("malformed model configuration"), std::string::npos) << e.what();
  }
  // A seed the trainer takes round-trips through a checkpoint: no negative or 64-bit wrap.
  o.resume_path.clear();
  o.seed = uint64_t(-1);
  EXPECT_THROW(train(o, log), UsageError);
}

}  // namespace
}  // namespace tt::test

namespace tt::test {
namespace {

// A resume that changes a training setting says which, before the first step.
TEST(Checkpoint, ResumeSaysWhatItChanges) {
  TempDir dir;
  std::ostringstream log;
  TrainOptions o = resume_after_one_step(dir, log);
  o.learning_rate = 1e-3;
  o.batch = 8;
  std::ostringstream resumed;
  train(o, resumed);
  EXPECT_NE(resumed.str().find("Resuming with changed settings: --batch-size 4 -> 8, --learning-rate 0.0003 -> 0.001"),
            std::string::npos)
      << resumed.str();
}

// The log line's Peak is all the run reserves, its Live what stays from step to step (weights,
// gradients, optimizer state): two different numbers, each what the memory summary adds up to.
TEST(Training, PeakAndLiveMeanDifferentThings) {
  std::ostringstream log;
  TrainOptions o = small_options();
  o.steps = 2, o.log_every = 1;
  const TrainResult r = train(o, log);
  const size_t live = r.memory.bytes[int(Category::Parameters)] + r.memory.bytes[int(Category::Gradients)] +
                      r.memory.bytes[int(Category::OptimizerState)];
  EXPECT_LT(live, r.memory.total());
  EXPECT_NE(log.str().find("| Peak: " + format_mb(r.memory.total()) + " | Live: " + format_mb(live) + " |"),
            std::string::npos) << log.str();
}

// ---- The step's recipe: gradient accumulation, clipping, decay exemptions ----

double max_relative(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, std::fabs(double(a[i]) - b[i]) / std::max(1e-3, std::fabs(double(b[i]))));
  return worst;
}

// N micro-batches of B/N sequences against one step on all B: the gradients of one step in
// fp32 (v1 and v4 plans) to 1e-6 of their norm, and four clipped steps in fp64 to 1e-10. (Four
// fp32 steps differ more in the weights: Adam's first steps move a weight by about lr whatever
// the size of its gradient, so a gradient of 1e-9 rounded differently moves it differently.)
TEST(Recipe, MicroBatchesEqualOneStepOnTheWholeBatch) {
  const TrainOptions o = small_options();
  auto data = make_data_source("synthetic", o.model.vocab_size, o.batch, o.seq_len, 5);
  Batch b;
  data->next_batch(b);
  for (int version : {1, 4}) {
    SCOPED_TRACE(testing::Message() << "plan v" << version);
    auto be = make_backend({DeviceKind::Cpu, plan_for_version(version)});
    Llama whole(o.model, *be, o.batch, o.seq_len), parts(o.model, *be, o.batch / 2, o.seq_len, {}, {2});
    whole.init_weights(5);
    parts.init_weights(5);
    whole.set_batch(b.tokens.data(), b.targets.data());
    whole.forward();
    whole.backward();
    parts.set_batch(b.tokens.data(), b.targets.data(), 2);
    for (int i = 0; i < 2; ++i) parts.forward(Llama::Pass::Train, i), parts.backward();
    EXPECT_NEAR(parts.mean_loss(), whole.mean_loss(), 1e-6 * whole.mean_loss());
    const std::vector<double> gw = whole.read(whole.grads()), gp = parts.read(parts.grads());
    double diff = 0, norm = 0;
    for (size_t i = 0; i < gw.size(); ++i) diff += (gp[i] - gw[i]) * (gp[i] - gw[i]), norm += gw[i] * gw[i];
    EXPECT_LT(std::sqrt(diff / norm), 1e-6);
  }
  auto be = make_cpu_backend_f64();
  Llama whole(o.model, *be, o.batch, o.seq_len, {}, {1, true}), parts(o.model, *be, o.batch / 2, o.seq_len, {}, {2, true});
  whole.init_weights(5);
  parts.init_weights(5);
  for (int step = 1; step <= 4; ++step) {
    data->next_batch(b);
    AdamWStep s;
    s.t = step, s.lr = 1e-2, s.max_grad_norm = 0.5;
    whole.set_batch(b.tokens.data(), b.targets.data());
    parts.set_batch(b.tokens.data(), b.targets.data(), 2);
    whole.train_step(s);
    parts.train_step(s);
    EXPECT_NEAR(parts.mean_loss(), whole.mean_loss(), 1e-12 * whole.mean_loss()) << "step " << step;
    EXPECT_NEAR(parts.grad_norm(), whole.grad_norm(), 1e-12 * whole.grad_norm());
    EXPECT_GT(whole.grad_norm(), 0.5) << "the test clips";
  }
  const std::vector<double> pw = whole.read(whole.params()), pp = parts.read(parts.params());
  for (size_t i = 0; i < pw.size(); ++i) ASSERT_NEAR(pp[i], pw[i], 1e-10) << i;
}

// Clipping inside the step against a hand computation: the norm of the gradients (read back,
// summed in double) and AdamW's first step on the gradients scaled by max / norm.
TEST(Recipe, ClippingAgainstAHandComputation) {
  TrainOptions o = small_options();
  auto be = make_cpu_backend_f64();
  auto data = make_data_source("synthetic", o.model.vocab_size, o.batch, o.seq_len, 6);
  Batch b;
  data->next_batch(b);
  Llama m(o.model, *be, o.batch, o.seq_len, {}, {1, true});
  m.init_weights(6);
  const std::vector<double> p0 = m.read(m.params());
  AdamWStep s;
  s.lr = 1e-3, s.weight_decay = 0, s.max_grad_norm = 0.1, s.t = 1;
  m.set_batch(b.tokens.data(), b.targets.data());
  m.forward();
  m.backward();
  const std::vector<double> g = m.read(m.grads());
  double sumsq = 0;
  for (double x : g) sumsq += x * x;
  const double norm = std::sqrt(sumsq), factor = 0.1 / (norm + 1e-6);
  ASSERT_GT(norm, 0.1) << "the test clips";
  m.optimizer_step(s);
  EXPECT_NEAR(m.grad_norm(), norm, 1e-12 * norm);
  const std::vector<double> p1 = m.read(m.params());
  for (size_t i = 0; i < g.size(); i += 97) {  // Adam's first step: lr * gc / (|gc| + eps), gc = g * factor
    const double gc = g[i] * factor;
    EXPECT_NEAR(p1[i], p0[i] - 1e-3 * gc / (std::fabs(gc) + 1e-8), 1e-12) << i;
  }
}

// Zero gradients and zero moments make Adam's step zero: what is left is the decay, p (1 - lr wd)
// for the tensors that decay and p for the exempt ones (per tensor in v1, in runs with fused-adamw).
TEST(Recipe, DecayExemptionsKeepNormsAndEmbedding) {
  for (int version : {1, 4})
    for (auto [norms, embedding] : {std::pair{true, true}, {false, true}, {true, false}, {false, false}}) {
      SCOPED_TRACE(testing::Message() << "v" << version << " decay norms " << norms << ", embedding " << embedding);
      TrainOptions o = small_options();
      auto be = make_backend({DeviceKind::Cpu, plan_for_version(version)});
      Llama m(o.model, *be, o.batch, o.seq_len, {}, {1, false, norms, embedding});
      m.init_weights(7);  // gradients and moments zero
      const std::vector<float> p0 = m.read_f32(m.params());
      AdamWStep s;
      s.lr = 0.1, s.weight_decay = 0.5, s.t = 1;
      m.optimizer_step(s);
      const std::vector<float> p1 = m.read_f32(m.params());
      for (const ParamEntry& e : param_table(o.model)) {
        const bool norm = e.shape.size() == 1, embed = e.name == "model.embed_tokens.weight";
        const bool decays = norm ? norms : embed ? embedding : true;
        for (int64_t i = e.offset; i < e.offset + e.numel; i += 7)
          ASSERT_EQ(p1[size_t(i)], decays ? p0[size_t(i)] * float(1 - 0.1 * 0.5) : p0[size_t(i)]) << e.name;
      }
    }
}

// The first layer's FFN tensors updated ahead of the rest of its bucket (update_ffn_ahead, as v6's
// weight-gradient lane does on one GPU), then the bucket's update: every parameter and moment as
// the bucket's update alone makes them, and no other bucket touched.
TEST(Recipe, FfnUpdateAheadThenTheRestIsTheWholeBucket) {
  const TrainOptions o = small_options();
  const std::vector<ParamEntry> table = param_table(o.model);
  auto updated = [&](bool ahead) {
    auto be = make_backend({DeviceKind::Cpu, plan_for_version(5)});
    ParamState st(o.model, *be, DataParallel{}, StepOptions{}, padded_vocab(o.model.vocab_size, be->vocab_padding_multiple()));
    Arena arena(be->memory());
    arena.build([&](Arena& a) { st.layout(a); });
    const CounterRng rng(11, 0);
    auto values = [&](const Tensor& t, uint64_t at, bool positive) {
      std::vector<float> v(size_t(t.numel));
      for (size_t i = 0; i < v.size(); ++i) v[i] = float(positive ? rng.uniform(at + i) : rng.normal(at + i));
      return v;
    };
    st.write(st.params(), values(st.params(), 0, false));
    st.write(st.grads(), values(st.grads(), 1 << 20, false));
    st.write(st.adam_m(), values(st.adam_m(), 2 << 20, false));
    st.write(st.adam_v(), values(st.adam_v(), 3 << 20, true));
    AdamWStep s;
    s.lr = 0.01, s.t = 3;
    be->set_adamw_step(s);
    if (ahead) st.update_ffn_ahead(0);
    st.bucket_complete(0, true);
    return std::vector<std::vector<float>>{st.read_f32(st.params()), st.read_f32(st.adam_m()), st.read_f32(st.adam_v()),
                                           values(st.params(), 0, false)};
  };
  const auto whole = updated(false), parts = updated(true);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(whole[size_t(i)] == parts[size_t(i)]) << "buffer " << i;
  const std::vector<float>& p = parts[0];
  const std::vector<float>& p0 = parts[3];
  for (const ParamEntry& e : table) {  // layer 0's nine tensors updated, every other one as it was
    const bool layer0 = e.name.rfind("model.layers.0.", 0) == 0;
    for (int64_t i = e.offset; i < e.offset + e.numel; i += 5)
      ASSERT_EQ(p[size_t(i)] != p0[size_t(i)], layer0) << e.name;
  }
}

// Through the binary's flags: --grad-accum-steps and --batch-size, on shuffled text, give the
// losses of the whole batch; a resumed accumulating run continues bit for bit; the log line
// shows the norm and the time left.
TEST(Recipe, FlagsAccumulateClipAndResume) {
  TempDir dir;
  {
    std::ofstream f(dir.file("text.txt"));
    for (int i = 0; i < 400; ++i) f << "line " << i << " of a text that the model reads in shuffled windows.\n";
  }
  auto run = [&](const std::string& name, const std::string& args) {
    std::ostringstream log;
    TrainOptions o = small_options();
    o.model.vocab_size = 256;
    o.data = dir.file("text.txt");
    o.shuffle = true;
    o.grad_clip = 1.0;
    o.decay_norms = o.decay_embedding = false;
    o.steps = 6;
    o.log_every = 2;
    o.json_path = dir.file(name + ".json");
    std::istringstream in(args);
    for (std::string flag, value; in >> flag >> value;) {
      if (flag == "batch") o.batch = std::stoi(value);
      if (flag == "accum") o.grad_accum = std::stoi(value);
      if (flag == "steps") o.steps = std::stoi(value);
      if (flag == "save") o.save_path = dir.file(value);
      if (flag == "resume") o.resume_path = dir.file(value);
    }
    train(o, log);
    return log.str();
  };
  run("whole", "batch 4 accum 1");
  const std::string log = run("parts", "batch 2 accum 2 save parts.st");
  const std::vector<double> whole = run_losses(dir.file("whole.json")), parts = run_losses(dir.file("parts.json"));
  ASSERT_EQ(whole.size(), parts.size());
  for (size_t i = 0; i < whole.size(); ++i) EXPECT_NEAR(parts[i], whole[i], 1e-6 * whole[i]) << "step " << i + 1;
  EXPECT_NE(log.find("Gradient accumulation: 2 micro-batches of 2 a step, 4 sequences per update"), std::string::npos) << log;
  EXPECT_NE(log.find("Settings: --grad-clip 1 --no-decay-norms --no-decay-embedding"), std::string::npos) << log;
  EXPECT_NE(log.find("| Norm: "), std::string::npos) << log;
  EXPECT_NE(log.find("| ETA: "), std::string::npos) << log;
  run("half", "batch 2 accum 2 steps 3 save half.st");
  run("resumed", "batch 2 accum 2 resume half.st save resumed.st");
  const std::vector<double> resumed = run_losses(dir.file("resumed.json"));
  ASSERT_EQ(resumed.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(resumed[i], parts[3 + i]) << "step " << i + 4;
  EXPECT_EQ(run_weights(dir.file("resumed.st")), run_weights(dir.file("parts.st")));
}

}  // namespace
}  // namespace tt::test
