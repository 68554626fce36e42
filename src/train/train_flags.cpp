#include "train/train_flags.h"

#include <fmt/format.h>

#include <climits>
#include <cmath>
#include <limits>
#include <type_traits>

#include "core/error.h"

namespace tt {

using json = nlohmann::json;

namespace {

using G = FlagGroup;
using R = FlagRule;

// The table. The order is --help's and the recipe's; the help texts are --help's.
const std::vector<TrainFlag> kFlags = {
    // The model's shape and seed: every command that builds a model.
    {"--hidden-dim", "model width", G::Model, kStored | kAgreed, +[](TrainOptions& o) -> int& { return o.model.hidden; }},
    {"--num-layers", "transformer blocks", G::Model, kStored | kAgreed,
     +[](TrainOptions& o) -> int& { return o.model.layers; }},
    {"--num-heads", "attention heads", G::Model, kStored | kAgreed, +[](TrainOptions& o) -> int& { return o.model.heads; }},
    {"--num-kv-heads", "key/value heads (default: heads/2)", G::Model, kStored | kAgreed | kDerived,
     +[](TrainOptions& o) -> int& { return o.model.kv_heads; }},
    {"--intermediate-size", "SwiGLU width (default: 4 x hidden)", G::Model, kStored | kAgreed | kDerived,
     +[](TrainOptions& o) -> int& { return o.model.intermediate; }},
    {"--vocab-size", "vocabulary (256 for a text file)", G::Model, kStored | kAgreed,
     +[](TrainOptions& o) -> int& { return o.model.vocab_size; }},
    {"--norm-eps", "RMSNorm epsilon", G::Model, kStored | kAgreed, +[](TrainOptions& o) -> double& { return o.model.norm_eps; }},
    {"--rope-theta", "RoPE base", G::Model, kStored | kAgreed, +[](TrainOptions& o) -> double& { return o.model.rope_theta; }},
    {"--tie-embeddings,!--no-tie-embeddings",
     "the output head is the embedding (default), or a matrix of its own (lm_head)", G::Model, kStored | kAgreed,
     +[](TrainOptions& o) -> bool& { return o.model.tie_embeddings; }},
    {"--seed", "initialisation, synthetic data and the shuffle", G::Model, kStored | kAgreed,
     +[](TrainOptions& o) -> uint64_t& { return o.seed; }},

    // The training: train and ablate.
    {"--batch-size", "sequences per micro-batch", G::Training, kStored | kAgreed,
     +[](TrainOptions& o) -> int& { return o.batch; }, R::Positive},
    {"--seq-len", "tokens per sequence", G::Training, kStored | kAgreed, +[](TrainOptions& o) -> int& { return o.seq_len; },
     R::Positive},
    {"--num-steps", "optimizer steps (total, also when resuming)", G::Training, kStored | kAgreed,
     +[](TrainOptions& o) -> int& { return o.steps; }, R::Positive},
    {"--learning-rate", "AdamW learning rate (a schedule's peak)", G::Training, kStored | kAgreed,
     +[](TrainOptions& o) -> double& { return o.learning_rate; }, R::PositiveFinite},
    {"--lr-schedule", "constant, cosine, linear or wsd (warmup-stable-decay)", G::Training, kStored | kAgreed,
     +[](TrainOptions& o) -> std::string& { return o.lr_schedule; }},
    {"--lr-warmup-steps", "steps of the learning rate's linear warmup", G::Training, kStored | kAgreed,
     +[](TrainOptions& o) -> int& { return o.lr_warmup; }, R::NonNegative},
    {"--min-lr", "where cosine, linear and wsd decay to at the last step", G::Training, kStored | kAgreed,
     +[](TrainOptions& o) -> double& { return o.min_lr; }},
    {"--lr-decay-steps", "wsd: steps of the final decay (default: a fifth of the schedule)", G::Training,
     kStored | kAgreed | kDerived, +[](TrainOptions& o) -> int& { return o.lr_decay; }, R::NonNegative},
    {"--lr-schedule-steps",
     "the schedule's length, when a run stops before its end (default: --num-steps); the minimum after it", G::Training,
     kStored | kAgreed | kDerived, +[](TrainOptions& o) -> int& { return o.lr_schedule_steps; }, R::NonNegative},
    {"--weight-decay", "AdamW decoupled weight decay", G::Training, kStored | kAgreed,
     +[](TrainOptions& o) -> double& { return o.weight_decay; }, R::NonNegativeFinite},
    {"--init-std", "std of the normal weight initialisation (1 shows a broken init)", G::Training,
     kStored | kAgreed | kShown, +[](TrainOptions& o) -> double& { return o.init_std; }, R::PositiveFinite},
    {"--beta1", "AdamW's first-moment decay", G::Training, kStored | kAgreed | kShown,
     +[](TrainOptions& o) -> double& { return o.beta1; }, R::Fraction},
    {"--beta2", "AdamW's second-moment decay", G::Training, kStored | kAgreed | kShown,
     +[](TrainOptions& o) -> double& { return o.beta2; }, R::Fraction},
    {"--adam-eps", "AdamW's epsilon", G::Training, kStored | kAgreed | kShown,
     +[](TrainOptions& o) -> double& { return o.adam_eps; }, R::PositiveFinite},
    {"--grad-accum-steps",
     "micro-batches of --batch-size whose gradients are summed into one update (gradient accumulation)", G::Training,
     kStored | kAgreed, +[](TrainOptions& o) -> int& { return o.grad_accum; }, R::Positive},
    {"--grad-clip", "clip the gradients to this global norm (fp32, over all ranks), logged each step; 0: no clipping",
     G::Training, kStored | kAgreed | kShown, +[](TrainOptions& o) -> double& { return o.grad_clip; },
     R::NonNegativeFinite},
    {"--decay-norms,!--no-decay-norms", "weight decay on the RMSNorm gains (default: on)", G::Training,
     kStored | kAgreed | kShown, +[](TrainOptions& o) -> bool& { return o.decay_norms; }},
    {"--decay-embedding,!--no-decay-embedding", "weight decay on the embedding, which is the tied output head (default: on)",
     G::Training, kStored | kAgreed | kShown, +[](TrainOptions& o) -> bool& { return o.decay_embedding; }},
    {"--data",
     "synthetic, a text file whose bytes are the tokens, or token files (a file or a quoted glob pattern of shards; "
     "names with \"val\" validate)",
     G::Training, kStored | kPath, +[](TrainOptions& o) -> std::string& { return o.data; }},
    {"--shuffle,!--no-shuffle", "the training windows in an order drawn from --seed, anew each pass over the data",
     G::Training, kStored | kAgreed | kShown, +[](TrainOptions& o) -> bool& { return o.shuffle; }},
    {"--val-tokens",
     "validate on the first N tokens of the validation split (windows of --seq-len), the same for any --batch-size and "
     "number of ranks (default: 32 windows)",
     G::Training, kStored | kAgreed | kShown | kDerived, +[](TrainOptions& o) -> int64_t& { return o.val_tokens; },
     R::NonNegative},
    {"--log-every", "print a line (and validation loss) every N steps", G::Training, kStored | kAgreed,
     +[](TrainOptions& o) -> int& { return o.log_every; }, R::Positive},
    {"--eval-every", "validation loss every N steps (default: with every log line)", G::Training,
     kStored | kAgreed | kShown | kDerived, +[](TrainOptions& o) -> int& { return o.eval_every; }, R::NonNegative},
    {"--timing-warmup-steps", "steps left out of the timing", G::Training, kAgreed,
     +[](TrainOptions& o) -> int& { return o.timing_warmup; }, R::NonNegative},
    {"--json", "write the summary and per-step losses as JSON", G::Training, kPath,
     +[](TrainOptions& o) -> std::string& { return o.json_path; }},
    {"--metrics",
     "JSON lines as the run goes, one at every log step (step, tokens, loss, lr, tokens/s, MFU, validation); a resumed "
     "run appends (default with --save-dir: DIR/metrics.jsonl)",
     G::Training, kPath | kDerived, +[](TrainOptions& o) -> std::string& { return o.metrics_path; }},

    {"--tensorboard", "TensorBoard event files into DIR as the run goes: --metrics' numbers (a resume adds a file)",
     G::Training, kPath, +[](TrainOptions& o) -> std::string& { return o.tensorboard_dir; }},
    {"--eval-task",
     "a multiple-choice task (HellaSwag's JSON lines) scored with every validation: acc_norm on the log line, acc and "
     "acc_norm in the metrics",
     G::Training, kPath | kAgreed, +[](TrainOptions& o) -> std::string& { return o.eval_task; }},
    {"--tokenizer",
     "the data's tokenizer (bytes, a .model or a tokenizer.json; default: the one tokenize recorded beside the shards, "
     "bytes for a text file), stored in the checkpoints; --eval-task's text goes through it",
     G::Training, kPath, +[](TrainOptions& o) -> std::string& { return o.tokenizer; }},

    // The run: train alone.
    {"--save", "write a checkpoint (safetensors) at the end, and when stopped by a signal", G::Run, kPath,
     +[](TrainOptions& o) -> std::string& { return o.save_path; }},
    {"--save-dir", "step-numbered checkpoints in DIR (step_00000100.safetensors) at --save-every and at the end", G::Run,
     kPath, +[](TrainOptions& o) -> std::string& { return o.save_dir; }},
    {"--save-every", "with --save or --save-dir: a checkpoint every N steps too", G::Run, kStored | kAgreed | kShown,
     +[](TrainOptions& o) -> int& { return o.save_every; }, R::NonNegative},
    {"--keep-last", "with --save-dir: keep this run's newest N step checkpoints (default: all)", G::Run, kStored | kShown,
     +[](TrainOptions& o) -> int& { return o.keep_last; }, R::NonNegative},
    {"--resume", "continue from a checkpoint written by --save, or the latest in a --save-dir (which it then saves to)",
     G::Run, kPath, +[](TrainOptions& o) -> std::string& { return o.resume_path; }},
    {"--init-from",
     "start from a model: a Hugging Face LLaMA directory or a checkpoint of --save (its weights alone: a new run); its "
     "shape is the model's unless flags say otherwise",
     G::Run, kPath | kAgreed, +[](TrainOptions& o) -> std::string& { return o.init_from; }},
    {"--zero", "data parallel: 0 keeps the optimizer state on every rank, 1 shards it (ZeRO-1)", G::Run, kAgreed,
     +[](TrainOptions& o) -> int& { return o.zero; }},
    {"--reduce-dtype",
     "GPU ranks: the type gradients are summed in: fp32, or bf16 (bf16 runs only: half the bytes sent, measured slower "
     "on NVLink: docs/multi-gpu.md)",
     G::Run, kAgreed, +[](TrainOptions& o) -> std::string& { return o.reduce_dtype; }},
    {"--dist-init",
     "GPU ranks: how they find rank 0: env (MASTER_ADDR, MASTER_PORT), mpi, or file:PATH on a shared path (default: "
     "env, or mpi under mpirun without MASTER_ADDR)",
     G::Run, kPath | kDerived, +[](TrainOptions& o) -> std::string& { return o.dist_init; }},
    {"--dist-timeout", "seconds the ranks wait for each other to start", G::Run, 0,
     +[](TrainOptions& o) -> int& { return o.dist_timeout; }},
    {"--nproc-per-node",
     "start this many local processes, one rank each (CPU: through mpirun); under torchrun, srun or mpirun the "
     "launcher starts them",
     G::Run, kDerived, +[](TrainOptions& o) -> int& { return o.nproc_per_node; }},
    {"--profile", "kernel trace (CUPTI) into DIR: trace.json, kernels.csv, regions.csv", G::Run, kPath,
     +[](TrainOptions& o) -> std::string& { return o.profile_dir; }},
    {"--profile-steps", "steps traced after the warm-up", G::Run, kAgreed,
     +[](TrainOptions& o) -> int& { return o.profile_steps; }, R::Positive},
    {"--flops-profile", "per-module FLOPs, time, TFLOP/s and MFU (traces like --profile)", G::Run, 0,
     +[](TrainOptions& o) -> bool& { return o.flops_profile; }},
    {"--profile-memory", "the arena's live bytes by category over one step: DIR/memory.csv", G::Run, 0,
     +[](TrainOptions& o) -> bool& { return o.profile_memory; }},
};

// The rows read the options they are given; the accessors take them mutable only to serve both.
TrainOptions& mutable_options(const TrainOptions& o) { return const_cast<TrainOptions&>(o); }

}  // namespace

const std::vector<TrainFlag>& train_flags() { return kFlags; }

const TrainFlag& train_flag(const std::string& name) {
  for (const TrainFlag& f : kFlags)
    if (f.name() == name) return f;
  TT_CHECK(false, "train_flag: no row named " + name);
  return kFlags.front();
}

std::vector<const TrainFlag*> train_flags_with(unsigned use) {
  std::vector<const TrainFlag*> rows;
  for (const TrainFlag& f : kFlags)
    if ((f.use & use) == use) rows.push_back(&f);
  return rows;
}

std::string TrainFlag::name() const {
  const std::string all(names);
  return all.substr(0, all.find(','));
}

std::string TrainFlag::negation() const {
  const std::string all(names);
  const size_t at = all.find(",!");
  return at == std::string::npos ? "" : all.substr(at + 2);
}

std::string TrainFlag::key() const {
  std::string k = name().substr(2);
  for (char& c : k)
    if (c == '-') c = '_';
  return k;
}

std::string TrainFlag::text(const TrainOptions& o) const {
  return std::visit(
      [&](auto get) -> std::string {
        const auto& v = get(mutable_options(o));
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, bool>) return v ? "true" : "false";
        else if constexpr (std::is_same_v<T, std::string>) return v;
        else return fmt::format("{}", v);  // a double's shortest form that reads back exactly
      },
      field);
}

