#include "train/data.h"

#include <algorithm>
#include <fstream>
#include <iterator>

#include "core/error.h"
#include "core/rng.h"

namespace tt {

void DataSource::fill(Batch& b, bool validation, int64_t first, int64_t count) const {
  b.tokens.resize(size_t(B_) * T_);
  b.targets.resize(size_t(B_) * T_);
  std::vector<int32_t> w(size_t(T_) + 1);
  for (int i = 0; i < B_; ++i) {
    window(validation, (first + i) % count, w.data());
    std::copy(w.begin(), w.end() - 1, b.tokens.begin() + int64_t(i) * T_);
    std::copy(w.begin() + 1, w.end(), b.targets.begin() + int64_t(i) * T_);
  }
}

void DataSource::next_batch(Batch& b) {
  fill(b, false, position_, train_windows());
  position_ += B_;
}

void DataSource::validation_batch(int i, Batch& b) const {
  fill(b, true, int64_t(i) * B_, validation_windows());
}

namespace {

class SyntheticData final : public DataSource {
 public:
  SyntheticData(int vocab, int batch, int seq_len, uint64_t seed)
      : DataSource(batch, seq_len), vocab_(vocab), seed_(seed), rng_(seed, kStreamData) {}
  std::string describe() const override {
    return "synthetic: " + std::to_string(kSyntheticSequences) + " fixed sequences of random " +
           "tokens in [1, " + std::to_string(vocab_) + "), seed " + std::to_string(seed_);
  }
  std::string identity() const override {
    return "synthetic seed=" + std::to_string(seed_) + " vocab=" + std::to_string(vocab_) +
           " seq_len=" + std::to_string(T_);
  }

 protected:
  int64_t train_windows() const override { return kSyntheticSequences; }
  void window(bool, int64_t w, int32_t* out) const override {
    for (int p = 0; p <= T_; ++p)
      out[p] = 1 + int32_t(rng_.below(uint64_t(w) * (T_ + 1) + p, uint32_t(vocab_ - 1)));
  }

 private:
  int vocab_;
  uint64_t seed_;
  CounterRng rng_;
};

class TextData final : public DataSource {
 public:
  TextData(std::string path, std::vector<uint8_t> bytes, int batch, int seq_len)
      : DataSource(batch, seq_len), path_(std::move(path)), bytes_(std::move(bytes)) {
    split_ = bytes_.size() * 9 / 10;
  }
  std::string describe() const override {
    return "text file " + path_ + ": " + std::to_string(bytes_.size()) + " bytes as tokens, " +
           std::to_string(split_) + " to train (" + std::to_string(train_windows()) +
           " windows), " + std::to_string(bytes_.size() - split_) + " to validate";
  }
  std::string identity() const override {
    uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a of the contents
    for (uint8_t c : bytes_) h = (h ^ c) * 0x100000001b3ull;
    return "text bytes=" + std::to_string(bytes_.size()) + " fnv1a=" + std::to_string(h) +
           " seq_len=" + std::to_string(T_);
  }

 protected:
  int64_t train_windows() const override { return int64_t(split_ - 1) / T_; }
  int64_t validation_windows() const override {
    const int64_t n = int64_t(bytes_.size() - split_ - 1) / T_;
    return std::min<int64_t>(n, int64_t(kMaxValidationBatches) * B_);
  }
  void window(bool validation, int64_t w, int32_t* out) const override {
    const uint8_t* base = bytes_.data() + (validation ? split_ : 0) + size_t(w) * T_;
    for (int p = 0; p <= T_; ++p) out[p] = base[p];
  }

 private:
  std::string path_;
  std::vector<uint8_t> bytes_;
  size_t split_;
};

}  // namespace

std::unique_ptr<DataSource> make_data_source(const std::string& spec, int vocab_size, int batch,
                                             int seq_len, uint64_t seed) {
  if (spec == "synthetic") return std::make_unique<SyntheticData>(vocab_size, batch, seq_len, seed);

  std::ifstream in(spec, std::ios::binary);
  if (!in) usage_fail("--data: cannot read '" + spec + "'");
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) usage_fail("--data: error while reading '" + spec + "'");
  if (bytes.empty()) usage_fail("--data: '" + spec + "' is empty");

  // Each split needs one window of T+1 bytes: the 10% validation part sets the minimum.
  const size_t need = size_t(seq_len + 1) * 10 + 10;
  const size_t split = bytes.size() * 9 / 10;
  if (split < size_t(seq_len) + 1 || bytes.size() - split < size_t(seq_len) + 1)
    usage_fail("--data: '" + spec + "' has " + std::to_string(bytes.size()) +
               " bytes, too short for --seq-len " + std::to_string(seq_len) + " (needs about " +
               std::to_string(need) + ": each of the 90/10 splits must hold seq-len + 1 bytes)");
  if (vocab_size != kTextVocab)
    usage_fail("--vocab-size: a text file's tokens are its bytes, so the vocabulary must be 256 "
               "(got " + std::to_string(vocab_size) + ")");
  return std::make_unique<TextData>(spec, std::move(bytes), batch, seq_len);
}

}  // namespace tt
