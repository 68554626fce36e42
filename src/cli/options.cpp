#include "cli/options.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <set>

#include "cli/commands.h"
#include "core/error.h"
#include "core/files.h"
#include "data/loader.h"
#include "train/checkpoint.h"
#include "train/hf.h"
#include "train/train_flags.h"

namespace tt {

namespace {

std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n') c = ' ';
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

// Binds a row of the training options' table (src/train/train_flags.h) to the command line; its
// default is shown unless it is derived, and a path is never read from a --config file.
CLI::Option* add_row(CLI::App& app, TrainOptions& o, const TrainFlag& row) {
  CLI::Option* opt = std::visit(
      [&](auto get) {
        auto& value = get(o);
        if constexpr (std::is_same_v<std::decay_t<decltype(value)>, bool>) return app.add_flag(row.names, value, row.help);
        else return app.add_option(row.names, value, row.help);
      },
      row.field);
  if (!(row.use & kDerived) && !row.is_switch()) opt->capture_default_str();
  if (row.use & kPath) opt->configurable(false);
  return opt;
}

void add_rows(CLI::App& app, TrainOptions& o, FlagGroup group) {
  for (const TrainFlag& row : train_flags())
    if (row.group == group) add_row(app, o, row);
}

// Flags shared by every subcommand that builds a model: its shape and seed (the table's Model
// rows), the device, the version preset, the precision and the plan switches.
struct ModelFlags {
  CLI::App* app = nullptr;
  std::string device = "auto", version = "v1", preset;
  bool amp = false, tf32 = false, no_nvtx = false;
  int classifier_chunk = 0;
  std::vector<std::string> enable, disable;
  std::set<std::string> restored;  // flags a resumed checkpoint's recipe set
  // The subcommand's batch and sequence-length flags, which a preset also sets: one value each
  // (train, ablate, validate, debug) or a list (bench).
  CLI::Option *batch = nullptr, *seq = nullptr;
  std::vector<int>*batch_list = nullptr, *seq_list = nullptr;
  // Whether the user gave the flag (on the command line or in --config), or a recipe restored it.
  bool given(const std::string& name) const { return app->count(name) > 0 || restored.count(name) > 0; }
};

void add_model_flags(CLI::App& app, TrainOptions& o, ModelFlags& f) {
  f.app = &app;
  std::string names;
  for (const Preset& p : presets()) names += std::string(names.empty() ? "" : ", ") + p.name;
  app.add_option("--preset", f.preset,
                 "a named model and batch (" + names + "); flags given explicitly override it");
  add_rows(app, o, FlagGroup::Model);
  app.add_option("--device", f.device, "auto, cpu or cuda")->capture_default_str();
  app.add_option("--level,--version", f.version,
                 "optimization level: " + version_list() + " (--version vN too; --version alone prints the program's "
                 "version)")
      ->capture_default_str();
  app.add_flag("--use-amp", f.amp, "bf16 mixed precision (CUDA; fp32 master weights and optimizer)");
  app.add_flag("--tf32", f.tf32, "allow TF32 tensor-core products in fp32 (default: true fp32)");
  app.add_option("--classifier-chunk", f.classifier_chunk,
                 "tokens per chunk of the fused classifier (default: chunks of at most 1 GiB of logits)");
  std::string switches;
  for (const PlanSwitch& sw : plan_switches()) switches += std::string(switches.empty() ? "" : ", ") + sw.name;
  app.add_option("--enable", f.enable, "turn plan switches on (comma list, or --enable-NAME): " + switches)
      ->delimiter(',')
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_option("--disable", f.disable, "turn plan switches off (comma list, or --disable-NAME)")
      ->delimiter(',')
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_flag("--no-nvtx", f.no_nvtx, "leave out the named ranges (only to measure what they cost)");
}

// The plan of a version with the user's switches applied.
Plan make_plan(int version, const ModelFlags& f) {
  Plan p = plan_for_version(version);
  p.amp = f.amp;
  p.tf32 = f.tf32;
  if (f.classifier_chunk < 0) usage_fail("--classifier-chunk: must be a positive number of tokens (or 0: automatic)");
  p.classifier_chunk = f.classifier_chunk;
  for (const std::string& name : f.disable) set_switch(p, name, false, "--disable");
  for (const std::string& name : f.enable) set_switch(p, name, true, "--enable");
  return p;
}

// Fills in what the preset names and the user did not give, and says what it set.
void apply_preset(TrainOptions& o, const ModelFlags& f) {
  const Preset& p = find_preset(f.preset);
  std::string set;
  auto fill = [&](const std::string& flag, auto& field, auto value) {
    if (f.given(flag)) return;
    field = value;
    set += " " + flag + " " + std::to_string(value);
  };
  ModelConfig& m = o.model;
  if (o.data == "synthetic") fill("--vocab-size", m.vocab_size, p.model.vocab_size);  // a text file's bytes: 256
  fill("--hidden-dim", m.hidden, p.model.hidden);
  fill("--num-layers", m.layers, p.model.layers);
  fill("--num-heads", m.heads, p.model.heads);
  fill("--num-kv-heads", m.kv_heads, p.model.kv_heads);
  fill("--intermediate-size", m.intermediate, p.model.intermediate);
  if (f.batch && !f.batch_list) fill(f.batch->get_name(), o.batch, p.batch);
  if (f.seq && !f.seq_list) fill(f.seq->get_name(), o.seq_len, p.seq_len);
  if (f.batch_list && !f.batch->count()) *f.batch_list = {p.batch};
  if (f.seq_list && !f.seq->count()) *f.seq_list = {p.seq_len};
  std::cout << "Preset " << p.name << ":" << (set.empty() ? " nothing (every value given explicitly)" : set) << "\n";
}

// 4 x hidden, without overflow: a hidden size too large for it is refused by its own flag.
int default_intermediate(int hidden) { return int(std::min<int64_t>(4 * int64_t(hidden), INT32_MAX)); }

// `from`: the model --init-from starts from, whose shape fills every shape flag not given.
void finish_model_flags(TrainOptions& o, const ModelFlags& f, const ModelConfig* from = nullptr) {
  ModelConfig& m = o.model;
  if (!f.preset.empty()) apply_preset(o, f);
  if (from) {
    TrainOptions shape;
    shape.model = *from;
    for (const TrainFlag& row : train_flags())
      if (row.group == FlagGroup::Model && row.name() != "--seed" && !f.given(row.name()))
        row.restore(o, row.value(shape), "--init-from");
  }
  const bool preset_shape = !f.preset.empty() || from;
  if (!f.given("--num-kv-heads") && !preset_shape) m.kv_heads = m.heads % 2 == 0 ? m.heads / 2 : m.heads;
  if (!f.given("--intermediate-size") && !preset_shape) m.intermediate = default_intermediate(m.hidden);
  if (o.data != "synthetic" && !f.given("--vocab-size") && !from) {
    if (names_token_files(o.data))
      usage_fail("--vocab-size: token files do not record their vocabulary: give the tokenizer's (for example "
                 "--vocab-size 8000)");
    m.vocab_size = kTextVocab;
  }
  if (f.device == "auto") o.backend.device = DeviceKind::Auto;
  else if (f.device == "cpu") o.backend.device = DeviceKind::Cpu;
  else if (f.device == "cuda") o.backend.device = DeviceKind::Cuda;
  else usage_fail("--device: must be auto, cpu or cuda (got '" + f.device + "')");
  o.backend.plan = make_plan(parse_version(f.version, "--level"), f);
  o.backend.nvtx = !f.no_nvtx;
}

// --enable-NAME and --disable-NAME are spelled as --enable NAME / --disable NAME for CLI11.
std::vector<std::string> expand_switch_flags(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (const std::string& a : args) {
    bool expanded = false;
    for (const char* prefix : {"--enable-", "--disable-"}) {
      const std::string p(prefix);
      if (a.rfind(p, 0) == 0 && a.size() > p.size()) {
        out.push_back(p.substr(0, p.size() - 1));
        out.push_back(a.substr(p.size()));
        expanded = true;
      }
    }
    if (!expanded) out.push_back(a);
  }
  return out;
}

// Other programs' names for our flags (nanoGPT, llm.c, Hugging Face), for "did you mean".
const std::pair<const char*, const char*> kOtherNames[] = {
    {"max-steps", "--num-steps"},          {"max-iters", "--num-steps"},         {"max_iters", "--num-steps"},
    {"num-iterations", "--num-steps"},     {"warmup-iters", "--lr-warmup-steps"}, {"warmup_iters", "--lr-warmup-steps"},
    {"lr-warmup", "--lr-warmup-steps"},    {"warmup-ratio", "--lr-warmup-steps"}, {"lr", "--learning-rate"},
    {"block-size", "--seq-len"},           {"block_size", "--seq-len"},          {"n-layer", "--num-layers"},
    {"n_layer", "--num-layers"},           {"n-head", "--num-heads"},            {"n_head", "--num-heads"},
    {"n-embd", "--hidden-dim"},            {"n_embd", "--hidden-dim"},           {"out-dir", "--save-dir"},
    {"out_dir", "--save-dir"},             {"eval-interval", "--eval-every"},    {"eval_interval", "--eval-every"},
    {"log-interval", "--log-every"},       {"gradient-accumulation-steps", "--grad-accum-steps"},
    {"max-grad-norm", "--grad-clip"},      {"dtype", "--use-amp"},
};

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

// An argument that looks like a flag the command does not have is refused with the nearest name
// it has (or the one another program's name stands for).
void refuse_unknown_flags(const CLI::App& app, const std::vector<std::string>& args) {
  std::vector<std::string> known;
  for (const CLI::Option* opt : app.get_options())
    for (const std::string& n : opt->get_lnames()) known.push_back(n);
  for (const std::string& arg : args) {
    if (arg.rfind("--", 0) != 0 || arg.size() == 2) continue;
    const std::string name = arg.substr(2, arg.find('=') == std::string::npos ? std::string::npos : arg.find('=') - 2);
    if (std::find(known.begin(), known.end(), name) != known.end()) continue;
    std::string best;
    for (const auto& [other, ours] : kOtherNames)
      if (name == other) best = ours;
    if (best.empty()) {
      size_t nearest = std::max<size_t>(2, name.size() / 3) + 1;  // farther off is no suggestion
      for (const std::string& n : known)  // the nearest; among equals the first in --help's order
        if (const size_t d = edit_distance(name, n); d < nearest) nearest = d, best = "--" + n;
    }
    usage_fail("--" + name + ": no such flag" + (best.empty() ? "" : "; did you mean " + best + "?") + " (see --help)");
  }
}

// Parses; false when help was printed.
bool parse(CLI::App& app, const std::vector<std::string>& args) {
  std::vector<std::string> reversed = expand_switch_flags(args);
  refuse_unknown_flags(app, reversed);
  std::reverse(reversed.begin(), reversed.end());  // CLI11 consumes from the back
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return false;
  } catch (const CLI::ConfigError& e) {
    const std::string what = one_line(e.what());
    if (what.find("not allowed in a configuration file") != std::string::npos)
      usage_fail("--config: " + what.substr(0, what.find(':')) +
                 " names a path: a recipe file holds numbers and choices; give it on the command line");
    const std::string unknown = "INI was not able to parse ";
    if (what.rfind(unknown, 0) == 0)
      usage_fail("--config: '" + what.substr(unknown.size()) + "' is not a flag of this command (see --help)");
    usage_fail("--config: " + what);
  } catch (const CLI::ParseError& e) {
    usage_fail(one_line(e.what()) + " (see --help)");
  }
  // An empty value is never meant (--resume "" would silently start from scratch).
  for (const CLI::Option* opt : app.get_options())
    for (const std::string& r : opt->results())
      if (r.empty() && opt->get_type_size() != 0 && opt->get_name() != "--prompt")  // "" starts from BOS
        usage_fail(opt->get_name() + ": empty value");
  return true;
}

// The levels a sweep runs (bench, validate, kernels): v1 to the latest, a comma list.
void add_levels_flag(CLI::App& app, const std::string& names, std::vector<std::string>& out, const std::string& help) {
  app.add_option(names, out, help + ": " + version_list())->delimiter(',');
}

std::vector<int> parse_levels(const std::vector<std::string>& texts) {
  std::vector<int> levels;
  for (const std::string& t : texts) levels.push_back(parse_version(t, "--levels"));
  return levels;
}

// --warmup-steps was the steps left out of the timing, and was read as the learning rate's
// warmup: it is refused with both new names.
void add_renamed_warmup_flag(CLI::App& app) {
  app.add_option_function<std::string>(
         "--warmup-steps",
         [](const std::string&) {
           usage_fail("--warmup-steps: renamed, to tell the two apart: --timing-warmup-steps N leaves steps out of "
                      "the timing, --lr-warmup-steps N warms the learning rate up");
         },
         "renamed: --timing-warmup-steps or --lr-warmup-steps")
      ->group("");
}

void add_train_flags(CLI::App& app, TrainOptions& o, ModelFlags& f) {
  add_rows(app, o, FlagGroup::Training);
  f.batch = app.get_option("--batch-size");
  f.seq = app.get_option("--seq-len");
  add_renamed_warmup_flag(app);
}

}  // namespace

