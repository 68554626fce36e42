#include "data/tokenizer.h"

#include <sentencepiece_processor.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "core/error.h"
#include "core/files.h"
#include "core/json_input.h"
#include "data/bpe_tokenizer.h"
#include "data/sentencepiece_json.h"
#include "data/word_cache.h"

namespace tt {

namespace {

class ByteTokenizer final : public Tokenizer {
 public:
  std::string describe() const override { return "bytes (vocabulary 256)"; }
  TokenizerKind kind() const override { return TokenizerKind::Bytes; }
  std::string path() const override { return ""; }
  int vocab_size() const override { return 256; }
  int bos() const override { return -1; }
  int eos() const override { return -1; }
  std::vector<int32_t> encode(const std::string& text) const override {  // bytes as 0..255, never a signed char
    std::vector<int32_t> ids(text.size());
    for (size_t i = 0; i < text.size(); ++i) ids[i] = int32_t(static_cast<unsigned char>(text[i]));
    return ids;
  }
  std::string decode(const std::vector<int32_t>& ids) const override {
    std::string s;
    for (int32_t t : ids) s.push_back(char(uint8_t(t)));
    return s;
  }
  std::string special_name(int id) const override { return decode({id}); }
};

class SentencePieceTokenizer final : public Tokenizer {
 public:
  // `model`: a serialized model, a .model file's bytes or the model a tokenizer.json makes.
  SentencePieceTokenizer(const std::string& path, std::string model, const std::string& flag)
      : path_(path), model_(std::move(model)) {
    const auto st = sp_.LoadFromSerializedProto(model_);
    if (!st.ok()) usage_fail(flag + ": '" + path + "' is not a SentencePiece model (" + st.ToString() + ")");
    // Words: the encoder splits the text before each space (its pieces never cross one), and the
    // dummy space it puts before the text is one piece of its own: then a word's pieces are the
    // same wherever it stands, and repeated words can be looked up (encode).
    const std::vector<int32_t> space = encode_whole(" ");
    by_words_ = space.size() == 2 && space[0] == space[1];
    // The same model without the dummy space, for a piece that continues a word: a second
    // normalizer_spec (field 3) holding add_dummy_prefix (its field 3) false, appended to the
    // serialized model, which protobuf merges into the first.
    const auto bare = sp_bare_.LoadFromSerializedProto(model_ + std::string("\x1a\x02\x18\x00", 4));
    if (!bare.ok()) usage_fail(flag + ": '" + path + "' is not a SentencePiece model (" + bare.ToString() + ")");
  }
  std::string describe() const override {
    return "SentencePiece " + path_ + " (vocabulary " + std::to_string(vocab_size()) + ")";
  }
  TokenizerKind kind() const override { return TokenizerKind::SentencePiece; }
  std::string path() const override { return path_; }
  int vocab_size() const override { return sp_.GetPieceSize(); }
  int bos() const override { return sp_.bos_id(); }
  int eos() const override { return sp_.eos_id(); }
  // SentencePiece's encoding, a word at a time: the text is cut before each space; the first
  // word is encoded as it is, each other one (" word") as SentencePiece encodes it alone less the
  // dummy space's piece in front, through this thread's cache of words (data/word_cache.h). The
  // tests check the result against SentencePiece's own encoding of whole documents.
  std::vector<int32_t> encode(const std::string& text) const override { return encode_words(text, true); }
  // A later piece: its first word, cut before a space, is one of the "other" words; cut inside a
  // word (no space first), it is encoded without the dummy space.
  std::vector<int32_t> encode_more(const std::string& text) const override { return encode_words(text, false); }
  std::string special_name(int id) const override { return sp_.IdToPiece(id); }
  const std::string& model() const { return model_; }
  std::string decode(const std::vector<int32_t>& ids) const override {
    std::string text;
    const auto st = sp_.Decode(std::vector<int>(ids.begin(), ids.end()), &text);
    if (!st.ok()) fail("SentencePiece could not decode the tokens: " + st.ToString());
    return text;
  }

 private:
  std::vector<int32_t> encode_words(const std::string& text, bool document_start) const {
    if (!by_words_) return encode_whole(text, document_start ? sp_ : sp_bare_);
    std::vector<int32_t> ids;
    for (size_t at = 0; at < text.size();) {
      const size_t end = std::min(text.find(' ', at + 1), text.size());
      const std::string word = text.substr(at, end - at);
      if (at == 0 && (document_start || word[0] != ' ')) {
        ids = encode_whole(word, document_start ? sp_ : sp_bare_);
      } else {
        append_word(cache_id_, word, [&](const std::string& s) {
          std::vector<int32_t> pieces = encode_whole(s);
          pieces.erase(pieces.begin());  // the dummy space
          return pieces;
        }, ids);
      }
      at = end;
    }
    return ids;
  }
  std::vector<int32_t> encode_whole(const std::string& text, const sentencepiece::SentencePieceProcessor& sp) const {
    std::vector<int> ids;
    const auto st = sp.Encode(text, &ids);
    if (!st.ok()) fail("SentencePiece could not encode the text: " + st.ToString());
    return std::vector<int32_t>(ids.begin(), ids.end());
  }

