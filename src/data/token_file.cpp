#include "data/token_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/error.h"
#include "core/files.h"
#include "core/json_input.h"

namespace tt {

namespace {

[[noreturn]] void bad(const std::string& flag, const std::string& path, const std::string& what) {
  usage_fail(flag + ": '" + path + "' " + what);
}

std::string hex(uint64_t h) {
  char s[17];
  std::snprintf(s, sizeof s, "%016llx", static_cast<unsigned long long>(h));
  return s;
}

// A shard of tokenize against its directory's manifest: listed, with its count and hash. Returns
// what is wrong ("" when nothing).
std::string check_against_manifest(const std::string& path, int64_t count, uint64_t hash, const std::string& flag) {
  const std::filesystem::path shard(path), dir = shard.has_parent_path() ? shard.parent_path() : ".";
  const std::string manifest = (dir / kShardManifest).string();
  std::error_code ec;
  if (!std::filesystem::exists(manifest, ec))
    return "was written by a tokenize run that did not finish (a full disk, a kill): its directory has no " +
           std::string(kShardManifest) + ", which tokenize writes after its last shard; tokenize again";
  const nlohmann::json m = read_json_file(manifest, flag, size_t(64) << 20);
  const nlohmann::json& shards = json_member(m, "shards");
  if (shards.is_array())
    for (const nlohmann::json& s : shards) {
      if (json_member(s, "file") != shard.filename().string()) continue;
      if (json_member(s, "tokens") != count || json_member(s, "hash") != hex(hash))
        return "has changed since tokenize wrote it: " + std::to_string(count) + " tokens of hash " + hex(hash) + ", where " +
               manifest + " records " + json_brief(json_member(s, "tokens")) + " of hash " + json_brief(json_member(s, "hash"));
      return "";
    }
  return "is not listed in " + manifest + ": a shard of another tokenize run, or renamed";
}

}  // namespace

void TokenHash::mix(uint64_t word) {
  h_ = (h_ ^ word) * 0xff51afd7ed558ccdull;  // odd: one-to-one
  h_ ^= h_ >> 32;                            // one-to-one
}

void TokenHash::add(const void* bytes, size_t n) {
  const auto* p = static_cast<const unsigned char*>(bytes);
  total_ += n;
  while (n > 0 && tail_n_ > 0 && tail_n_ < 8) tail_[tail_n_++] = *p++, --n;  // complete a word begun before
  if (tail_n_ == 8) {
    uint64_t w;
    std::memcpy(&w, tail_, 8);
    mix(w);
    tail_n_ = 0;
  }
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    mix(w);
  }
  while (n > 0) tail_[tail_n_++] = *p++, --n;
}

uint64_t TokenHash::value() const {
  TokenHash h = *this;
  uint64_t w = 0;
  std::memcpy(&w, h.tail_, h.tail_n_);
  h.mix(w);
  h.mix(total_);
  return h.h_;
}

namespace {

uint64_t hash_of(const std::string& bytes) {
  TokenHash h;
  h.add(bytes.data(), bytes.size());
  return h.value();
}

}  // namespace

void write_shard_manifest(const std::string& dir, const std::vector<ShardRecord>& shards, const std::string& tokenizer,
                          const TokenizerFiles& tokenizer_files) {
  nlohmann::json list = nlohmann::json::array(), files = nlohmann::json::array();
  for (const ShardRecord& s : shards) list.push_back({{"file", s.file}, {"tokens", s.tokens}, {"hash", hex(s.hash)}});
  for (const auto& [name, bytes] : tokenizer_files.files)
    files.push_back({{"file", name}, {"bytes", bytes.size()}, {"hash", hex(hash_of(bytes))}});
  const nlohmann::json m = {{"written_by", "tiny_llama tokenize"}, {"tokenizer", tokenizer},
                            {"tokenizer_kind", tokenizer_kind_name(tokenizer_files.kind)}, {"tokenizer_files", files},
                            {"shards", list}};
  write_file_atomic((std::filesystem::path(dir) / kShardManifest).string(), [&](std::ostream& out) { out << m.dump(1) << "\n"; });
}

