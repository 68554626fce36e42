#include "data/bpe_tokenizer.h"

#include <climits>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <queue>
#include <unordered_map>

#include "core/error.h"
#include "core/files.h"
#include "core/json_input.h"
#include "data/added_tokens.h"
#include "data/unicode_classes.h"
#include "data/word_cache.h"

namespace tt {

namespace {

using json = nlohmann::json;

constexpr int64_t kMaxTokens = int64_t(1) << 24;  // ids beyond any vocabulary (LLaMA-3's is 128,256)

bool is_other(char32_t c) { return !is_space(c) && !is_letter(c) && !is_number(c); }  // [^\s\p{L}\p{N}]
bool is_newline(char32_t c) { return c == '\r' || c == '\n'; }

// The end of the word that starts at character i of `c` (n characters) under the pattern: the
// regular expression's alternatives in their order, the first that matches taken (as a
// backtracking engine does), each written out.
size_t word_end(const std::vector<char32_t>& c, size_t i, WordPattern pattern) {
  const size_t n = c.size();
  const auto run = [&](size_t j, bool (*in)(char32_t)) {
    while (j < n && in(c[j])) ++j;
    return j;
  };
  // 's 't 're 've 'm 'll 'd (LLaMA-3: any case; U+017F, the long s, folds to s)
  if (c[i] == '\'' && i + 1 < n) {
    const bool fold = pattern == WordPattern::Llama3;
    const auto lower = [&](char32_t x) -> char32_t {
      if (!fold) return x;
      return x >= 'A' && x <= 'Z' ? x + 32 : x == 0x17F ? 's' : x;
    };
    const char32_t a = lower(c[i + 1]), b = i + 2 < n ? lower(c[i + 2]) : 0;
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
  }
  if (pattern == WordPattern::Gpt2) {  // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`
    const size_t at = c[i] == ' ' && i + 1 < n ? i + 1 : i;
    if (is_letter(c[at])) return run(at, is_letter);
    if (is_number(c[at])) return run(at, is_number);
    if (is_other(c[at])) return run(at, is_other);
  } else {
    // `[^\r\n\p{L}\p{N}]?\p{L}+`
    if (!is_newline(c[i]) && !is_letter(c[i]) && !is_number(c[i]) && i + 1 < n && is_letter(c[i + 1]))
      return run(i + 1, is_letter);
    if (is_letter(c[i])) return run(i, is_letter);
    // `\p{N}{1,3}`
    if (is_number(c[i])) {
      size_t j = i;
      while (j < n && j - i < 3 && is_number(c[j])) ++j;
      return j;
    }
    // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
    const size_t at = c[i] == ' ' && i + 1 < n && is_other(c[i + 1]) ? i + 1 : i;
    if (is_other(c[at])) return run(run(at, is_other), is_newline);
    // `\s*[\r\n]+`: the spaces up to the last line break among them
    const size_t spaces = run(i, is_space);
    for (size_t j = spaces; j > i; --j)
      if (is_newline(c[j - 1])) return j;
  }
  // c[i] is a space. `\s+(?!\S)`: the spaces but the last, which goes with the word after them
  // (all of them at the end of the text); a single one is `\s+`.
  const size_t spaces = run(i, is_space);
  return spaces == n || spaces - i == 1 ? spaces : spaces - 1;
}

// The raw bytes a byte-level token stands for (false: a character that is no byte's).
bool bytes_of(const std::string& token, const std::unordered_map<char32_t, uint8_t>& byte_of, std::string& out) {
  out.clear();
  for (size_t at = 0; at < token.size();) {
    const auto [c, len] = next_char(token, at);
    const auto it = byte_of.find(c);
    if (it == byte_of.end()) return false;
    out.push_back(char(it->second));
    at += len;
  }
  return true;
}

class ByteLevelBpe final : public Tokenizer {
 public:
  ByteLevelBpe(const json& j, const std::string& path, const std::string& flag) : path_(path) {
    const auto bad = [&](const std::string& what) -> void {
      usage_fail(flag + ": '" + path + "': " + what);
    };
    if (!json_member(j, "model").is_object()) bad("no \"model\": not a tokenizer.json");
    const json& m = j["model"];
    const auto field = [](const json& o, const char* key) -> const json& { return json_member(o, key); };
    if (field(m, "type") != "BPE") bad("model.type is " + json_brief(field(m, "type")) + ": only BPE models are read");
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
      if (!field(m, key).is_null() && field(m, key) != "") bad(std::string("model.") + key + " is not read");
    if (!field(m, "dropout").is_null() && field(m, "dropout") != 0) bad("model.dropout: BPE dropout is not read");
    ignore_merges_ = field(m, "ignore_merges") == true;
    read_pre_tokenizer(field(j, "pre_tokenizer"), bad);
    if (field(field(j, "decoder"), "type") != "ByteLevel")
      bad("decoder " + json_brief(field(field(j, "decoder"), "type")) + ": only the ByteLevel decoder is read");

    // The vocabulary, as raw bytes; every byte must be a token (then every text has an encoding).
    const std::vector<std::string> chars = byte_characters();
    std::unordered_map<char32_t, uint8_t> byte_of;
    for (int b = 0; b < 256; ++b) byte_of[next_char(chars[size_t(b)], 0).first] = uint8_t(b);
    if (!field(m, "vocab").is_object() || field(m, "vocab").empty()) bad("model.vocab is not a map of tokens to ids");
    // Ids lie below twice the file's tokens and 1024 (the token table has an entry for each id up
    // to the largest: an id of 16777215 in a file of 260 tokens made a vocabulary of 16 M).
    const json& added = json_member(j, "added_tokens");
    const int64_t id_limit = std::min<int64_t>(kMaxTokens, 2 * int64_t(m["vocab"].size() + added.size()) + 1024);
    const std::string below = " is not a token id below " + std::to_string(id_limit) + " (twice the file's tokens and 1024)";
    std::string raw;
    for (const auto& [token, id] : m["vocab"].items()) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= id_limit)
        bad("model.vocab: the id of " + json_brief(token) + ", " + json_brief(id) + "," + below);
      if (!bytes_of(token, byte_of, raw)) bad("model.vocab: '" + token + "' is not a byte-level token");
      add_token(id.get<int>(), raw, bad);
      ids_.emplace(raw, id.get<int>());
    }
    for (int b = 0; b < 256; ++b) {
      const auto it = ids_.find(std::string(1, char(b)));
      if (it == ids_.end()) bad("model.vocab has no token for the byte " + std::to_string(b) + " ('" + chars[size_t(b)] + "')");
      byte_ids_[size_t(b)] = it->second;
    }
    // Merges, "left right" (older files) or ["left", "right"]: rank by order; a merge listed
    // twice ranks by its last copy, as in the library (its map of merges keeps the last).
    if (!field(m, "merges").is_array()) bad("model.merges is not a list");
    int rank = 0;
    for (const json& merge : m["merges"]) {
      std::string left, right;
      if (!merge_sides(merge, left, right))
        bad("model.merges: " + (merge.is_string() ? "'" + merge.get<std::string>() + "'" : json_brief(merge)) + " is not a pair");
      std::string l, r;
      if (!bytes_of(left, byte_of, l) || !bytes_of(right, byte_of, r) || !ids_.count(l) || !ids_.count(r) ||
          !ids_.count(l + r))
        bad("model.merges: '" + left + " " + right + "' merges tokens that are not in the vocabulary");
      merges_[pair_key(ids_[l], ids_[r])] = {rank++, ids_[l + r]};
    }
    read_added_tokens(j, byte_of, bad);
    read_bos_eos(j, bad);
  }