namespace {

// An unquoted pattern (--data tokens/*.bin) reaches the program as the files the shell matched:
// said so, instead of CLI11's "argument was not expected".
void refuse_expanded_pattern(const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] != "--data") continue;
    size_t n = 0;
    while (i + 1 + n < args.size() && args[i + 1 + n].rfind("-", 0) != 0) ++n;
    if (n >= 2)
      usage_fail("--data: " + std::to_string(n) + " files follow it (" + args[i + 1] + ", " + args[i + 2] +
                 ", ...): the shell expanded a pattern; quote it, --data 'dir/*.bin', and the program expands it");
  }
}

// --resume: a directory means its latest step checkpoint, and the run goes on saving there unless
// told otherwise (the one path a resume takes without --save or --save-dir: the directory the user
// named). The checkpoint's recipe then fills every stored flag not given, as typed values that
// TrainOptions::validate checks like the user's own; never a path (src/train/train_flags.h).
void restore_recipe(TrainOptions& o, ModelFlags& f) {
  if (std::filesystem::is_directory(o.resume_path)) {
    const std::string dir = o.resume_path;
    o.resume_path = latest_step_checkpoint(dir);
    if (o.save_path.empty() && o.save_dir.empty()) o.save_dir = dir;
  }
  const CheckpointInfo info = read_checkpoint_info(o.resume_path);
  for (const TrainFlag* row : train_flags_with(kStored)) {
    if (row->use & kPath || f.given(row->name()) || !info.recipe.contains(row->name())) continue;
    row->restore(o, info.recipe[row->name()], "--resume: '" + o.resume_path + "'");
    f.restored.insert(row->name());
  }
  if (o.save_path.empty() && o.save_dir.empty())  // the stored cadence applies where the run saves
    for (auto [flag, field] : {std::pair{"--save-every", &o.save_every}, {"--keep-last", &o.keep_last}})
      if (f.restored.erase(flag)) *field = 0;
  const nlohmann::json data = info.recipe.value("--data", nlohmann::json("synthetic"));
  if (!f.given("--data") && data != "synthetic")
    usage_fail("--resume: the checkpoint trained on --data " + data.dump() +
               ": give --data (a checkpoint restores numbers and choices, never the files a run reads)");
}