std::optional<TokenizerFiles> recorded_tokenizer(const std::string& dir, const std::string& flag) {
  const std::string manifest = (std::filesystem::path(dir) / kShardManifest).string();
  std::error_code ec;
  if (!std::filesystem::exists(manifest, ec)) return std::nullopt;
  const nlohmann::json m = read_json_file(manifest, flag, size_t(64) << 20);
  const nlohmann::json& kind = json_member(m, "tokenizer_kind");
  if (kind.is_null()) return std::nullopt;  // written before tokenize recorded its tokenizer
  TokenizerFiles f;
  if (!kind.is_string() || !tokenizer_kind_named(kind.get<std::string>(), &f.kind))
    bad(flag, manifest, "has a tokenizer_kind that names no tokenizer this build reads (" + json_brief(kind) + ")");
  const nlohmann::json& listed = json_member(m, "tokenizer_files");
  if (!listed.is_array()) bad(flag, manifest, "has no list of tokenizer_files");
  // Only the kind's own names are read, in the manifest's directory: never a path it names.
  for (const TokenizerFileName& name : tokenizer_file_names(f.kind)) {
    const nlohmann::json* entry = nullptr;
    for (const nlohmann::json& e : listed)
      if (json_member(e, "file") == name.name) entry = &e;
    if (!entry) {
      if (name.required) bad(flag, manifest, "lists no " + name.name + " of its " + kind.get<std::string>() + " tokenizer");
      continue;
    }
    const std::string path = (std::filesystem::path(dir) / name.name).string();
    std::string bytes = read_input_file(path, flag, size_t(256) << 20);
    if (json_member(*entry, "bytes") != bytes.size() || json_member(*entry, "hash") != hex(hash_of(bytes)))
      bad(flag, path, "has changed since tokenize copied it beside the shards: " + std::to_string(bytes.size()) +
                          " bytes of hash " + hex(hash_of(bytes)) + ", where " + manifest + " records " +
                          json_brief(json_member(*entry, "bytes")) + " of hash " + json_brief(json_member(*entry, "hash")));
    f.files.emplace_back(name.name, std::move(bytes));
  }
  if (listed.size() != f.files.size()) bad(flag, manifest, "lists tokenizer_files that are not its tokenizer's");
  return f;
}

TokenFile::TokenFile(const std::string& path, int vocab, const std::string& flag) : path_(path), vocab_(vocab) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd_ < 0) bad(flag, path, "cannot be read: " + std::string(std::strerror(errno)));
  const auto fail_here = [&](const std::string& what) {
    ::close(fd_);
    fd_ = -1;
    bad(flag, path, what);
  };
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) fail_here("is not a regular file");
  bytes_ = uint64_t(st.st_size);
  if (bytes_ < uint64_t(kTokenFileHeaderBytes)) fail_here("is not a token file (shorter than its 1024-byte header)");
  int32_t header[kTokenFileHeaderInts];
  if (!read_bytes(0, sizeof header, header)) fail_here("cannot be read");
  if (header[0] != kTokenFileMagic && header[0] != kWideTokenFileMagic)
    fail_here("is not a token file (no magic 20240520 or 20240801 at its start)");
  version_ = header[1];
  if (header[0] == kTokenFileMagic ? version_ != 1 && version_ != 2 : version_ != 7)
    fail_here("has token-file version " + std::to_string(version_) + " of magic " + std::to_string(header[0]) +
              " (this build reads 20240520 version 1: uint16, 2: uint32; 20240801 version 7: uint32)");
  if (header[2] < 0) fail_here("has a negative token count");
  count_ = header[2];
  const bool tokenize_shard = header[3] == kTokenizeShardMark;
  TokenHash hash;
  const uint64_t width = version_ == 1 ? 2 : 4, expected = uint64_t(kTokenFileHeaderBytes) + uint64_t(count_) * width;
  if (bytes_ != expected)
    fail_here("holds " + std::to_string(bytes_) + " bytes where its header's " + std::to_string(count_) +
              " tokens make " + std::to_string(expected) + (bytes_ < expected ? " (truncated?)" : ""));
  // Every token against the vocabulary, a chunk at a time.
  std::vector<int32_t> chunk(size_t(1) << 18);
  for (int64_t at = 0; at < count_; at += int64_t(chunk.size())) {
    const int64_t n = std::min<int64_t>(int64_t(chunk.size()), count_ - at);
    if (!read_bytes(uint64_t(kTokenFileHeaderBytes) + uint64_t(at) * width, size_t(n) * width, chunk.data()))
      fail_here("cannot be read");
    if (tokenize_shard) hash.add(chunk.data(), size_t(n) * width);
    for (int64_t i = 0; i < n; ++i) {
      const uint32_t t = version_ == 1 ? reinterpret_cast<const uint16_t*>(chunk.data())[i] : uint32_t(chunk[size_t(i)]);
      if (t >= uint32_t(vocab))
        fail_here("has token " + std::to_string(t) + " at position " + std::to_string(at + i) +
                  ", outside the vocabulary of " + std::to_string(vocab) + " (--vocab-size)");
    }
  }
  if (tokenize_shard) {
    const std::string wrong = check_against_manifest(path, count_, hash.value(), flag);
    if (!wrong.empty()) fail_here(wrong);
  }
}

TokenFile::~TokenFile() {
  if (fd_ >= 0) ::close(fd_);
}

bool TokenFile::read_bytes(uint64_t offset, size_t n, void* out) const {
  char* p = static_cast<char*>(out);
  while (n > 0) {
    const ssize_t k = ::pread(fd_, p, n, off_t(offset));
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k, offset += uint64_t(k), n -= size_t(k);
  }
  return true;
}

