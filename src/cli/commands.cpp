#include "cli/commands.h"

#include <cstdlib>
#include <iostream>

#include "bench/scaling.h"
#include "cli/options.h"
#include "core/error.h"
#include "core/signals.h"
#include "parallel/launch.h"
#include "parallel/world.h"

namespace tt {

namespace {

int run_train(const std::vector<std::string>& args) {
  TrainOptions options;
  if (!parse_train_options(args, options)) return 0;
  if (options.nproc_per_node >= 1 && !detect_world(process_environment()).distributed()) {
    std::string why;
    const bool cuda = options.backend.device == DeviceKind::Cuda ||
                      (options.backend.device == DeviceKind::Auto && cuda_available(&why));
    return launch_local_ranks(options.nproc_per_node, without_launcher_flag(args), cuda);
  }
  install_stop_handlers();
  const TrainResult r = train(options, std::cout);
  return r.stopped_by && !std::getenv(kLaunchedRank) ? 128 + r.stopped_by : 0;  // a launched rank: the launcher says
}

int run_ablate_command(const std::vector<std::string>& args) {
  AblateOptions options;
  if (parse_ablate_options(args, options)) run_ablation(options, std::cout);
  return 0;
}

int run_bench_command(const std::vector<std::string>& args) {
  if (launcher_ranks(args) > 0)  // data-parallel scaling: train's flags
    return run_scaling_bench(launcher_ranks(args), without_launcher_flag(args), std::cout);
  BenchOptions options;
  if (parse_bench_options(args, options) && !run_bench(options, std::cout)) {
    std::cerr << "tiny_llama: bench: performance regression against the baseline\n";
    return 1;
  }
  return 0;
}

int run_validate_command(const std::vector<std::string>& args) {
  ValidateOptions options;
  if (parse_validate_options(args, options) && !run_validate(options, std::cout)) {
    std::cerr << "tiny_llama: validate: an error exceeds the bound of its precision\n";
    return 1;
  }
  return 0;
}

int run_kernels_command(const std::vector<std::string>& args) {
  KernelBenchOptions options;
  if (!parse_kernel_options(args, options)) return 0;
  const std::vector<KernelRow> rows = run_kernel_bench(options, std::cout);
  if (options.check && kernel_check_failures(rows) > 0) {
    std::cerr << "tiny_llama: kernels --check: " << kernel_check_failures(rows) << " rows do not match the reference\n";
    return 1;
  }
  return 0;
}

int run_debug_command(const std::vector<std::string>& args) {
  DebugOptions options;
  if (parse_debug_options(args, options)) run_debug(options, std::cout);
  return 0;
}

int run_generate_command(const std::vector<std::string>& args) {
  GenerateOptions options;
  if (parse_generate_options(args, options)) run_generate(options, std::cout);
  return 0;
}

int run_export_command(const std::vector<std::string>& args) {
  ExportOptions options;
  if (parse_export_options(args, options)) export_hf(options, std::cout);
  return 0;
}

int run_eval_command(const std::vector<std::string>& args) {
  EvalOptions options;
  if (parse_eval_options(args, options)) run_eval(options, std::cout);
  return 0;
}

int run_tokenize_command(const std::vector<std::string>& args) {
  TokenizeOptions options;
  if (parse_tokenize_options(args, options)) run_tokenize(options, std::cout);
  return 0;
}

int run_tokenizer_train_command(const std::vector<std::string>& args) {
  TokenizerTrainOptions options;
  if (parse_tokenizer_train_options(args, options)) run_tokenizer_train(options, std::cout);
  return 0;
}

}  // namespace

const std::vector<Command>& commands() {
  static const std::vector<Command> table = {
      {"train", "train", "trains (the default action)", run_train},
      {"generate", "generate CKPT|DIR", "text from a checkpoint, a --save-dir or a Hugging Face directory",
       run_generate_command},
      {"export", "export CKPT --hf DIR", "a checkpoint as a Hugging Face transformers directory", run_export_command},
      {"eval", "eval CKPT|DIR", "the loss on held-out tokens, and multiple-choice task accuracy", run_eval_command},
      {"tokenizer-train", "tokenizer-train", "a SentencePiece tokenizer from text", run_tokenizer_train_command},
      {"tokenize", "tokenize", "text files, directories and JSON lines to token-file shards", run_tokenize_command},
      {"bench", "bench", "levels x batch sizes x sequence lengths x precisions, timed (--nproc-per-node: scaling)",
       run_bench_command},
      {"ablate", "ablate", "a level's plan switches taken away one at a time, timed", run_ablate_command},
      {"validate", "validate", "every level against the CPU reference and against v1", run_validate_command},
      {"kernels", "kernels", "each operation's kernels against the GPU's ceilings (--check: against the CPU)",
       run_kernels_command},
      {"debug", "debug STAGE", "the performance-debugging stages", run_debug_command},
  };
  return table;
}

const Command& find_command(const std::string& name) {
  std::string names;
  for (const Command& c : commands()) {
    if (name == c.name) return c;
    names += std::string(names.empty() ? "" : ", ") + c.name;
  }
  usage_fail("unknown command '" + name + "' (commands: " + names + "; see --help)");
}

std::string command_list() {
  std::string list = "Other commands (each takes --help):\n";
  for (const Command& c : commands())
    if (std::string(c.name) != "train") list += "  " + (std::string(c.usage) + std::string(24, ' ')).substr(0, 24) + c.summary + "\n";
  return list.substr(0, list.size() - 1);
}

}  // namespace tt
