#include "train/tensorboard.h"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "core/files.h"

namespace tt {

namespace {

// The byte-at-a-time table of the reflected Castagnoli polynomial.
const std::array<uint32_t, 256>& crc_table() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  return table;
}

// Protocol buffers' wire format: a field's key is (number << 3) | wire type; type 0 is a varint,
// 1 eight bytes, 2 a length-prefixed run of bytes, 5 four bytes (fixed widths little-endian).
void varint(std::string& out, uint64_t v) {
  for (; v >= 0x80; v >>= 7) out += char(uint8_t(v) | 0x80);
  out += char(uint8_t(v));
}

void key(std::string& out, int field, int wire_type) { varint(out, uint64_t(field) << 3 | uint64_t(wire_type)); }

template <class T>
void fixed(std::string& out, T value) {  // the host is little-endian, as the format
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  out.append(bytes, sizeof(T));
}

void bytes_field(std::string& out, int field, const std::string& bytes) {
  key(out, field, 2);
  varint(out, bytes.size());
  out += bytes;
}

// Event's wall_time (1) and step (2), each left out when zero, as proto3 writes a default value.
std::string event_header(double wall_time, int64_t step) {
  std::string e;
  if (wall_time != 0) {
    key(e, 1, 1);
    fixed(e, wall_time);
  }
  if (step != 0) {
    key(e, 2, 0);
    varint(e, uint64_t(step));  // an int64 as a varint: its two's complement bits
  }
  return e;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

uint32_t crc32c(const std::string& bytes) {
  const std::array<uint32_t, 256>& table = crc_table();
  uint32_t c = 0xffffffffu;
  for (const char b : bytes) c = table[(c ^ uint8_t(b)) & 0xff] ^ (c >> 8);
  return c ^ 0xffffffffu;
}

uint32_t masked_crc32c(const std::string& bytes) {
  const uint32_t c = crc32c(bytes);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

std::string tfrecord(const std::string& payload) {
  std::string length, out;
  fixed(length, uint64_t(payload.size()));
  out = length;
  fixed(out, masked_crc32c(length));
  out += payload;
  fixed(out, masked_crc32c(payload));
  return out;
}

std::string file_version_event(double wall_time) {
  std::string e = event_header(wall_time, 0);
  bytes_field(e, 3, "brain.Event:2");
  return e;
}

std::string scalars_event(double wall_time, int64_t step, const Scalars& values) {
  std::string summary;
  for (const auto& [tag, value] : values) {
    std::string v;
    bytes_field(v, 1, tag);
    key(v, 2, 5);
    fixed(v, float(value));
    bytes_field(summary, 1, v);
  }
  std::string e = event_header(wall_time, step);
  bytes_field(e, 5, summary);
  return e;
}

Scalars metrics_scalars(const nlohmann::json& line) {
  Scalars values;
  for (const auto& [name, value] : line.items())
    if (name != "step" && value.is_number()) values.emplace_back(name, value.get<double>());
  return values;
}

void check_tensorboard_dir(const std::string& dir, const std::string& flag) {
  if (dir.empty()) usage_fail(flag + ": empty path");
  check_writable_directory(dir, flag);
}

TensorBoardWriter::TensorBoardWriter(const std::string& dir, const std::string& flag) : flag_(flag) {
  check_tensorboard_dir(dir, flag);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (!std::filesystem::is_directory(dir)) usage_fail(flag + ": cannot create directory '" + dir + "'");
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') std::strcpy(host, "localhost");
  const std::string stem = (std::filesystem::path(dir) / "events.out.tfevents.").string() +
                           std::to_string(int64_t(now_seconds())) + "." + host + "." + std::to_string(::getpid()) + ".";
  for (int n = 0; fd_ < 0; ++n) {  // a new file: the next number when one of this name exists
    path_ = stem + std::to_string(n);
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd_ < 0 && (errno != EEXIST || n >= 1000))
      usage_fail(flag + ": cannot create '" + path_ + "': " + std::strerror(errno));
  }
  append(file_version_event(now_seconds()));
}

TensorBoardWriter::~TensorBoardWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void TensorBoardWriter::write(int64_t step, const Scalars& values) { append(scalars_event(now_seconds(), step, values)); }

void TensorBoardWriter::append(const std::string& event) {
  const std::string record = tfrecord(event);
  for (size_t done = 0; done < record.size();) {
    const ssize_t n = ::write(fd_, record.data() + done, record.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail(flag_ + ": error while writing '" + path_ + "': " + std::strerror(errno));
    done += size_t(n);
  }
}

}  // namespace tt
