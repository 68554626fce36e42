// `tiny_llama generate`: text from a checkpoint, streamed as it is made (src/model/generate.h).
#pragma once
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/generate.h"

namespace tt {

struct GenerateOptions {
  std::string checkpoint;
  std::string tokenizer;                // "bytes", a .model or tokenizer.json; empty: the checkpoint's (or directory's), else bytes for 256
  std::string prompt, prompts_file;     // text, or a file of prompts (one a line)
  bool prompt_given = false;            // --prompt was given (an empty one starts from BOS alone)
  std::vector<int32_t> prompt_tokens;   // or token ids
  int max_new_tokens = 100;
  SamplingOptions sampling;
  uint64_t seed = 42;
  DeviceKind device = DeviceKind::Cpu;
  bool cache = true;  // false: every token recomputes the whole window (to measure what the cache saves)
};

struct Generated {
  std::vector<int32_t> tokens;  // the new ones
  std::string text;             // decoded
  double first_token_ms = 0, tokens_per_sec = 0;  // of the whole batch of prompts
};

// The length of the longest prefix of `s` that does not end inside a UTF-8 sequence: what can
// be printed now without splitting a character whose last bytes the next token brings.
size_t complete_utf8(const std::string& s);

// Generates for each prompt, streaming the text to `out`; returns what each produced. An empty
// --prompt starts from the begin-of-document token; beyond the context the model was trained at,
// each token sees the last `context` tokens (a sliding window, said in a line after the text).
// Bad input (no usable checkpoint, an empty prompt without a BOS token, a tokenizer of another
// vocabulary) is refused with UsageError before any generation.
std::vector<Generated> run_generate(const GenerateOptions& o, std::ostream& out);

}  // namespace tt
