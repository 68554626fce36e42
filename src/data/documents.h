// The documents of a corpus as `tokenize` and `tokenizer-train` take it: text files, the files of
// directories (recursively, in name order) and standard input ("-"), each plain or compressed
// (src/data/text_input.h); a text file one document or a document a line, a JSON-lines file a
// document a record (its text field). Documents are handed out a piece of at most 1 MiB at a
// time, cut where a tokenizer encodes the pieces as it does the whole (Tokenizer::encode_more),
// so that memory does not grow with a document.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tt {

class TextInput;

// How the inputs hold documents: "file" (a text file is one), "line" (a document a line; empty
// lines are none) or "jsonl" (every input a record a line); JSON-lines files (.jsonl, .ndjson,
// .json, compressed too) are a record a line whatever it says. `text_field` is a record's text.
struct DocumentFormat {
  std::string documents = "file";
  std::string text_field = "text";
};
// UsageError naming --documents for another value.
void check_document_format(const DocumentFormat& format);

// The files of `inputs`: files, directories' regular files and "-" (once). UsageError naming
// `command` for a path that is none of them, or inputs holding no file.
std::vector<std::string> input_files(const std::vector<std::string>& inputs, const std::string& command);

// Their bytes on disk (0 when standard input is one of them: unknown), for a progress line.
uint64_t input_bytes(const std::vector<std::string>& files);

// A piece of a document's text, and whether it is the document's first and last.
struct Piece {
  std::string text;
  bool first = false, last = false;
};

// Pieces are at most kPieceBytes, cut where the tokenizer encodes the parts as it does the whole;
// a run of text with no such place is cut every kRunBytes.
constexpr size_t kPieceBytes = size_t(1) << 20;
constexpr size_t kRunBytes = size_t(64) << 10;

// The documents of the files, a piece at a time. Text holds no NUL byte: UsageError naming the
// file (and line) for one that does, for a JSON-lines record that is not an object with a string
// text field, or for one over 1 GiB (a record is read whole); `command` starts the message.
class Documents {
 public:
  Documents(std::vector<std::string> files, DocumentFormat format, std::string command);
  ~Documents();
  bool next(Piece& piece);      // false at the inputs' end
  uint64_t raw_bytes() const;   // read from the files so far (before decompression)

 private:
  enum class Mode { File, Line, Json };
  bool start_document();
  void fill();
  void close_input();
  std::string where() const;
  std::string record_text(const std::string& line) const;

  std::vector<std::string> inputs_;
  DocumentFormat format_;
  std::string command_;
  size_t next_input_ = 0;
  std::unique_ptr<TextInput> in_;
  Mode mode_ = Mode::File;
  int64_t line_ = 0;
  std::string buffer_;  // the current document's bytes read and not yet handed out
  bool in_document_ = false, first_ = false, complete_ = false;
  uint64_t raw_done_ = 0;
};

}  // namespace tt