// The recipe of a run as a --config file (TOML): every row but the paths and the run's own
// outputs and ranks, and the plan's flags.
void write_config(const std::string& path, const TrainOptions& o, const ModelFlags& f) {
  static const TrainOptions defaults;
  write_file_atomic(path, [&](std::ostream& out) {
    out << "# A recipe of tiny_llama: tiny_llama --config FILE, with paths (--data, --save-dir, ...) on the command\n"
           "# line, whose flags win over the file's.\n";
    out << "level = \"v" << o.backend.plan.version << "\"\n";
    if (f.amp) out << "use-amp = true\n";
    if (f.tf32) out << "tf32 = true\n";
    if (f.classifier_chunk) out << "classifier-chunk = " << f.classifier_chunk << "\n";
    for (auto [key, names] : {std::pair{"enable", &f.enable}, {"disable", &f.disable}}) {
      if (names->empty()) continue;
      out << key << " = [";
      for (size_t i = 0; i < names->size(); ++i) out << (i ? ", " : "") << nlohmann::json((*names)[i]).dump();
      out << "]\n";
    }
    for (const TrainFlag& row : train_flags()) {
      const bool recipe = (row.use & kStored) && !(row.use & kPath);
      if (row.use & kPath || (!recipe && row.text(o) == row.text(defaults))) continue;
      const nlohmann::json v = row.value(o);
      out << row.name().substr(2) << " = " << (v.is_number_float() ? row.text(o) : v.dump()) << "\n";
    }
  });
}

}  // namespace