  std::string describe() const override {
    return "byte-level BPE " + path_ + " (vocabulary " + std::to_string(vocab_size()) + ")";
  }
  TokenizerKind kind() const override { return TokenizerKind::ByteLevelBpe; }
  std::string path() const override { return path_; }
  int vocab_size() const override { return int(tokens_.size()); }
  int bos() const override { return bos_; }
  int eos() const override { return eos_; }

  // The added tokens that are not special, then each piece of text between them on its own: its
  // words by the pattern, each word's merges. The prefix space goes in front of the piece, or,
  // after a Split, in front of each of its words (each a piece of the Split), where there is none.
  std::vector<int32_t> encode(const std::string& text) const override {
    std::vector<int32_t> ids;
    const auto prefixed = [&](std::string s) { return add_prefix_space_ && s[0] != ' ' ? " " + s : s; };
    for (const TextPiece& piece : added_tokens_->split(text)) {
      if (piece.id >= 0) {
        ids.push_back(piece.id);
        continue;
      }
      if (piece.begin == piece.end) continue;
      std::string body = text.substr(piece.begin, piece.end - piece.begin);
      if (!split_first_) body = prefixed(body);
      for (const auto& [begin, end] : split_words(body, pattern_)) {
        const std::string word = body.substr(begin, end - begin);
        append_word(cache_id_, split_first_ ? prefixed(word) : word, [&](const std::string& w) { return encode_word(w); },
                    ids);
      }
    }
    return ids;
  }

