#include "data/added_tokens.h"

#include <algorithm>

#include "data/unicode_classes.h"

namespace tt {

namespace {

// Where the white space that ends text[begin, at) starts (\s*$).
size_t spaces_before(const std::string& text, size_t begin, size_t at) {
  while (at > begin) {
    size_t start = at - 1;
    while (start > begin && (uint8_t(text[start]) & 0xC0) == 0x80) --start;  // the character's first byte
    const auto [c, len] = next_char(text, start);
    if (start + len != at || !is_space(c)) break;
    at = start;
  }
  return at;
}

// Where the white space that starts text[at, end) ends (^\s*).
size_t spaces_after(const std::string& text, size_t at, size_t end) {
  while (at < end) {
    const auto [c, len] = next_char(text, at);
    if (!is_space(c) || at + len > end) break;
    at += len;
  }
  return at;
}

}  // namespace

void AddedTokens::Trie::add(const std::string& content, int32_t index) {
  first.set(uint8_t(content[0]));
  int32_t node = 0;
  for (const char b : content) {
    const uint64_t key = (uint64_t(node) << 8) | uint8_t(b);
    auto it = next.find(key);
    if (it == next.end()) {
      it = next.emplace(key, int32_t(token.size())).first;
      token.push_back(-1);
    }
    node = it->second;
  }
  token[size_t(node)] = index;
}

AddedTokens::AddedTokens(const std::vector<AddedToken>& tokens) : tokens_(tokens) {
  for (size_t i = 0; i < tokens_.size(); ++i) {
    if (tokens_[i].content.empty()) continue;
    Trie& trie = tokens_[i].normalized ? normalized_ : raw_;
    trie.add(tokens_[i].content, int32_t(i));
    trie.any_taken |= !tokens_[i].special;
  }
}

std::vector<TextPiece> AddedTokens::split(const std::string& text) const {
  std::vector<TextPiece> pieces = {{0, text.size(), -1}};
  for (const Trie* trie : {&raw_, &normalized_}) {
    if (!trie->any_taken) continue;
    std::vector<TextPiece> out;
    for (const TextPiece& p : pieces) {
      if (p.id >= 0) out.push_back(p);
      else find(*trie, text, p.begin, p.end, out);
    }
    pieces.swap(out);
  }
  return pieces;
}

void AddedTokens::find(const Trie& trie, const std::string& text, size_t begin, size_t end,
                       std::vector<TextPiece>& out) const {
  size_t done = begin;  // the end of the last token taken
  for (size_t at = begin; at < end;) {
    if (!trie.first[uint8_t(text[at])]) {
      ++at;
      continue;
    }
    // The longest token that starts here.
    int32_t node = 0, found = -1;
    size_t length = 0;
    for (size_t k = at; k < end; ++k) {
      const auto it = trie.next.find((uint64_t(node) << 8) | uint8_t(text[k]));
      if (it == trie.next.end()) break;
      node = it->second;
      if (trie.token[size_t(node)] >= 0) found = trie.token[size_t(node)], length = k + 1 - at;
    }
    if (found < 0) {
      ++at;
      continue;
    }
    const AddedToken& t = tokens_[size_t(found)];
    size_t start = at, stop = at + length;
    at = stop;  // the search goes on after the token, taken or not
    if (t.special) continue;
    if (t.lstrip) start = std::max(spaces_before(text, begin, start), done);
    if (t.rstrip) stop = spaces_after(text, stop, end);
    if (done < start) out.push_back({done, start, -1});
    out.push_back({start, stop, t.id});
    done = stop;
  }
  if (done < end) out.push_back({done, end, -1});
}

}  // namespace tt
