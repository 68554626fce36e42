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
  std::string tokenizer = "bytes";  // Tokenizer::load's: "bytes", a SentencePiece .model, a tokenizer.json
  std::string out_dir;
  std::vector<std::string> inputs;
  double val_fraction = 0.1;             // the tokens that validate, into val_*.bin
  int64_t shard_tokens = 100'000'000;    // tokens per shard at most
  // Which tokens validate: "last", the last tokens of the last files; "docs", whole documents
  // (input files) drawn with the seed until they hold the fraction, so no one file decides it.
  std::string val_split = "last";
  uint64_t seed = 42;
  // A text file is one document ("file") or a document a line ("line"); a JSON-lines file
  // (.jsonl, .ndjson, .json) a document a record, its text in text_field.
  std::string documents = "file";
  std::string text_field = "text";
  int threads = 0;  // encoding threads (0: every core)
};

// Streams the inputs (files, and directories' files recursively) a document at a time, encodes
// batches of documents on every core, and writes each document as BOS, its tokens, EOS (where
// the tokenizer has them; BOS left out where it is EOS, as GPT-2's <|endoftext|> is, which then
// stands once between documents) to one temporary file in out_dir; then the split is chosen and the
// shards out_dir/train_000000.bin, ... and out_dir/val_000000.bin, ... are copied from it. Memory
// is a batch of documents per thread and 8 bytes per document, whatever the corpus's size.
// Refuses, before writing any shard: a missing tokenizer, an input that is not text (a NUL
// byte) or a JSON-lines record without its text, an out_dir that exists as a file or already
// holds token files.
void run_tokenize(const TokenizeOptions& o, std::ostream& log);

struct TokenizerTrainOptions {
  std::vector<std::string> inputs;
  int vocab_size = 8000;
  std::string prefix;  // writes prefix.model and prefix.vocab
  std::string model_type = "bpe";
};
void run_tokenizer_train(const TokenizerTrainOptions& o, std::ostream& log);

}  // namespace tt
