// The bytes of one input of `tokenize`, streamed in constant memory: a file, or standard input
// ("-"), either of them plain or compressed with gzip (zlib) or Zstandard (libzstd). The
// compression is recognized by the data's first bytes (gzip's 1f 8b, Zstandard's 28 b5 2f fd),
// not by the name, so that a pipe can carry either; concatenated streams (as `cat a.gz b.gz`
// makes) read as one. What tokenize writes does not depend on how the text arrived.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace tt {

class TextInput {
 public:
  // UsageError naming `path` when it cannot be opened. "-" reads standard input.
  explicit TextInput(const std::string& path);
  ~TextInput();
  TextInput(const TextInput&) = delete;
  TextInput& operator=(const TextInput&) = delete;

  // Up to n bytes of the text into out; 0 only at its end. UsageError naming the input when its
  // compressed data is corrupt or ends early (a truncated file).
  size_t read(char* out, size_t n);
  // The next line's bytes, without its '\n', appended to `line` until it holds max bytes: true
  // when the line ended (or the text did), false when it was cut at max (call again for more).
  // `at_end` tells whether the text is exhausted.
  bool read_line(std::string& line, size_t max);
  bool at_end();

  const std::string& name() const { return name_; }  // the path, or "standard input"
  const char* compression() const;                  // "", "gzip" or "zstd"
  uint64_t raw_bytes_read() const { return raw_read_; }  // of the file or pipe, before decompression

 private:
  size_t fill_raw();     // more bytes of the file into raw_: how many
  bool fill_text();      // more text into text_ (false at the end)
  [[noreturn]] void corrupt(const std::string& why) const;

  std::string name_;
  int fd_ = -1;
  bool owns_fd_ = false;
  enum class Kind { Plain, Gzip, Zstd } kind_ = Kind::Plain;
  std::string raw_, text_;     // read but not decompressed; decompressed but not handed out
  size_t raw_at_ = 0, text_at_ = 0;
  bool raw_end_ = false;       // the file has no more bytes
  bool stream_open_ = false;   // inside a compressed stream (not between two)
  uint64_t raw_read_ = 0;
  struct Codec;                // zlib's or libzstd's state
  std::unique_ptr<Codec> codec_;
};

}  // namespace tt
