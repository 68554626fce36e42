// `tiny_llama eval`: its loss is training's validation loss at the same windows (text, token
// files, an exported directory); the task scores are the log-probabilities worked out by hand for
// a model that predicts every byte alike, and each row's score computed alone in double; task
// files are read as lm-eval reads them; bad input is refused through the real binary. (The
// scores against transformers on the exported model: tests/gpu/test_gpu_eval.cpp.)
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "data/loader.h"
#include "data/tokenize.h"
#include "data/tokenizer.h"
#include "data/tokenizer_train.h"
#include "model/llama.h"
#include "parallel/world.h"
#include "run_outputs.h"
#include "train/checkpoint.h"
#include "train/evaluate.h"
#include "train/task.h"
#include "train/trainer.h"

namespace tt::test {
namespace {

namespace fs = std::filesystem;

const std::string kTaskFile = std::string(TT_TESTS_DIR) + "/data/multiple_choice.jsonl";

ModelConfig byte_model() {
  ModelConfig c;
  c.vocab_size = 256, c.hidden = 32, c.layers = 2, c.heads = 4, c.kv_heads = 2, c.intermediate = 64;
  return c;
}

// The right endings of the task file, as running text: what the model of the tests learns from.
std::string task_corpus() {
  std::ifstream in(kTaskFile);
  std::string text;
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    text += j["ctx"].get<std::string>() + " " + j["endings"][j["label"].get<int>()].get<std::string>() + "\n";
  }
  std::string all;
  for (int i = 0; i < 8; ++i) all += text;
  return all;
}

nlohmann::json read_json(const fs::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

class EvalCli : public ::testing::Test {
 protected:
  // A byte-level model, three steps on the task's text (seq-len 32, batch 4), validated at the end
  // on the first 200 tokens of the split: its loss is what eval must give.
  void SetUp() override {
    std::ofstream(dir / "text.txt") << task_corpus();
    o.data = (dir / "text.txt").string();
    o.model = byte_model();
    o.batch = 4, o.seq_len = 32, o.steps = 3, o.timing_warmup = 0, o.log_every = 100, o.val_tokens = 200;
    o.backend.device = DeviceKind::Cpu;
    o.save_path = ckpt();
    std::ostringstream log;
    trained = train(o, log).validation.back().second;
  }
  Outcome run(const std::string& args) { return run_binary("eval " + args, dir); }
  std::string ckpt() const { return (dir / "m.safetensors").string(); }
  std::string json() const { return (dir / "eval.json").string(); }
  ScratchDir scratch_{"eval"};
  const fs::path dir = scratch_.path();
  TrainOptions o;
  double trained = 0;
};

// The same windows, the same number: at the batch of training bit for bit (the same CPU code), at
// another batch to the rounding of the products' blocking; from the exported directory too.
TEST_F(EvalCli, LossIsTrainingsValidationAtTheSameWindows) {
  for (const std::string& model : {ckpt(), (dir / "hf").string()}) {
    SCOPED_TRACE(model);
    if (model != ckpt())
      ASSERT_EQ(run_binary("export " + ckpt() + " --hf " + model + " --dtype fp32", dir).exit_code, 0);
    const Outcome same = run(model + " --data " + o.data + " --val-tokens 200 --batch-size 4 --seq-len 32 --json " + json());
    ASSERT_EQ(same.exit_code, 0) << same.err;
    const nlohmann::json v = read_json(json())["validation"];
    EXPECT_EQ(v["loss"].get<double>(), trained);
    EXPECT_EQ(v["windows"].get<int64_t>(), 7) << "ceil(200 / 32)";
    EXPECT_DOUBLE_EQ(v["perplexity"].get<double>(), std::exp(trained));
    EXPECT_NE(same.out.find("Validation: 7 windows of 32 tokens (224 tokens, the split's first): loss"), std::string::npos)
        << same.out;
    const Outcome other = run(model + " --data " + o.data + " --val-tokens 200 --batch-size 3 --seq-len 32 --json " + json());
    ASSERT_EQ(other.exit_code, 0) << other.err;
    EXPECT_NEAR(read_json(json())["validation"]["loss"].get<double>(), trained, 1e-6 * trained);
  }
  // Without --val-tokens: every window of the split, at the checkpoint's own length (32).
  const Outcome all = run(ckpt() + " --data " + o.data + " --json " + json());
  ASSERT_EQ(all.exit_code, 0) << all.err;
  const int64_t windows = make_data_source(o.data, 256, 8, 32, 0)->all_validation_windows();
  EXPECT_EQ(read_json(json())["validation"]["windows"].get<int64_t>(), windows);
  EXPECT_NE(all.out.find("tokens, all of the split): loss"), std::string::npos) << all.out;
}

// Token files as training reads them (a quoted glob of shards): the same number.
TEST_F(EvalCli, TokenFilesGiveTrainingsNumberToo) {
  std::ostringstream log;
  run_tokenize({"bytes", (dir / "shards").string(), {o.data}, 0.1, 100000}, log);
  TrainOptions t = o;
  t.data = (dir / "shards" / "*.bin").string();
  t.save_path = (dir / "shards.safetensors").string();
  const double want = train(t, log).validation.back().second;
  const Outcome r = run(t.save_path + " --data '" + t.data + "' --val-tokens 200 --batch-size 4 --json " + json());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(read_json(json())["validation"]["loss"].get<double>(), want);
}

// A model whose weights are all zero gives every byte the probability 1/256, so each ending's
// log-probability is -ln 256 per token, its tokens being its bytes and the space before it. The
// example {"ab", [" c", " dddd", " ee"]}: sums -2L, -5L, -3L (L = ln 256), so acc picks 0; means
// all -L, a tie that goes to the first, 0; per character -2L, -1.25L, -1.5L, so acc_norm_chars
// picks 1, the label.
TEST_F(EvalCli, UniformModelScoresByHand) {
  auto cpu = make_backend({DeviceKind::Cpu, plan_for_version(1)});
  Llama zero(byte_model(), *cpu, 1, 8);
  zero.init_weights(0);  // the moments zero too: the arena's earlier contents failed the checkpoint's checks
  zero.write(zero.params(), std::vector<float>(size_t(byte_model().param_count()), 0.0f));
  save_checkpoint((dir / "zero.safetensors").string(), zero, CheckpointInfo{byte_model(), 0, 0, 0, "none", 0, 8});
  std::ofstream(dir / "task.jsonl") << R"({"ctx": "ab", "endings": ["c", "dddd", "ee"], "label": 1})" "\n";
  const Outcome r = run((dir / "zero.safetensors").string() + " --task " + (dir / "task.jsonl").string() + " --json " + json());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("acc 0.0000 (0/1), acc_norm 0.0000 (0/1; per token, llm.c), acc_norm_chars 1.0000 (1/1; per "
                       "character, lm-eval)"), std::string::npos) << r.out;
  const nlohmann::json e = read_json(json())["tasks"][0]["details"][0];
  const double L = std::log(256.0);
  EXPECT_EQ(e["context_tokens"], nlohmann::json({97, 98}));
  EXPECT_EQ(e["ending_tokens"], nlohmann::json({{32, 99}, {32, 100, 100, 100, 100}, {32, 101, 101}}));
  const double sums[] = {-2 * L, -5 * L, -3 * L};
  for (int i = 0; i < 3; ++i) {  // each token's loss as the fp32 backend keeps it: ln 256 to float rounding
    EXPECT_NEAR(e["logprob_sum"][i].get<double>(), sums[i], 1e-7 * -sums[i]);
    EXPECT_NEAR(e["logprob_mean"][i].get<double>(), -L, 1e-7 * L);
  }
  EXPECT_EQ(e["pred"], 0);
  EXPECT_EQ(e["pred_norm"], 0);
  EXPECT_EQ(e["pred_norm_chars"], 1);
}

// Batched, padded and cut rows score what each row scores alone, computed in double from a model
// of that row's length: at full length, and at 64 tokens, where long rows lose their context's start.
TEST_F(EvalCli, BatchedScoresAreEachRowsAlone) {
  const std::unique_ptr<Tokenizer> bytes = Tokenizer::load("bytes", "test");
  Task task = load_task(kTaskFile, *bytes);
  task.examples.resize(5);  // 20 rows, not in batches of 8: a batch's padding rows too
  auto cpu = make_backend({DeviceKind::Cpu, plan_for_version(1)});
  auto f64 = make_cpu_backend_f64();
  const std::unique_ptr<Communicator> solo = make_communicator(World{}, *cpu);
  for (const int T : {int(task.longest_row()), 64}) {
    SCOPED_TRACE(T);
    Llama model(byte_model(), *cpu, 8, T);
    load_checkpoint(ckpt(), model);
    const TaskScore score = score_task(model, task, *solo);
    int64_t cut = 0, correct = 0;
    for (size_t x = 0; x < task.examples.size(); ++x) {
      const TaskExample& e = task.examples[x];
      for (size_t i = 0; i < e.endings.size(); ++i) {
        std::vector<int32_t> seq = e.context;
        seq.insert(seq.end(), e.endings[i].begin(), e.endings[i].end());
        if (seq.size() - 1 > size_t(T)) seq.erase(seq.begin(), seq.end() - (T + 1)), ++cut;
        const int n = int(seq.size()) - 1, k = int(e.endings[i].size());
        Llama alone(byte_model(), *f64, 1, n);
        load_checkpoint(ckpt(), alone);
        alone.set_batch(seq.data(), seq.data() + 1);
        alone.forward(Llama::Pass::Eval);
        const std::vector<double> logits = alone.read(alone.logits());
        double sum = 0;
        for (int p = n - k; p < n; ++p) {
          const double* row = logits.data() + int64_t(p) * alone.padded_vocab();
          double mx = row[0], z = 0;
          for (int v = 0; v < 256; ++v) mx = std::max(mx, row[v]);
          for (int v = 0; v < 256; ++v) z += std::exp(row[v] - mx);
          sum += row[seq[size_t(p) + 1]] - mx - std::log(z);
        }
        EXPECT_NEAR(score.examples[x].endings[i].sum, sum, 1e-4) << "line " << e.line << " ending " << i;
        EXPECT_EQ(score.examples[x].endings[i].tokens, k);
      }
      correct += score.examples[x].pred == e.label;
    }
    EXPECT_EQ(score.truncated, cut);
    EXPECT_EQ(score.correct, correct);
    EXPECT_EQ(cut > 0, T == 64);
  }
}

// lm-eval's reading: "context" for "ctx", a label of digits, the context's trailing whitespace
// moved into the continuation, other fields ignored; a SentencePiece ending is the whole text's
// tokens after the context's (its dummy space would double a space encoded alone), BOS in front.
TEST_F(EvalCli, TaskFilesAreReadAsLmEvalReadsThem) {
  std::ofstream(dir / "a.jsonl") << R"({"ctx": "A man sits. he", "endings": ["runs.", "eats soup."], "label": 1})" "\n";
  std::ofstream(dir / "b.jsonl") << "\n" R"({"context": "A man sits. he  ", "endings": ["runs.", "eats soup."], "label": "1", "x": [1]})" "\n\n";
  const std::unique_ptr<Tokenizer> bytes = Tokenizer::load("bytes", "test");
  const Task a = load_task((dir / "a.jsonl").string(), *bytes), b = load_task((dir / "b.jsonl").string(), *bytes);
  ASSERT_EQ(b.examples.size(), 1u);
  EXPECT_EQ(b.examples[0].line, 2);
  EXPECT_EQ(b.examples[0].label, 1);
  EXPECT_EQ(b.examples[0].context, a.examples[0].context);
  EXPECT_EQ(b.examples[0].endings[0].size(), a.examples[0].endings[0].size() + 2) << "the two spaces begin the ending";
  EXPECT_EQ(a.examples[0].ending_chars, (std::vector<int64_t>{5, 10}));

  std::ofstream(dir / "corpus.txt") << task_corpus();
  std::ostringstream log;
  run_tokenizer_train({{(dir / "corpus.txt").string()}, 300, (dir / "sp").string(), "bpe"}, log);
  const std::unique_ptr<Tokenizer> sp = Tokenizer::load((dir / "sp.model").string(), "test");
  const TaskExample e = load_task((dir / "a.jsonl").string(), *sp).examples[0];
  const std::vector<int32_t> context = sp->encode("A man sits. he"), whole = sp->encode("A man sits. he eats soup.");
  EXPECT_EQ(e.context.front(), sp->bos());
  EXPECT_EQ(std::vector<int32_t>(e.context.begin() + 1, e.context.end()), context);
  EXPECT_EQ(e.endings[1], std::vector<int32_t>(whole.begin() + int64_t(context.size()), whole.end()));
  EXPECT_NE(e.endings[1], sp->encode(" eats soup.")) << "encoded alone, the dummy space doubles the space";
}

TEST_F(EvalCli, BadInputIsRefused) {
  auto task = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir / name) << text;
    return " --task " + (dir / name).string();
  };
  const std::string m = ckpt(), j = " --json " + json();
  const struct {
    std::string args, expect;
  } cases[] = {
      {m + j, "eval: give --data (the loss on its validation split) or --task"},
      {m + " --val-tokens 64" + task("t.jsonl", R"({"ctx": "a", "endings": ["b", "c"], "label": 0})"), "--val-tokens: counts tokens of --data"},
      {m + " --data " + o.data + " --val-tokens 100000" + j, "--val-tokens: 100000 tokens are 3125 windows of --seq-len 32; the validation split holds"},
      {m + " --data synthetic" + j, "--data: synthetic data has no validation split"},
      {m + " --data " + (dir / "none.txt").string() + j, "--data: '"},
      {m + " --data " + o.data + " --batch-size 0" + j, "--batch-size: must be a positive integer"},
      {m + " --data " + o.data + " --seq-len -1" + j, "--seq-len: must be a positive integer"},
      {m + " --data " + o.data + " --device gpu" + j, "--device: must be auto, cpu or cuda"},
      {(dir / "nope.safetensors").string() + " --data " + o.data + j, "eval: '"},
      {o.data + " --data " + o.data + j, "eval: '" + o.data + "'"},  // a text file is no checkpoint
      {m + " --data " + o.data + " --json " + o.data, "--json"},    // an output over an input
      {m + task("e.jsonl", ""), "holds no example"},
      {m + task("n.jsonl", "{\"ctx\": \"a\",\n"), "line 1 is not JSON (a syntax error at byte 13)"},
      {m + task("c.jsonl", R"({"endings": ["b", "c"], "label": 0})"), "line 1: no \"ctx\" (or \"context\") string"},
      {m + task("o.jsonl", R"({"ctx": "a", "endings": ["b"], "label": 0})"), "\"endings\" must be a list of two or more"},
      {m + task("l.jsonl", R"({"ctx": "a", "endings": ["b", "c"], "label": 2})"), "\"label\" 2 is not the index of one of its 2"},
      {m + task("s.jsonl", R"({"ctx": "a", "endings": ["b", "c"], "label": "one"})"), "\"label\" \"one\" is not the index"},
      {m + task("m.jsonl", R"({"ctx": "a", "endings": ["b", "c"]})"), "no \"label\""},
      {m + task("x.jsonl", R"({"ctx": "a", "endings": ["b", ""], "label": 0})"), "ending 1 is not a string of some text"},
      {m + task("z.jsonl", R"({"ctx": "", "endings": ["b", "c"], "label": 0})"), "an empty context, and bytes (vocabulary 256) stored in '" + m + "' has no begin-of-document token"},
      {m + " --seq-len 8" + task("g.jsonl", R"({"ctx": "a", "endings": ["b", "a long ending"], "label": 0})"),
       "line 1: ending 1 has 14 tokens, more than the 8 of a row (--seq-len)"},
      {m + " --task " + dir.string(), "--task: '"},  // a directory is no task file
  };
  for (const auto& c : cases) {
    const Outcome r = run(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.err << r.out;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_EQ(r.out, "") << "nothing is done before the input is checked: " << c.args;
    EXPECT_FALSE(fs::exists(json())) << c.args;
  }
}

}  // namespace
}  // namespace tt::test