  std::vector<int32_t> encode_whole(const std::string& text) const { return encode_whole(text, sp_); }

  std::string path_, model_;
  sentencepiece::SentencePieceProcessor sp_, sp_bare_;  // the model; the model without the dummy space
  bool by_words_ = false;
  const uint64_t cache_id_ = new_tokenizer_id();
};

// A Hugging Face directory's tokenizer file: its tokenizer.model (SentencePiece) first, else its
// tokenizer.json; "" for neither.
std::string tokenizer_file_in(const std::string& dir) {
  std::error_code ec;
  for (const char* name : {"tokenizer.model", "tokenizer.json"}) {
    const std::filesystem::path file = std::filesystem::path(dir) / name;
    if (std::filesystem::is_regular_file(file, ec)) return file.string();
  }
  return "";
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::load(const std::string& spec, const std::string& flag) {
  if (spec == "bytes") return std::make_unique<ByteTokenizer>();
  std::error_code ec;
  if (std::filesystem::is_directory(spec, ec)) {
    const std::string file = tokenizer_file_in(spec);
    if (file.empty()) usage_fail(flag + ": directory '" + spec + "' holds neither tokenizer.model nor tokenizer.json");
    return load(file, flag);
  }
  struct stat st {};
  if (::stat(spec.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
    usage_fail(flag + ": '" + spec + "' is not a file (give \"bytes\", a SentencePiece .model or a tokenizer.json)");
  // A tokenizer.json is JSON (its name says so, or its first character after a UTF-8 byte-order
  // mark and spaces is '{'); a SentencePiece model starts with its first piece's record (the byte
  // 0x0A, then the record's length: a few bytes for the unknown token, not the 123 of '{').
  if (st.st_size == 0) usage_fail(flag + ": '" + spec + "' is empty (give a SentencePiece .model or a tokenizer.json)");
  std::ifstream in(spec, std::ios::binary);
  std::string start(3, '\0');
  in.read(start.data(), 3);
  if (start != "\xEF\xBB\xBF") in.clear(), in.seekg(0);
  char first = 0;
  in >> first;
  const bool json_name = std::filesystem::path(spec).extension() == ".json";
  if (first == '{' || json_name) {
    const nlohmann::json file = read_json_file(spec, flag, kMaxTokenizerFileBytes);
    if (is_sentencepiece_json(file))
      return std::make_unique<SentencePieceTokenizer>(spec, sentencepiece_model_from_json(file, spec, flag), flag);
    return load_byte_level_bpe(file, spec, flag);
  }
  return std::make_unique<SentencePieceTokenizer>(spec, read_input_file(spec, flag, kMaxTokenizerFileBytes), flag);
}

nlohmann::ordered_json bos_post_processor(const std::string& bos_name, int bos) {
  using json = nlohmann::ordered_json;
  json single = json::array(), pair = json::array(), special = json::object();
  for (int type_id : {0, 1}) {
    if (bos >= 0) pair.push_back({{"SpecialToken", {{"id", bos_name}, {"type_id", type_id}}}});
    pair.push_back({{"Sequence", {{"id", type_id == 0 ? "A" : "B"}, {"type_id", type_id}}}});
    if (type_id == 0) single = pair;
  }
  if (bos >= 0) special[bos_name] = {{"id", bos_name}, {"ids", json::array({bos})}, {"tokens", json::array({bos_name})}};
  return {{"type", "TemplateProcessing"}, {"single", single}, {"pair", pair}, {"special_tokens", special}};
}

int document_start(const Tokenizer& tok) { return tok.bos() != tok.eos() ? tok.bos() : -1; }

std::unique_ptr<Tokenizer> model_tokenizer(const std::string& spec, const std::string& hf_dir, int vocab) {
  const std::string in_dir = hf_dir.empty() ? "" : tokenizer_file_in(hf_dir);
  const std::string chosen = !spec.empty() ? spec : !in_dir.empty() ? in_dir : vocab == 256 ? "bytes" : "";
  if (chosen.empty())
    usage_fail("--tokenizer: the model's vocabulary is " + std::to_string(vocab) +
               ": give the tokenizer it was trained with (a SentencePiece .model or a tokenizer.json)");
  std::unique_ptr<Tokenizer> tok = Tokenizer::load(chosen, "--tokenizer");
  if (tok->vocab_size() > vocab)
    usage_fail("--tokenizer: " + tok->describe() + " does not fit the model's vocabulary of " + std::to_string(vocab));
  return tok;
}

const std::string& sentencepiece_model(const Tokenizer& tok) {
  const auto* sp = dynamic_cast<const SentencePieceTokenizer*>(&tok);
  if (!sp) fail("sentencepiece_model: " + tok.describe() + " is not a SentencePiece tokenizer");
  return sp->model();
}

}  // namespace tt