void TokenFile::read(int64_t first, int64_t n, int32_t* out) const {
  TT_CHECK(first >= 0 && n >= 0 && first + n <= count_, "TokenFile::read: outside the file");
  const uint64_t width = version_ == 1 ? 2 : 4;
  std::vector<uint16_t> narrow(version_ == 1 ? size_t(n) : 0);
  void* into = version_ == 1 ? static_cast<void*>(narrow.data()) : static_cast<void*>(out);
  if (!read_bytes(uint64_t(kTokenFileHeaderBytes) + uint64_t(first) * width, size_t(n) * width, into))
    fail("--data: '" + path_ + "' changed while training: it is shorter than when it was opened (" +
         std::to_string(bytes_) + " bytes)");
  for (int64_t i = 0; i < n; ++i) {
    if (version_ == 1) out[i] = int32_t(narrow[size_t(i)]);
    if (uint32_t(out[i]) >= uint32_t(vocab_))
      fail("--data: '" + path_ + "' changed while training: token " + std::to_string(uint32_t(out[i])) +
           " at position " + std::to_string(first + i) + " is outside the vocabulary of " + std::to_string(vocab_));
  }
}

uint64_t TokenFile::fingerprint() const {
  uint64_t h = 0xcbf29ce484222325ull;
  auto add = [&](uint64_t offset, size_t n) {
    std::vector<unsigned char> b(n);
    if (!read_bytes(offset, n, b.data())) fail("--data: '" + path_ + "' changed while training: it is shorter");
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ull;
  };
  const size_t body = size_t(bytes_) - size_t(kTokenFileHeaderBytes), edge = std::min<size_t>(body, 4096);
  add(0, size_t(kTokenFileHeaderBytes));
  add(uint64_t(kTokenFileHeaderBytes), edge);
  add(bytes_ - edge, edge);
  for (int k = 1; k < kSamples; ++k)  // and blocks spread through the middle
    add(uint64_t(kTokenFileHeaderBytes) + uint64_t(body - edge) * uint64_t(k) / kSamples, edge);
  return h;
}

bool is_token_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  std::ifstream in(path, std::ios::binary);
  int32_t magic = 0;
  return in.read(reinterpret_cast<char*>(&magic), 4) && (magic == kTokenFileMagic || magic == kWideTokenFileMagic);
}

void write_token_file(const std::string& path, const std::vector<int32_t>& tokens) {
  TT_CHECK(tokens.size() <= size_t(INT32_MAX), "write_token_file: more tokens than a header can count");
  const bool narrow = std::all_of(tokens.begin(), tokens.end(), [](int32_t t) { return t >= 0 && t < 65536; });
  int32_t header[kTokenFileHeaderInts] = {};
  header[0] = narrow ? kTokenFileMagic : kWideTokenFileMagic;
  header[1] = narrow ? 1 : 7;
  header[2] = int32_t(tokens.size());
  write_file_atomic(path, [&](std::ostream& out) {
    out.write(reinterpret_cast<const char*>(header), sizeof header);
    if (narrow) {
      std::vector<uint16_t> t(tokens.begin(), tokens.end());
      out.write(reinterpret_cast<const char*>(t.data()), std::streamsize(t.size() * 2));
    } else {
      out.write(reinterpret_cast<const char*>(tokens.data()), std::streamsize(tokens.size() * 4));
    }
  });
}

TokenFileWriter::TokenFileWriter(const std::string& path, bool wide, bool tokenize_shard)
    : path_(path), tmp_(path + ".tmp." + std::to_string(::getpid())), wide_(wide), tokenize_shard_(tokenize_shard) {
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("cannot write '" + tmp_ + "': " + std::strerror(errno));
  const std::vector<char> header(size_t(kTokenFileHeaderBytes), 0);  // the count goes in at finish()
  write_whole(fd_, header.data(), header.size(), tmp_, 0);
}

TokenFileWriter::~TokenFileWriter() {
  if (fd_ < 0) return;
  ::close(fd_);
  ::unlink(tmp_.c_str());
}

void TokenFileWriter::append_raw(const void* tokens, int64_t n) {
  TT_CHECK(fd_ >= 0 && count_ + n <= INT32_MAX, "TokenFileWriter: finished, or more tokens than a header can count");
  const int64_t width = wide_ ? 4 : 2;
  write_whole(fd_, tokens, size_t(n * width), tmp_, kTokenFileHeaderBytes + count_ * width);
  hash_.add(tokens, size_t(n * width));
  count_ += n;
}

void TokenFileWriter::finish() {
  const int32_t header[4] = {wide_ ? kWideTokenFileMagic : kTokenFileMagic, wide_ ? 7 : 1, int32_t(count_),
                             tokenize_shard_ ? kTokenizeShardMark : 0};
  const bool ok = ::pwrite(fd_, header, sizeof header, 0) == ssize_t(sizeof header) && ::fsync(fd_) == 0;
  ::close(fd_);
  fd_ = -1;
  if (!ok || std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    ::unlink(tmp_.c_str());
    fail("cannot write '" + path_ + "': " + std::strerror(errno));
  }
}

}  // namespace tt
