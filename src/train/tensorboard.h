// TensorBoard's event files, written as a run goes, so that `tensorboard --logdir DIR` charts
// the loss, the learning rate and the rest without any Python in the run.
//
// An event file is a sequence of TFRecords: the payload's length (uint64, little-endian), the
// masked CRC-32C of those 8 bytes, the payload, the masked CRC-32C of the payload; the mask is
// ((crc >> 15) | (crc << 17)) + 0xa282ead8. Each payload is an Event protobuf message
// (tensorboard/compat/proto/event.proto): wall_time (1, double), step (2, int64), and either
// file_version (3, string: "brain.Event:2", the file's first event) or summary (5, a Summary:
// repeated value (1), each a tag (1, string) and a simple_value (2, float)). TensorBoard reads
// every file of a directory whose name holds "tfevents" as one run, in the order of their names:
// a resumed run writes a new file into the same directory, and TensorBoard joins the two.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace tt {

// CRC-32C (Castagnoli, reflected polynomial 0x82f63b78), and the masked form TFRecords store.
uint32_t crc32c(const std::string& bytes);
uint32_t masked_crc32c(const std::string& bytes);
// One TFRecord around `payload`.
std::string tfrecord(const std::string& payload);

using Scalars = std::vector<std::pair<std::string, double>>;  // (tag, value); a value is stored as a float
// The encoded Event messages: the file's first, naming its version, and one of scalars at a step.
std::string file_version_event(double wall_time);
std::string scalars_event(double wall_time, int64_t step, const Scalars& values);

class TensorBoardWriter {
 public:
  // A new event file in `dir` (made when missing), events.out.tfevents.<seconds>.<host>.<pid>.<n>,
  // never an existing one; its first event written. UsageError naming `flag` when it cannot be.
  TensorBoardWriter(const std::string& dir, const std::string& flag);
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  // One event holding `values` at `step`, written through to the file (a run that stops leaves
  // every event up to its last). Error naming the flag when the write fails (a full disk).
  void write(int64_t step, const Scalars& values);
  const std::string& path() const { return path_; }

 private:
  void append(const std::string& event);
  std::string flag_, path_;
  int fd_ = -1;
};

// The numbers of a --metrics line (a JSON object) as scalars tagged with their names, "step" (the
// x axis) and null fields left out: TensorBoard charts what --metrics writes, by the same names.
Scalars metrics_scalars(const nlohmann::json& line);

// Checks at start, before any work, that `dir` can take the event file (made or not yet).
void check_tensorboard_dir(const std::string& dir, const std::string& flag);

}  // namespace tt