json TrainFlag::value(const TrainOptions& o) const {
  return std::visit([&](auto get) { return json(get(mutable_options(o))); }, field);
}

std::string TrainFlag::as_flag(const TrainOptions& o) const {
  if (is_switch()) return std::get<FlagField<bool>>(field)(mutable_options(o)) ? name() : negation();
  return name() + " " + text(o);
}

void TrainFlag::restore(TrainOptions& o, const json& v, const std::string& where) const {
  auto refuse = [&](const char* what) {
    usage_fail(fmt::format("{}: the stored {} is not {} (got {})", where, name(), what, v.dump().substr(0, 64)));
  };
  std::visit(
      [&](auto get) {
        auto& out = get(o);
        using T = std::decay_t<decltype(out)>;
        if constexpr (std::is_same_v<T, bool>) {
          if (!v.is_boolean()) refuse("true or false");
          out = v.get<bool>();
        } else if constexpr (std::is_same_v<T, std::string>) {
          if (!v.is_string() || v.get_ref<const std::string&>().size() > 256) refuse("a short text");
          out = v.get<std::string>();
        } else if constexpr (std::is_same_v<T, double>) {
          if (!v.is_number()) refuse("a number");
          out = v.get<double>();
        } else {  // an integer of T's range
          if (!v.is_number_integer()) refuse("an integer");
          const bool in_range = v.is_number_unsigned()
                                    ? v.get<uint64_t>() <= uint64_t(std::numeric_limits<T>::max())
                                    : v.get<int64_t>() >= int64_t(std::numeric_limits<T>::min()) &&
                                          (std::is_unsigned_v<T> || v.get<int64_t>() <= int64_t(std::numeric_limits<T>::max()));
          if (!in_range) refuse("an integer in range");
          out = v.is_number_unsigned() ? T(v.get<uint64_t>()) : T(v.get<int64_t>());
        }
      },
      field);
}

