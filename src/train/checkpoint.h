// Checkpoints in the safetensors format (an 8-byte little-endian header length, a JSON
// header, then the raw tensor bytes), so that any safetensors reader can open them.
//
// Tensors (all F32, shapes as in the model):
//   <name>                          the parameters, names from param_table (Hugging Face
//                                   LLaMA naming: model.layers.0.self_attn.q_proj.weight, ...)
//   optimizer.exp_avg.<name>        Adam's first moment
//   optimizer.exp_avg_sq.<name>     Adam's second moment
//   fp8/scale_state                 [layers x 12 x 20] version 5's delayed scaling (rank 0's
//                                   scales, amaxes and histories), where the run had filled its
//                                   history: a resume restores it and continues bit for bit
// __metadata__ (strings): format "tiny_llama", format_version "1", step (optimizer steps
// taken), data_position (sequences consumed), data (which data and windows), config (the
// model configuration as JSON), seed, seq_len, run (the run's identity: a fresh run draws one, a
// resumed run keeps its checkpoint's), recipe (the run's stored flags as a JSON object of typed
// values, src/train/train_flags.h), and where the model was trained on a known tokenizer,
// tokenizer (its kind: "bytes", "sentencepiece", "byte-level-bpe"; src/data/tokenizer_files.h).
// The tokenizer's files, where its kind has any, follow the model's tensors as U8 tensors
// "tokenizer/<file name>" [bytes]: tokenizer.model; tokenizer.json and tokenizer_config.json.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "data/tokenizer_files.h"
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
  // The run that wrote it ("" in checkpoints older than run identities): a save directory's step
  // files of another run are never removed by this one.
  std::string run_id;
  // The recipe it was trained with, {"--batch-size": 8, ...} (empty in checkpoints older than it):
  // a resume restores the values it is not given, checked like the user's.
  nlohmann::json recipe = nlohmann::json::object();
  // The kind of the tokenizer it stores ("" for none: older checkpoints, synthetic data, other
  // tools' shards); its files are read by read_checkpoint_tokenizer.
  std::string tokenizer;
};

// Writes atomically (temporary file, then rename), with `tokenizer` where given (info.tokenizer is
// not read: the files say it).
void save_checkpoint(const std::string& path, Llama& model, const CheckpointInfo& info,
                     const TokenizerFiles* tokenizer = nullptr);

// The tokenizer a checkpoint stores (nullopt: none). UsageError naming `flag` for a bad file.
std::optional<TokenizerFiles> read_checkpoint_tokenizer(const std::string& path, const std::string& flag);

// Reads and checks the header (format, offsets, every expected tensor with its shape, file
// size). Throws UsageError naming `flag` (the command's way of giving the checkpoint) and what
// is wrong. Reads no tensor data.
CheckpointInfo read_checkpoint_info(const std::string& path, const std::string& flag = "--resume");

// Checkpoints of a long run in a directory (--save-dir): DIR/step_00000100.safetensors (more
// digits past step 99,999,999). The path of step `step`; the latest in DIR (empty when it holds
// none; UsageError naming `flag` when its step files are of more than one run, or not
// checkpoints); and, after a write, run `run_id`'s step files beyond its newest `keep` removed
// (keep 0: all kept). A file that is not a checkpoint of the run is never touched.
std::string step_checkpoint_path(const std::string& dir, int64_t step);
std::string latest_step_checkpoint(const std::string& dir, const std::string& flag = "--resume");
void remove_older_step_checkpoints(const std::string& dir, int keep, const std::string& run_id);
// The step files in DIR that are not run `run_id`'s: "step_00000020.safetensors (run 3f2a...)".
std::vector<std::string> other_runs_step_files(const std::string& dir, const std::string& run_id);

// A new run's identity: 16 hexadecimal digits drawn from the system's entropy.
std::string new_run_id();

// Loads parameters and moments into the model (whose config must equal the checkpoint's).
void load_checkpoint(const std::string& path, Llama& model, const std::string& flag = "--resume");

// The parameters alone (the flat layout of `config`, which must be the checkpoint's), for a new
// run that starts from them (--init-from); UsageError naming `flag` for a bad file.
std::vector<float> read_checkpoint_params(const std::string& path, const ModelConfig& config, const std::string& flag);

}  // namespace tt
