// Token files: the format llm.c's and nanoGPT-style pipelines write, so that their shards train
// here and ours there. A header of 256 little-endian int32: [0] the magic 20240520, [1] the
// version, [2] the number of tokens; then the tokens, and nothing after them:
//   version 1: uint16 tokens (vocabularies up to 65536), as llm.c writes GPT-2's;
//   version 2: uint32 tokens, this project's variant for larger vocabularies.
// Files are read where a window needs them (pread), never whole; opening one checks the header,
// the length and every token against the vocabulary, so that bad data is refused before
// training, with the file and the position. A file that changes while a run reads it (truncated,
// rewritten) is named in an error, never a crash: no memory map, whose pages past a truncation
// would kill the process with SIGBUS.
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
  // Tokens [first, first + n) into out. Error naming the file when it has changed since it was
  // opened (shorter, or a token outside the vocabulary).
  void read(int64_t first, int64_t n, int32_t* out) const;
  // FNV-1a of the header, of up to the first and last 4 KB of tokens and of 4 KB at 63 places
  // between them: a cheap identity of the contents (a few hundred KB read, whatever the size).
  uint64_t fingerprint() const;
  static constexpr int kSamples = 64;

 private:
  std::string path_;
  // Bytes [offset, offset + n) of the file, or false when it has fewer now.
  bool read_bytes(uint64_t offset, size_t n, void* out) const;
  int version_ = 0;
  int64_t count_ = 0;
  uint64_t bytes_ = 0;
  int vocab_ = 0;
  int fd_ = -1;
};

// Whether the file at `path` starts with the token files' magic (false when it cannot be read).
bool is_token_file(const std::string& path);

// Writes `tokens` as a token file, whole or not at all: version 1 when every token fits in
// 16 bits, else version 2.
void write_token_file(const std::string& path, const std::vector<int32_t>& tokens);

// A token file written a piece at a time, in constant memory: into a temporary file beside
// `path`, renamed to it by finish() once the header holds the count (whole or not at all: a
// writer destroyed before finish() removes its temporary file). Version 1 (uint16) or, wide,
// version 2 (uint32); append_raw takes tokens already in that width.
class TokenFileWriter {
 public:
  TokenFileWriter(const std::string& path, bool wide);
  ~TokenFileWriter();
  TokenFileWriter(const TokenFileWriter&) = delete;
  TokenFileWriter& operator=(const TokenFileWriter&) = delete;
  void append_raw(const void* tokens, int64_t n);
  int64_t size() const { return count_; }
  void finish();

 private:
  std::string path_, tmp_;
  bool wide_;
  int fd_ = -1;
  int64_t count_ = 0;
};

}  // namespace tt
