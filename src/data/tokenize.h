// `tiny_llama tokenize`: text in (src/data/documents.h), token-file shards out
// (src/data/token_file.h), through a tokenizer (src/data/tokenizer.h).
#pragma once
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace tt {

struct TokenizeOptions {
  std::string tokenizer = "bytes";  // Tokenizer::load's: "bytes", a SentencePiece .model, a tokenizer.json
  std::string out_dir;
  std::vector<std::string> inputs;  // files, directories, "-" (standard input); plain, .gz or .zst
  double val_fraction = 0.1;             // the tokens that validate, into val_*.bin
  int64_t shard_tokens = 100'000'000;    // tokens per shard at most
  // Which tokens validate: "last", the last tokens of the last files; "docs", whole documents
  // drawn with the seed, each taken while it brings the held tokens nearer the fraction (a line
  // says so when few, unequal documents leave it more than a tenth away).
  std::string val_split = "last";
  uint64_t seed = 42;
  // A text file is one document ("file") or a document a line ("line"); a JSON-lines file
  // (.jsonl, .ndjson, .json, compressed too, or every input with "jsonl") a document a record,
  // its text in text_field.
  std::string documents = "file";
  std::string text_field = "text";
  int threads = 0;  // encoding threads (0: every core)
};

// Streams the inputs (files, directories' files recursively, standard input; gzip and Zstandard
// decompressed as they are read, src/data/text_input.h) a document at a time, and a document a
// piece of at most 1 MiB at a time, cut where the tokenizer encodes the pieces as it does the
// whole (Tokenizer::encode_more); encodes batches of 16 MiB of pieces on every core, and writes
// each document as BOS, its tokens, EOS (where the tokenizer has them; BOS left out where it is
// EOS, as GPT-2's <|endoftext|> is, which then stands once between documents) to one temporary
// file in out_dir; then the split is chosen and the shards out_dir/train_000000.bin, ... and
// out_dir/val_000000.bin, ... are copied from it, each with the hash of its tokens, the tokenizer's
// files beside them (tokenizer.model; tokenizer.json and its tokenizer_config.json: a training run
// on the shards stores them in its checkpoints), and last out_dir/manifest.json lists them all:
// without it (a run that failed or was killed) training refuses the shards. Memory is a batch and
// 8 bytes per document, whatever the corpus's or a document's size (a JSON-lines record is read
// whole). A failed run removes what it wrote; a later run removes the
// temporaries of killed ones. Refuses, before writing any shard: a missing tokenizer, an input that
// is not text (a NUL byte), a JSON-lines record without its text, corrupt or truncated compressed
// data, an out_dir that exists as a file, already holds token files, or holds a tokenizer file
// other than the tokenizer's.
void run_tokenize(const TokenizeOptions& o, std::ostream& log);

}  // namespace tt
