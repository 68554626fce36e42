// A per-thread cache of words' token ids, for the tokenizers that encode text a word at a time
// (the words of a corpus repeat: tokenize runs several times faster). A thread's cache holds the
// words of one tokenizer, named by an id of its own (a later tokenizer could stand at a freed
// one's address), and up to a million of them.
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

// The ids of `word` for tokenizer `owner`: encode(word) the first time, then from the cache. The
// reference holds until this thread's next call.
template <class Encode>
const std::vector<int32_t>& cached_word(uint64_t owner, const std::string& word, Encode encode) {
  thread_local std::unordered_map<std::string, std::vector<int32_t>> cache;
  thread_local uint64_t cached_owner = 0;
  if (cached_owner != owner || cache.size() > (size_t(1) << 20)) cache.clear(), cached_owner = owner;
  auto it = cache.find(word);
  if (it == cache.end()) it = cache.emplace(word, encode(word)).first;
  return it->second;
}

}  // namespace tt
