// Command-line flags of `tiny_llama [train]`, with the original workshop's names and defaults.
#pragma once
#include <string>
#include <vector>

#include "bench/ablate.h"
#include "bench/bench.h"
#include "bench/debug_stages.h"
#include "bench/kernels.h"
#include "bench/validate.h"
#include "data/tokenize.h"
#include "data/tokenizer_train.h"
#include "train/evaluate.h"
#include "train/generation.h"
#include "train/hf.h"
#include "train/trainer.h"

namespace tt {

// Parses the arguments after the program name (and after an optional "train"). Returns false
// when help was printed. Throws UsageError with one line naming the flag for any bad value.
bool parse_train_options(const std::vector<std::string>& args, TrainOptions& out);

bool parse_ablate_options(const std::vector<std::string>& args, AblateOptions& out);
bool parse_bench_options(const std::vector<std::string>& args, BenchOptions& out);
bool parse_validate_options(const std::vector<std::string>& args, ValidateOptions& out);
bool parse_kernel_options(const std::vector<std::string>& args, KernelBenchOptions& out);
bool parse_debug_options(const std::vector<std::string>& args, DebugOptions& out);
bool parse_export_options(const std::vector<std::string>& args, ExportOptions& out);
bool parse_generate_options(const std::vector<std::string>& args, GenerateOptions& out);
bool parse_tokenize_options(const std::vector<std::string>& args, TokenizeOptions& out);
bool parse_tokenizer_train_options(const std::vector<std::string>& args, TokenizerTrainOptions& out);
bool parse_eval_options(const std::vector<std::string>& args, EvalOptions& out);

}  // namespace tt
