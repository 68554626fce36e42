// tiny_llama: train a Tiny LLaMA (the default action, also spelled `tiny_llama train`).
// Exit codes: 0 success, 1 failure of the program or the device, 2 bad input.
#include <iostream>
#include <string>
#include <vector>

#include "cli/options.h"
#include "core/error.h"
#include "train/trainer.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && args[0] == "train") args.erase(args.begin());
  try {
    tt::TrainOptions options;
    if (!tt::parse_train_options(args, options)) return 0;
    tt::train(options, std::cout);
    return 0;
  } catch (const tt::UsageError& e) {
    std::cerr << "tiny_llama: error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "tiny_llama: failed: " << e.what() << "\n";
    return 1;
  }
}
