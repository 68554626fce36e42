#include "cli/options.h"
#include "train/checkpoint.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>

#include "core/error.h"
#include "data/loader.h"
#include "train/hf.h"

namespace tt {

namespace {

std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n') c = ' ';
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

// Flags shared by every subcommand that builds a model: its shape, the device, the version
// preset, the precision and the plan switches.
struct ModelFlags {
  std::string device = "auto", version = "v1", preset;
  bool amp = false, tf32 = false, no_nvtx = false;
  int classifier_chunk = 0;
  std::vector<std::string> enable, disable;
  CLI::Option *hidden = nullptr, *layers = nullptr, *heads = nullptr, *kv = nullptr, *ffn = nullptr, *vocab = nullptr,
              *eps = nullptr, *theta = nullptr, *tie = nullptr;
  // The subcommand's batch and sequence-length flags, which a preset also sets: one value each
  // (train, ablate, validate, debug) or a list (bench).
  CLI::Option *batch = nullptr, *seq = nullptr;
  std::vector<int>*batch_list = nullptr, *seq_list = nullptr;
};

void add_model_flags(CLI::App& app, TrainOptions& o, ModelFlags& f) {
  ModelConfig& m = o.model;
  std::string names;
  for (const Preset& p : presets()) names += std::string(names.empty() ? "" : ", ") + p.name;
  app.add_option("--preset", f.preset,
                 "a named model and batch (" + names + "); flags given explicitly override it");
  f.hidden = app.add_option("--hidden-dim", m.hidden, "model width")->capture_default_str();
  f.layers = app.add_option("--num-layers", m.layers, "transformer blocks")->capture_default_str();
  f.heads = app.add_option("--num-heads", m.heads, "attention heads")->capture_default_str();
  f.kv = app.add_option("--num-kv-heads", m.kv_heads, "key/value heads (default: heads/2)");
  f.ffn = app.add_option("--intermediate-size", m.intermediate, "SwiGLU width (default: 4 x hidden)");
  f.vocab = app.add_option("--vocab-size", m.vocab_size, "vocabulary (256 for a text file)")->capture_default_str();
  f.eps = app.add_option("--norm-eps", m.norm_eps, "RMSNorm epsilon")->capture_default_str();
  f.theta = app.add_option("--rope-theta", m.rope_theta, "RoPE base")->capture_default_str();
  f.tie = app.add_flag("--tie-embeddings,!--no-tie-embeddings", m.tie_embeddings,
                       "the output head is the embedding (default), or a matrix of its own (lm_head)");
  app.add_option("--seed", o.seed, "initialisation and synthetic data")->capture_default_str();
  app.add_option("--device", f.device, "auto, cpu or cuda")->capture_default_str();
  app.add_option("--level,--version", f.version,
                 "optimization level: v1, v2, v3, v4 or v5 (--version v5 too; --version alone prints the program's version)")
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

// "v1" to "v5"; anything else is refused, naming `flag`.
int parse_version(const std::string& v, const char* flag = "--level") {
  if (v.size() != 2 || v[0] != 'v' || v[1] < '1' || v[1] > '0' + kLatestVersion)
    usage_fail(std::string(flag) + ": the optimization level is one of v1, v2, v3, v4, v5 (got '" + v + "')");
  return v[1] - '0';
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
  auto fill = [&](CLI::Option* opt, auto& field, auto value) {
    if (!opt || opt->count()) return;
    field = value;
    set += " " + opt->get_name() + " " + std::to_string(value);
  };
  ModelConfig& m = o.model;
  if (o.data == "synthetic") fill(f.vocab, m.vocab_size, p.model.vocab_size);  // a text file's bytes: 256
  fill(f.hidden, m.hidden, p.model.hidden);
  fill(f.layers, m.layers, p.model.layers);
  fill(f.heads, m.heads, p.model.heads);
  fill(f.kv, m.kv_heads, p.model.kv_heads);
  fill(f.ffn, m.intermediate, p.model.intermediate);
  fill(f.batch, o.batch, p.batch);
  fill(f.seq, o.seq_len, p.seq_len);
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
    for (auto [opt, field, value] : {std::tuple{f.hidden, &m.hidden, from->hidden}, {f.layers, &m.layers, from->layers},
                                     {f.heads, &m.heads, from->heads}, {f.kv, &m.kv_heads, from->kv_heads},
                                     {f.ffn, &m.intermediate, from->intermediate}, {f.vocab, &m.vocab_size, from->vocab_size}})
      if (!opt->count()) *field = value;
    if (!f.eps->count()) m.norm_eps = from->norm_eps;
    if (!f.tie->count()) m.tie_embeddings = from->tie_embeddings;
    if (!f.theta->count()) m.rope_theta = from->rope_theta;
  }
  const bool preset_shape = !f.preset.empty() || from;
  if (!f.kv->count() && !preset_shape) m.kv_heads = m.heads % 2 == 0 ? m.heads / 2 : m.heads;
  if (!f.ffn->count() && !preset_shape) m.intermediate = default_intermediate(m.hidden);
  if (o.data != "synthetic" && !f.vocab->count() && !from) {
    if (names_token_files(o.data))
      usage_fail("--vocab-size: token files do not record their vocabulary: give the tokenizer's (for example "
                 "--vocab-size 8000)");
    m.vocab_size = kTextVocab;
  }
  if (f.device == "auto") o.backend.device = DeviceKind::Auto;
  else if (f.device == "cpu") o.backend.device = DeviceKind::Cpu;
  else if (f.device == "cuda") o.backend.device = DeviceKind::Cuda;
  else usage_fail("--device: must be auto, cpu or cuda (got '" + f.device + "')");
  o.backend.plan = make_plan(parse_version(f.version), f);
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

// Parses; false when help was printed.
bool parse(CLI::App& app, const std::vector<std::string>& args) {
  std::vector<std::string> reversed = expand_switch_flags(args);
  std::reverse(reversed.begin(), reversed.end());  // CLI11 consumes from the back
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return false;
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
  f.batch = app.add_option("--batch-size", o.batch, "sequences per step")->capture_default_str();
  f.seq = app.add_option("--seq-len", o.seq_len, "tokens per sequence")->capture_default_str();
  app.add_option("--num-steps", o.steps, "optimizer steps (total, also when resuming)")->capture_default_str();
  app.add_option("--learning-rate", o.learning_rate, "AdamW learning rate (a schedule's peak)")->capture_default_str();
  app.add_option("--lr-schedule", o.lr_schedule, "constant, cosine, linear or wsd (warmup-stable-decay)")->capture_default_str();
  app.add_option("--lr-warmup-steps", o.lr_warmup, "steps of the learning rate's linear warmup")->capture_default_str();
  app.add_option("--min-lr", o.min_lr, "where cosine, linear and wsd decay to at the last step")->capture_default_str();
  app.add_option("--lr-decay-steps", o.lr_decay, "wsd: steps of the final decay (default: a fifth of the schedule)");
  app.add_option("--lr-schedule-steps", o.lr_schedule_steps,
                 "the schedule's length, when a run stops before its end (default: --num-steps); the minimum after it");
  app.add_option("--weight-decay", o.weight_decay, "AdamW decoupled weight decay")->capture_default_str();
  app.add_option("--init-std", o.init_std, "std of the normal weight initialisation (1 shows a broken init)")
      ->capture_default_str();
  app.add_option("--timing-warmup-steps", o.timing_warmup, "steps left out of the timing")->capture_default_str();
  add_renamed_warmup_flag(app);
  app.add_option("--log-every", o.log_every, "print a line (and validation loss) every N steps")->capture_default_str();
  app.add_option("--eval-every", o.eval_every, "validation loss every N steps (default: with every log line)");
  app.add_option("--data", o.data,
                 "synthetic, a text file whose bytes are the tokens, or token files (a file or a quoted glob "
                 "pattern of shards; names with \"val\" validate)")->capture_default_str();
  app.add_option("--json", o.json_path, "write the summary and per-step losses as JSON");
  app.add_option("--val-tokens", o.val_tokens,
                 "validate on the first N tokens of the validation split (windows of --seq-len), the same for any "
                 "--batch-size and number of ranks (default: the first 4 batches)");
  app.add_flag("--shuffle,!--no-shuffle", o.shuffle,
               "the training windows in an order drawn from --seed, anew each pass over the data");
  app.add_option("--metrics", o.metrics_path,
                 "JSON lines as the run goes, one at every log step (step, tokens, loss, lr, tokens/s, MFU, validation)");
  app.add_option("--beta1", o.beta1, "AdamW's first-moment decay")->capture_default_str();
  app.add_option("--beta2", o.beta2, "AdamW's second-moment decay")->capture_default_str();
  app.add_option("--adam-eps", o.adam_eps, "AdamW's epsilon")->capture_default_str();
  app.add_option("--grad-accum-steps", o.grad_accum,
                 "micro-batches of --batch-size whose gradients are summed into one update (gradient accumulation)")
      ->capture_default_str();
  app.add_option("--grad-clip", o.grad_clip,
                 "clip the gradients to this global norm (fp32, over all ranks), logged each step; 0: no clipping")
      ->capture_default_str();
  app.add_flag("--decay-norms,!--no-decay-norms", o.decay_norms, "weight decay on the RMSNorm gains (default: on)");
  app.add_flag("--decay-embedding,!--no-decay-embedding", o.decay_embedding,
               "weight decay on the embedding, which is the tied output head (default: on)");
}

}  // namespace

bool parse_train_options(const std::vector<std::string>& args, TrainOptions& o, bool with_recipe);

bool parse_train_options(const std::vector<std::string>& args, TrainOptions& o) {
  return parse_train_options(args, o, true);
}

// With --resume, the checkpoint's recipe (src/train/trainer.h) goes before the flags given, which
// win (the last of a flag is taken): a resume needs only what changes.
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

}  // namespace

bool parse_train_options(const std::vector<std::string>& args, TrainOptions& o, bool with_recipe) {
  refuse_expanded_pattern(args);
  CLI::App app{"Train a Tiny LLaMA from scratch (CPU reference or CUDA, versions v1..v5)", "tiny_llama"};
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);  // last one wins
  ModelFlags f;
  add_train_flags(app, o, f);
  add_model_flags(app, o, f);
  app.add_option("--save", o.save_path, "write a checkpoint (safetensors) at the end, and when stopped by a signal");
  app.add_option("--save-every", o.save_every, "with --save or --save-dir: a checkpoint every N steps too");
  app.add_option("--save-dir", o.save_dir,
                 "step-numbered checkpoints in DIR (step_00000100.safetensors) at --save-every and at the end");
  app.add_option("--keep-last", o.keep_last, "with --save-dir: keep the newest N step checkpoints (default: all)");
  app.add_option("--zero", o.zero, "data parallel: 0 keeps the optimizer state on every rank, 1 shards it (ZeRO-1)")
      ->capture_default_str();
  app.add_option("--reduce-dtype", o.reduce_dtype,
                 "GPU ranks: the type gradients are summed in: fp32, or bf16 (bf16 runs only: half the bytes sent, "
                 "measured slower on NVLink: docs/multi-gpu.md)")
      ->capture_default_str();
  app.add_option("--dist-init", o.dist_init,
                 "GPU ranks: how they find rank 0: env (MASTER_ADDR, MASTER_PORT), mpi, or file:PATH on a shared path "
                 "(default: env, or mpi under mpirun without MASTER_ADDR)");
  app.add_option("--dist-timeout", o.dist_timeout, "seconds the ranks wait for each other to start")->capture_default_str();
  app.add_option("--nproc-per-node", o.nproc_per_node,
                 "start this many local processes, one rank each (CPU: through mpirun); under torchrun, srun or "
                 "mpirun the launcher starts them");
  app.add_option("--resume", o.resume_path, "continue from a checkpoint written by --save, or the latest in a --save-dir");
  app.add_option("--init-from", o.init_from,
                 "start from a model: a Hugging Face LLaMA directory or a checkpoint of --save (its weights alone: a new "
                 "run); its shape is the model's unless flags say otherwise");
  app.add_option("--profile", o.profile_dir, "kernel trace (CUPTI) into DIR: trace.json, kernels.csv, regions.csv");
  app.add_option("--profile-steps", o.profile_steps, "steps traced after the warm-up")->capture_default_str();
  app.add_flag("--flops-profile", o.flops_profile, "per-module FLOPs, time, TFLOP/s and MFU (traces like --profile)");
  app.add_flag("--profile-memory", o.profile_memory, "the arena's live bytes by category over one step: DIR/memory.csv");
  app.footer("Other commands (each takes --help):\n"
             "  generate CKPT|DIR      text from a checkpoint or a Hugging Face directory\n"
             "  export CKPT --hf DIR   a checkpoint as a Hugging Face transformers directory\n"
             "  tokenizer-train        a SentencePiece tokenizer from text files\n"
             "  tokenize               text files to token-file shards\n"
             "  bench                  versions x batch sizes x sequence lengths x precisions, timed\n"
             "  ablate                 the plan's switches taken away one at a time, timed\n"
             "  validate               every version against the CPU reference\n"
             "  kernels                each custom kernel against its v2 counterpart and the GPU's ceilings\n"
             "  debug STAGE            the performance-debugging stages");
  if (!parse(app, args)) return false;
  if (!o.resume_path.empty() && std::filesystem::is_directory(o.resume_path)) {  // --save-dir's latest
    const std::string latest = latest_step_checkpoint(o.resume_path);
    if (latest.empty()) usage_fail("--resume: '" + o.resume_path + "' holds no step checkpoint (step_*.safetensors)");
    o.resume_path = latest;
  }
  if (with_recipe && !o.resume_path.empty()) {
    std::vector<std::string> recipe = read_checkpoint_info(o.resume_path).train_args;
    if (!recipe.empty()) {
      recipe.insert(recipe.end(), args.begin(), args.end());
      o = TrainOptions{};
      return parse_train_options(recipe, o, false);
    }
  }
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
  return true;
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
  if (!parse(app, args)) return false;
  finish_model_flags(o.train, f);
  return true;
}

