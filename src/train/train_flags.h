// The training options as one table: each flag of `tiny_llama [train]` written once, with what
// every part of the program needs to know of it. The command line (src/cli/options.cpp) binds
// the rows; TrainOptions::validate checks each row's rule; a checkpoint stores the recipe rows as
// typed values, which a resume restores and compares; the ranks agree on the agreed rows; the
// run's header shows the shown rows that differ from their default; the JSON report carries the
// agreed rows. A new flag is a member of TrainOptions and a row here.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <variant>
#include <vector>

#include "train/trainer.h"

namespace tt {

// A row's value in TrainOptions, by type: a function from the options to the member.
template <class T>
using FlagField = T& (*)(TrainOptions&);
using AnyFlagField = std::variant<FlagField<int>, FlagField<int64_t>, FlagField<uint64_t>, FlagField<double>,
                                  FlagField<bool>, FlagField<std::string>>;

// Which commands take a row: every one that builds a model (its shape and seed), those that
// train it (train, ablate), or train alone (its outputs, ranks, checkpoints and profiles).
enum class FlagGroup { Model, Training, Run };

// What the rest of the program does with a row (bits of TrainFlag::use).
enum FlagUse : unsigned {
  kStored = 1,    // the run's recipe: in every checkpoint; restored by --resume when not given; compared
  kAgreed = 2,    // changes the math or the collectives: every rank must have rank 0's value
  kShown = 4,     // the header's Settings line shows it when it differs from its default
  kPath = 8,      // names a file or directory: never restored from a file's contents
  kDerived = 16,  // its default (0 or empty) is computed, as its help says: --help shows no value
};

// The single-value rule of a row, checked with every other user input (TrainOptions::validate).
enum class FlagRule { Any, Positive, NonNegative, PositiveFinite, NonNegativeFinite, Fraction };

struct TrainFlag {
  const char* names;  // as CLI11 takes them: "--learning-rate", a switch "--shuffle,!--no-shuffle"
  const char* help;
  FlagGroup group;
  unsigned use;
  AnyFlagField field;
  FlagRule rule = FlagRule::Any;

  std::string name() const;           // the first name: "--shuffle"
  std::string negation() const;       // a switch's off name ("--no-shuffle"), else ""
  std::string key() const;            // the JSON key: "shuffle", "learning_rate"
  bool is_switch() const { return std::holds_alternative<FlagField<bool>>(field); }
  // The value in o as text that reads back exactly ("0.0003", "true"), and as typed JSON.
  std::string text(const TrainOptions& o) const;
  nlohmann::json value(const TrainOptions& o) const;
  // As given on a command line: "--batch-size 8", "--no-shuffle".
  std::string as_flag(const TrainOptions& o) const;
  // Sets the value from typed JSON (a stored recipe), refusing another type or an out-of-range
  // number with UsageError naming `where` and the flag; the rule is checked later with the rest.
  void restore(TrainOptions& o, const nlohmann::json& v, const std::string& where) const;
  // Throws UsageError naming the flag when the value breaks the row's rule.
  void check(const TrainOptions& o) const;
};

const std::vector<TrainFlag>& train_flags();
const TrainFlag& train_flag(const std::string& name);  // by its first name; TT_CHECKs that it exists

// The rows with every bit of `use`, in table order.
std::vector<const TrainFlag*> train_flags_with(unsigned use);

// The recipe a checkpoint stores: {"--batch-size": 8, ...}, the kStored rows.
nlohmann::json recipe_of(const TrainOptions& o);

// "--learning-rate 0.0003 -> 0.001, ...": the stored rows (but --num-steps, which a resume
// changes by design) whose value in `now` differs from the recipe's; "" when none does.
std::string changed_settings(const nlohmann::json& recipe, const TrainOptions& now);

// "--beta2 0.95 --grad-clip 1 ...": the shown rows that differ from their default.
std::string settings_line(const TrainOptions& o);

// One line per agreed row, "--batch-size=8\n...": what the ranks compare.
std::vector<std::string> agreed_values(const TrainOptions& o);

}  // namespace tt
