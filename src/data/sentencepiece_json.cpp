#include "data/sentencepiece_json.h"

#include <sentencepiece_processor.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "core/json_input.h"
#include "data/bpe_tokenizer.h"
#include "data/tokenizer.h"

namespace tt {

namespace {

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

using ojson = nlohmann::ordered_json;  // the export keeps its fields in order

// Control, unknown, byte and unused pieces: SentencePiece never takes them for text.
bool is_normal(const sentencepiece::SentencePieceProcessor& sp, int i) {
  return !(sp.IsControl(i) || sp.IsUnknown(i) || sp.IsByte(i) || sp.IsUnused(i));
}

// A BPE model's pieces and merges: each normal piece split into two pieces of the vocabulary,
// pieces in id order and their splits by the ids of the halves, then ranked by the piece's score
// (a stable sort).
ojson bpe_model(const sentencepiece::SentencePieceProcessor& sp) {
  ojson vocab = ojson::object();
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
  ojson merge_list = ojson::array();
  for (const Merge& m : merges) merge_list.push_back(ojson::array({m.left, m.right}));
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
ojson unigram_model(const sentencepiece::SentencePieceProcessor& sp) {
  float lowest = 0;
  size_t longest = 0;
  for (int i = 0; i < sp.GetPieceSize(); ++i) {
    if (is_normal(sp, i)) lowest = std::min(lowest, sp.GetScore(i));
    else longest = std::max(longest, sp.IdToPiece(i).size());
  }
  const double never = double(longest) * lowest - 1;
  ojson pieces = ojson::array();
  for (int i = 0; i < sp.GetPieceSize(); ++i)
    pieces.push_back(ojson::array({sp.IdToPiece(i), is_normal(sp, i) ? double(sp.GetScore(i)) : never}));
  return {{"type", "Unigram"}, {"unk_id", sp.unk_id()}, {"vocab", pieces}, {"byte_fallback", true}};
}

const std::string kSpace = "\xe2\x96\x81";  // U+2581, SentencePiece's mark of a space

// The normalizer that does what SentencePiece does to a text before it encodes it (with the
// models tokenizer-train makes: no Unicode normalization, spaces kept): a space in front, every
// space as "▁". And the decoder that undoes it.
ojson sentencepiece_normalizer() {
  return {{"type", "Sequence"},
          {"normalizers", ojson::array({{{"type", "Prepend"}, {"prepend", kSpace}},
                                        {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kSpace}}})}};
}
ojson sentencepiece_decoder() {
  return {{"type", "Sequence"},
          {"decoders", ojson::array({{{"type", "Replace"}, {"pattern", {{"String", kSpace}}}, {"content", " "}},
                                     {{"type", "ByteFallback"}},
                                     {{"type", "Fuse"}},
                                     {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}})}};
}

// A protobuf message, written field by field in the wire format: a key (the field's number and
// the value's kind), then a varint, a float's four bytes, or a length and that many bytes.
class ProtoWriter {
 public:
  ProtoWriter& number(int field, int64_t value) {  // int32, bool, enum (a negative one as ten bytes)
    key(field, 0);
    varint(uint64_t(value));
    return *this;
  }
  ProtoWriter& real(int field, float value) {
    key(field, 5);
    uint32_t bits = 0;
    std::memcpy(&bits, &value, sizeof bits);
    for (int i = 0; i < 4; ++i) bytes_.push_back(char(uint8_t(bits >> (8 * i))));
    return *this;
  }
  ProtoWriter& text(int field, const std::string& value) {  // a string, bytes or a message
    key(field, 2);
    varint(value.size());
    bytes_ += value;
    return *this;
  }
  const std::string& bytes() const { return bytes_; }