bool parse_bench_options(const std::vector<std::string>& args, BenchOptions& o) {
  CLI::App app{"Benchmark sweep: versions x batch sizes x sequence lengths x precisions", "tiny_llama bench"};
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  ModelFlags f;
  add_model_flags(app, o.base, f);
  std::vector<std::string> versions;
  app.add_option("--versions", versions, "versions to run, e.g. v1,v2 (default v1,v2)")->delimiter(',');
  f.batch = app.add_option("--batch-sizes", o.batch_sizes, "batch sizes, e.g. 4,8,16 (default 8)")->delimiter(',');
  f.seq = app.add_option("--seq-lens", o.seq_lens, "sequence lengths, e.g. 128,256 (default 128)")->delimiter(',');
  f.batch_list = &o.batch_sizes;
  f.seq_list = &o.seq_lens;
  app.add_option("--precisions", o.precisions, "fp32, tf32, bf16 (default fp32,bf16)")->delimiter(',');
  app.add_option("--timing-warmup-steps", o.timing_warmup, "untimed steps per point")->capture_default_str();
  add_renamed_warmup_flag(app);
  app.add_option("--steps", o.steps, "steps per timed repetition")->capture_default_str();
  app.add_option("--repeats", o.repeats, "timed repetitions per point")->capture_default_str();
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
  if (!versions.empty()) {
    o.versions.clear();
    for (const std::string& v : versions) o.versions.push_back(parse_version(v, "--versions"));
  }
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
  std::vector<std::string> versions;
  app.add_option("--versions", versions, "versions to validate (default v1,v2,v3,v4)")->delimiter(',');
  app.add_option("--precisions", o.precisions, "fp32, tf32, bf16 (default fp32,bf16)")->delimiter(',');
  app.add_option("--json", o.json_path, "write the results as JSON");
  if (!parse(app, args)) return false;
  finish_model_flags(o.base, f);
  if (!versions.empty()) {
    o.versions.clear();
    for (const std::string& v : versions) o.versions.push_back(parse_version(v, "--versions"));
  }
  o.selected = !versions.empty() || app.count("--precisions");
  return true;
}


