// `tiny_llama tokenize`: text files in, token-file shards out (src/data/token_file.h), through
// a tokenizer (src/data/tokenizer.h); and `tiny_llama tokenizer-train`, which makes a
// SentencePiece model from text files.
#pragma once
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace tt {

struct TokenizeOptions {
  std::string tokenizer = "bytes";  // "bytes" or a SentencePiece .model
  std::string out_dir;
  std::vector<std::string> inputs;
  double val_fraction = 0.1;             // the tokens that validate, into val_*.bin
  int64_t shard_tokens = 100'000'000;    // tokens per shard at most
  // Which tokens validate: "last", the last tokens of the last files; "docs", whole documents
  // (input files) drawn with the seed until they hold the fraction, so no one file decides it.
  std::string val_split = "last";
  uint64_t seed = 42;
};

// Each input file is one document (a begin-of-document token first, where the tokenizer has
// one). The tokens are written to out_dir/train_000000.bin, ... and out_dir/val_000000.bin, ...
// Refuses, before writing anything: a missing tokenizer, an input that is not a text file
// (a NUL byte), an out_dir that exists as a file or already holds token files.
void run_tokenize(const TokenizeOptions& o, std::ostream& log);

struct TokenizerTrainOptions {
  std::vector<std::string> inputs;
  int vocab_size = 8000;
  std::string prefix;  // writes prefix.model and prefix.vocab
  std::string model_type = "bpe";
};
void run_tokenizer_train(const TokenizerTrainOptions& o, std::ostream& log);

}  // namespace tt