  std::string special_name(int id) const override { return decode({id}); }
  std::string decode(const std::vector<int32_t>& ids) const override {
    std::string text;
    for (int32_t id : ids) {
      if (id < 0 || id >= vocab_size() || !known_[size_t(id)])
        fail("the tokenizer has no token " + std::to_string(id) + " (" + path_ + ")");
      text += tokens_[size_t(id)];
    }
    return text;
  }

 private:
  static uint64_t pair_key(int left, int right) { return (uint64_t(uint32_t(left)) << 32) | uint32_t(right); }

  template <class Bad>
  void add_token(int id, const std::string& text, Bad bad) {
    if (size_t(id) >= tokens_.size()) tokens_.resize(size_t(id) + 1), known_.resize(size_t(id) + 1);
    if (known_[size_t(id)] && tokens_[size_t(id)] != text) bad("two tokens have the id " + std::to_string(id));
    tokens_[size_t(id)] = text, known_[size_t(id)] = true;
  }

  // ByteLevel with its own (GPT-2's) pattern, or a Sequence of a Split by a known pattern
  // ("Isolated") and a ByteLevel without one (whose prefix space then goes on each word).
  template <class Bad>
  void read_pre_tokenizer(const json& p, Bad bad) {
    static const std::string kGpt2 = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
    static const std::string kLlama3 =
        R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
    const auto type = [](const json& o) -> const json& { return json_member(o, "type"); };
    const auto byte_level = [&](const json& o, bool regex) {
      if (type(o) != "ByteLevel") return false;
      if ((o.contains("use_regex") ? o["use_regex"] == true : true) != regex)
        bad(std::string("pre_tokenizer: a ByteLevel ") + (regex ? "without" : "with") + " its pattern here is not read");
      add_prefix_space_ = o.contains("add_prefix_space") && o["add_prefix_space"] == true;
      return true;
    };
    if (json_member(p, "use_regex") == false && byte_level(p, false)) {
      pattern_ = WordPattern::Whole;
      return;
    }
    if (byte_level(p, true)) {
      pattern_ = WordPattern::Gpt2;
      return;
    }
    if (type(p) == "Sequence" && json_member(p, "pretokenizers").is_array() && p["pretokenizers"].size() == 2) {
      const json& split = p["pretokenizers"][0];
      const json& regex_field = json_member(json_member(split, "pattern"), "Regex");
      if (type(split) == "Split" && !regex_field.is_null() && json_member(split, "behavior") == "Isolated" &&
          json_member(split, "invert") != true && byte_level(p["pretokenizers"][1], false)) {
        const std::string regex = regex_field.is_string() ? regex_field.get<std::string>() : "";
        if (regex == kGpt2 || regex == kLlama3) {
          pattern_ = regex == kGpt2 ? WordPattern::Gpt2 : WordPattern::Llama3;
          split_first_ = true;
          return;
        }
        bad("pre_tokenizer: the Split pattern " + json_brief(regex_field) + " is neither GPT-2's nor LLaMA-3's");
      }
    }
    bad("pre_tokenizer " + json_brief(type(p)) + ": only a byte-level one, GPT-2's or LLaMA-3's, is read");
  }