bool parse_kernel_options(const std::vector<std::string>& args, KernelBenchOptions& o) {
  CLI::App app{"Each custom kernel against its v2 counterpart, against the GEMM and copy ceilings measured in the same run",
               "tiny_llama kernels"};
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  std::vector<std::string> impls;
  CLI::Option* kv = nullptr;
  CLI::Option* ffn = nullptr;
  app.add_option("--impl", impls, "implementations, by version preset: v1 to v5 (default v2,v3,v4,v5)")->delimiter(',');
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
  app.add_option("--csv", o.csv_path, "write the rows as CSV");
  app.add_option("--json", o.json_path, "write the rows, the ceilings and the machine as JSON");
  app.add_flag("--check", o.check,
               "instead of timing, each row against the CPU reference in double at the default shape (error, bound, "
               "repeatable bits)");
  if (!parse(app, args)) return false;
  if (!kv->count()) o.kv_heads = o.heads % 2 == 0 ? o.heads / 2 : o.heads;
  if (!ffn->count()) o.intermediate = default_intermediate(o.hidden);
  if (!impls.empty()) {
    o.versions.clear();
    for (const std::string& v : impls) {
      o.versions.push_back(parse_version(v, "--impl"));
    }
  }
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

bool parse_tokenize_options(const std::vector<std::string>& args, TokenizeOptions& o) {
  CLI::App app{"Text files to token-file shards (train_*.bin, val_*.bin) through a tokenizer", "tiny_llama tokenize"};
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("files", o.inputs,
                 "text files, directories of them, JSON-lines files (.jsonl), each plain or compressed (.gz, .zst), "
                 "or - for standard input")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
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
  app.add_option("--documents", o.documents,
                 "a text file is one document (file), a document a line (line), or a JSON record a line (jsonl: "
                 "the default for .jsonl, .ndjson and .json files)")
      ->capture_default_str();
  app.add_option("--text-field", o.text_field, "a JSON-lines file's (.jsonl) field that holds each record's text")
      ->capture_default_str();
  app.add_option("--threads", o.threads, "encoding threads (default: every core)");
  app.add_option("--shard-tokens", o.shard_tokens, "tokens per shard at most")->capture_default_str();
  return parse(app, args);
}

bool parse_tokenizer_train_options(const std::vector<std::string>& args, TokenizerTrainOptions& o) {
  CLI::App app{"A SentencePiece tokenizer learned from text files: PREFIX.model and PREFIX.vocab",
               "tiny_llama tokenizer-train"};
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("files", o.inputs, "text files to learn from")->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_option("--vocab-size", o.vocab_size, "pieces at most (a small corpus may give fewer)")->capture_default_str();
  app.add_option("--out", o.prefix, "the model's path without its extension");
  app.add_option("--model-type", o.model_type, "bpe or unigram")->capture_default_str();
  return parse(app, args);
}

bool parse_generate_options(const std::vector<std::string>& args, GenerateOptions& o) {
  CLI::App app{"Text from a checkpoint, streamed as it is made (a key/value cache, one token at a time)",
               "tiny_llama generate"};
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  std::string device = "cpu";
  app.add_option("checkpoint", o.checkpoint, "a checkpoint written by --save, or a Hugging Face LLaMA directory")->required();
  app.add_option("--tokenizer", o.tokenizer,
                 "bytes, or the .model or tokenizer.json the model was trained with (a directory's own by default)");
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
  app.add_option("checkpoint", o.checkpoint, "a checkpoint written by --save")->required();
  app.add_option("--hf", o.out_dir, "the directory to write")->required();
  app.add_option("--dtype", o.dtype, "bf16 or fp32")->capture_default_str();
  app.add_option("--tokenizer", o.tokenizer, "bytes, or the .model or tokenizer.json the model was trained with");
  return parse(app, args);
}

}  // namespace tt
