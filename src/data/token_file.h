// Token files: the format llm.c's and nanoGPT-style pipelines write, so that their shards train
// here and ours there. A header of 256 little-endian int32: [0] the magic, [1] the version, [2]
// the number of tokens; then the tokens, and nothing after them:
//   magic 20240520, version 1: uint16 tokens (vocabularies up to 65536), as llm.c writes GPT-2's
//     and modded-nanogpt's FineWeb shards are;
//   magic 20240801, version 7: uint32 tokens, as llm.c writes LLaMA-3's (written here for
//     vocabularies above 65536);
//   magic 20240520, version 2: uint32 tokens, which this project wrote before (read only).
// Files are read where a window needs them (pread), never whole; opening one checks the header,
// the length and every token against the vocabulary, so that bad data is refused before
// training, with the file and the position. A file that changes while a run reads it (truncated,
// rewritten) is named in an error, never a crash: no memory map, whose pages past a truncation
// would kill the process with SIGBUS.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "data/tokenizer_files.h"

namespace tt {

constexpr int32_t kTokenFileMagic = 20240520;
constexpr int32_t kWideTokenFileMagic = 20240801;  // llm.c's LLaMA-3 shards, version 7
constexpr int kTokenFileHeaderInts = 256;
constexpr int64_t kTokenFileHeaderBytes = kTokenFileHeaderInts * 4;

// The shards `tokenize` writes carry this in header word 3 (llm.c's and nanoGPT's readers read
// words 0 to 2 only): such a shard is complete only where the manifest of its directory, which
// tokenize writes after every shard, lists it with the hash of its tokens. So the shards of a
// run that failed (a full disk) or was killed are refused, and so is a shard changed since.
constexpr int32_t kTokenizeShardMark = 0x544b4e5a;
constexpr const char* kShardManifest = "manifest.json";

// A 64-bit hash of bytes given in any pieces (the tokens of a shard, after its header): each
// 8-byte word mixed in by steps that are one-to-one, so that changing any one word always changes
// the hash. It detects changes, not forgery (it is not cryptographic).
class TokenHash {
 public:
  void add(const void* bytes, size_t n);
  uint64_t value() const;

 private:
  void mix(uint64_t word);
  uint64_t h_ = 0x243f6a8885a308d3ull, total_ = 0;
  unsigned char tail_[8] = {};
  size_t tail_n_ = 0;
};

struct ShardRecord {
  std::string file;  // the name in its directory
  int64_t tokens;
  uint64_t hash;     // TokenHash of its tokens
};
// dir/manifest.json, written whole or not at all: the shards, the tokenizer (its description, its
// kind, and its files, which tokenize copies into dir: their names, sizes and hashes).
void write_shard_manifest(const std::string& dir, const std::vector<ShardRecord>& shards, const std::string& tokenizer,
                          const TokenizerFiles& tokenizer_files);
// The tokenizer dir/manifest.json records, its files read from dir and checked against their
// sizes and hashes; nullopt for a directory without a manifest, or a manifest written before
// tokenize recorded its tokenizer. UsageError naming `flag` for a file changed since, a missing
// one, or a record this build does not read.
std::optional<TokenizerFiles> recorded_tokenizer(const std::string& dir, const std::string& flag);

class TokenFile {
 public:
  // Throws UsageError naming `flag` and the file: not a regular file, unreadable, not a token
  // file, an unknown version, a length other than its count says, a token >= vocab, or a shard
  // of tokenize that its directory's manifest does not list with its tokens' hash.
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

// Writes `tokens` as a token file, whole or not at all: uint16 (20240520, version 1) when every
// token fits in 16 bits, else uint32 (20240801, version 7).
void write_token_file(const std::string& path, const std::vector<int32_t>& tokens);

// A token file written a piece at a time, in constant memory: into a temporary file beside
// `path`, renamed to it by finish() once the header holds the count (whole or not at all: a
// writer destroyed before finish() removes its temporary file). uint16 or, wide, uint32 (as
// write_token_file); append_raw takes tokens already in that width. A shard of tokenize is
// marked so (kTokenizeShardMark), and hash() is then the one its manifest records.
class TokenFileWriter {
 public:
  TokenFileWriter(const std::string& path, bool wide, bool tokenize_shard = false);
  ~TokenFileWriter();
  TokenFileWriter(const TokenFileWriter&) = delete;
  TokenFileWriter& operator=(const TokenFileWriter&) = delete;
  void append_raw(const void* tokens, int64_t n);
  int64_t size() const { return count_; }
  uint64_t hash() const { return hash_.value(); }
  void finish();

 private:
  std::string path_, tmp_;
  bool wide_, tokenize_shard_;
  TokenHash hash_;
  int fd_ = -1;
  int64_t count_ = 0;
};

}  // namespace tt