void TrainFlag::check(const TrainOptions& o) const {
  if (rule == FlagRule::Any) return;
  const std::string n = name(), got = text(o);
  const double x = std::visit(
      [&](auto get) {
        const auto& v = get(mutable_options(o));
        if constexpr (std::is_arithmetic_v<std::decay_t<decltype(v)>>) return double(v);
        else return 0.0;  // no rule applies to a text
      },
      field);
  switch (rule) {
    case FlagRule::Positive:
      if (x <= 0) usage_fail(n + ": must be a positive integer (got " + got + ")");
      break;
    case FlagRule::NonNegative:
      if (x < 0) usage_fail(n + ": must not be negative (got " + got + ")");
      break;
    case FlagRule::PositiveFinite:
      if (!(std::isfinite(x) && x > 0)) usage_fail(n + ": must be a positive finite number (got " + got + ")");
      break;
    case FlagRule::NonNegativeFinite:
      if (!(std::isfinite(x) && x >= 0)) usage_fail(n + ": must be a finite number, zero or more (got " + got + ")");
      break;
    case FlagRule::Fraction:
      if (!(std::isfinite(x) && x >= 0 && x < 1)) usage_fail(n + ": must be in [0, 1) (got " + got + ")");
      break;
    case FlagRule::Any:
      break;
  }
}

