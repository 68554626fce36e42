#include "train/task.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "core/files.h"
#include "core/json_input.h"

namespace tt {

namespace {

constexpr size_t kMaxTaskBytes = size_t(1) << 30;

int64_t code_points(const std::string& s) {
  return std::count_if(s.begin(), s.end(), [](char c) { return (uint8_t(c) & 0xC0) != 0x80; });
}

// The label: an integer, or a string of digits (Hugging Face's HellaSwag), below `endings`.
int read_label(const nlohmann::json& j, size_t endings, const std::string& where) {
  int64_t label = -1;
  if (j.contains("label") && j["label"].is_number_integer()) {
    label = j["label"].get<int64_t>();
  } else if (j.contains("label") && j["label"].is_string()) {
    const std::string s = j["label"].get<std::string>();
    if (!s.empty() && s.size() < 10 && s.find_first_not_of("0123456789") == std::string::npos) label = std::stol(s);
  } else {
    usage_fail(where + ": no \"label\" (the index of the right ending)");
  }
  if (label < 0 || label >= int64_t(endings))
    usage_fail(fmt::format("{}: \"label\" {} is not the index of one of its {} endings", where, j["label"].dump(), endings));
  return int(label);
}

// One example and one of its endings: a row of the batch.
struct Row {
  const TaskExample* example;
  int ending;
  const std::vector<int32_t>& ending_tokens() const { return example->endings[size_t(ending)]; }
  size_t inputs() const { return example->context.size() + ending_tokens().size() - 1; }
};

// The sum of the log-probabilities of the targets at positions [first, first + n) of a forward
// whose token losses (-log p of each target) are `losses`.
double target_logprob_sum(const std::vector<double>& losses, int64_t first, int64_t n) {
  double sum = 0;
  for (int64_t p = first; p < first + n; ++p) sum -= losses[size_t(p)];
  return sum;
}

}  // namespace

size_t Task::longest_row() const {
  size_t n = 0;
  for (const TaskExample& e : examples)
    for (const std::vector<int32_t>& ending : e.endings) n = std::max(n, e.context.size() + ending.size() - 1);
  return n;
}

Task load_task(const std::string& path, const Tokenizer& tok, const std::string& flag) {
  std::istringstream in(read_input_file(path, flag, kMaxTaskBytes));
  Task task;
  task.path = path;
  task.flag = flag;
  const int bos = tok.bos() >= 0 && tok.bos() != tok.eos() ? tok.bos() : -1;
  int line_number = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = fmt::format("{}: '{}' line {}", flag, path, line_number);
    const nlohmann::json j = parse_json_input(line, where);
    if (!j.is_object()) usage_fail(where + ": not a JSON object");
    const char* context_key = j.contains("ctx") ? "ctx" : "context";
    if (!j.contains(context_key) || !j[context_key].is_string()) usage_fail(where + ": no \"ctx\" (or \"context\") string");
    const nlohmann::json& endings = j.contains("endings") ? j["endings"] : nlohmann::json();
    if (!endings.is_array() || endings.size() < 2) usage_fail(where + ": \"endings\" must be a list of two or more strings");
    TaskExample e;
    e.line = line_number;
    e.label = read_label(j, endings.size(), where);
    // lm-eval's split: the context's trailing whitespace begins the continuation.
    std::string context = j[context_key].get<std::string>();
    const size_t kept = context.find_last_not_of(" \t\n\r\v\f") + 1;  // 0 when all of it is whitespace
    const std::string moved = context.substr(kept);
    context.resize(kept);
    const std::vector<int32_t> context_ids = tok.encode(context);
    if (bos >= 0) e.context.push_back(bos);
    e.context.insert(e.context.end(), context_ids.begin(), context_ids.end());
    if (e.context.empty())
      usage_fail(where + ": an empty context, and " + tok.describe() +
                 " has no begin-of-document token to put before the endings");
    for (size_t i = 0; i < endings.size(); ++i) {
      if (!endings[i].is_string() || endings[i].get<std::string>().empty())
        usage_fail(fmt::format("{}: ending {} is not a string of some text", where, i));
      const std::string ending = endings[i].get<std::string>();
      const std::vector<int32_t> whole = tok.encode(context + moved + " " + ending);
      if (whole.size() <= context_ids.size())
        usage_fail(fmt::format("{}: ending {} adds no token to the context's", where, i));
      e.endings.emplace_back(whole.begin() + int64_t(context_ids.size()), whole.end());
      e.ending_chars.push_back(code_points(ending));
    }
    task.examples.push_back(std::move(e));
  }
  if (task.examples.empty()) usage_fail(flag + ": '" + path + "' holds no example (a JSON object a line)");
  return task;
}

