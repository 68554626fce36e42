#include "train/generation.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <fstream>

#include "core/error.h"
#include "data/tokenizer.h"
#include "model/llama.h"
#include "train/checkpoint.h"

namespace tt {

size_t complete_utf8(const std::string& s) {
  size_t i = s.size(), back = 0;
  while (i > 0 && back < 4 && (uint8_t(s[i - 1]) & 0xC0) == 0x80) --i, ++back;  // continuation bytes
  if (i == 0) return s.size();
  const uint8_t lead = uint8_t(s[i - 1]);
  const size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
  return need > back + 1 && lead >= 0xC0 ? i - 1 : s.size();
}

namespace {

std::vector<std::string> read_prompts(const GenerateOptions& o) {
  const int given = int(!o.prompt.empty()) + int(!o.prompts_file.empty()) + int(!o.prompt_tokens.empty());
  if (given != 1) usage_fail("generate: give one of --prompt, --prompt-tokens or --prompts-file (a non-empty one)");
  if (!o.prompts_file.empty()) {
    std::ifstream in(o.prompts_file);
    if (!in) usage_fail("--prompts-file: cannot read '" + o.prompts_file + "'");
    std::vector<std::string> prompts;
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) prompts.push_back(line);
    if (prompts.empty()) usage_fail("--prompts-file: '" + o.prompts_file + "' holds no prompt");
    return prompts;
  }
  return {o.prompt};
}

}  // namespace

std::vector<Generated> run_generate(const GenerateOptions& o, std::ostream& out) {
  if (o.max_new_tokens < 1) usage_fail("--max-new-tokens: must be a positive integer");
  if (!(std::isfinite(o.sampling.temperature) && o.sampling.temperature >= 0))
    usage_fail("--temperature: must be a finite number, 0 (greedy) or more");
  if (o.sampling.top_k < 0) usage_fail("--top-k: must not be negative (0: all tokens)");
  if (!(o.sampling.top_p > 0 && o.sampling.top_p <= 1)) usage_fail("--top-p: must be in (0, 1]");
  const CheckpointInfo info = read_checkpoint_info(o.checkpoint);
  const ModelConfig& c = info.config;
  const std::string tok_spec = o.tokenizer.empty() ? (c.vocab_size == 256 ? "bytes" : "") : o.tokenizer;
  if (tok_spec.empty())
    usage_fail("--tokenizer: the model's vocabulary is " + std::to_string(c.vocab_size) +
               ": give the tokenizer it was trained with (a SentencePiece .model)");
  const std::unique_ptr<Tokenizer> tok = Tokenizer::load(tok_spec, "--tokenizer");
  if (tok->vocab_size() != c.vocab_size)
    usage_fail("--tokenizer: " + tok->describe() + " does not match the model's vocabulary of " +
               std::to_string(c.vocab_size));
  const int context = info.seq_len > 0 ? info.seq_len : 2048;
  std::vector<std::vector<int32_t>> prompts;
  if (!o.prompt_tokens.empty()) {
    for (int32_t t : o.prompt_tokens)
      if (t < 0 || t >= c.vocab_size) usage_fail("--prompt-tokens: token " + std::to_string(t) + " is outside the vocabulary");
    prompts.push_back(o.prompt_tokens);
  } else {
    for (const std::string& p : read_prompts(o)) {
      std::vector<int32_t> ids;
      if (tok->bos() >= 0) ids.push_back(tok->bos());
      const std::vector<int32_t> text = tok->encode(p);
      ids.insert(ids.end(), text.begin(), text.end());
      prompts.push_back(ids);
    }
  }
  for (const auto& p : prompts)
    if (int64_t(p.size()) + o.max_new_tokens > context)
      usage_fail(fmt::format("generate: a prompt of {} tokens and --max-new-tokens {} exceed the model's context of {} "
                             "tokens (the sequence length it was trained at)", p.size(), o.max_new_tokens, context));
  std::string why;
  if (o.device == DeviceKind::Cuda || (o.device == DeviceKind::Auto && cuda_available(&why)))
    usage_fail("--device: generation runs on the CPU for now (--device cpu); the GPU's decoding kernel is not written yet");
  std::unique_ptr<Backend> be = make_backend({DeviceKind::Cpu, plan_for_version(1)});
  Llama model(c, *be, 1, 1);
  load_checkpoint(o.checkpoint, model);
  Generator gen(model, context);
  const CounterRng rng(o.seed, kStreamSampling);
  const int eos = tok_spec == "bytes" ? -1 : 2;  // SentencePiece models of tokenizer-train end documents with 2
  std::vector<Generated> results;
  uint64_t draw = 0;
  for (const auto& prompt : prompts) {
    using clock = std::chrono::steady_clock;
    const auto start = clock::now();
    gen.reset();
    std::vector<int32_t> shown(prompt.begin() + (!prompt.empty() && prompt[0] == tok->bos() ? 1 : 0), prompt.end());
    out << tok->decode(shown) << std::flush;  // the prompt, then its continuation
    std::vector<float> logits;
    for (int32_t t : prompt) logits = gen.step(t);
    Generated g;
    std::string printed;
    auto first = start;
    for (int i = 0; i < o.max_new_tokens; ++i) {
      const int32_t next = choose_token(logits, o.sampling, rng, draw++);
      if (i == 0) first = clock::now();
      if (next == eos) break;
      g.tokens.push_back(next);
      const std::string text = tok->decode(g.tokens);
      const size_t ready = complete_utf8(text);
      if (ready > printed.size()) {
        out << text.substr(printed.size(), ready - printed.size()) << std::flush;
        printed = text.substr(0, ready);
      }
      if (i + 1 < o.max_new_tokens) logits = gen.step(next);
    }
    g.text = tok->decode(g.tokens);
    if (g.text.size() > printed.size()) out << g.text.substr(printed.size());
    const double total_s = std::chrono::duration<double>(clock::now() - start).count();
    g.first_token_ms = std::chrono::duration<double, std::milli>(first - start).count();
    g.tokens_per_sec = g.tokens.empty() ? 0 : double(g.tokens.size()) / std::max(1e-9, total_s - g.first_token_ms / 1e3);
    out << fmt::format("\n[{} prompt tokens, {} new: first token after {:.1f} ms, then {:.1f} tokens/s on the CPU]\n",
                       prompt.size(), g.tokens.size(), g.first_token_ms, g.tokens_per_sec);
    results.push_back(std::move(g));
  }
  return results;
}

}  // namespace tt