bool parse_train_options(const std::vector<std::string>& args, TrainOptions& o) {
  refuse_expanded_pattern(args);
  CLI::App app{"Train a Tiny LLaMA from scratch (CPU reference or CUDA, levels " + version_list() + ")", "tiny_llama"};
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);  // last one wins
  ModelFlags f;
  add_train_flags(app, o, f);
  add_model_flags(app, o, f);
  add_rows(app, o, FlagGroup::Run);
  app.set_config("--config", "", "a recipe file (TOML or INI: numbers and choices, no paths); flags given win");
  app.allow_config_extras(CLI::config_extras_mode::error);
  std::string config_out;
  app.add_option("--write-config", config_out, "write this run's recipe as a --config file, and exit")
      ->configurable(false);
  app.footer(command_list());
  if (!parse(app, args)) return false;
  if (!o.resume_path.empty()) restore_recipe(o, f);
  if (app.count("--nproc-per-node") && (o.nproc_per_node < 1 || o.nproc_per_node > 64))
    usage_fail("--nproc-per-node: a count of 1 to 64 processes (got " + std::to_string(o.nproc_per_node) + ")");
  if (!o.init_from.empty()) {  // its shape, where the flags do not give one (a flag that differs is refused later)
    int context = 0;
    const ModelConfig from = std::filesystem::is_directory(o.init_from)
                                 ? hf_model_config(o.init_from, "--init-from", &context)
                                 : read_checkpoint_info(o.init_from, "--init-from").config;
    finish_model_flags(o, f, &from);
  } else {
    finish_model_flags(o, f);
  }
  if (o.metrics_path.empty() && !o.save_dir.empty())  // the save directory keeps its run's metrics
    o.metrics_path = (std::filesystem::path(o.save_dir) / "metrics.jsonl").string();
  if (config_out.empty()) return true;
  o.validate();
  check_writable(config_out, "--write-config");
  write_config(config_out, o, f);
  std::cout << "Wrote the recipe to " << config_out << " (use it with --config " << config_out << ")\n";
  return false;
}

