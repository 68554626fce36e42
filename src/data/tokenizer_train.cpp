#include "data/tokenizer_train.h"

#include <fmt/format.h>
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <exception>
#include <functional>
#include <iostream>
#include <memory>
#include <sstream>
#include <thread>
#include <unordered_map>

#include "core/error.h"
#include "core/files.h"
#include "core/rng.h"
#include "data/documents.h"
#include "data/tokenizer.h"

namespace tt {

namespace {

const std::string kReserved = "\xE2\x81\x87";  // U+2047: SentencePiece drops a line holding it

// The corpus's sentences for SentencePiece: each line of each document (empty ones are none), cut
// to at most kSentenceBytes and around U+2047, counting what was cut. Documents come a piece at a
// time, so memory holds a piece and a sentence whatever the length of a line. On a terminal, a
// progress line on stderr every two seconds and when the reading ends.
class Sentences {
 public:
  Sentences(Documents& docs, uint64_t input_bytes) : docs_(docs), input_bytes_(input_bytes) {}

  bool next(std::string& sentence) {
    while (ready_.empty()) {
      if (ended_) return false;
      read_piece();
    }
    sentence = std::move(ready_.front());
    ready_.pop_front();
    ++sentences;
    return true;
  }

  int64_t documents = 0, lines = 0, long_lines = 0, reserved = 0, sentences = 0;
  uint64_t bytes = 0;

 private:
  void read_piece() {
    Piece piece;
    if (!docs_.next(piece)) {
      ended_ = true;
      report(true);
      return;
    }
    documents += piece.first;
    bytes += piece.text.size();
    size_t mark = piece.text.find(kReserved);  // searched again only once passed: a piece holds many lines
    for (size_t at = 0;;) {
      if (mark < at) mark = piece.text.find(kReserved, at);
      const size_t newline = piece.text.find('\n', at), end = std::min(newline, mark);
      add(piece.text, at, std::min(end, piece.text.size()));
      if (end == std::string::npos) break;
      if (end == mark) {
        ++reserved;
        end_sentence();
        at = mark + kReserved.size();
      } else {
        end_line();
        at = newline + 1;
      }
    }
    if (piece.last) end_line();
    report(false);
  }
  void add(const std::string& text, size_t begin, size_t end) {
    line_.append(text, begin, end - begin);
    line_bytes_ += end - begin;
    while (line_.size() > kSentenceBytes) {
      // The last space that leaves a sentence before it, dropped: SentencePiece's dummy space in
      // front of the next sentence stands in for it. Without one, at a character's start.
      size_t cut = line_.rfind(' ', kSentenceBytes), skip = 1;
      if (cut == 0 || cut == std::string::npos) {
        cut = kSentenceBytes, skip = 0;
        while (cut > kSentenceBytes - 4 && (uint8_t(line_[cut]) & 0xC0) == 0x80) --cut;
      }
      long_lines += !line_long_;
      line_long_ = true;
      ready_.push_back(line_.substr(0, cut));
      line_.erase(0, cut + skip);
    }
  }
  void end_sentence() {
    if (!line_.empty()) ready_.push_back(std::move(line_));
    line_.clear();
  }
  void end_line() {
    lines += line_bytes_ > 0;
    end_sentence();
    line_bytes_ = 0;
    line_long_ = false;
  }
  void report(bool last) {
    if (!progress_) return;
    const auto now = std::chrono::steady_clock::now();
    if (!last && now - last_report_ < std::chrono::seconds(2)) return;
    last_report_ = now;
    std::cerr << fmt::format("\rtokenizer-train: {:.1f} MB read{}, {} lines", docs_.raw_bytes() / 1e6,
                             input_bytes_ ? fmt::format(" of {:.1f}", input_bytes_ / 1e6) : "", lines)
              << (last ? ": SentencePiece learns its pieces\n" : "") << std::flush;
  }

