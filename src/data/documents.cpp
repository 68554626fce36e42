#include "data/documents.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_input.h"
#include "data/text_input.h"

namespace tt {

namespace {

namespace fs = std::filesystem;

constexpr size_t kLookahead = 8;  // bytes read past a piece, to see what follows a cut
constexpr size_t kMaxJsonLineBytes = size_t(1) << 30;  // a JSON-lines record is read whole

// JSON lines by name (compressed too: corpus.jsonl.zst), or for every input with --documents jsonl.
bool is_json_lines(const std::string& path, const DocumentFormat& format) {
  if (format.documents == "jsonl") return true;
  fs::path p(path);
  if (p.extension() == ".gz" || p.extension() == ".zst") p = p.stem();
  const std::string ext = p.extension().string();
  return ext == ".jsonl" || ext == ".ndjson" || ext == ".json";
}

bool ascii_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
bool ascii_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// Where `text` (more than max bytes of a document) is cut: the last space at most max bytes in that
// follows an ASCII character other than a space and comes before an ASCII letter. No pattern here
// joins the characters on its two sides into one word (GPT-2's and LLaMA-3's: the word before ends
// at that character, " letters..." starts the next; SentencePiece's words start at each space), so
// the pieces encode as the whole does (Tokenizer::encode_more). A run without one (base64, text
// without spaces) is cut at a character's start kRunBytes in, its tokens there the two parts'.
size_t cut_point(const std::string& text, size_t max) {
  for (size_t i = std::min(max, text.size() - 2); i >= 1; --i)
    if (text[i] == ' ' && ascii_letter(text[i + 1]) && !ascii_space(text[i - 1]) && uint8_t(text[i - 1]) < 0x80) return i;
  size_t i = kRunBytes;
  while (i > kRunBytes - 4 && (uint8_t(text[i]) & 0xC0) == 0x80) --i;  // not inside a UTF-8 character
  return i;
}

}  // namespace

void check_document_format(const DocumentFormat& format) {
  if (format.documents != "file" && format.documents != "line" && format.documents != "jsonl")
    usage_fail("--documents: file, line or jsonl (got '" + format.documents + "')");
}

std::vector<std::string> input_files(const std::vector<std::string>& inputs, const std::string& command) {
  std::vector<std::string> files;
  for (const std::string& in : inputs) {
    if (in == "-") {
      if (std::count(files.begin(), files.end(), "-")) usage_fail(command + ": '-' (standard input) is given twice");
      files.push_back(in);
      continue;
    }
    std::error_code ec;
    if (fs::is_directory(in, ec)) {
      std::vector<std::string> found;
      for (auto it = fs::recursive_directory_iterator(in, ec); !ec && it != fs::recursive_directory_iterator();
           it.increment(ec))
        if (it->is_regular_file(ec)) found.push_back(it->path().string());
      if (ec) usage_fail(command + ": cannot read the directory '" + in + "': " + ec.message());
      std::sort(found.begin(), found.end());
      files.insert(files.end(), found.begin(), found.end());
      continue;
    }
    struct stat st {};
    if (::stat(in.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
      usage_fail(command + ": '" + in + "' is not a regular file or a directory (or does not exist)");
    files.push_back(in);
  }
  if (files.empty()) usage_fail(command + ": the inputs hold no file");
  return files;
}

uint64_t input_bytes(const std::vector<std::string>& files) {
  uint64_t total = 0;
  std::error_code ec;
  for (const std::string& f : files) {
    if (f == "-") return 0;
    const uintmax_t size = fs::file_size(f, ec);
    total += ec ? 0 : uint64_t(size);
  }
  return total;
}

Documents::Documents(std::vector<std::string> files, DocumentFormat format, std::string command)
    : inputs_(std::move(files)), format_(std::move(format)), command_(std::move(command)) {}

Documents::~Documents() = default;

bool Documents::next(Piece& piece) {
  if (!in_document_) {
    if (!start_document()) return false;
    in_document_ = true, first_ = true;
  }
  if (!complete_ && buffer_.size() < kPieceBytes + kLookahead) fill();
  const size_t cut = complete_ && buffer_.size() <= kPieceBytes ? buffer_.size() : cut_point(buffer_, kPieceBytes);
  piece.text.assign(buffer_, 0, cut);
  buffer_.erase(0, cut);
  piece.first = first_, first_ = false;
  piece.last = complete_ && buffer_.empty();
  if (piece.text.find('\0') != std::string::npos) usage_fail(command_ + ": " + where() + " is not text (it holds a NUL byte)");
  if (piece.last) {
    in_document_ = false;
    if (mode_ == Mode::File) close_input();  // the file was the document
  }
  return true;
}

uint64_t Documents::raw_bytes() const { return raw_done_ + (in_ ? in_->raw_bytes_read() : 0); }

// The next document's first bytes into buffer_ (all of them: complete_): false at the inputs' end.
bool Documents::start_document() {
  for (;;) {
    if (!in_) {
      if (next_input_ == inputs_.size()) return false;
      const std::string& path = inputs_[next_input_++];
      in_ = std::make_unique<TextInput>(path);
      mode_ = is_json_lines(path, format_) ? Mode::Json : format_.documents == "line" ? Mode::Line : Mode::File;
      line_ = 0;
      buffer_.clear();
      if (mode_ == Mode::File) {
        complete_ = false;
        return true;  // a file is one document, even empty
      }
    }
    if (in_->at_end()) {
      close_input();
      continue;
    }
    ++line_;
    buffer_.clear();
    if (mode_ == Mode::Line) {
      complete_ = in_->read_line(buffer_, kPieceBytes + kLookahead);
      if (!buffer_.empty()) return true;
      continue;
    }
    if (!in_->read_line(buffer_, kMaxJsonLineBytes))
      usage_fail(command_ + ": " + where() + " is longer than 1 GiB: a JSON-lines record is read whole");
    if (buffer_.empty()) continue;
    buffer_ = record_text(buffer_);
    complete_ = true;
    if (!buffer_.empty()) return true;
  }
}

// More of the current document: up to a piece and what follows it.
void Documents::fill() {
  const size_t have = buffer_.size(), want = kPieceBytes + kLookahead;
  if (mode_ == Mode::Line) {
    complete_ = in_->read_line(buffer_, want);
    return;
  }
  buffer_.resize(want);  // Mode::File (the other modes read a document whole)
  const size_t got = in_->read(buffer_.data() + have, want - have);
  buffer_.resize(have + got);
  complete_ = got < want - have;
}

void Documents::close_input() {
  raw_done_ += in_->raw_bytes_read();
  in_.reset();
}

std::string Documents::where() const {
  return "'" + (in_ ? in_->name() : inputs_[next_input_ - 1]) + "'" + (mode_ != Mode::File ? " line " + std::to_string(line_) : "");
}

std::string Documents::record_text(const std::string& line) const {
  const nlohmann::json record = parse_json_input(line, command_ + ": " + where());
  if (!record.is_object())
    usage_fail(command_ + ": " + where() + " is not a JSON object (a JSON-lines file holds one a line)");
  const nlohmann::json& text = json_member(record, format_.text_field);
  if (!text.is_string())
    usage_fail(command_ + ": " + where() + " has no string field \"" + format_.text_field + "\" (--text-field)");
  return text.get<std::string>();
}

}  // namespace tt