json recipe_of(const TrainOptions& o) {
  json r = json::object();
  for (const TrainFlag* f : train_flags_with(kStored)) r[f->name()] = f->value(o);
  return r;
}

std::string changed_settings(const json& recipe, const TrainOptions& now) {
  std::string changed;
  for (const TrainFlag* f : train_flags_with(kStored)) {
    if (f->use & kPath || f->name() == "--num-steps" || !recipe.contains(f->name())) continue;
    TrainOptions was = now;
    f->restore(was, recipe[f->name()], "--resume");
    if (f->text(was) != f->text(now))
      changed += fmt::format("{}{} {} -> {}", changed.empty() ? "" : ", ", f->name(), f->text(was), f->text(now));
  }
  return changed;
}

std::string settings_line(const TrainOptions& o) {
  static const TrainOptions defaults;
  std::string line;
  for (const TrainFlag* f : train_flags_with(kShown))
    if (f->text(o) != f->text(defaults)) line += (line.empty() ? "" : " ") + f->as_flag(o);
  return line;
}

std::vector<std::string> agreed_values(const TrainOptions& o) {
  std::vector<std::string> lines;
  for (const TrainFlag* f : train_flags_with(kAgreed)) lines.push_back(f->name() + "=" + f->text(o));
  return lines;
}

}  // namespace tt
