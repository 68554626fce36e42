// The GPU machine's Python checks (transformers, the tokenizers library), shared by the tests that
// run them: whether they can run here, and the tokenizers library's side of the BPE checks.
#pragma once
#include <cstdlib>
#include <filesystem>
#include <string>

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

}  // namespace tt::test
