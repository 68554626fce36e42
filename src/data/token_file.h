// Token files: the format llm.c's and nanoGPT-style pipelines write, so that their shards train
// here and ours there. A header of 256 little-endian int32: [0] the magic 20240520, [1] the
// version, [2] the number of tokens; then the tokens, and nothing after them:
//   version 1: uint16 tokens (vocabularies up to 65536), as llm.c writes GPT-2's;
//   version 2: uint32 tokens, this project's variant for larger vocabularies.
// Files are memory-mapped and read where a window needs them, never whole; opening one checks
// the header, the length and every token against the vocabulary, so that bad data is refused
// before training, with the file and the position.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace tt {

constexpr int32_t kTokenFileMagic = 20240520;
constexpr int kTokenFileHeaderInts = 256;
constexpr int64_t kTokenFileHeaderBytes = kTokenFileHeaderInts * 4;

class TokenFile {
 public:
  // Throws UsageError naming `flag` and the file: not a regular file, unreadable, not a token
  // file, an unknown version, a length other than its count says, or a token >= vocab.
  TokenFile(const std::string& path, int vocab, const std::string& flag);
  ~TokenFile();
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;

  const std::string& path() const { return path_; }
  int version() const { return version_; }
  int64_t size() const { return count_; }  // tokens
  int32_t at(int64_t i) const {
    return version_ == 1 ? int32_t(static_cast<const uint16_t*>(tokens_)[i])
                         : int32_t(static_cast<const uint32_t*>(tokens_)[i]);
  }
  // FNV-1a of the header and of up to the first and last 4 KB of tokens: a cheap identity.
  uint64_t fingerprint() const;

 private:
  std::string path_;
  int version_ = 0;
  int64_t count_ = 0;
  size_t mapped_bytes_ = 0;
  void* map_ = nullptr;
  const void* tokens_ = nullptr;
};

// Whether the file at `path` starts with the token files' magic (false when it cannot be read).
bool is_token_file(const std::string& path);

// Writes `tokens` as a token file, whole or not at all: version 1 when every token fits in
// 16 bits, else version 2.
void write_token_file(const std::string& path, const std::vector<int32_t>& tokens);

}  // namespace tt
