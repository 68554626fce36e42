// Evaluation of a model on held-out data. The mean loss over windows of the validation split is
// one function, which training's --val-tokens validation and `tiny_llama eval` both call, so
// that eval gives the number training printed for the same windows. `tiny_llama eval` takes a
// checkpoint or a Hugging Face LLaMA directory and reports that loss and its perplexity, and the
// accuracies of multiple-choice tasks (src/train/task.h), on the CPU or a GPU, in fp32.
#pragma once
#include <cmath>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "data/loader.h"
#include "model/llama.h"
#include "parallel/comm.h"
#include "train/task.h"

namespace tt {

// --val-tokens N: the ceil(N / seq_len) windows that hold the split's first N tokens; UsageError
// when the split holds fewer.
int64_t validation_windows(int64_t val_tokens, int seq_len, const DataSource& data);

// The mean token loss over the first `windows` windows of the validation split, in blocks over
// the ranks of `comm` and in batches of model.batch() on each: the same for any batch size and
// number of ranks (to the rounding of the fp32 products, whose blocking follows the batch: 2e-10
// relative at batch 3 against 8 on the CPU).
double mean_loss_on_windows(Llama& model, const DataSource& data, int64_t windows, Communicator& comm);

struct EvalOptions {
  std::string model;               // a checkpoint of --save, or a Hugging Face LLaMA directory
  std::string data;                // a text file or token files: the loss on their validation split
  int64_t val_tokens = 0;          // the split's first N tokens (0: all of it)
  std::vector<std::string> tasks;  // multiple-choice task files
  std::string tokenizer;           // the tasks' (default: the checkpoint's or the directory's, else bytes for 256)
  int batch = 8;                   // windows, or task rows, a forward
  int seq_len = 0;                 // 0: the model's context (the length it was trained at), else 2048
  DeviceKind device = DeviceKind::Auto;
  std::string json_path;           // the results, and every task example's tokens and scores
};

struct EvalResult {
  std::string device;  // cpu or cuda
  int seq_len = 0;
  int64_t windows = 0;  // of the validation split, evaluated (0: no --data)
  double loss = std::nan(""), perplexity = std::nan("");
  std::vector<TaskScore> tasks;
};

// Checks everything first (UsageError naming the flag, before any work or output), then
// evaluates, printing to `out`; writes --json whole.
EvalResult run_eval(const EvalOptions& o, std::ostream& out);

}  // namespace tt
