#include "data/text_input.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace tt {

namespace {
constexpr size_t kChunk = size_t(256) << 10;  // bytes read from the file, or decompressed, at a time
}  // namespace

struct TextInput::Codec {
  z_stream zs{};
  bool zs_ready = false;
  ZSTD_DCtx* zstd = nullptr;
  ~Codec() {
    if (zs_ready) inflateEnd(&zs);
    if (zstd) ZSTD_freeDCtx(zstd);
  }
};

TextInput::TextInput(const std::string& path) : name_(path == "-" ? "standard input" : path) {
  if (path == "-") {
    fd_ = 0;
  } else {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) usage_fail("tokenize: cannot read '" + path + "': " + std::strerror(errno));
    owns_fd_ = true;
  }
  while (raw_.size() < 4 && fill_raw() > 0) {
  }
  const auto starts = [&](const char* magic, size_t n) { return raw_.size() >= n && raw_.compare(0, n, magic, n) == 0; };
  codec_ = std::make_unique<Codec>();
  if (starts("\x1f\x8b", 2)) {
    kind_ = Kind::Gzip;
    if (inflateInit2(&codec_->zs, 15 + 16) != Z_OK) fail("tokenize: zlib cannot start");  // 16: gzip's header
    codec_->zs_ready = true;
  } else if (starts("\x28\xb5\x2f\xfd", 4)) {
    kind_ = Kind::Zstd;
    codec_->zstd = ZSTD_createDCtx();
    if (!codec_->zstd) fail("tokenize: libzstd cannot start");
  }
}

TextInput::~TextInput() {
  if (owns_fd_) ::close(fd_);
}

const char* TextInput::compression() const {
  return kind_ == Kind::Gzip ? "gzip" : kind_ == Kind::Zstd ? "zstd" : "";
}

void TextInput::corrupt(const std::string& why) const {
  usage_fail("tokenize: '" + name_ + "' is not valid " + compression() + " data: " + why);
}

size_t TextInput::fill_raw() {
  if (raw_end_) return 0;
  if (raw_at_ == raw_.size()) raw_.clear(), raw_at_ = 0;
  const size_t old = raw_.size();
  raw_.resize(old + kChunk);
  ssize_t k;
  while ((k = ::read(fd_, raw_.data() + old, kChunk)) < 0 && errno == EINTR) {
  }
  if (k < 0) usage_fail("tokenize: error while reading '" + name_ + "': " + std::strerror(errno));
  raw_.resize(old + size_t(k));
  raw_read_ += uint64_t(k);
  if (k == 0) raw_end_ = true;
  return size_t(k);
}

bool TextInput::fill_text() {
  text_.clear(), text_at_ = 0;
  if (kind_ == Kind::Plain) {
    if (raw_at_ == raw_.size() && fill_raw() == 0) return false;
    text_.assign(raw_, raw_at_, std::string::npos);
    raw_at_ = raw_.size();
    return true;
  }
  // Decompress until some text comes out, the file ends, or the data is refused.
  while (text_.empty()) {
    if (raw_at_ == raw_.size() && fill_raw() == 0) {
      if (stream_open_) corrupt("it ends inside a compressed stream (truncated?)");
      return false;
    }
    text_.resize(kChunk);
    const auto* in = reinterpret_cast<const uint8_t*>(raw_.data()) + raw_at_;
    const size_t in_size = raw_.size() - raw_at_;
    size_t used = 0, made = 0;
    if (kind_ == Kind::Gzip) {
      z_stream& zs = codec_->zs;
      zs.next_in = const_cast<Bytef*>(in), zs.avail_in = uInt(in_size);
      zs.next_out = reinterpret_cast<Bytef*>(text_.data()), zs.avail_out = uInt(kChunk);
      const int rc = inflate(&zs, Z_NO_FLUSH);
      used = in_size - zs.avail_in, made = kChunk - zs.avail_out;
      if (rc == Z_STREAM_END) {
        stream_open_ = false;
        inflateReset(&zs);  // a next member may follow
      } else if (rc == Z_OK || rc == Z_BUF_ERROR) {
        stream_open_ = true;
      } else {
        corrupt(zs.msg ? zs.msg : "zlib error " + std::to_string(rc));
      }
    } else {
      ZSTD_inBuffer ib{in, in_size, 0};
      ZSTD_outBuffer ob{text_.data(), kChunk, 0};
      const size_t rc = ZSTD_decompressStream(codec_->zstd, &ob, &ib);
      if (ZSTD_isError(rc)) corrupt(ZSTD_getErrorName(rc));
      used = ib.pos, made = ob.pos;
      stream_open_ = rc != 0;  // 0: a frame ended and is flushed
    }
    raw_at_ += used;
    text_.resize(made);
  }
  return true;
}

size_t TextInput::read(char* out, size_t n) {
  size_t done = 0;
  while (done < n) {
    if (text_at_ == text_.size() && !fill_text()) break;
    const size_t k = std::min(n - done, text_.size() - text_at_);
    std::memcpy(out + done, text_.data() + text_at_, k);
    text_at_ += k, done += k;
  }
  return done;
}

bool TextInput::read_line(std::string& line, size_t max) {
  while (line.size() < max) {
    if (text_at_ == text_.size() && !fill_text()) return true;
    const size_t avail = std::min(text_.size() - text_at_, max - line.size());
    const char* start = text_.data() + text_at_;
    const void* newline = std::memchr(start, '\n', avail);
    const size_t k = newline ? size_t(static_cast<const char*>(newline) - start) : avail;
    line.append(start, k);
    text_at_ += k;
    if (newline) {
      ++text_at_;
      return true;
    }
  }
  return false;
}

bool TextInput::at_end() { return text_at_ == text_.size() && !fill_text(); }

}  // namespace tt
