#include "data/token_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>

#include "core/error.h"
#include "core/files.h"

namespace tt {

namespace {

[[noreturn]] void bad(const std::string& flag, const std::string& path, const std::string& what) {
  usage_fail(flag + ": '" + path + "' " + what);
}

}  // namespace

TokenFile::TokenFile(const std::string& path, int vocab, const std::string& flag) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) bad(flag, path, "cannot be read: " + std::string(std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    bad(flag, path, "is not a regular file");
  }
  const uint64_t bytes = uint64_t(st.st_size);
  if (bytes < uint64_t(kTokenFileHeaderBytes)) {
    ::close(fd);
    bad(flag, path, "is not a token file (shorter than its 1024-byte header)");
  }
  map_ = ::mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    bad(flag, path, "cannot be mapped: " + std::string(std::strerror(errno)));
  }
  mapped_bytes_ = bytes;
  int32_t header[kTokenFileHeaderInts];
  std::memcpy(header, map_, sizeof header);
  const auto fail_here = [&](const std::string& what) {
    ::munmap(map_, mapped_bytes_);
    map_ = nullptr;
    bad(flag, path, what);
  };
  if (header[0] != kTokenFileMagic) fail_here("is not a token file (no magic 20240520 at its start)");
  version_ = header[1];
  if (version_ != 1 && version_ != 2)
    fail_here("has token-file version " + std::to_string(version_) + " (this build reads 1: uint16, 2: uint32)");
  if (header[2] < 0) fail_here("has a negative token count");
  count_ = header[2];
  const uint64_t width = version_ == 1 ? 2 : 4, expected = uint64_t(kTokenFileHeaderBytes) + uint64_t(count_) * width;
  if (bytes != expected)
    fail_here("holds " + std::to_string(bytes) + " bytes where its header's " + std::to_string(count_) +
              " tokens make " + std::to_string(expected) + (bytes < expected ? " (truncated?)" : ""));
  tokens_ = static_cast<const char*>(map_) + kTokenFileHeaderBytes;
  for (int64_t i = 0; i < count_; ++i) {
    const uint32_t t = version_ == 1 ? static_cast<const uint16_t*>(tokens_)[i] : static_cast<const uint32_t*>(tokens_)[i];
    if (t >= uint32_t(vocab))
      fail_here("has token " + std::to_string(t) + " at position " + std::to_string(i) +
                ", outside the vocabulary of " + std::to_string(vocab) + " (--vocab-size)");
  }
}

TokenFile::~TokenFile() {
  if (map_) ::munmap(map_, mapped_bytes_);
}

uint64_t TokenFile::fingerprint() const {
  uint64_t h = 0xcbf29ce484222325ull;
  auto add = [&](const unsigned char* p, size_t n) {
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  };
  const auto* base = static_cast<const unsigned char*>(map_);
  const size_t body = mapped_bytes_ - size_t(kTokenFileHeaderBytes), edge = std::min<size_t>(body, 4096);
  add(base, size_t(kTokenFileHeaderBytes));
  add(base + kTokenFileHeaderBytes, edge);
  add(base + mapped_bytes_ - edge, edge);
  return h;
}

bool is_token_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  std::ifstream in(path, std::ios::binary);
  int32_t magic = 0;
  return in.read(reinterpret_cast<char*>(&magic), 4) && magic == kTokenFileMagic;
}

void write_token_file(const std::string& path, const std::vector<int32_t>& tokens) {
  TT_CHECK(tokens.size() <= size_t(INT32_MAX), "write_token_file: more tokens than a header can count");
  const bool narrow = std::all_of(tokens.begin(), tokens.end(), [](int32_t t) { return t >= 0 && t < 65536; });
  int32_t header[kTokenFileHeaderInts] = {};
  header[0] = kTokenFileMagic;
  header[1] = narrow ? 1 : 2;
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

}  // namespace tt
