#include "data/tokenizer.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>
#include <sys/stat.h>

#include <thread>

#include "core/error.h"

namespace tt {

namespace {

class ByteTokenizer final : public Tokenizer {
 public:
  std::string describe() const override { return "bytes (vocabulary 256)"; }
  int vocab_size() const override { return 256; }
  int bos() const override { return -1; }
  std::vector<int32_t> encode(const std::string& text) const override {
    return std::vector<int32_t>(text.begin(), text.end()) ;
  }
  std::string decode(const std::vector<int32_t>& ids) const override {
    std::string s;
    for (int32_t t : ids) s.push_back(char(uint8_t(t)));
    return s;
  }
};

class SentencePieceTokenizer final : public Tokenizer {
 public:
  SentencePieceTokenizer(const std::string& path, const std::string& flag) : path_(path) {
    const auto st = sp_.Load(path);
    if (!st.ok()) usage_fail(flag + ": '" + path + "' is not a SentencePiece model (" + st.ToString() + ")");
  }
  std::string describe() const override {
    return "SentencePiece " + path_ + " (vocabulary " + std::to_string(vocab_size()) + ")";
  }
  int vocab_size() const override { return sp_.GetPieceSize(); }
  int bos() const override { return sp_.bos_id(); }
  std::vector<int32_t> encode(const std::string& text) const override {
    std::vector<int> ids;
    const auto st = sp_.Encode(text, &ids);
    if (!st.ok()) fail("SentencePiece could not encode the text: " + st.ToString());
    return std::vector<int32_t>(ids.begin(), ids.end());
  }
  std::string decode(const std::vector<int32_t>& ids) const override {
    std::string text;
    const auto st = sp_.Decode(std::vector<int>(ids.begin(), ids.end()), &text);
    if (!st.ok()) fail("SentencePiece could not decode the tokens: " + st.ToString());
    return text;
  }

 private:
  std::string path_;
  sentencepiece::SentencePieceProcessor sp_;
};

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::load(const std::string& spec, const std::string& flag) {
  if (spec == "bytes") return std::make_unique<ByteTokenizer>();
  struct stat st {};
  if (::stat(spec.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
    usage_fail(flag + ": '" + spec + "' is not a file (give \"bytes\" or a SentencePiece .model file)");
  return std::make_unique<SentencePieceTokenizer>(spec, flag);
}

void train_sentencepiece(const std::vector<std::string>& inputs, int vocab_size, const std::string& prefix,
                         const std::string& model_type) {
  if (inputs.empty()) usage_fail("tokenizer-train: give the text files to learn from");
  if (vocab_size < 260 || vocab_size > 1000000)
    usage_fail("--vocab-size: must be in [260, 1000000]: the 256 byte tokens and the special ones come first");
  if (model_type != "bpe" && model_type != "unigram")
    usage_fail("--model-type: must be bpe or unigram (got '" + model_type + "')");
  std::string files;
  for (const std::string& f : inputs) {
    struct stat st {};
    if (::stat(f.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) usage_fail("tokenizer-train: '" + f + "' is not a file");
    if (f.find(',') != std::string::npos) usage_fail("tokenizer-train: '" + f + "': file names with a comma are not taken");
    files += (files.empty() ? "" : ",") + f;
  }
  // Token 0 unknown, 1 begins a document, 2 ends one, as LLaMA's; every byte has a token.
  const std::string args = "--input=" + files + " --model_prefix=" + prefix + " --vocab_size=" +
                           std::to_string(vocab_size) + " --model_type=" + model_type +
                           " --byte_fallback=true --character_coverage=1.0 --normalization_rule_name=identity"
                           " --remove_extra_whitespaces=false --split_digits=true --hard_vocab_limit=false"
                           " --unk_id=0 --bos_id=1 --eos_id=2 --pad_id=-1 --minloglevel=2 --num_threads=" +
                           std::to_string(std::max(1u, std::thread::hardware_concurrency()));
  const auto st = sentencepiece::SentencePieceTrainer::Train(args);
  if (!st.ok()) usage_fail("tokenizer-train: SentencePiece failed: " + st.ToString());
}

}  // namespace tt