  // The added tokens (special ones too: their text, for decode and BOS and EOS; they may lie past
  // the model's vocabulary). The library gives each its id by itself, whatever the file says: the
  // model's id of a token spelt the same, else the next after the model's vocabulary, in order;
  // a file whose ids are not those is refused, as one with a field this does not do.
  template <class Bad>
  void read_added_tokens(const json& j, const std::unordered_map<char32_t, uint8_t>& byte_of, Bad bad) {
    const json& list = j.contains("added_tokens") ? j["added_tokens"] : json::array();
    if (!list.is_array()) bad("added_tokens is not a list");
    const json& vocab = j["model"]["vocab"];
    int64_t next_id = int64_t(vocab.size());
    std::vector<AddedToken> tokens;
    for (const json& t : list) {
      AddedToken a;
      const auto flag = [&](const char* key) {
        if (!t.is_object() || !t.contains(key) || !t[key].is_boolean())
          bad("added_tokens: " + json_brief(t) + " has no \"" + key + "\" (true or false)");
        return t[key].get<bool>();
      };
      if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() || !t.contains("content") ||
          !t["content"].is_string())
        bad("added_tokens: " + json_brief(t) + " has no id and content");
      a.content = t["content"].get<std::string>();
      a.special = flag("special"), a.lstrip = flag("lstrip"), a.rstrip = flag("rstrip"), a.normalized = flag("normalized");
      if (flag("single_word") && !a.special)
        bad("added_tokens: '" + a.content + "' has single_word true, which is not read");
      if (a.content.empty()) continue;  // the library leaves it out
      if (added_.count(a.content)) bad("added_tokens: '" + a.content + "' is listed twice");
      const auto in_vocab = vocab.find(a.content);
      const int64_t id = in_vocab != vocab.end() ? in_vocab->get<int64_t>() : next_id++;
      if (t["id"].get<int64_t>() != id)
        bad("added_tokens: '" + a.content + "' has id " + json_brief(t["id"]) + ", where the tokenizers library gives it " +
            std::to_string(id));
      if (id >= kMaxTokens) bad("added_tokens: id " + std::to_string(id) + " is not a token id below 16777216");
      a.id = int(id);
      std::string text;  // what the ByteLevel decoder makes of it: its bytes, or itself if it is not byte-level
      add_token(a.id, bytes_of(a.content, byte_of, text) ? text : a.content, bad);
      added_.emplace(a.content, a.id);
      tokens.push_back(a);
    }
    added_tokens_ = std::make_unique<AddedTokens>(tokens);
  }

  // bos_token and eos_token of tokenizer_config.json beside the file, else the file's own.
  template <class Bad>
  void read_bos_eos(const json& j, Bad bad) {
    const auto id_of = [&](const json& token) {
      const json& content = token.is_object() ? json_member(token, "content") : token;
      if (!content.is_string()) return -1;
      const auto a = added_.find(content.get<std::string>());
      if (a != added_.end()) return a->second;
      const auto v = ids_.find(content.get<std::string>());
      return v == ids_.end() ? -1 : v->second;
    };
    const std::filesystem::path config = std::filesystem::path(path_).parent_path() / "tokenizer_config.json";
    std::error_code ec;
    if (std::filesystem::is_regular_file(config, ec)) {
      // A token named there must be one of the vocabulary (null: none): shards without their EOS
      // are no one's intent.
      const json c = read_json_file(config.string(), "tokenizer_config.json", size_t(64) << 20);
      for (auto [key, id] : {std::pair{"bos_token", &bos_}, {"eos_token", &eos_}}) {
        const json& token = json_member(c, key);
        if (token.is_null()) continue;
        *id = id_of(token);
        const json& text = token.is_object() ? json_member(token, "content") : token;
        if (*id < 0)
          usage_fail("tokenizer_config.json: '" + config.string() + "': " + key + " " + json_brief(token) +
                     (text.is_string() ? " is not a token of the vocabulary of '" + path_ + "'"
                                       : " is neither a token's text nor an object with its \"content\""));
      }
      return;
    }
    const json& post = json_member(j, "post_processor");
    const json& single = json_member(post, "single");
    if (json_member(post, "type") == "TemplateProcessing" && single.is_array() && !single.empty())
      bos_ = id_of(json_member(json_member(single[0], "SpecialToken"), "id"));
    for (const char* name : {"<|endoftext|>", "<|end_of_text|>", "</s>"})
      if (eos_ < 0 && added_.count(name)) eos_ = added_.at(name);
  }

  // A word's ids: its bytes' tokens, merged pair by pair, the lowest rank first (leftmost among
  // equals), until no pair of neighbours merges. The tokens are a linked list and the pairs a
  // heap, so that a long word (a run of punctuation, a line of base64) costs n log n, not n^2:
  // a pair taken from the heap is used only if its two tokens are still neighbours as they were.
  std::vector<int32_t> encode_word(const std::string& word) const {
    if (ignore_merges_) {
      const auto whole = ids_.find(word);
      if (whole != ids_.end()) return {whole->second};
    }
    const size_t n = word.size(), none = SIZE_MAX;  // next[k] == n: the end; prev[k] == none: the start
    std::vector<int32_t> id(n);
    std::vector<size_t> prev(n), next(n);
    std::vector<bool> gone(n, false);  // merged into the token on its left
    for (size_t k = 0; k < n; ++k) id[k] = byte_ids_[uint8_t(word[k])], prev[k] = k == 0 ? none : k - 1, next[k] = k + 1;
    struct Pair {
      int rank;
      size_t left;
      int32_t l, r;
      bool operator>(const Pair& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
    };
    std::priority_queue<Pair, std::vector<Pair>, std::greater<Pair>> heap;
    const auto push = [&](size_t left) {
      if (left == none || next[left] >= n) return;
      const auto it = merges_.find(pair_key(id[left], id[next[left]]));
      if (it != merges_.end()) heap.push({it->second.first, left, id[left], id[next[left]]});
    };
    for (size_t k = 0; k + 1 < n; ++k) push(k);
    while (!heap.empty()) {
      const Pair p = heap.top();
      heap.pop();
      const size_t right = next[p.left];
      if (gone[p.left] || right >= n || id[p.left] != p.l || id[right] != p.r) continue;  // no longer these neighbours
      id[p.left] = merges_.at(pair_key(p.l, p.r)).second;
      gone[right] = true;
      next[p.left] = next[right];
      if (next[right] < n) prev[next[right]] = p.left;
      push(prev[p.left]);
      push(p.left);
    }
    std::vector<int32_t> out;
    for (size_t k = 0; k < n; k = next[k]) out.push_back(id[k]);
    return out;
  }

  std::string path_;
  WordPattern pattern_ = WordPattern::Gpt2;
  bool add_prefix_space_ = false, ignore_merges_ = false;
  bool split_first_ = false;                                  // a Split before the ByteLevel
  std::unordered_map<std::string, int> ids_, added_;          // raw bytes -> id; added token -> id
  std::unique_ptr<AddedTokens> added_tokens_;
  std::unordered_map<uint64_t, std::pair<int, int>> merges_;  // (left, right) -> (rank, merged id)
  int32_t byte_ids_[256] = {};
  std::vector<std::string> tokens_;  // id -> its bytes (a special token: its text)
  std::vector<bool> known_;          // ids a token has (a file may leave gaps)
  int bos_ = -1, eos_ = -1;
  const uint64_t cache_id_ = new_tokenizer_id();
};

}  // namespace

