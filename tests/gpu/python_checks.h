// The GPU machine's Python checks (transformers, the tokenizers library), shared by the tests that
// run them: whether they can run here, the tokenizers library's side of the BPE checks, and the
// corpus their runs train on.
#pragma once
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>

#include "data/tokenize.h"
#include "data/tokenizer.h"
#include "train/trainer.h"

namespace tt::test {

inline bool have_transformers() { return std::system("python3 -c 'import torch, transformers' >/dev/null 2>&1") == 0; }

// Runs tests/gpu/bpe_check.py with `args`; its output in `log`.
inline int bpe_check(const std::string& args, const std::filesystem::path& log) {
  const std::string cmd =
      "python3 " + std::string(TT_TESTS_DIR) + "/gpu/bpe_check.py " + args + " > " + log.string() + " 2>&1";
  return std::system(cmd.c_str());
}

// The tokenizers of the export checks: bytes, SentencePiece (tokenizer-train's BPE and unigram),
// and GPT-2- and LLaMA-3-style byte-level BPE that the tokenizers library trains (bpe_check.py).
enum class TokenizerCase { Bytes, SentencePiece, SentencePieceUnigram, Gpt2Bpe, Llama3Bpe };

// The run's data from dir/corpus.txt: the text's bytes (`tokenizer` "bytes"), or its shards
// through the tokenizer, tokenized into dir/tokens; the model's vocabulary set to match.
inline void use_corpus(TrainOptions& o, const std::string& tokenizer, const std::filesystem::path& dir) {
  if (tokenizer == "bytes") {
    o.data = (dir / "corpus.txt").string();
    o.model.vocab_size = 256;
    return;
  }
  std::ostringstream log;
  run_tokenize({tokenizer, (dir / "tokens").string(), {(dir / "corpus.txt").string()}, 0.1, 100000}, log);
  o.data = (dir / "tokens" / "*.bin").string();
  o.model.vocab_size = Tokenizer::load(tokenizer, "test")->vocab_size();
}

}  // namespace tt::test
