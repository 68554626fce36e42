// Hugging Face transformers' LLaMA. `tiny_llama export CKPT --hf DIR` writes a directory that
// transformers.AutoModelForCausalLM.from_pretrained(DIR) loads as LlamaForCausalLM computing the
// same function, with the tokenizer AutoTokenizer.from_pretrained(DIR) loads; `--init-from DIR`
// starts training from such a directory (ours, or any LLaMA of the same shape in safetensors).
//
// The one difference between the two models is RoPE's pairing: ours rotates the interleaved
// pairs (2i, 2i+1) of a head, transformers' the halves (i, i + d/2). Permuting the rows of the
// query and key projections in every head makes them equal: transformers' row h*d + j*d/2 + i
// is our row h*d + 2i + j (i < d/2, j in {0, 1}); the scores q.k do not change, since queries and
// keys move together. Export applies it, import inverts it; everything else maps one to one
// (the output head is the embedding: tie_word_embeddings).
#pragma once
#include <ostream>
#include <string>
#include <vector>

#include "model/config.h"

namespace tt {

class Llama;

struct ExportOptions {
  std::string checkpoint, out_dir;
  std::string dtype = "bf16";  // bf16 or fp32
  std::string tokenizer;       // "bytes", a .model or tokenizer.json; empty: the checkpoint's, else bytes for a vocabulary of 256
};
void export_hf(const ExportOptions& o, std::ostream& log);

// The parameters of a LLaMA directory in our flat layout (src/model/params.h), for a run of
// `config`. UsageError naming `flag` (the command line's name for the directory) when the
// directory is not a LLaMA of that shape.
std::vector<float> import_hf(const std::string& dir, const ModelConfig& config, const std::string& flag = "--init-from");
// The model a LLaMA directory describes (its config.json), and its context in `context`
// (max_position_embeddings; 0 when absent). UsageError naming `flag` for one this program
// cannot build.
ModelConfig hf_model_config(const std::string& dir, const std::string& flag, int* context);

// A model to run (generate, eval): a checkpoint of --save, or a Hugging Face LLaMA directory; its
// shape, and its context: the length it was trained at (a checkpoint's seq_len, a directory's
// max_position_embeddings; 0 when not recorded). UsageError naming `flag` for neither.
struct ModelSource {
  ModelConfig config;
  int context = 0;
  bool hf_directory = false;
  int64_t step = -1;  // a checkpoint's training step
};
ModelSource read_model_source(const std::string& path, const std::string& flag);
// Its weights into `model`, built for source.config.
void load_model_source(const std::string& path, const ModelSource& source, Llama& model, const std::string& flag);

// The permutation of one projection's rows (heads of d, rows of `cols` values), both ways.
void rope_rows_to_hf(std::vector<float>& rows, int heads, int d, int64_t cols);
void rope_rows_from_hf(std::vector<float>& rows, int heads, int d, int64_t cols);

}  // namespace tt
