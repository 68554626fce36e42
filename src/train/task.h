// Multiple-choice tasks in HellaSwag's JSON-lines form, scored as llm.c and lm-eval score them.
//
// A line is an example: {"ctx": "A man is sitting on a roof. he", "endings": ["is ...", ...],
// "label": 3} ("context" may stand for "ctx"; the label may be a string of digits, as Hugging
// Face's copy of HellaSwag writes it; other fields are ignored). Each ending continues the
// context after a space, tokenized as lm-eval tokenizes a continuation: the whole text's tokens
// less the context's (context + " " + ending, the context's trailing whitespace moved into the
// continuation), so a tokenizer that marks a word's leading space (SentencePiece's dummy space,
// GPT-2's byte-level pieces) sees the ending as it would in running text. A tokenizer whose
// begin-of-document token is not its end-of-document one puts it in front, as `tokenize` puts it
// before every document.
//
// The model scores an ending by its tokens' log-probabilities given everything before them, in
// double from the model's token losses (whatever its head: the fused classifier's chunks too): their
// sum, and their mean. An example is right when its label's ending
// has the highest sum (acc), the highest mean (acc_norm: llm.c's length normalisation, per token)
// or the highest sum per character of the ending (acc_norm_chars: lm-eval's acc_norm); a tie goes
// to the first ending, as numpy's argmax. A row longer than the model's sequence length loses the
// start of its context (lm-eval's truncation).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "model/llama.h"
#include "parallel/comm.h"

namespace tt {

struct TaskExample {
  int line = 0;  // in the file, from 1
  int label = 0;
  std::vector<int32_t> context;               // the BOS (where the tokenizer puts one) and the context's tokens
  std::vector<std::vector<int32_t>> endings;  // each ending's tokens (the continuation's)
  std::vector<int64_t> ending_chars;          // each ending's length in characters (code points)
};

struct Task {
  std::string path;
  std::string flag;  // that named it (--task, --eval-task), for the messages about it
  std::vector<TaskExample> examples;
  size_t longest_row() const;  // the most tokens a row (context and one ending) feeds the model
};

// Reads and tokenizes a task file. UsageError naming `flag`, the file and the line for a file
// that is not one (not JSON, a field missing or of the wrong type, fewer than two endings, an
// empty ending, a label outside them, no example at all).
Task load_task(const std::string& path, const Tokenizer& tok, const std::string& flag = "--task");

// UsageError naming the flag, the file and the line of an ending longer than `seq_len` tokens,
// which no row of that length can score.
void check_task_fits(const Task& task, int seq_len);

struct EndingScore {
  double sum = 0, mean = 0;  // of its tokens' log-probabilities
  int tokens = 0;            // scored (all of the ending's)
};
struct ExampleScore {
  std::vector<EndingScore> endings;
  int pred = 0, pred_norm = 0, pred_norm_chars = 0;  // the chosen ending by sum, mean, sum per character
};
struct TaskScore {
  std::string path;
  std::vector<ExampleScore> examples;
  int64_t correct = 0, correct_norm = 0, correct_norm_chars = 0;
  int64_t truncated = 0;  // rows whose context lost its start to fit the model's sequence length
  double acc() const { return double(correct) / double(examples.size()); }
  double acc_norm() const { return double(correct_norm) / double(examples.size()); }
  double acc_norm_chars() const { return double(correct_norm_chars) / double(examples.size()); }
};

// Scores every ending of `task` on `model`, which is left as any forward for evaluation leaves
// it (between training steps too): rows of one context and one ending, model.batch() of them a
// forward, each cut to model.seq_len() tokens (check_task_fits); the rows in blocks over the ranks
// of `comm`, the scores summed over them. Reads every token's logits: a model without the fused
// classifier.
TaskScore score_task(Llama& model, const Task& task, Communicator& comm);

}  // namespace tt
