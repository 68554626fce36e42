// Training data: batches of B sequences of T tokens and their next-token targets.
//
//   synthetic  the original workshop's data: 1000 fixed sequences of random tokens in
//              [1, vocab), drawn from the seed; batch i holds sequences iB .. iB+B-1 (mod 1000).
//              Each sequence has T+1 tokens: inputs are tokens 0..T-1, targets 1..T, so every
//              position has a target (labels shifted once).
//   a file     its bytes are the tokens (vocabulary 256). The first 90% trains, the last 10%
//              validates; both are cut into windows of T+1 bytes, stepping by T.
//   token files (src/data/token_file.h): one file, or a glob pattern of shards. Files whose
//              name contains "val" validate, the others train; without any, the last 10% of
//              the training tokens validate. Windows of T+1 tokens, stepping by T, within each
//              file; the tokens must lie below the model's vocabulary.
#pragma once
#include <cstdint>
#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace tt {

// The validation without --val-tokens: the first windows of the split, as many at any batch
// size and number of ranks.
constexpr int64_t kDefaultValidationWindows = 32;

struct Batch {
  std::vector<int32_t> tokens, targets;  // B*T each
};

class DataSource {
 public:
  virtual ~DataSource() = default;
  virtual std::string describe() const = 0;
  // Identifies the data and its windows, to refuse resuming a checkpoint on other data.
  virtual std::string identity() const = 0;
  // Where the next batch starts: sequences consumed so far, modulo the training windows (the
  // data repeats after them), and the passes over them so far (the epoch). Part of a checkpoint;
  // any recorded value is reduced once, here, so that no later arithmetic can overflow.
  int64_t position() const { return position_; }
  int64_t epoch() const { return epoch_; }
  void set_position(int64_t p, int64_t epoch = 0) {
    const int64_t count = train_windows();
    position_ = (p % count + count) % count;
    epoch_ = std::max<int64_t>(0, epoch) % (int64_t(1) << 40);
  }
  // --shuffle: each pass visits the training windows in an order of its own, drawn from the seed
  // and the pass's number (every window once a pass); otherwise in the data's order.
  void set_shuffle(uint64_t seed) { shuffle_ = true, shuffle_seed_ = seed; }
  // Data parallelism: of every global batch of B x count sequences, this rank reads its own B,
  // the rank-th; the position counts the global batch's sequences.
  void set_shard(int rank, int count) { shard_rank_ = rank, shard_count_ = count; }
  void next_batch(Batch& b);
  // n consecutive batches in one (a step's micro-batches): batch i is rows [i B, (i + 1) B).
  void next_batches(int n, Batch& b);
  // Validation on a set number of windows: the split's windows (none for synthetic data), and a
  // batch of `rows` of them from `first` (rows <= batch; the batch's other rows repeat the last
  // one, for the caller not to count).
  virtual int64_t all_validation_windows() const { return 0; }
  void validation_windows_batch(int64_t first, int rows, Batch& b) const;

 protected:
  DataSource(int batch, int seq_len) : B_(batch), T_(seq_len) {}
  virtual int64_t train_windows() const = 0;
  // Writes the T+1 tokens of window w of the split.
  virtual void window(bool validation, int64_t w, int32_t* out) const = 0;
  // A batch of the split's windows window_of(0) .. window_of(B - 1).
  void fill(Batch& b, bool validation, const std::function<int64_t(int)>& window_of) const;

  int B_, T_;
  int64_t position_ = 0, epoch_ = 0;
  int shard_rank_ = 0, shard_count_ = 1;
  bool shuffle_ = false;
  uint64_t shuffle_seed_ = 0;
};

// spec is "synthetic", a text file, a token file or a glob pattern of token files. vocab_size
// is the model's; for a text file it must be 256.
std::unique_ptr<DataSource> make_data_source(const std::string& spec, int vocab_size, int batch,
                                             int seq_len, uint64_t seed);

// The files a --data spec reads (none for synthetic data).
std::vector<std::string> data_files(const std::string& spec);

// Whether spec names token files (a glob pattern, or a file that starts with their magic).
bool names_token_files(const std::string& spec);

constexpr int kSyntheticSequences = 1000;
// A text file given to --data is held whole in memory, up to this size; larger text is refused
// with the tokenize command that turns it into token files, which are read as training goes.
constexpr size_t kMaxTextBytes = size_t(256) << 20;
constexpr int kTextVocab = 256;

}  // namespace tt
