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
#include "data/bpe_tokenizer.h"
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
  SentencePieceTokenizer(const std::string& path, const std::string& flag) : path_(path) {
    const auto st = sp_.Load(path);
    if (!st.ok()) usage_fail(flag + ": '" + path + "' is not a SentencePiece model (" + st.ToString() + ")");
    // Words: the encoder splits the text before each space (its pieces never cross one), and the
    // dummy space it puts before the text is one piece of its own: then a word's pieces are the
    // same wherever it stands, and repeated words can be looked up (encode).
    const std::vector<int32_t> space = encode_whole(" ");
    by_words_ = space.size() == 2 && space[0] == space[1];
    // The same model without the dummy space, for a piece that continues a word: a second
    // normalizer_spec (field 3) holding add_dummy_prefix (its field 3) false, appended to the
    // serialized model, which protobuf merges into the first.
    const auto bare = sp_bare_.LoadFromSerializedProto(sp_.serialized_model_proto() + std::string("\x1a\x02\x18\x00", 4));
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

  std::string path_;
  sentencepiece::SentencePieceProcessor sp_, sp_bare_;  // the model; the model without the dummy space
  bool by_words_ = false;
  const uint64_t cache_id_ = new_tokenizer_id();
};

// A field of a protobuf message: its bytes (length-delimited) or its varint's bytes; "" if absent.
std::string proto_field(const std::string& message, uint64_t number) {
  size_t at = 0;
  const auto varint = [&] {
    uint64_t v = 0;
    for (int shift = 0; at < message.size() && shift < 64; shift += 7) {
      const uint8_t b = uint8_t(message[at++]);
      v |= uint64_t(b & 0x7F) << shift;
      if (!(b & 0x80)) break;
    }
    return v;
  };
  while (at < message.size()) {
    const uint64_t key = varint();
    size_t start = at;
    switch (key & 7) {
      case 0: varint(); break;
      case 1: at += 8; break;
      case 2: {
        const uint64_t length = varint();
        start = at;
        at += std::min<uint64_t>(length, message.size() - at);
        break;
      }
      case 5: at += 4; break;
      default: return "";  // (groups: no SentencePiece model has them)
    }
    if ((key >> 3) == number) return message.substr(start, std::min(at, message.size()) - start);
  }
  return "";
}

// Whether a SentencePiece model is a unigram model: its trainer_spec (field 2) model_type (field
// 3: 1 unigram, the default, 2 BPE), read from the serialized proto, whose class Debian's headers
// do not declare.
bool is_unigram(const sentencepiece::SentencePieceProcessor& sp) {
  const std::string type = proto_field(proto_field(sp.serialized_model_proto(), 2), 3);
  return type.empty() || type[0] == 1;
}

using json = nlohmann::ordered_json;

// Control, unknown, byte and unused pieces: SentencePiece never takes them for text.
bool is_normal(const sentencepiece::SentencePieceProcessor& sp, int i) {
  return !(sp.IsControl(i) || sp.IsUnknown(i) || sp.IsByte(i) || sp.IsUnused(i));
}

// A BPE model's pieces and merges: each normal piece split into two pieces of the vocabulary,
// pieces in id order and their splits by the ids of the halves, then ranked by the piece's score
// (a stable sort).
json bpe_model(const sentencepiece::SentencePieceProcessor& sp) {
  json vocab = json::object();
  std::unordered_map<std::string, int> ids;
  for (int i = 0; i < sp.GetPieceSize(); ++i) vocab[sp.IdToPiece(i)] = i, ids[sp.IdToPiece(i)] = i;
  struct Merge {
    std::string left, right;
    float score;
  };
  std::vector<Merge> merges;
  for (int i = 0; i < sp.GetPieceSize(); ++i) {
    if (sp.IsControl(i) || sp.IsUnknown(i) || sp.IsByte(i)) continue;
    const std::string piece = sp.IdToPiece(i);
    std::vector<Merge> local;
    for (size_t at = 1; at < piece.size(); ++at) {
      if ((uint8_t(piece[at]) & 0xC0) == 0x80) continue;  // inside a UTF-8 character
      const std::string l = piece.substr(0, at), r = piece.substr(at);
      if (ids.count(l) && ids.count(r)) local.push_back({l, r, sp.GetScore(i)});
    }
    std::sort(local.begin(), local.end(), [&](const Merge& a, const Merge& b) {
      return std::pair(ids[a.left], ids[a.right]) < std::pair(ids[b.left], ids[b.right]);
    });
    merges.insert(merges.end(), local.begin(), local.end());
  }
  std::stable_sort(merges.begin(), merges.end(), [](const Merge& a, const Merge& b) { return a.score > b.score; });
  json merge_list = json::array();
  for (const Merge& m : merges) merge_list.push_back(json::array({m.left, m.right}));
  return {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", sp.IdToPiece(sp.unk_id())},
          {"continuing_subword_prefix", nullptr}, {"end_of_word_suffix", nullptr}, {"fuse_unk", true},
          {"byte_fallback", true}, {"ignore_merges", false}, {"vocab", vocab}, {"merges", merge_list}};
}

