// A per-thread cache of words' token ids, for the tokenizers that encode text a word at a time
// (the words of a corpus repeat: tokenize runs several times faster). A thread's cache holds the
// words of one tokenizer, named by an id of its own (a later tokenizer could stand at a freed
// one's address), up to a million of them, and none longer than 64 bytes (a long word, a run of
// punctuation or a line of base64, rarely comes again).
#pragma once
#include <atomic>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace tt {

inline uint64_t new_tokenizer_id() {
  static std::atomic<uint64_t> counter{0};
  return ++counter;
}

// Appends the ids of `word` for tokenizer `owner` to `ids`: encode(word) the first time, then
// from the cache.
template <class Encode>
void append_word(uint64_t owner, const std::string& word, Encode encode, std::vector<int32_t>& ids) {
  if (word.size() > 64) {
    const std::vector<int32_t> w = encode(word);
    ids.insert(ids.end(), w.begin(), w.end());
    return;
  }
  thread_local std::unordered_map<std::string, std::vector<int32_t>> cache;
  thread_local uint64_t cached_owner = 0;
  if (cached_owner != owner || cache.size() > (size_t(1) << 20)) cache.clear(), cached_owner = owner;
  auto it = cache.find(word);
  if (it == cache.end()) it = cache.emplace(word, encode(word)).first;
  ids.insert(ids.end(), it->second.begin(), it->second.end());
}

}  // namespace tt
