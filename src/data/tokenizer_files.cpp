#include "data/tokenizer_files.h"

#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/files.h"
#include "data/sentencepiece_json.h"

namespace tt {

namespace {

namespace fs = std::filesystem;

// A tokenizer loaded from stored files: the files' tokenizer, described by where they came from.
class StoredTokenizer final : public Tokenizer {
 public:
  StoredTokenizer(std::unique_ptr<Tokenizer> inner, TokenizerFiles files, std::string description)
      : inner_(std::move(inner)), files_(std::move(files)), description_(std::move(description)) {}
  std::string describe() const override { return description_; }
  TokenizerKind kind() const override { return inner_->kind(); }
  std::string path() const override { return ""; }
  int vocab_size() const override { return inner_->vocab_size(); }
  int bos() const override { return inner_->bos(); }
  int eos() const override { return inner_->eos(); }
  std::vector<int32_t> encode(const std::string& text) const override { return inner_->encode(text); }
  std::vector<int32_t> encode_more(const std::string& text) const override { return inner_->encode_more(text); }
  std::string decode(const std::vector<int32_t>& ids) const override { return inner_->decode(ids); }
  std::string special_name(int id) const override { return inner_->special_name(id); }
  const TokenizerFiles& files() const { return files_; }

 private:
  std::unique_ptr<Tokenizer> inner_;
  TokenizerFiles files_;
  std::string description_;
};

// `text` with every `from` replaced by `to`.
std::string replaced(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

// A private directory that goes, with what it holds, when this does.
class TemporaryDirectory {
 public:
  TemporaryDirectory() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/tiny_llama-tokenizer.XXXXXX";
    if (!::mkdtemp(pattern.data()))
      fail("cannot make a temporary directory for a stored tokenizer (" + pattern + "): " + std::strerror(errno));
    path_ = pattern;
  }
  ~TemporaryDirectory() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  TemporaryDirectory(const TemporaryDirectory&) = delete;
  TemporaryDirectory& operator=(const TemporaryDirectory&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace

const std::string* TokenizerFiles::find(const std::string& name) const {
  for (const auto& [file, bytes] : files)
    if (file == name) return &bytes;
  return nullptr;
}

bool same_tokenizer(const TokenizerFiles& a, const TokenizerFiles& b) {
  if (a == b) return true;
  if (a.kind != TokenizerKind::SentencePiece || b.kind != TokenizerKind::SentencePiece) return false;
  const std::string name = tokenizer_file_names(TokenizerKind::SentencePiece).front().name;
  const std::string *model_a = a.find(name), *model_b = b.find(name);
  if (!model_a || !model_b) return false;
  const std::string identity = sentencepiece_identity(*model_a);
  return !identity.empty() && identity == sentencepiece_identity(*model_b);
}

std::string tokenizer_kind_name(TokenizerKind kind) {
  switch (kind) {
    case TokenizerKind::Bytes: return "bytes";
    case TokenizerKind::SentencePiece: return "sentencepiece";
    case TokenizerKind::ByteLevelBpe: return "byte-level-bpe";
  }
  return "";
}

bool tokenizer_kind_named(const std::string& name, TokenizerKind* kind) {
  for (TokenizerKind k : {TokenizerKind::Bytes, TokenizerKind::SentencePiece, TokenizerKind::ByteLevelBpe})
    if (tokenizer_kind_name(k) == name) return *kind = k, true;
  return false;
}

std::vector<TokenizerFileName> tokenizer_file_names(TokenizerKind kind) {
  switch (kind) {
    case TokenizerKind::Bytes: return {};
    case TokenizerKind::SentencePiece: return {{"tokenizer.model", true}};
    case TokenizerKind::ByteLevelBpe: return {{"tokenizer.json", true}, {"tokenizer_config.json", false}};
  }
  return {};
}

TokenizerFiles tokenizer_files(const Tokenizer& tok) {
  if (const auto* stored = dynamic_cast<const StoredTokenizer*>(&tok)) return stored->files();
  TokenizerFiles f;
  f.kind = tok.kind();
  if (f.kind == TokenizerKind::Bytes) return f;
  const fs::path main(tok.path());
  f.files.emplace_back(tokenizer_file_names(f.kind).front().name,
                       f.kind == TokenizerKind::SentencePiece  // a tokenizer.json's: the model it made
                           ? sentencepiece_model(tok)
                           : read_input_file(main.string(), "--tokenizer", kMaxTokenizerFileBytes));
  const fs::path config = main.parent_path() / "tokenizer_config.json";  // the reader's BOS and EOS (bpe_tokenizer.h)
  std::error_code ec;
  if (f.kind == TokenizerKind::ByteLevelBpe && fs::is_regular_file(config, ec))
    f.files.emplace_back("tokenizer_config.json",
                         read_input_file(config.string(), "tokenizer_config.json", kMaxTokenizerFileBytes));
  return f;
}

std::unique_ptr<Tokenizer> load_tokenizer_files(const TokenizerFiles& files, const std::string& origin,
                                                const std::string& flag) {
  if (files.kind == TokenizerKind::Bytes) {
    std::unique_ptr<Tokenizer> bytes = Tokenizer::load("bytes", flag);
    const std::string description = bytes->describe() + " " + origin;
    return std::make_unique<StoredTokenizer>(std::move(bytes), files, description);
  }
  const TemporaryDirectory dir;
  for (const auto& [name, bytes] : files.files) {
    const std::string path = (fs::path(dir.path()) / name).string();
    std::ofstream out(path, std::ios::binary);
    out.write(bytes.data(), std::streamsize(bytes.size()));
    if (!out.flush()) fail("cannot write a stored tokenizer's " + name + " into '" + dir.path() + "'");
  }
  const std::string main = (fs::path(dir.path()) / tokenizer_file_names(files.kind).front().name).string();
  std::unique_ptr<Tokenizer> inner;
  try {
    inner = Tokenizer::load(main, flag);
  } catch (const UsageError& e) {  // the temporary path means nothing to the user: the origin does
    std::string why = replaced(e.what(), dir.path() + "/", "");
    if (why.rfind(flag + ": ", 0) == 0) why.erase(0, flag.size() + 2);
    usage_fail(flag + ": the tokenizer " + origin + " does not load: " + why);
  }
  if (inner->kind() != files.kind)
    usage_fail(flag + ": the tokenizer " + origin + " is recorded as " + tokenizer_kind_name(files.kind) + ", but its " +
               "file is " + tokenizer_kind_name(inner->kind()));
  const std::string description = replaced(inner->describe(), dir.path() + "/", "") + " " + origin;
  return std::make_unique<StoredTokenizer>(std::move(inner), files, description);
}

}  // namespace tt
