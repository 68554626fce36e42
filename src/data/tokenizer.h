// Text to tokens and back. Three kinds:
//   bytes          each byte is a token (vocabulary 256), no model file: the simplest path;
//   SentencePiece  a .model file (the tokenizer family LLaMA and LLaMA-2 use), made from the
//                  user's corpus by `tiny_llama tokenizer-train` (data/tokenizer_train.h): byte-pair
//                  encoding, unknown bytes spelled as byte tokens, the text kept as it is (no
//                  normalization, whitespace and newlines preserved), so decode(encode(t)) == t;
//                  or the tokenizer.json the export writes of one (data/sentencepiece_json.h);
//   byte-level BPE a Hugging Face tokenizer.json of GPT-2's or LLaMA-3's kind, as users bring
//                  with a model (data/bpe_tokenizer.h); decode(encode(t)) == t as well.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tt {

enum class TokenizerKind { Bytes, SentencePiece, ByteLevelBpe };

// The largest tokenizer file read (LLaMA-3's tokenizer.json: 9 MB).
constexpr size_t kMaxTokenizerFileBytes = size_t(256) << 20;

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // "bytes", the path of a SentencePiece model or of a tokenizer.json, or a directory holding one
  // (tokenizer.model first); UsageError naming `flag` when it cannot load.
  static std::unique_ptr<Tokenizer> load(const std::string& spec, const std::string& flag);

  virtual std::string describe() const = 0;
  virtual TokenizerKind kind() const = 0;
  virtual std::string path() const = 0;  // the file it was read from ("" for bytes)
  virtual int vocab_size() const = 0;
  virtual int bos() const = 0;  // the token that starts a document; -1 for none
  virtual int eos() const = 0;  // the token that ends one; -1 for none (GPT-2's: the same as bos)
  // The ids are < vocab_size(); a model's vocabulary may be larger (padded), never smaller.
  virtual std::vector<int32_t> encode(const std::string& text) const = 0;
  // The tokens of a document's later piece: `text` follows other text of the same document, cut
  // before it at a space that follows a character other than a space and comes before an ASCII
  // letter (tokenize's cut: src/data/tokenize.cpp). encode(a) then encode_more(b) give the tokens
  // of encode(a + b) (SentencePiece's dummy space and a byte-level BPE's prefix space belong to the
  // document's start only), for every tokenizer here but a byte-level BPE without a word pattern,
  // whose merges may join the two sides (the bytes model's export has none). A piece cut elsewhere
  // (a run of text without such a space) is encoded the same way, its tokens at the cut those of
  // the two parts.
  virtual std::vector<int32_t> encode_more(const std::string& text) const { return encode(text); }
  virtual std::string decode(const std::vector<int32_t>& ids) const = 0;
  // A special token's name as tokenizer configurations spell it ("<s>", "<|endoftext|>").
  virtual std::string special_name(int id) const = 0;
};

// The token tokenize puts first in every document: BOS, unless it is EOS too (GPT-2's
// <|endoftext|>, which then stands once, between documents); -1 for none. The export's
// tokenizer puts it first as well (add_bos_token), so that transformers encodes as the model
// was trained.
int document_start(const Tokenizer& tok);

// The post-processor of a tokenizer.json that puts the token `bos_name` (id `bos`; -1: none)
// before each sequence and nothing else: the TemplateProcessing transformers makes of
// add_bos_token.
nlohmann::ordered_json bos_post_processor(const std::string& bos_name, int bos);

// The tokenizer of a model with `vocab` tokens: `spec` (Tokenizer::load's) when given, else
// the tokenizer file of the model's Hugging Face directory `hf_dir` (may be empty), else bytes
// for a vocabulary of 256. UsageError naming --tokenizer when none is given for another
// vocabulary, or when the tokenizer's ids do not fit the model's (a model may have more).
std::unique_ptr<Tokenizer> model_tokenizer(const std::string& spec, const std::string& hf_dir, int vocab);

// The serialized model a SentencePiece tokenizer encodes with: its .model file's bytes, or the
// model its tokenizer.json makes (data/sentencepiece_json.h). Fails for another kind.
const std::string& sentencepiece_model(const Tokenizer& tok);

}  // namespace tt