bool parse_ablate_options(const std::vector<std::string>& args, AblateOptions& o) {
  CLI::App app{"Ablation: a version's plan with each of its switches turned off in turn, timed in one run",
               "tiny_llama ablate"};
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  ModelFlags f;
  f.version = "v2";
  o.train.seq_len = 128;
  o.train.steps = 40;
  o.train.timing_warmup = 10;
  add_train_flags(app, o.train, f);
  add_model_flags(app, o.train, f);
  app.add_option("--csv", o.csv_path, "write the table as CSV");
  app.add_option("--repeats", o.repeats, "runs of each configuration, taking turns (the median is reported)")
      ->capture_default_str();
  if (!parse(app, args)) return false;
  finish_model_flags(o.train, f);
  return true;
}

bool parse_bench_options(const std::vector<std::string>& args, BenchOptions& o) {
  CLI::App app{"Benchmark sweep: versions x batch sizes x sequence lengths x precisions", "tiny_llama bench"};
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  ModelFlags f;
  add_model_flags(app, o.base, f);
  std::vector<std::string> levels;
  add_levels_flag(app, "--levels,--versions", levels, "levels to run, e.g. v1,v4 (default: every one)");
  f.batch = app.add_option("--batch-sizes", o.batch_sizes, "batch sizes, e.g. 4,8,16 (default 8)")->delimiter(',');
  f.seq = app.add_option("--seq-lens", o.seq_lens, "sequence lengths, e.g. 128,256 (default 128)")->delimiter(',');
  f.batch_list = &o.batch_sizes;
  f.seq_list = &o.seq_lens;
  app.add_option("--precisions", o.precisions, "fp32, tf32, bf16 (default fp32,bf16)")->delimiter(',');
  app.add_option("--timing-warmup-steps", o.timing_warmup, "untimed steps before each repetition")->capture_default_str();
  add_renamed_warmup_flag(app);
  app.add_option("--steps", o.steps, "steps per timed repetition")->capture_default_str();
  app.add_option("--repeats", o.repeats, "timed repetitions per point, each a run of its own (the points take turns)")->capture_default_str();
  app.add_option("--csv", o.csv_path, "write the points as CSV");
  app.add_option("--json", o.json_path, "write the points and the machine as JSON");
  app.add_option("--baseline", o.baseline_path, "a bench JSON to compare against");
  app.add_option("--pytorch", o.pytorch_path,
                 "tools/pytorch_reference.py --json output: its strongest mode beside the ladder of versions");
  app.add_option("--min-speedup", o.min_speedup, "fail when a point's speed is below this times the baseline's");
  app.add_flag("--find-max-batch", o.find_max_batch, "the largest batch that fits the memory budget");
  app.add_option("--memory-budget", o.memory_budget_mb, "MB for --find-max-batch (default: free memory)");
  if (!parse(app, args)) return false;
  finish_model_flags(o.base, f);
  o.enable = f.enable;
  o.disable = f.disable;
  if (!levels.empty()) o.versions = parse_levels(levels);
  o.selected = !levels.empty() || app.count("--precisions");
  return true;
}

bool parse_validate_options(const std::vector<std::string>& args, ValidateOptions& o) {
  CLI::App app{"Numerical validation of every version against the CPU reference and against v1", "tiny_llama validate"};
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  ModelFlags f;
  o.base.seq_len = 128;
  add_model_flags(app, o.base, f);
  f.batch = app.add_option("--batch-size", o.base.batch, "batch of the comparison against v1")->capture_default_str();
  f.seq = app.add_option("--seq-len", o.base.seq_len, "sequence length of the comparison against v1")->capture_default_str();
  app.add_option("--steps", o.steps, "training steps compared")->capture_default_str();
  std::vector<std::string> levels;
  add_levels_flag(app, "--levels,--versions", levels, "levels to validate (default: every one)");
  app.add_option("--precisions", o.precisions, "fp32, tf32, bf16 (default fp32,bf16)")->delimiter(',');
  app.add_option("--json", o.json_path, "write the results as JSON");
  if (!parse(app, args)) return false;
  finish_model_flags(o.base, f);
  if (!levels.empty()) o.versions = parse_levels(levels);
  o.selected = !levels.empty() || app.count("--precisions");
  return true;
}


