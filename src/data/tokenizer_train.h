// `tiny_llama tokenizer-train`: a SentencePiece model (src/data/tokenizer.h) learned from a
// corpus given as `tokenize` takes it (src/data/documents.h: files, directories, JSON lines,
// --documents line; plain, .gz or .zst; standard input). SentencePiece learns from sentences,
// each a line of a document. It leaves out, without a word, a line longer than its
// max_sentence_length (4192 bytes) and a line holding U+2047, the character it reserves for
// unknown text: here such a line is cut instead (a long one at its last space before the limit,
// the space dropped, where SentencePiece's dummy space stands in for it; text without a space
// every 4192 bytes; around U+2047, dropping that character), and the run says how many.
// --input-sentence-size N learns from N of the sentences drawn with --seed (memory for N, not for
// the corpus, which SentencePiece otherwise holds whole); on a terminal, progress on stderr.
#pragma once
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace tt {

struct TokenizerTrainOptions {
  std::vector<std::string> inputs;  // as tokenize's: files, directories, "-"
  int vocab_size = 8000;
  std::string prefix;  // writes prefix.model and prefix.vocab
  std::string model_type = "bpe";
  std::string documents = "file";  // as tokenize's --documents and --text-field
  std::string text_field = "text";
  int64_t input_sentence_size = 0;  // sentences to learn from, drawn with the seed (0: all)
  uint64_t seed = 42;
};

// SentencePiece's longest sentence (its max_sentence_length, which it keeps by dropping longer
// ones): longer lines are cut to it.
constexpr size_t kSentenceBytes = 4192;

// Writes prefix.model and prefix.vocab, whole or not at all, and says what it read and cut (and
// sampled). `vocab_size` is an upper bound for a small corpus (the model says how many pieces it
// has). UsageError for bad input, before any output is written.
void run_tokenizer_train(const TokenizerTrainOptions& o, std::ostream& log);
// The same on the files `inputs` with the other options' defaults, saying nothing.
void train_sentencepiece(const std::vector<std::string>& inputs, int vocab_size, const std::string& prefix,
                         const std::string& model_type);

}  // namespace tt