 private:
  void key(int field, int kind) { varint(uint64_t(field) << 3 | uint64_t(kind)); }
  void varint(uint64_t v) {
    for (; v >= 0x80; v >>= 7) bytes_.push_back(char(uint8_t(v | 0x80)));
    bytes_.push_back(char(uint8_t(v)));
  }
  std::string bytes_;
};

// sentencepiece_model.proto's numbers: a piece's kinds; the fields of ModelProto, of its pieces,
// of TrainerSpec and of NormalizerSpec that encoding reads.
enum PieceKind { kNormal = 1, kUnknown = 2, kControl = 3, kByte = 6 };
enum ModelField { kPieces = 1, kTrainerSpec = 2, kNormalizerSpec = 3 };
enum PieceField { kPieceText = 1, kPieceScore = 2, kPieceKind = 3 };
enum TrainerField { kModelType = 3, kVocabSize = 4, kByteFallback = 35, kUnkPiece = 45, kBosPiece = 46, kEosPiece = 47 };
enum NormalizerField { kRuleName = 1, kAddDummyPrefix = 3, kRemoveExtraWhitespaces = 4, kEscapeWhitespaces = 5 };
constexpr int kUnigramType = 1, kBpeType = 2;
constexpr size_t kMaxPieces = size_t(1) << 24;

struct Piece {
  std::string text;
  float score = 0;
  int kind = kNormal;
  bool known = false;  // the file gave this id a piece
};

// "<0x00>" .. "<0xFF>": SentencePiece's names of the byte pieces.
bool is_byte_piece(const std::string& p) {
  const auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F'); };
  return p.size() == 6 && p.compare(0, 3, "<0x") == 0 && hex(p[3]) && hex(p[4]) && p[5] == '>';
}

using Bad = std::function<void(const std::string&)>;

// A BPE model's pieces: the vocabulary's ids, and scores from the merges' order.
std::vector<Piece> bpe_pieces(const nlohmann::json& m, const Bad& bad) {
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (!json_member(m, key).is_null() && json_member(m, key) != "") bad(std::string("model.") + key + " is not SentencePiece's");
  if (!json_member(m, "dropout").is_null() && json_member(m, "dropout") != 0) bad("model.dropout: BPE dropout is not read");
  if (json_member(m, "ignore_merges") == true) bad("model.ignore_merges is not SentencePiece's");
  const nlohmann::json& vocab = json_member(m, "vocab");
  if (!vocab.is_object() || vocab.empty() || vocab.size() > kMaxPieces) bad("model.vocab is not a map of pieces to ids");
  std::vector<Piece> pieces(vocab.size());
  std::unordered_map<std::string, int> id_of;
  for (const auto& [text, id] : vocab.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= int64_t(pieces.size()))
      bad("model.vocab: the id of " + json_brief(text) + ", " + json_brief(id) + ", is not below the " +
          std::to_string(pieces.size()) + " pieces (SentencePiece's ids have no gaps)");
    Piece& p = pieces[size_t(id.get<int64_t>())];
    if (p.known) bad("model.vocab: two pieces have the id " + json_brief(id));
    p.text = text, p.known = true;
    id_of[text] = id.get<int>();
  }
  // A piece's score: minus the rank of its first merge, so that the better merge scores higher.
  const nlohmann::json& merges = json_member(m, "merges");
  if (!merges.is_array()) bad("model.merges is not a list");
  std::vector<bool> merged(pieces.size(), false);
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const nlohmann::json& merge = merges[rank];
    std::string left, right;  // (a piece has no space: "▁" stands for it)
    if (!merge_sides(merge, left, right)) bad("model.merges: " + json_brief(merge) + " is not a pair");
    const auto whole = id_of.find(left + right);
    if (!id_of.count(left) || !id_of.count(right) || whole == id_of.end())
      bad("model.merges: '" + left + " " + right + "' merges pieces that are not in the vocabulary");
    if (!merged[size_t(whole->second)]) pieces[size_t(whole->second)].score = -float(rank), merged[size_t(whole->second)] = true;
  }
  // A piece no merge makes is never made by one, here or by the library: it scores below them.
  for (size_t id = 0; id < pieces.size(); ++id)
    if (!merged[id]) pieces[id].score = -float(merges.size() + id);
  const nlohmann::json& unk = json_member(m, "unk_token");
  if (!unk.is_string() || !id_of.count(unk.get<std::string>())) bad("model.unk_token " + json_brief(unk) + " is not a piece");
  pieces[size_t(id_of[unk.get<std::string>()])].kind = kUnknown;
  return pieces;
}