bool parse_kernel_options(const std::vector<std::string>& args, KernelBenchOptions& o) {
  CLI::App app{"Each custom kernel against its v2 counterpart, against the GEMM and copy ceilings measured in the same run",
               "tiny_llama kernels"};
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  std::vector<std::string> levels;
  CLI::Option* kv = nullptr;
  CLI::Option* ffn = nullptr;
  add_levels_flag(app, "--levels,--impl", levels, "implementations, by level (default: every one from v2; v1 too)");
  app.add_option("--precision", o.precision, "bf16 or fp32")->capture_default_str();
  app.add_option("--batch-size", o.batch, "batch of the default shape")->capture_default_str();
  app.add_option("--seq-len", o.seq_len, "sequence length of the default shape")->capture_default_str();
  app.add_option("--seq-lens", o.seq_lens, "the long sequences (default 1024,2048,4096,8192)")->delimiter(',');
  app.add_option("--long-batch", o.long_batch, "batch of the long sequences")->capture_default_str();
  app.add_option("--hidden-dim", o.hidden, "RMSNorm width")->capture_default_str();
  app.add_option("--num-heads", o.heads, "query heads")->capture_default_str();
  kv = app.add_option("--num-kv-heads", o.kv_heads, "key/value heads (default: heads/2)");
  app.add_option("--head-dim", o.head_dim, "head size")->capture_default_str();
  ffn = app.add_option("--intermediate-size", o.intermediate, "SwiGLU width (default: 4 x hidden)");
  app.add_option("--vocab-size", o.vocab, "the cross-entropy's vocabulary")->capture_default_str();
  app.add_option("--warmup", o.warmup, "untimed calls before the repetitions")->capture_default_str();
  app.add_option("--repeats", o.repeats, "timed repetitions (the median is reported)")->capture_default_str();
  app.add_option("--seed", o.seed, "random inputs")->capture_default_str();
  app.add_option("--ops", o.ops, "only these operations' rows, by name (default: every one)")->delimiter(',');
  app.add_option("--csv", o.csv_path, "write the rows as CSV");
  app.add_option("--json", o.json_path, "write the rows, the ceilings and the machine as JSON");
  app.add_flag("--check", o.check,
               "instead of timing, each row against the CPU reference in double at the default shape (error, bound, "
               "repeatable bits)");
  app.add_flag("--programmatic", o.programmatic,
               "time the calls launched as in a step where the version does (programmatic launch, v3 on): each may "
               "start before the one before it ends");
  if (!parse(app, args)) return false;
  if (!kv->count()) o.kv_heads = o.heads % 2 == 0 ? o.heads / 2 : o.heads;
  if (!ffn->count()) o.intermediate = default_intermediate(o.hidden);
  if (!levels.empty()) o.versions = parse_levels(levels);
  return true;
}

bool parse_debug_options(const std::vector<std::string>& args, DebugOptions& o) {
  CLI::App app{"The performance-debugging stages: each shows a symptom, then its fix, measured", "tiny_llama debug"};
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  ModelFlags f;
  TrainOptions& t = o.train;
  t.batch = 8;
  t.seq_len = 128;
  t.steps = 3;
  app.add_option("stage", o.stage, "broken, slow, better, same, optimal, or all (the journey, in order)");
  f.batch = app.add_option("--batch-size", t.batch, "broken, optimal: sequences per step (the GEMM's tokens = batch x seq)")
                ->capture_default_str();
  f.seq = app.add_option("--seq-len", t.seq_len, "broken, optimal: tokens per sequence")->capture_default_str();
  app.add_option("--num-steps", t.steps, "broken: steps trained with each initialisation")->capture_default_str();
  app.add_option("--repeats", o.repeats, "slow, better, same, optimal: timed repetitions (median)")->capture_default_str();
  add_model_flags(app, t, f);
  if (!parse(app, args)) return false;
  finish_model_flags(t, f);
  return true;
}

namespace {

// The inputs of tokenize and tokenizer-train (src/data/documents.h).
const char* const kCorpusHelp =
    "text files, directories of them (recursively), JSON-lines files (.jsonl, .ndjson, .json: a document a record), "
    "each plain or compressed (.gz, .zst), or - for standard input";

void add_document_flags(CLI::App& app, std::string& documents, std::string& text_field) {
  app.add_option("--documents", documents,
                 "a text file is one document (file), a document a line (line), or a JSON record a line (jsonl: "
                 "the default for .jsonl, .ndjson and .json files; for standard input, say jsonl)")
      ->capture_default_str();
  app.add_option("--text-field", text_field, "a JSON-lines record's field that holds its text")->capture_default_str();
}

}  // namespace

