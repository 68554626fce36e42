#include "train/evaluate.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <memory>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/files.h"
#include "data/tokenizer.h"
#include "train/bound_tokenizer.h"
#include "parallel/world.h"
#include "train/hf.h"

namespace tt {

int64_t validation_windows(int64_t val_tokens, int seq_len, const DataSource& data) {
  const int64_t windows = (val_tokens + seq_len - 1) / seq_len;
  if (windows > data.all_validation_windows())
    usage_fail(fmt::format("--val-tokens: {} tokens are {} windows of --seq-len {}; the validation split holds {}",
                           val_tokens, windows, seq_len, data.all_validation_windows()));
  return windows;
}

double mean_loss_on_windows(Llama& model, const DataSource& data, int64_t windows, Communicator& comm) {
  const int64_t per = (windows + comm.size() - 1) / comm.size();
  const int64_t first = std::min(windows, comm.rank() * per), last = std::min(windows, first + per);
  Batch b;
  std::vector<double> sum = {0.0};
  for (int64_t at = first; at < last; at += model.batch()) {
    const int rows = int(std::min<int64_t>(model.batch(), last - at));
    data.validation_windows_batch(at, rows, b);
    model.set_batch(b.tokens.data(), b.targets.data());
    model.forward(Llama::Pass::Eval);
    sum[0] += model.loss_sum(rows);
  }
  if (!comm.solo()) comm.all_reduce_sum(sum);
  return sum[0] / double(windows * model.seq_len());
}

namespace {

nlohmann::json task_json(const Task& task, const TaskScore& s) {
  nlohmann::json details = nlohmann::json::array();
  for (size_t i = 0; i < task.examples.size(); ++i) {
    const TaskExample& e = task.examples[i];
    const ExampleScore& x = s.examples[i];
    nlohmann::json sums = nlohmann::json::array(), means = nlohmann::json::array();
    for (const EndingScore& end : x.endings) sums.push_back(end.sum), means.push_back(end.mean);
    details.push_back({{"line", e.line}, {"label", e.label}, {"context_tokens", e.context},
                       {"ending_tokens", e.endings}, {"ending_chars", e.ending_chars}, {"logprob_sum", sums},
                       {"logprob_mean", means}, {"pred", x.pred}, {"pred_norm", x.pred_norm},
                       {"pred_norm_chars", x.pred_norm_chars}});
  }
  return {{"file", task.path},           {"examples", task.examples.size()}, {"acc", s.acc()},
          {"acc_norm", s.acc_norm()},     {"acc_norm_chars", s.acc_norm_chars()}, {"correct", s.correct},
          {"correct_norm", s.correct_norm}, {"correct_norm_chars", s.correct_norm_chars},
          {"truncated", s.truncated},     {"details", details}};
}

}  // namespace

EvalResult run_eval(const EvalOptions& o, std::ostream& out) {
  // Everything the user gave is checked before any work is done or any file is written.
  if (o.data.empty() && o.tasks.empty())
    usage_fail("eval: give --data (the loss on its validation split) or --task (a multiple-choice task), or both");
  if (o.batch < 1) usage_fail("--batch-size: must be a positive integer (got " + std::to_string(o.batch) + ")");
  if (o.seq_len < 0) usage_fail("--seq-len: must be a positive integer (got " + std::to_string(o.seq_len) + ")");
  if (o.val_tokens < 0) usage_fail("--val-tokens: must not be negative");
  if (o.val_tokens > 0 && o.data.empty()) usage_fail("--val-tokens: counts tokens of --data's validation split: give --data");
  const ModelSource source = read_model_source(o.model, "eval");
  const ModelConfig& c = source.config;
  EvalResult r;
  r.seq_len = o.seq_len > 0 ? o.seq_len : source.context > 0 ? source.context : 2048;
  if (int64_t(o.batch) * r.seq_len > INT32_MAX / 8)
    usage_fail("--batch-size x --seq-len: too many tokens a forward (limit 268435455)");

  std::unique_ptr<DataSource> data;
  std::vector<std::pair<std::string, std::string>> inputs = {{"eval", o.model}};
  if (!o.data.empty()) {
    if (o.data == "synthetic") usage_fail("--data: synthetic data has no validation split; give a text file or token files");
    if (!names_token_files(o.data) && c.vocab_size != kTextVocab)
      usage_fail(fmt::format("--data: '{}' is a text file, whose tokens are its bytes (vocabulary 256); the model's "
                             "vocabulary is {}: give the token files it was trained on", o.data, c.vocab_size));
    data = make_data_source(o.data, c.vocab_size, o.batch, r.seq_len, 0);
    if (!source.hf_directory) check_data_tokenizer(o.data, o.model, "eval");
    r.windows = o.val_tokens > 0 ? validation_windows(o.val_tokens, r.seq_len, *data) : data->all_validation_windows();
    for (const std::string& f : data_files(o.data)) inputs.emplace_back("--data", f);
  }
  std::vector<Task> tasks;
  if (!o.tasks.empty()) {
    const std::unique_ptr<Tokenizer> tok =
        model_source_tokenizer(o.tokenizer, o.model, source.hf_directory, c.vocab_size, "eval").tokenizer;
    for (const std::string& path : o.tasks) {
      tasks.push_back(load_task(path, *tok));
      check_task_fits(tasks.back(), r.seq_len);
      inputs.emplace_back("--task", path);
    }
  }
  check_distinct_paths({{"--json", o.json_path}}, inputs);
  if (!o.json_path.empty()) check_writable(o.json_path, "--json");
  std::string why;
  const bool cuda = o.device != DeviceKind::Cpu && cuda_available(&why);
  if (o.device == DeviceKind::Cuda && !cuda) usage_fail("--device cuda: " + why);
  // fp32 on either device, without the fused classifier: the task scores read every token's logits.
  const std::unique_ptr<Backend> backend = make_backend({cuda ? DeviceKind::Cuda : DeviceKind::Cpu, plan_for_version(1)});
  const std::unique_ptr<Communicator> comm = make_communicator(World{}, *backend);
  r.device = cuda ? "cuda" : "cpu";

  out << fmt::format("Model: {} ({}): {} parameters (vocab {}, hidden {}, {} layers, {} heads / {} kv heads), fp32 on "
                     "the {}\n", o.model,
                     source.hf_directory ? "a Hugging Face directory" : fmt::format("a checkpoint at step {}", source.step),
                     c.param_count(), c.vocab_size, c.hidden, c.layers, c.heads, c.kv_heads, cuda ? "GPU" : "CPU");
  if (data) {
    Llama model(c, *backend, o.batch, r.seq_len);
    load_model_source(o.model, source, model, "eval");
    out << fmt::format("Data: {}\n", data->describe());
    r.loss = mean_loss_on_windows(model, *data, r.windows, *comm);
    r.perplexity = std::exp(r.loss);
    out << fmt::format("Validation: {} windows of {} tokens ({} tokens{}): loss {:.6f}, perplexity {:.4f}\n", r.windows,
                       r.seq_len, r.windows * r.seq_len,
                       r.windows == data->all_validation_windows() ? ", all of the split" : ", the split's first",
                       r.loss, r.perplexity);
  }
  if (!tasks.empty()) {
    size_t longest = 0;
    for (const Task& t : tasks) longest = std::max(longest, t.longest_row());
    const int T = int(std::min<size_t>(longest, size_t(r.seq_len)));
    Llama model(c, *backend, o.batch, T);
    load_model_source(o.model, source, model, "eval");
    for (const Task& t : tasks) {
      r.tasks.push_back(score_task(model, t, *comm));
      const TaskScore& s = r.tasks.back();
      const int64_t n = int64_t(t.examples.size());
      out << fmt::format("Task {}: {} examples{}: acc {:.4f} ({}/{}), acc_norm {:.4f} ({}/{}; per token, llm.c), "
                         "acc_norm_chars {:.4f} ({}/{}; per character, lm-eval)\n", t.path, n,
                         s.truncated ? fmt::format(" ({} rows cut to their last {} tokens)", s.truncated, T) : "",
                         s.acc(), s.correct, n, s.acc_norm(), s.correct_norm, n, s.acc_norm_chars(),
                         s.correct_norm_chars, n);
    }
  }
  if (!o.json_path.empty()) {
    nlohmann::json j = {{"model", o.model}, {"device", r.device}, {"seq_len", r.seq_len}};
    if (data)
      j["validation"] = {{"data", data->describe()}, {"windows", r.windows}, {"tokens", r.windows * r.seq_len},
                         {"loss", r.loss}, {"perplexity", r.perplexity}};
    j["tasks"] = nlohmann::json::array();
    for (size_t i = 0; i < tasks.size(); ++i) j["tasks"].push_back(task_json(tasks[i], r.tasks[i]));
    write_file_atomic(o.json_path, [&](std::ostream& f) { f << j.dump(1) << "\n"; });
  }
  return r;
}

}  // namespace tt