// A unigram model's pieces with their scores. SentencePiece's lattice holds the normal pieces
// only, the library's every piece: so the others ("<s>", "<0x41>") get a score below any way of
// spelling their text in normal pieces (each node scores at least the lowest normal score and
// covers a byte or more), and are never taken for text; the byte pieces still serve the byte
// fallback, by name. (The score of an unknown character, the lowest score less 10, then falls
// with it; but every way through a text meets its unknown characters alike, as no normal piece
// holds a character that is not a piece (character_coverage 1.0), so the best way is the same.
// Only in the text of such a piece with a character the model never saw, "<0x41>" where no "x"
// was, does the library then take the piece.)
json unigram_model(const sentencepiece::SentencePieceProcessor& sp) {
  float lowest = 0;
  size_t longest = 0;
  for (int i = 0; i < sp.GetPieceSize(); ++i) {
    if (is_normal(sp, i)) lowest = std::min(lowest, sp.GetScore(i));
    else longest = std::max(longest, sp.IdToPiece(i).size());
  }
  const double never = double(longest) * lowest - 1;
  json pieces = json::array();
  for (int i = 0; i < sp.GetPieceSize(); ++i)
    pieces.push_back(json::array({sp.IdToPiece(i), is_normal(sp, i) ? double(sp.GetScore(i)) : never}));
  return {{"type", "Unigram"}, {"unk_id", sp.unk_id()}, {"vocab", pieces}, {"byte_fallback", true}};
}

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
  if (first == '{' || json_name) return load_byte_level_bpe(spec, flag);
  return std::make_unique<SentencePieceTokenizer>(spec, flag);
}

json bos_post_processor(const std::string& bos_name, int bos) {
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

std::string sentencepiece_tokenizer_json(const std::string& model_path) {
  sentencepiece::SentencePieceProcessor sp;
  if (!sp.Load(model_path).ok()) usage_fail("'" + model_path + "' is not a SentencePiece model");
  json added = json::array();
  for (int i = 0; i < sp.GetPieceSize(); ++i)
    if (sp.IsControl(i) || sp.IsUnknown(i))
      added.push_back({{"id", i}, {"content", sp.IdToPiece(i)}, {"single_word", false}, {"lstrip", false},
                       {"rstrip", false}, {"normalized", false}, {"special", true}});
  const std::string bos = sp.IdToPiece(sp.bos_id()), space = "\xe2\x96\x81";  // U+2581, SentencePiece's space
  const json tokenizer = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", {{"type", "Sequence"},
                      {"normalizers", json::array({{{"type", "Prepend"}, {"prepend", space}},
                                                   {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", space}}})}}},
      {"pre_tokenizer", nullptr},
      {"post_processor", bos_post_processor(bos, sp.bos_id())},
      {"decoder", {{"type", "Sequence"},
                   {"decoders", json::array({{{"type", "Replace"}, {"pattern", {{"String", space}}}, {"content", " "}},
                                             {{"type", "ByteFallback"}},
                                             {{"type", "Fuse"}},
                                             {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}})}}},
      {"model", is_unigram(sp) ? unigram_model(sp) : bpe_model(sp)}};
  return tokenizer.dump(1);
}

}  // namespace tt
