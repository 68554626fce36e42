// `tiny_llama eval` on the GPU, against training and against transformers (on the GPU machine,
// where PyTorch and transformers are installed; the comparison with transformers is skipped with
// a message where they are not). For a byte-level, a SentencePiece and a GPT-2-style BPE model:
// eval's loss on the GPU is training's validation at the same windows; its task scores on the GPU
// are the CPU's within 1e-4; and transformers, scoring the task file on the exported fp32
// directory with lm-eval's tokenization (tests/gpu/task_check.py), gives our token ids, every
// ending's log-probability within 1e-4 of ours and the same accuracies.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "data/tokenize.h"
#include "data/tokenizer.h"
#include "data/tokenizer_train.h"
#include "gpu_harness.h"
#include "python_checks.h"
#include "run_outputs.h"
#include "train/trainer.h"

namespace tt::test {
namespace {

namespace fs = std::filesystem;

const std::string kTaskFile = std::string(TT_TESTS_DIR) + "/data/multiple_choice.jsonl";

struct EvalCase {
  const char* name;
  TokenizerCase tokenizer;
};

class GpuEval : public ::testing::TestWithParam<EvalCase> {
 protected:
  void SetUp() override { REQUIRE_GPU(); }
  ScratchDir scratch_{"gpu_eval"};
  const fs::path dir = scratch_.path();
};

nlohmann::json read_json(const fs::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

TEST_P(GpuEval, TrainingAndTransformersAgree) {
  const EvalCase& k = GetParam();
  // The task's contexts with their right endings, and some other text: what the model learns from.
  std::string text;
  std::ifstream task(kTaskFile);
  for (std::string line; std::getline(task, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    text += j["ctx"].get<std::string>() + " " + j["endings"][j["label"].get<int>()].get<std::string>() + "\n";
  }
  std::string corpus;
  for (int i = 0; i < 40; ++i) corpus += text + "the quick brown fox jumps over the lazy dog, " + std::to_string(i) + "\n";
  std::ofstream(dir / "corpus.txt") << corpus;
  std::string tokenizer = "bytes";
  if (k.tokenizer == TokenizerCase::Gpt2Bpe) {
    if (!have_transformers()) GTEST_SKIP() << "python3 with torch, transformers and tokenizers is not installed here";
    ASSERT_EQ(bpe_check("train " + (dir / "corpus.txt").string() + " " + (dir / "bpe").string() + " gpt2", dir / "bpe.log"), 0)
        << read_text(dir / "bpe.log");
    tokenizer = (dir / "bpe" / "tokenizer.json").string();
  } else if (k.tokenizer == TokenizerCase::SentencePiece) {
    std::ostringstream log;
    run_tokenizer_train({{(dir / "corpus.txt").string()}, 400, (dir / "sp").string(), "bpe"}, log);  // (300: too few)
    tokenizer = (dir / "sp.model").string();
  }
  TrainOptions o;
  o.model.hidden = 64, o.model.layers = 2, o.model.heads = 4, o.model.kv_heads = 2, o.model.intermediate = 128;
  o.batch = 8, o.seq_len = 128, o.steps = 80, o.timing_warmup = 0, o.log_every = 100, o.learning_rate = 3e-3;
  o.val_tokens = 512;
  o.backend.device = DeviceKind::Cuda;
  o.backend.plan = plan_for_version(1);  // fp32, eval's plan
  use_corpus(o, tokenizer, dir);
  o.save_path = (dir / "m.safetensors").string();
  std::ostringstream log;
  const double trained = train(o, log).validation.back().second;

  // The loss: training's validation, on the GPU at the same windows and batch.
  const Outcome loss = run_binary("eval " + o.save_path + " --device cuda --data '" + o.data +
                                      "' --val-tokens 512 --batch-size 8 --json " + (dir / "loss.json").string(), dir);
  ASSERT_EQ(loss.exit_code, 0) << loss.err;
  std::cout << loss.out;
  EXPECT_NEAR(read_json(dir / "loss.json")["validation"]["loss"].get<double>(), trained, 1e-6 * trained);

  // The task on the GPU and on the CPU (whole rows: --seq-len 256 holds the longest).
  const std::string args = "eval " + o.save_path + " --task " + kTaskFile + " --tokenizer " + tokenizer + " --seq-len 256";
  const Outcome gpu = run_binary(args + " --device cuda --json " + (dir / "gpu.json").string(), dir);
  ASSERT_EQ(gpu.exit_code, 0) << gpu.err;
  std::cout << gpu.out;
  const Outcome cpu = run_binary(args + " --device cpu --json " + (dir / "cpu.json").string(), dir);
  ASSERT_EQ(cpu.exit_code, 0) << cpu.err;
  const nlohmann::json g = read_json(dir / "gpu.json")["tasks"][0], c = read_json(dir / "cpu.json")["tasks"][0];
  ASSERT_EQ(g["details"].size(), c["details"].size());
  double worst = 0;
  for (size_t x = 0; x < g["details"].size(); ++x)
    for (size_t i = 0; i < g["details"][x]["logprob_sum"].size(); ++i)
      worst = std::max(worst, std::abs(g["details"][x]["logprob_sum"][i].get<double>() -
                                       c["details"][x]["logprob_sum"][i].get<double>()));
  std::cout << "GPU against CPU: every ending's log-probability within " << worst << "\n";
  EXPECT_LE(worst, 1e-4);

  // Transformers on the exported directory.
  if (!have_transformers()) GTEST_SKIP() << "python3 with torch and transformers is not installed here";
  ASSERT_EQ(run_binary("export " + o.save_path + " --hf " + (dir / "hf").string() + " --dtype fp32 --tokenizer " + tokenizer,
                       dir).exit_code, 0);
  const std::string cmd = "python3 " + std::string(TT_TESTS_DIR) + "/gpu/task_check.py " + (dir / "hf").string() + " " +
                          kTaskFile + " " + (dir / "gpu.json").string() + " > " + (dir / "check.log").string() + " 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << read_text(dir / "check.log");
  std::cout << read_text(dir / "check.log");
}

const EvalCase kCases[] = {{"bytes", TokenizerCase::Bytes},
                           {"sentencepiece", TokenizerCase::SentencePiece},
                           {"gpt2_bpe", TokenizerCase::Gpt2Bpe}};
INSTANTIATE_TEST_SUITE_P(Models, GpuEval, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace tt::test
