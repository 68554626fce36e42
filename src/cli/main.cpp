// tiny_llama: train a Tiny LLaMA, and the tools around it (the commands: src/cli/commands.cpp).
//   tiny_llama [train] ...   train (the default action)
//   tiny_llama COMMAND ...   any other command; tiny_llama --help lists them
// Exit codes: 0 success, 1 failure of the program or the device, 2 bad input, 130 / 143 training
// stopped by SIGINT / SIGTERM (after writing its checkpoint where --save asks for one).
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "cli/commands.h"
#include "core/error.h"
#include "core/signals.h"
#include "train/trainer.h"

namespace {

// The CPU backend's OpenMP threads spin while they wait, by default: on a machine with other work
// that halves training speed or worse (1490 against 420 ms a step with OMP_WAIT_POLICY=passive, a
// 4-layer model on a loaded 2-core machine, docs/reliability.md). Unless the user chose a policy,
// the program starts itself again once with passive waiting: the OpenMP runtime reads the variable
// as it loads, before main. TT_WAIT_POLICY_CHOSEN tells the run's header that the program chose it.
void wait_passively_unless_told(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") || std::getenv("TT_WAIT_POLICY_CHOSEN")) return;
  ::setenv("OMP_WAIT_POLICY", "passive", 1);
  ::setenv("TT_WAIT_POLICY_CHOSEN", "1", 1);
  ::execv("/proc/self/exe", argv);  // returns only on failure: the run goes on as it is
}

int run(std::vector<std::string> args) {
  // --version alone (no level after it: --level v4, or --version v4, chooses the optimization level).
  for (size_t i = 0; i < args.size(); ++i)
    if (args[i] == "--version" && (i + 1 == args.size() || args[i + 1].rfind("-", 0) == 0)) {
      std::cout << tt::program_version() << "\n";
      return 0;
    }
  const std::string command = !args.empty() && args[0].rfind("-", 0) != 0 ? args[0] : "train";
  if (!args.empty() && args[0] == command) args.erase(args.begin());
  return tt::find_command(command).run(args);
}

}  // namespace

int main(int argc, char** argv) {
  wait_passively_unless_told(argv);
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
