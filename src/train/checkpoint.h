// Checkpoints in the safetensors format (an 8-byte little-endian header length, a JSON
// header, then the raw tensor bytes), so that any safetensors reader can open them.
//
// Tensors (all F32, shapes as in the model):
//   <name>                          the parameters, names from param_table (Hugging Face
//                                   LLaMA naming: model.layers.0.self_attn.q_proj.weight, ...)
//   optimizer.exp_avg.<name>        Adam's first moment
//   optimizer.exp_avg_sq.<name>     Adam's second moment
// __metadata__ (strings): format "tiny_llama", format_version "1", step (optimizer steps
// taken), data_position (sequences consumed), data (which data and windows), config (the
// model configuration as JSON), seed, seq_len, learning_rate, weight_decay, batch_size.
#pragma once
#include <cstdint>
#include <string>

#include "model/config.h"
#include "model/llama.h"

namespace tt {

struct CheckpointInfo {
  ModelConfig config;
  int64_t step = 0;
  int64_t data_position = 0, data_epoch = 0;
  std::string data_identity;
  uint64_t seed = 0;
  int seq_len = 0;  // the sequence length it was trained at (0: not recorded): the context for generation
  // The settings it was trained with (empty: not recorded, in checkpoints older than them), so
  // that a resume can say what it changes.
  std::string learning_rate, weight_decay, batch_size, lr_schedule;
  // The run's recipe as flags (--batch-size 8 --learning-rate 0.0003 ...): a resume takes those it
  // is not given (empty in checkpoints older than them).
  std::vector<std::string> train_args;
};

// Writes atomically (temporary file, then rename).
void save_checkpoint(const std::string& path, Llama& model, const CheckpointInfo& info);

// Reads and checks the header (format, offsets, every expected tensor with its shape, file
// size). Throws UsageError naming `flag` (the command's way of giving the checkpoint) and what
// is wrong. Reads no tensor data.
CheckpointInfo read_checkpoint_info(const std::string& path, const std::string& flag = "--resume");

// Checkpoints of a long run in a directory (--save-dir): DIR/step_00000100.safetensors. The path
// of step `step`; the latest in DIR (empty when it holds none); and, after a write, the step
// files beyond the newest `keep` removed (keep 0: all kept).
std::string step_checkpoint_path(const std::string& dir, int64_t step);
std::string latest_step_checkpoint(const std::string& dir);
void remove_older_step_checkpoints(const std::string& dir, int keep);

// Loads parameters and moments into the model (whose config must equal the checkpoint's).
void load_checkpoint(const std::string& path, Llama& model, const std::string& flag = "--resume");

// The parameters alone (the flat layout of `config`, which must be the checkpoint's), for a new
// run that starts from them (--init-from); UsageError naming `flag` for a bad file.
std::vector<float> read_checkpoint_params(const std::string& path, const ModelConfig& config, const std::string& flag);

}  // namespace tt