// A unigram model's pieces: [text, score] in id order.
std::vector<Piece> unigram_pieces(const nlohmann::json& m, const Bad& bad) {
  const nlohmann::json& vocab = json_member(m, "vocab");
  if (!vocab.is_array() || vocab.empty() || vocab.size() > kMaxPieces) bad("model.vocab is not a list of pieces");
  std::vector<Piece> pieces;
  for (const nlohmann::json& v : vocab) {
    if (!v.is_array() || v.size() != 2 || !v[0].is_string() || !v[1].is_number())
      bad("model.vocab: " + json_brief(v) + " is not a piece and its score");
    const double score = v[1].get<double>();
    if (!(std::abs(score) <= std::numeric_limits<float>::max())) bad("model.vocab: the score of " + json_brief(v[0]) + " is not a float");
    pieces.push_back({v[0].get<std::string>(), float(score), kNormal, true});
  }
  const nlohmann::json& unk = json_member(m, "unk_id");
  if (!unk.is_number_integer() || unk.get<int64_t>() < 0 || unk.get<int64_t>() >= int64_t(pieces.size()))
    bad("model.unk_id " + json_brief(unk) + " is not a piece's id");
  pieces[size_t(unk.get<int64_t>())].kind = kUnknown;
  return pieces;
}

// The piece a token of tokenizer_config.json names (its text, or an object with its "content"),
// which must be a special one; "" for null.
std::string named_special(const nlohmann::json& token, const std::vector<Piece>& pieces, const std::string& where,
                          const Bad& bad) {
  if (token.is_null()) return "";
  const nlohmann::json& text = token.is_object() ? json_member(token, "content") : token;
  for (const Piece& p : pieces)
    if (text.is_string() && p.text == text.get<std::string>() && p.kind == kControl) return p.text;
  bad(where + " " + json_brief(token) + " is not a special token of the file");
  return "";
}

}  // namespace

namespace {

std::string tokenizer_json_of(const sentencepiece::SentencePieceProcessor& sp) {
  ojson added = ojson::array();
  for (int i = 0; i < sp.GetPieceSize(); ++i)
    if (sp.IsControl(i) || sp.IsUnknown(i))
      added.push_back({{"id", i}, {"content", sp.IdToPiece(i)}, {"single_word", false}, {"lstrip", false},
                       {"rstrip", false}, {"normalized", false}, {"special", true}});
  const std::string bos = sp.IdToPiece(sp.bos_id());
  const ojson tokenizer = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", sentencepiece_normalizer()},
      {"pre_tokenizer", nullptr},
      {"post_processor", bos_post_processor(bos, sp.bos_id())},
      {"decoder", sentencepiece_decoder()},
      {"model", is_unigram(sp) ? unigram_model(sp) : bpe_model(sp)}};
  return tokenizer.dump(1);
}

// Whether a boolean field of a message holds `value` (absent: the default).
bool proto_flag(const std::string& message, uint64_t number, bool value, bool default_value) {
  const std::string v = proto_field(message, number);
  return v.empty() ? default_value == value : (v[0] != 0) == value;
}

}  // namespace

std::string sentencepiece_tokenizer_json(const std::string& model_path) {
  sentencepiece::SentencePieceProcessor sp;
  if (!sp.Load(model_path).ok()) usage_fail("'" + model_path + "' is not a SentencePiece model");
  return tokenizer_json_of(sp);
}

std::string sentencepiece_identity(const std::string& serialized_model) {
  sentencepiece::SentencePieceProcessor sp;
  if (!sp.LoadFromSerializedProto(serialized_model).ok()) return "";
  // The normalizer the export writes: the text as it is, with the dummy space and "▁" for spaces.
  const std::string ns = proto_field(serialized_model, kNormalizerSpec);
  if (proto_field(ns, kRuleName) != "identity" || !proto_flag(ns, kRemoveExtraWhitespaces, false, true) ||
      !proto_flag(ns, kAddDummyPrefix, true, true) || !proto_flag(ns, kEscapeWhitespaces, true, true))
    return "";
  return tokenizer_json_of(sp) + "\neos " + std::to_string(sp.eos_id());
}


bool is_sentencepiece_json(const nlohmann::json& file) {
  return !json_member(file, "normalizer").is_null() || json_member(json_member(file, "model"), "type") == "Unigram";
}

