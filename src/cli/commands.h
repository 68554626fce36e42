// The commands of tiny_llama, as one table: its name, how it is called, what it does, and the
// function that runs it. The dispatch, --help's list and the unknown-command message all read it.
#pragma once
#include <string>
#include <vector>

namespace tt {

struct Command {
  const char* name;     // "generate"; "train" is the default action
  const char* usage;    // "generate CKPT|DIR"
  const char* summary;  // one line for --help
  // Runs it on the arguments after its name; the exit code (0, or 1 for a failed check).
  int (*run)(const std::vector<std::string>& args);
};

const std::vector<Command>& commands();

// The command named `name`; UsageError naming the commands for any other.
const Command& find_command(const std::string& name);

// --help's footer: every command but train, with its usage and summary.
std::string command_list();

}  // namespace tt