bool parse_tokenize_options(const std::vector<std::string>& args, TokenizeOptions& o) {
  CLI::App app{"Text to token-file shards (train_*.bin, val_*.bin) through a tokenizer, each document between BOS and "
               "EOS, the tokenizer's files beside them (a training run on the shards stores them in its "
               "checkpoints), and last manifest.json (the shards' and the tokenizer's hashes)",
               "tiny_llama tokenize"};
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("files", o.inputs, kCorpusHelp)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_option("--tokenizer", o.tokenizer,
                 "bytes, a SentencePiece .model (tiny_llama tokenizer-train), or a Hugging Face tokenizer.json "
                 "(byte-level BPE: GPT-2's, LLaMA-3's) or a directory holding one")
      ->capture_default_str();
  app.add_option("--out", o.out_dir, "directory for the shards (new, or without .bin files)");
  app.add_option("--val-fraction", o.val_fraction, "the fraction of the tokens that validates")->capture_default_str();
  app.add_option("--val-split", o.val_split,
                 "which tokens validate: last (the last of the last files) or docs (whole documents drawn with --seed)")
      ->capture_default_str();
  app.add_option("--seed", o.seed, "--val-split docs: the draw of the validation documents")->capture_default_str();
  add_document_flags(app, o.documents, o.text_field);
  app.add_option("--threads", o.threads, "encoding threads (default: every core)");
  app.add_option("--shard-tokens", o.shard_tokens, "tokens per shard at most")->capture_default_str();
  return parse(app, args);
}

bool parse_tokenizer_train_options(const std::vector<std::string>& args, TokenizerTrainOptions& o) {
  CLI::App app{"A SentencePiece tokenizer learned from text, taken as tokenize takes it: PREFIX.model and PREFIX.vocab",
               "tiny_llama tokenizer-train"};
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("files", o.inputs, kCorpusHelp)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_option("--vocab-size", o.vocab_size, "pieces at most (a small corpus may give fewer)")->capture_default_str();
  app.add_option("--out", o.prefix, "the model's path without its extension");
  app.add_option("--model-type", o.model_type, "bpe or unigram")->capture_default_str();
  add_document_flags(app, o.documents, o.text_field);
  app.add_option("--input-sentence-size", o.input_sentence_size,
                 "learn from this many sentences (lines) drawn with --seed, in memory for them alone (0: every one; "
                 "SentencePiece holds them all)")
      ->capture_default_str();
  app.add_option("--seed", o.seed, "the draw of --input-sentence-size")->capture_default_str();
  return parse(app, args);
}

namespace {

// A model to run: the positional checkpoint or directory, or --save-dir's latest checkpoint, as
// --resume DIR takes it (one of the two).
void add_model_source(CLI::App& app, std::string& model, std::string& save_dir, const std::string& what) {
  app.add_option("checkpoint", model, what);
  app.add_option("--save-dir", save_dir, "or the latest checkpoint of a run's --save-dir (instead of a checkpoint)");
}

void take_model_source(std::string& model, const std::string& save_dir, const std::string& command) {
  if (!model.empty() && !save_dir.empty())
    usage_fail("--save-dir: give a checkpoint or --save-dir, not both (got '" + model + "' and --save-dir '" + save_dir +
               "')");
  if (model.empty() && save_dir.empty()) usage_fail(command + ": give a checkpoint, or --save-dir DIR for its latest");
  if (!save_dir.empty()) model = latest_step_checkpoint(save_dir, "--save-dir");
}

}  // namespace