std::vector<std::pair<size_t, size_t>> split_words(const std::string& text, WordPattern pattern) {
  if (pattern == WordPattern::Whole) return text.empty() ? std::vector<std::pair<size_t, size_t>>{} : std::vector{std::pair(size_t(0), text.size())};
  std::vector<char32_t> chars;
  std::vector<size_t> offsets;  // of each character, and the text's end
  for (size_t at = 0; at < text.size();) {
    const auto [c, len] = next_char(text, at);
    chars.push_back(c), offsets.push_back(at);
    at += len;
  }
  offsets.push_back(text.size());
  std::vector<std::pair<size_t, size_t>> words;
  for (size_t i = 0; i < chars.size();) {
    const size_t end = word_end(chars, i, pattern);
    words.emplace_back(offsets[i], offsets[end]);
    i = end;
  }
  return words;
}

bool merge_sides(const nlohmann::json& merge, std::string& left, std::string& right) {
  if (merge.is_string()) {
    const std::string& s = merge.get_ref<const std::string&>();
    const size_t space = s.find(' ');
    if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) return false;
    left = s.substr(0, space), right = s.substr(space + 1);
    return true;
  }
  if (!merge.is_array() || merge.size() != 2 || !merge[0].is_string() || !merge[1].is_string()) return false;
  left = merge[0], right = merge[1];
  return true;
}

std::vector<std::string> byte_characters() {
  std::vector<std::string> out;
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    const int c = printable ? b : next++;
    out.push_back(c < 0x80 ? std::string(1, char(c)) : std::string{char(0xC0 | (c >> 6)), char(0x80 | (c & 0x3F))});
  }
  return out;
}

std::unique_ptr<Tokenizer> load_byte_level_bpe(const nlohmann::json& file, const std::string& path,
                                               const std::string& flag) {
  return std::make_unique<ByteLevelBpe>(file, path, flag);
}

}  // namespace tt
