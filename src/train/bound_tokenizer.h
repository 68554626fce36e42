// The tokenizer bound to a model. A training run finds the tokenizer of its data and stores its
// files in every checkpoint (src/train/checkpoint.h); generate, export and eval then take the
// checkpoint's by default and refuse a different --tokenizer (same_tokenizer: the same files, or
// a SentencePiece model and its exported tokenizer.json), naming both (the wrong one printed
// text and then failed, wrote a broken Hugging Face directory, or printed bytes as text, each with
// exit code 0 or 1). A checkpoint that stores none (older ones, synthetic data, other tools'
// shards) leaves the choice to --tokenizer as before (model_tokenizer, src/data/tokenizer.h).
#pragma once
#include <memory>
#include <optional>
#include <string>

#include "data/tokenizer_files.h"

namespace tt {

struct BoundTokenizer {
  TokenizerFiles files;
  std::unique_ptr<Tokenizer> tokenizer;
  bool stored = false;  // taken from a checkpoint
};

// The tokenizer that made `data`'s tokens, where it is known: the one tokenize recorded beside
// the shards (the same in every directory of them; none when one directory records none), bytes
// for a text file; nullopt for synthetic data and other tools' shards. UsageError naming --data
// for shard directories that record different tokenizers, or a record that does not check.
std::optional<BoundTokenizer> data_tokenizer(const std::string& data);

// A training run's tokenizer: `spec` (--tokenizer) when given, else the data's; else the one of
// the checkpoint `from` (--resume's or --init-from's, named by `from_flag`; empty: none). nullopt
// when none is known. UsageError for a --tokenizer other than the data's, a checkpoint's other than
// the run's (naming both), or a tokenizer whose vocabulary is larger than the model's `vocab`.
std::optional<BoundTokenizer> training_tokenizer(const std::string& spec, const std::string& data, const std::string& from,
                                                 const std::string& from_flag, int vocab);

// The tokenizer to run a model with: the one the checkpoint `model` stores, which a --tokenizer
// `spec` cannot replace unless it is the same (refused naming both); else model_tokenizer's
// (spec, the Hugging Face directory's own, bytes for a vocabulary of 256). UsageError naming
// `command` for a stored tokenizer that does not load or fit the model's `vocab`.
BoundTokenizer model_source_tokenizer(const std::string& spec, const std::string& model, bool hf_directory, int vocab,
                                      const std::string& command);

// UsageError naming --data when the checkpoint `model` stores a tokenizer and `data` was made by
// another (eval's loss on them would be a number of nothing).
void check_data_tokenizer(const std::string& data, const std::string& model, const std::string& command);

}  // namespace tt