void check_task_fits(const Task& task, int seq_len) {
  for (const TaskExample& e : task.examples)
    for (size_t i = 0; i < e.endings.size(); ++i)
      if (e.endings[i].size() > size_t(seq_len))
        usage_fail(fmt::format("{}: '{}' line {}: ending {} has {} tokens, more than the {} of a row (--seq-len)",
                               task.flag, task.path, e.line, i, e.endings[i].size(), seq_len));
}

TaskScore score_task(Llama& model, const Task& task, Communicator& comm) {
  const int B = model.batch(), T = model.seq_len();
  TaskScore score;
  score.path = task.path;
  check_task_fits(task, T);
  std::vector<Row> rows;
  for (const TaskExample& e : task.examples)
    for (size_t i = 0; i < e.endings.size(); ++i) {
      rows.push_back({&e, int(i)});
      if (rows.back().inputs() > size_t(T)) ++score.truncated;
    }

  // This rank's block of rows, B at a time: each row's inputs (the last T when longer) and
  // targets from position 0, then padding; the ending's log-probabilities at its positions.
  const int64_t n = int64_t(rows.size()), per = (n + comm.size() - 1) / comm.size();
  const int64_t first = std::min(n, comm.rank() * per), last = std::min(n, first + per);
  std::vector<double> sums(size_t(n), 0.0);
  std::vector<int32_t> tokens(size_t(B) * T), targets(size_t(B) * T);
  for (int64_t at = first; at < last; at += B) {
    const int count = int(std::min<int64_t>(B, last - at));
    std::fill(tokens.begin(), tokens.end(), 0);
    std::fill(targets.begin(), targets.end(), 0);
    std::vector<int> ending_at(static_cast<size_t>(count));  // the position that predicts its first token
    for (int r = 0; r < count; ++r) {
      const Row& row = rows[size_t(at + r)];
      std::vector<int32_t> seq = row.example->context;
      const std::vector<int32_t>& ending = row.ending_tokens();
      seq.insert(seq.end(), ending.begin(), ending.end());
      const size_t inputs = std::min(row.inputs(), size_t(T)), drop = row.inputs() - inputs;
      std::copy_n(seq.begin() + int64_t(drop), inputs, tokens.begin() + int64_t(r) * T);
      std::copy_n(seq.begin() + int64_t(drop) + 1, inputs, targets.begin() + int64_t(r) * T);
      ending_at[size_t(r)] = int(inputs - ending.size());
    }
    model.set_batch(tokens.data(), targets.data());
    model.forward(Llama::Pass::Eval);
    const std::vector<double> losses = model.token_losses();
    for (int r = 0; r < count; ++r)
      sums[size_t(at + r)] = target_logprob_sum(losses, int64_t(r) * T + ending_at[size_t(r)],
                                                int64_t(rows[size_t(at + r)].ending_tokens().size()));
  }
  if (!comm.solo()) comm.all_reduce_sum(sums);

  size_t next = 0;
  for (const TaskExample& e : task.examples) {
    ExampleScore s;
    double best = 0, best_norm = 0, best_chars = 0;
    for (size_t i = 0; i < e.endings.size(); ++i) {
      const double sum = sums[next++];
      const EndingScore end{sum, sum / double(e.endings[i].size()), int(e.endings[i].size())};
      const double per_char = sum / double(e.ending_chars[i]);
      if (i == 0 || end.sum > best) best = end.sum, s.pred = int(i);
      if (i == 0 || end.mean > best_norm) best_norm = end.mean, s.pred_norm = int(i);
      if (i == 0 || per_char > best_chars) best_chars = per_char, s.pred_norm_chars = int(i);
      s.endings.push_back(end);
    }
    score.correct += s.pred == e.label;
    score.correct_norm += s.pred_norm == e.label;
    score.correct_norm_chars += s.pred_norm_chars == e.label;
    score.examples.push_back(std::move(s));
  }
  return score;
}

}  // namespace tt