bool parse_generate_options(const std::vector<std::string>& args, GenerateOptions& o) {
  CLI::App app{"Text from a checkpoint, streamed as it is made (a key/value cache, one token at a time)",
               "tiny_llama generate"};
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  std::string device = "cpu", save_dir;
  add_model_source(app, o.checkpoint, save_dir,
                   "a checkpoint written by --save or --save-dir, or a Hugging Face LLaMA directory");
  app.add_option("--tokenizer", o.tokenizer,
                 "bytes, or the .model or tokenizer.json the model was trained with (default: the one the checkpoint "
                 "stores, a directory's own)");
  CLI::Option* prompt = app.add_option("--prompt", o.prompt, "the text to continue (\"\": from the begin-of-document token)");
  std::string prompt_tokens;
  app.add_option("--prompt-tokens", prompt_tokens, "or token ids, e.g. 1,42,7");
  app.add_option("--prompts-file", o.prompts_file, "or a file of prompts, one a line, generated together as a batch");
  app.add_option("--max-new-tokens", o.max_new_tokens, "tokens to generate at most")->capture_default_str();
  app.add_option("--temperature", o.sampling.temperature, "0: greedy")->capture_default_str();
  app.add_option("--top-k", o.sampling.top_k, "the k most likely tokens only (0: all)")->capture_default_str();
  app.add_option("--top-p", o.sampling.top_p, "the most likely tokens up to this probability")->capture_default_str();
  app.add_option("--seed", o.seed, "the draws (the same seed, the same text)")->capture_default_str();
  app.add_option("--device", device, "cpu or cuda (fp32 on both)")->capture_default_str();
  app.add_flag("!--no-cache", o.cache, "recompute the whole window for every token (to measure what the cache saves)");
  if (!parse(app, args)) return false;
  take_model_source(o.checkpoint, save_dir, "generate");
  o.prompt_given = prompt->count() > 0;
  if (o.seed > uint64_t(INT64_MAX))  // --seed -1 parses as 2^64 - 1
    usage_fail("--seed: must be in [0, 9223372036854775807] (got " + std::to_string(o.seed) + ")");
  for (size_t at = 0; !prompt_tokens.empty() && at <= prompt_tokens.size();) {  // ids between commas, none empty
    const size_t comma = std::min(prompt_tokens.find(',', at), prompt_tokens.size());
    const std::string id = prompt_tokens.substr(at, comma - at);
    if (id.empty() || id.size() > 9 || id.find_first_not_of("0123456789") != std::string::npos)
      usage_fail("--prompt-tokens: '" + prompt_tokens + "' is not a list of token ids (non-negative integers between "
                 "commas, e.g. 1,42,7)");
    o.prompt_tokens.push_back(int32_t(std::stol(id)));
    at = comma + 1;
  }
  if (device == "auto") o.device = DeviceKind::Auto;
  else if (device == "cpu") o.device = DeviceKind::Cpu;
  else if (device == "cuda") o.device = DeviceKind::Cuda;
  else usage_fail("--device: must be auto, cpu or cuda (got '" + device + "')");
  return true;
}

bool parse_export_options(const std::vector<std::string>& args, ExportOptions& o) {
  CLI::App app{"A checkpoint as a Hugging Face transformers directory (LlamaForCausalLM and its tokenizer)",
               "tiny_llama export"};
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  std::string save_dir;
  add_model_source(app, o.checkpoint, save_dir, "a checkpoint written by --save or --save-dir");
  app.add_option("--hf", o.out_dir, "the directory to write")->required();
  app.add_option("--dtype", o.dtype, "bf16 or fp32")->capture_default_str();
  app.add_option("--tokenizer", o.tokenizer,
                 "bytes, or the .model or tokenizer.json the model was trained with (default: the one the checkpoint "
                 "stores)");
  if (!parse(app, args)) return false;
  take_model_source(o.checkpoint, save_dir, "export");
  return true;
}

bool parse_eval_options(const std::vector<std::string>& args, EvalOptions& o) {
  refuse_expanded_pattern(args);
  CLI::App app{"The loss and perplexity of a model on held-out tokens, and its accuracy on multiple-choice tasks "
               "(HellaSwag's JSON lines), in fp32 on the CPU or a GPU",
               "tiny_llama eval"};
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  std::string device = "auto", save_dir;
  add_model_source(app, o.model, save_dir, "a checkpoint written by --save or --save-dir, or a Hugging Face LLaMA "
                                           "directory");
  app.add_option("--data", o.data,
                 "a text file or token files (a quoted glob): the loss on their validation split, the windows "
                 "training validates on");
  app.add_option("--val-tokens", o.val_tokens, "the split's first N tokens, as training's --val-tokens (default: all)");
  app.add_option("--task", o.tasks, "a multiple-choice task in HellaSwag's JSON lines (ctx, endings, label); repeatable")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_option("--tokenizer", o.tokenizer,
                 "the tasks' tokenizer: bytes, or the .model or tokenizer.json the model was trained with (default: "
                 "the one the checkpoint stores, a directory's own)");
  app.add_option("--batch-size", o.batch, "windows, or task rows, a forward")->capture_default_str();
  app.add_option("--seq-len", o.seq_len,
                 "tokens a window (default: the length the model was trained at, a directory's "
                 "max_position_embeddings, else 2048); task rows longer lose the start of their context");
  app.add_option("--device", device, "auto, cpu or cuda (fp32 on both)")->capture_default_str();
  app.add_option("--json", o.json_path, "write the results and every task example's tokens and scores");
  if (!parse(app, args)) return false;
  take_model_source(o.model, save_dir, "eval");
  if (device == "auto") o.device = DeviceKind::Auto;
  else if (device == "cpu") o.device = DeviceKind::Cpu;
  else if (device == "cuda") o.device = DeviceKind::Cuda;
  else usage_fail("--device: must be auto, cpu or cuda (got '" + device + "')");
  return true;
}

}  // namespace tt