std::string sentencepiece_model_from_json(const nlohmann::json& j, const std::string& path, const std::string& flag) {
  const Bad bad = [&](const std::string& what) {
    usage_fail(flag + ": '" + path + "': " + what +
               " (a tokenizer.json with a normalizer or a Unigram model is read as SentencePiece's form, which the export "
               "writes)");
  };
  const auto same = [](const nlohmann::json& a, const ojson& b) { return a == nlohmann::json::parse(b.dump()); };
  if (!same(json_member(j, "normalizer"), sentencepiece_normalizer()))
    bad("normalizer " + json_brief(json_member(json_member(j, "normalizer"), "type")) +
        ": only SentencePiece's, a space in front and every space as U+2581, is read");
  if (!json_member(j, "pre_tokenizer").is_null()) bad("pre_tokenizer " + json_brief(json_member(j["pre_tokenizer"], "type")) + " is not read");
  if (!same(json_member(j, "decoder"), sentencepiece_decoder()))
    bad("decoder: only SentencePiece's (U+2581 as a space, byte fallback, the first space dropped) is read");
  const nlohmann::json& m = json_member(j, "model");
  const nlohmann::json& type = json_member(m, "type");
  if (type != "BPE" && type != "Unigram") bad("model.type " + json_brief(type) + ": only BPE and Unigram models are read");
  if (json_member(m, "byte_fallback") != true) bad("model.byte_fallback is not true");
  std::vector<Piece> pieces = type == "BPE" ? bpe_pieces(m, bad) : unigram_pieces(m, bad);

  // Special added tokens are the control pieces (with <unk>, which stays unknown); the byte pieces
  // are named so.
  const nlohmann::json& added = json_member(j, "added_tokens");
  if (!added.is_null() && !added.is_array()) bad("added_tokens is not a list");
  for (const nlohmann::json& t : added.is_array() ? added : nlohmann::json::array()) {
    const nlohmann::json &id = json_member(t, "id"), &content = json_member(t, "content");
    if (!id.is_number_integer() || !content.is_string()) bad("added_tokens: " + json_brief(t) + " has no id and content");
    if (json_member(t, "special") != true) bad("added_tokens: '" + content.get<std::string>() + "' is not special: added text tokens are not read");
    if (id.get<int64_t>() < 0 || id.get<int64_t>() >= int64_t(pieces.size()) || pieces[size_t(id.get<int64_t>())].text != content)
      bad("added_tokens: '" + content.get<std::string>() + "' is not the piece of id " + json_brief(id));
    Piece& p = pieces[size_t(id.get<int64_t>())];
    if (p.kind != kUnknown) p.kind = kControl;
  }
  for (Piece& p : pieces) {
    if (p.text.empty()) bad("model.vocab: a piece is empty");
    if (p.kind == kNormal && is_byte_piece(p.text)) p.kind = kByte;
    if (p.kind != kNormal) p.score = 0;  // SentencePiece never takes them for text
  }

  // BOS and EOS: tokenizer_config.json's beside the file, else the token the post-processor
  // puts first and </s>.
  std::string bos, eos, unk;
  const std::filesystem::path config = std::filesystem::path(path).parent_path() / "tokenizer_config.json";
  std::error_code ec;
  if (std::filesystem::is_regular_file(config, ec)) {
    const nlohmann::json c = read_json_file(config.string(), "tokenizer_config.json", size_t(64) << 20);
    bos = named_special(json_member(c, "bos_token"), pieces, "tokenizer_config.json: bos_token", bad);
    eos = named_special(json_member(c, "eos_token"), pieces, "tokenizer_config.json: eos_token", bad);
  } else {
    const nlohmann::json& single = json_member(json_member(j, "post_processor"), "single");
    if (single.is_array() && !single.empty()) {
      const nlohmann::json& first = json_member(json_member(single[0], "SpecialToken"), "id");
      if (!first.is_null()) bos = named_special(first, pieces, "post_processor: the first token", bad);
    }
    for (const Piece& p : pieces)
      if (p.text == "</s>" && p.kind == kControl) eos = p.text;
  }
  for (const Piece& p : pieces)
    if (p.kind == kUnknown) unk = p.text;

  ProtoWriter model;
  for (const Piece& p : pieces)
    model.text(kPieces, ProtoWriter().text(kPieceText, p.text).real(kPieceScore, p.score).number(kPieceKind, p.kind).bytes());
  model.text(kTrainerSpec, ProtoWriter()
                               .number(kModelType, type == "BPE" ? kBpeType : kUnigramType)
                               .number(kVocabSize, int64_t(pieces.size()))
                               .number(kByteFallback, 1)
                               .text(kUnkPiece, unk)
                               .text(kBosPiece, bos)
                               .text(kEosPiece, eos)
                               .bytes());
  model.text(kNormalizerSpec, ProtoWriter().text(kRuleName, "identity").number(kRemoveExtraWhitespaces, 0).bytes());
  return model.bytes();
}

}  // namespace tt