  Documents& docs_;
  const uint64_t input_bytes_;
  const bool progress_ = ::isatty(2);
  std::chrono::steady_clock::time_point last_report_ = std::chrono::steady_clock::now();
  std::deque<std::string> ready_;
  std::string line_;  // the sentence being read
  uint64_t line_bytes_ = 0;  // of the line being read
  bool line_long_ = false, ended_ = false;
};

// SentencePiece's way in: the sentences `next` gives. An error while reading (a file that is not
// text, corrupt compressed data) ends the iteration, and train() throws it once SentencePiece
// returns.
class Feed final : public sentencepiece::SentenceIterator {
 public:
  explicit Feed(std::function<bool(std::string&)> next) : next_(std::move(next)) { Next(); }
  bool done() const override { return done_; }
  void Next() override {
    try {
      done_ = !next_(value_);
    } catch (...) {
      error_ = std::current_exception();
      done_ = true;
    }
  }
  const std::string& value() const override { return value_; }
  sentencepiece::util::Status status() const override {
    return error_ ? sentencepiece::util::Status(sentencepiece::util::StatusCode::kAborted, "the corpus could not be read")
                  : sentencepiece::util::Status();
  }
  std::exception_ptr error() const { return error_; }

 private:
  std::function<bool(std::string&)> next_;
  std::string value_;
  bool done_ = false;
  std::exception_ptr error_;
};

// SentencePiece's model of the sentences `next` gives (the serialized proto). Token 0 unknown, 1
// begins a document, 2 ends one, as LLaMA's; every byte has a token; the text as it is.
std::string train(const std::function<bool(std::string&)>& next, const TokenizerTrainOptions& o) {
  const std::unordered_map<std::string, std::string> args = {
      {"vocab_size", std::to_string(o.vocab_size)}, {"model_type", o.model_type},
      {"byte_fallback", "true"}, {"character_coverage", "1.0"}, {"normalization_rule_name", "identity"},
      {"remove_extra_whitespaces", "false"}, {"split_digits", "true"}, {"hard_vocab_limit", "false"},
      {"max_sentence_length", std::to_string(kSentenceBytes)}, {"input_sentence_size", "0"},
      {"unk_id", "0"}, {"bos_id", "1"}, {"eos_id", "2"}, {"pad_id", "-1"}, {"minloglevel", "2"},
      {"num_threads", std::to_string(std::max(1u, std::thread::hardware_concurrency()))}};
  Feed feed(next);
  std::string proto;
  const auto st = sentencepiece::SentencePieceTrainer::Train(args, &feed, &proto);
  if (feed.error()) std::rethrow_exception(feed.error());
  if (!st.ok()) {
    const std::string why = st.ToString();
    const size_t at = why.find("Vocabulary size is smaller than required_chars. ");
    if (at != std::string::npos)  // "... required_chars. 300 vs 312. ...": the corpus needs more
      usage_fail("--vocab-size: " + std::to_string(o.vocab_size) + " is too small for this corpus: its characters and " +
                 "the byte and special tokens need more (SentencePiece: " +
                 why.substr(at + 48, why.find('.', at + 48) - at - 48) + ")");
    usage_fail("tokenizer-train: SentencePiece failed: " + why);
  }
  return proto;
}

}  // namespace

void run_tokenizer_train(const TokenizerTrainOptions& o, std::ostream& log) {
  if (o.prefix.empty()) usage_fail("--out: give the prefix of the model files (writes PREFIX.model, PREFIX.vocab)");
  if (o.inputs.empty())
    usage_fail("tokenizer-train: give the text to learn from (files, directories, JSON lines, or - for standard input)");
  if (o.vocab_size < 260 || o.vocab_size > 1000000)
    usage_fail("--vocab-size: must be in [260, 1000000]: the 256 byte tokens and the special ones come first");
  if (o.model_type != "bpe" && o.model_type != "unigram")
    usage_fail("--model-type: must be bpe or unigram (got '" + o.model_type + "')");
  if (o.input_sentence_size < 0) usage_fail("--input-sentence-size: 0 (every sentence) or more");
  check_document_format({o.documents, o.text_field});
  const std::vector<std::string> files = input_files(o.inputs, "tokenizer-train");
  // The outputs are checked before any work, never an input, and written whole or not at all
  // by the writer every output uses: SentencePiece hands the model over in memory.
  const std::string model_path = o.prefix + ".model", vocab_path = o.prefix + ".vocab";
  check_writable(model_path, "--out");
  check_writable(vocab_path, "--out");
  std::vector<std::pair<std::string, std::string>> inputs;
  for (const std::string& f : files)
    if (f != "-") inputs.emplace_back("the input", f);
  check_distinct_paths({{"--out", model_path}, {"--out", vocab_path}}, inputs);

  Documents docs(files, {o.documents, o.text_field}, "tokenizer-train");
  Sentences corpus(docs, input_bytes(files));
  std::vector<std::string> sample;  // --input-sentence-size: a reservoir, each sentence kept with the same chance
  std::string proto;
  if (o.input_sentence_size > 0) {
    const CounterRng rng(o.seed, kStreamSentences);
    const uint64_t size = uint64_t(o.input_sentence_size);
    for (std::string s; corpus.next(s);) {
      const uint64_t i = uint64_t(corpus.sentences) - 1;
      const uint64_t j = i < size ? i : uint64_t((static_cast<unsigned __int128>(rng.bits(i)) * (i + 1)) >> 64);
      if (j >= size) continue;
      if (j == sample.size()) sample.push_back(std::move(s));
      else sample[j] = std::move(s);
    }
    size_t at = 0;
    proto = train([&](std::string& s) { return at < sample.size() ? (s = std::move(sample[at++]), true) : false; }, o);
  } else {
    proto = train([&](std::string& s) { return corpus.next(s); }, o);
  }
  sentencepiece::SentencePieceProcessor sp;
  if (!sp.LoadFromSerializedProto(proto).ok()) fail("tokenizer-train: SentencePiece returned a model it cannot load");
  write_file_atomic(model_path, [&](std::ostream& out) { out << proto; });
  write_file_atomic(vocab_path, [&](std::ostream& out) {  // SentencePiece's .vocab: a piece and its score a line
    for (int i = 0; i < sp.GetPieceSize(); ++i) out << sp.IdToPiece(i) << '\t' << sp.GetScore(i) << '\n';
  });

  log << fmt::format("Read {} files, {} documents, {} bytes: {} lines, {} sentences for SentencePiece\n", files.size(),
                     corpus.documents, corpus.bytes, corpus.lines, corpus.sentences);
  if (corpus.long_lines > 0)
    log << fmt::format("{} lines longer than {} bytes (SentencePiece's longest sentence: it drops longer lines) were "
                       "cut at spaces into sentences\n", corpus.long_lines, kSentenceBytes);
  if (corpus.reserved > 0)
    log << fmt::format("U+2047, which SentencePiece reserves (it drops a line holding it), was left out {} time(s), the "
                       "text around it kept\n", corpus.reserved);
  if (o.input_sentence_size > 0)
    log << fmt::format("Learned from {} of the {} sentences, drawn with seed {} (--input-sentence-size {})\n",
                       sample.size(), corpus.sentences, o.seed, o.input_sentence_size);
  const std::unique_ptr<Tokenizer> tok = Tokenizer::load(model_path, "--out");
  log << fmt::format("Wrote {0}.model and {0}.vocab: {1}\n", o.prefix, tok->describe());
}

void train_sentencepiece(const std::vector<std::string>& inputs, int vocab_size, const std::string& prefix,
                         const std::string& model_type) {
  std::ostringstream quiet;
  run_tokenizer_train({inputs, vocab_size, prefix, model_type}, quiet);
}

}  // namespace tt
