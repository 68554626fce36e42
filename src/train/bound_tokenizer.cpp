#include "train/bound_tokenizer.h"

#include <filesystem>
#include <map>

#include "core/error.h"
#include "data/loader.h"
#include "data/token_file.h"
#include "train/checkpoint.h"

namespace tt {

namespace {

BoundTokenizer bound(const TokenizerFiles& files, const std::string& origin, const std::string& flag) {
  return {files, load_tokenizer_files(files, origin, flag), true};
}

}  // namespace

std::optional<BoundTokenizer> data_tokenizer(const std::string& data) {
  if (data == "synthetic") return std::nullopt;
  if (!names_token_files(data)) return bound(TokenizerFiles{}, "of the text file --data", "--data");
  std::map<std::string, std::optional<TokenizerFiles>> by_dir;
  for (const std::string& file : data_files(data)) {
    const std::filesystem::path parent = std::filesystem::path(file).parent_path();
    const std::string dir = parent.empty() ? "." : parent.string();
    if (!by_dir.count(dir)) by_dir[dir] = recorded_tokenizer(dir, "--data");
  }
  const auto& [first_dir, first] = *by_dir.begin();
  for (const auto& [dir, recorded] : by_dir) {
    if (!recorded) return std::nullopt;  // another tool's shards, or tokenize's before it recorded its tokenizer
    if (!same_tokenizer(*recorded, *first))
      usage_fail("--data: the shards of '" + first_dir + "' and of '" + dir + "' were made by different tokenizers (" +
                 bound(*first, "recorded in '" + first_dir + "'", "--data").tokenizer->describe() + "; " +
                 bound(*recorded, "recorded in '" + dir + "'", "--data").tokenizer->describe() +
                 "): train on the shards of one tokenizer");
  }
  return bound(*first, "recorded by tokenize in '" + first_dir + "'", "--data");
}

std::optional<BoundTokenizer> training_tokenizer(const std::string& spec, const std::string& data, const std::string& from,
                                                 const std::string& from_flag, int vocab) {
  std::optional<BoundTokenizer> chosen = data_tokenizer(data);
  if (!spec.empty()) {
    std::unique_ptr<Tokenizer> given = Tokenizer::load(spec, "--tokenizer");
    TokenizerFiles files = tokenizer_files(*given);
    if (chosen && !same_tokenizer(files, chosen->files))
      usage_fail("--tokenizer: " + given->describe() + " is not the tokenizer that made the data, " +
                 chosen->tokenizer->describe() + ": leave --tokenizer out to use it");
    chosen = BoundTokenizer{std::move(files), std::move(given), false};
  }
  if (!from.empty())
    if (const std::optional<TokenizerFiles> stored = read_checkpoint_tokenizer(from, from_flag)) {
      BoundTokenizer earlier = bound(*stored, "stored in '" + from + "'", from_flag);
      if (chosen && !same_tokenizer(chosen->files, *stored))
        usage_fail(from_flag + ": the checkpoint's tokenizer, " + earlier.tokenizer->describe() + ", is not this run's, " +
                   chosen->tokenizer->describe());
      if (!chosen) chosen = std::move(earlier);
    }
  if (chosen && chosen->tokenizer->vocab_size() > vocab)
    usage_fail("--vocab-size: " + std::to_string(vocab) + " is smaller than the vocabulary of the data's tokenizer, " +
               chosen->tokenizer->describe());
  return chosen;
}

BoundTokenizer model_source_tokenizer(const std::string& spec, const std::string& model, bool hf_directory, int vocab,
                                      const std::string& command) {
  if (!hf_directory)
    if (const std::optional<TokenizerFiles> stored = read_checkpoint_tokenizer(model, command)) {
      BoundTokenizer b = bound(*stored, "stored in '" + model + "'", command);
      b.stored = true;
      if (!spec.empty()) {
        const std::unique_ptr<Tokenizer> given = Tokenizer::load(spec, "--tokenizer");
        if (!same_tokenizer(tokenizer_files(*given), b.files))
          usage_fail("--tokenizer: " + given->describe() + " is not the tokenizer the model was trained with, " +
                     b.tokenizer->describe() + ": leave --tokenizer out to use it");
      }
      if (b.tokenizer->vocab_size() > vocab)
        usage_fail(command + ": the tokenizer " + b.tokenizer->describe() + " does not fit the model's vocabulary of " +
                   std::to_string(vocab));
      return b;
    }
  std::unique_ptr<Tokenizer> tok = model_tokenizer(spec, hf_directory ? model : "", vocab);
  TokenizerFiles files = tokenizer_files(*tok);
  return {std::move(files), std::move(tok), false};
}

void check_data_tokenizer(const std::string& data, const std::string& model, const std::string& command) {
  const std::optional<TokenizerFiles> stored = read_checkpoint_tokenizer(model, command);
  if (!stored) return;
  const std::optional<BoundTokenizer> made = data_tokenizer(data);
  if (made && !same_tokenizer(made->files, *stored))
    usage_fail("--data: its tokens were made by " + made->tokenizer->describe() + ", not by the model's tokenizer, " +
               bound(*stored, "stored in '" + model + "'", command).tokenizer->describe());
}

}  // namespace tt
