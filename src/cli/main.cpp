// tiny_llama: train a Tiny LLaMA, and the tools around it.
//   tiny_llama [train] ...   train (the default action)
//   tiny_llama ablate ...    time a version with each of its plan switches off in turn
//   tiny_llama bench ...     sweep versions x batch sizes x sequence lengths x precisions
//   tiny_llama bench --nproc-per-node N ...  data-parallel scaling of a training (train's flags)
//   tiny_llama validate ...  every version against the CPU reference and against v1
//   tiny_llama kernels ...   each custom kernel against its v2 counterpart and the GPU's ceilings
//   tiny_llama debug STAGE   the performance-debugging stages: init, layout, sync, gemm, all
//   tiny_llama generate CKPT ...  text from a checkpoint
//   tiny_llama export CKPT --hf DIR  a checkpoint as a Hugging Face transformers directory
//   tiny_llama eval CKPT|DIR ...  the loss on held-out tokens, and multiple-choice task accuracy
//   tiny_llama tokenize ...  text files to token-file shards
//   tiny_llama tokenizer-train ...  a SentencePiece tokenizer from text files
// Exit codes: 0 success, 1 failure of the program or the device, 2 bad input, 130 / 143 training
// stopped by SIGINT / SIGTERM (after writing its checkpoint where --save asks for one).
#include <iostream>
#include <string>
#include <vector>

#include "cli/options.h"
#include "core/error.h"
#include "core/signals.h"
#include "parallel/launch.h"
#include "parallel/world.h"
#include "bench/bench.h"
#include "bench/scaling.h"
#include "bench/ablate.h"
#include "train/trainer.h"

namespace {

int run(std::vector<std::string> args) {
  // --version alone (no level after it: --level v4, or --version v4, chooses the optimization level).
  for (size_t i = 0; i < args.size(); ++i)
    if (args[i] == "--version" && (i + 1 == args.size() || args[i + 1].rfind("-", 0) == 0)) {
      std::cout << tt::program_version() << "\n";
      return 0;
    }
  const std::string command = !args.empty() && args[0].rfind("-", 0) != 0 ? args[0] : "train";
  if (!args.empty() && args[0] == command) args.erase(args.begin());
  if (command == "train") {
    tt::TrainOptions options;
    if (!tt::parse_train_options(args, options)) return 0;
    if (options.nproc_per_node >= 1 && !tt::detect_world(tt::process_environment()).distributed()) {
      std::string why;
      const bool cuda = options.backend.device == tt::DeviceKind::Cuda ||
                        (options.backend.device == tt::DeviceKind::Auto && tt::cuda_available(&why));
      return tt::launch_local_ranks(options.nproc_per_node, tt::without_launcher_flag(args), cuda);
    }
    tt::install_stop_handlers();
    const tt::TrainResult r = tt::train(options, std::cout);
    if (r.stopped_by) return 128 + r.stopped_by;
  } else if (command == "ablate") {
    tt::AblateOptions options;
    if (tt::parse_ablate_options(args, options)) tt::run_ablation(options, std::cout);
  } else if (command == "bench" && tt::launcher_ranks(args) > 0) {  // data-parallel scaling: train's flags
    return tt::run_scaling_bench(tt::launcher_ranks(args), tt::without_launcher_flag(args), std::cout);
  } else if (command == "bench") {
    tt::BenchOptions options;
    if (tt::parse_bench_options(args, options) && !tt::run_bench(options, std::cout)) {
      std::cerr << "tiny_llama: bench: performance regression against the baseline\n";
      return 1;
    }
  } else if (command == "validate") {
    tt::ValidateOptions options;
    if (tt::parse_validate_options(args, options) && !tt::run_validate(options, std::cout)) {
      std::cerr << "tiny_llama: validate: an error exceeds the bound of its precision\n";
      return 1;
    }
  } else if (command == "kernels") {
    tt::KernelBenchOptions options;
    if (tt::parse_kernel_options(args, options)) {
      const std::vector<tt::KernelRow> rows = tt::run_kernel_bench(options, std::cout);
      if (options.check && tt::kernel_check_failures(rows) > 0) {
        std::cerr << "tiny_llama: kernels --check: " << tt::kernel_check_failures(rows)
                  << " rows do not match the reference\n";
        return 1;
      }
    }
  } else if (command == "debug") {
    tt::DebugOptions options;
    if (tt::parse_debug_options(args, options)) tt::run_debug(options, std::cout);
  } else if (command == "export") {
    tt::ExportOptions options;
    if (tt::parse_export_options(args, options)) tt::export_hf(options, std::cout);
  } else if (command == "generate") {
    tt::GenerateOptions options;
    if (tt::parse_generate_options(args, options)) tt::run_generate(options, std::cout);
  } else if (command == "tokenize") {
    tt::TokenizeOptions options;
    if (tt::parse_tokenize_options(args, options)) tt::run_tokenize(options, std::cout);
  } else if (command == "eval") {
    tt::EvalOptions options;
    if (tt::parse_eval_options(args, options)) tt::run_eval(options, std::cout);
  } else if (command == "tokenizer-train") {
    tt::TokenizerTrainOptions options;
    if (tt::parse_tokenizer_train_options(args, options)) tt::run_tokenizer_train(options, std::cout);
  } else {
    tt::usage_fail("unknown command '" + command +
                   "' (commands: train, ablate, bench, validate, kernels, debug, generate, export, eval, tokenize, tokenizer-train; see --help)");
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  tt::ignore_file_size_signal();  // a write over the file-size limit fails like a full disk
  try {
    return run(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const tt::UsageError& e) {
    std::cerr << "tiny_llama: error: " << e.what() << "\n";
    return 2;
  } catch (const std::bad_alloc&) {
    std::cerr << "tiny_llama: failed: out of host memory (an allocation outside the arena, checked at start); "
                 "lower --batch-size, --seq-len or the model's size\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "tiny_llama: failed: " << e.what() << "\n";
    return 1;
  }
}
