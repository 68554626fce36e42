#include "train/generation.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "core/error.h"
#include "core/files.h"
#include "data/tokenizer.h"
#include "model/generate.h"
#include "model/llama.h"
#include "train/bound_tokenizer.h"
#include "train/hf.h"

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

constexpr size_t kMaxPromptsBytes = size_t(64) << 20;

// The prompts as text (--prompt, or --prompts-file: one a line).
std::vector<std::string> read_prompts(const GenerateOptions& o) {
  if (!o.prompts_file.empty()) {
    std::istringstream in(read_input_file(o.prompts_file, "--prompts-file", kMaxPromptsBytes));
    std::vector<std::string> prompts;
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) prompts.push_back(line);
    if (prompts.empty()) usage_fail("--prompts-file: '" + o.prompts_file + "' holds no prompt");
    return prompts;
  }
  return {o.prompt};
}

// The ids below `vocab` that `tok` cannot turn into text: those past its vocabulary, and gaps in
// it (a tokenizer.json may leave ids without a token).
std::vector<int32_t> undecodable_ids(const Tokenizer& tok, int vocab) {
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < vocab; ++id) {
    bool decodes = id < tok.vocab_size();
    try {
      if (decodes) tok.decode({id});
    } catch (const Error&) {
      decodes = false;
    }
    if (!decodes) ids.push_back(id);
  }
  return ids;
}

}  // namespace

std::vector<Generated> run_generate(const GenerateOptions& o, std::ostream& out) {
  if (o.max_new_tokens < 1) usage_fail("--max-new-tokens: must be a positive integer");
  if (!(std::isfinite(o.sampling.temperature) && o.sampling.temperature >= 0))
    usage_fail("--temperature: must be a finite number, 0 (greedy) or more");
  if (o.sampling.top_k < 0) usage_fail("--top-k: must not be negative (0: all tokens)");
  if (!(o.sampling.top_p > 0 && o.sampling.top_p <= 1)) usage_fail("--top-p: must be in (0, 1]");
  // A checkpoint of ours, or a Hugging Face LLaMA directory (tiny_llama export writes one).
  const ModelSource source = read_model_source(o.checkpoint, "generate");
  const ModelConfig& c = source.config;
  const int context = source.context > 0 ? source.context : 2048;
  const BoundTokenizer bound = model_source_tokenizer(o.tokenizer, o.checkpoint, source.hf_directory, c.vocab_size, "generate");
  const std::unique_ptr<Tokenizer>& tok = bound.tokenizer;
  std::vector<std::vector<int32_t>> prompts;
  const int given = int(o.prompt_given) + int(!o.prompts_file.empty()) + int(!o.prompt_tokens.empty());
  if (given != 1) usage_fail("generate: give one of --prompt, --prompt-tokens or --prompts-file");
  if (o.prompt_given && o.prompt.empty() && tok->bos() < 0)
    usage_fail("--prompt: an empty prompt starts from the begin-of-document token, which " + tok->describe() +
               " does not have");
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
  // Beyond the context the model was trained at, each token sees the last `context` tokens.
  size_t longest = 0;
  for (const auto& p : prompts) longest = std::max(longest, p.size());
  const int64_t positions = int64_t(longest) + o.max_new_tokens;
  if (positions > (int64_t(1) << 24)) usage_fail("generate: a prompt and --max-new-tokens of more than 16777216 tokens");
  std::string why;
  const bool cuda = o.device == DeviceKind::Cuda || (o.device == DeviceKind::Auto && cuda_available(&why));
  // fp32 on either device: greedy decoding gives the CPU's tokens on the GPU.
  std::unique_ptr<Backend> be = make_backend({cuda ? DeviceKind::Cuda : DeviceKind::Cpu, plan_for_version(1)});
  const int B = int(prompts.size());
  Llama model(c, *be, o.cache ? 1 : B, o.cache ? 1 : context);
  load_model_source(o.checkpoint, source, model, "generate");
  std::unique_ptr<Generator> cached;
  std::unique_ptr<WindowGenerator> window;
  if (o.cache)
    cached = std::make_unique<Generator>(model, context, B, int(positions));
  else
    window = std::make_unique<WindowGenerator>(model);
  // A model's vocabulary may be larger than its tokenizer's (padded): the ids the tokenizer cannot
  // decode are never chosen (one of them ended generation with an error, or printed another
  // byte's text).
  const std::vector<int32_t> undecodable = undecodable_ids(*tok, c.vocab_size);
  const StepFn step = [&](const std::vector<int32_t>& tokens) {
    std::vector<std::vector<float>> logits = cached ? cached->step(tokens) : window->step(tokens);
    for (std::vector<float>& row : logits)
      for (int32_t id : undecodable) row[size_t(id)] = -std::numeric_limits<float>::infinity();
    return logits;
  };

  // Each prompt's tokens after its BOS and their text (decoded once), and what a continuation adds
  // to it: decoded after the prompt, not alone (a SentencePiece piece that begins a word carries
  // its space, which decoding drops at the start).
  std::vector<std::vector<int32_t>> prompt_body;
  std::vector<std::string> prompt_text;
  for (const auto& p : prompts) {
    prompt_body.emplace_back(p.begin() + (!p.empty() && p[0] == tok->bos() ? 1 : 0), p.end());
    prompt_text.push_back(tok->decode(prompt_body.back()));
  }
  auto continuation = [&](int b, const std::vector<int32_t>& generated) {
    std::vector<int32_t> all = prompt_body[size_t(b)];
    all.insert(all.end(), generated.begin(), generated.end());
    const std::string& before = prompt_text[size_t(b)];
    const std::string text = tok->decode(all);
    return text.compare(0, before.size(), before) == 0 ? text.substr(before.size()) : tok->decode(generated);
  };
  if (B == 1) out << prompt_text[0] << std::flush;
  std::string printed;
  const Decoded d = decode(step, prompts, o.max_new_tokens, tok->eos(), o.sampling, CounterRng(o.seed, kStreamSampling),
                           [&](int b, const std::vector<int32_t>& tokens) {
                             if (B != 1) return;
                             const std::string text = continuation(b, tokens);  // streamed, a whole character at a time
                             const size_t ready = complete_utf8(text);
                             if (ready > printed.size()) {
                               out << text.substr(printed.size(), ready - printed.size()) << std::flush;
                               printed = text.substr(0, ready);
                             }
                           });
  std::vector<Generated> results(static_cast<size_t>(B));
  size_t generated = 0;
  for (int b = 0; b < B; ++b) {
    Generated& g = results[size_t(b)];
    g.tokens = d.tokens[size_t(b)];
    g.text = continuation(b, g.tokens);
    generated += g.tokens.size();
    if (B == 1) {
      if (g.text.size() > printed.size()) out << g.text.substr(printed.size());
    } else {
      out << fmt::format("--- {} ---\n", b + 1) << prompt_text[size_t(b)] << g.text << "\n";
    }
  }
  const double first_ms = d.first_token_ms, total_s = d.seconds;
  const double rate = generated == 0 ? 0 : double(generated) / std::max(1e-9, total_s - first_ms / 1e3);
  for (Generated& g : results) g.first_token_ms = first_ms, g.tokens_per_sec = rate;
  const std::string what = B == 1 ? fmt::format("{} prompt tokens, {} new", prompts[0].size(), generated)
                                    : fmt::format("{} sequences, {} new tokens", B, generated);
  out << fmt::format("\n[{}: first token after {:.1f} ms, then {:.1f} tokens/s on the {} (fp32, {})]\n", what, first_ms,
                     rate, cuda ? "GPU" : "CPU", o.cache ? "key/value cache" : "no cache: the window recomputed each token");
  if (bound.stored) out << "[tokenizer: " << tok->describe() << "]\n";
  if (positions > context)
    out << fmt::format("[beyond the model's context of {} tokens (its training length) each token saw the last {}: a "
                       "sliding window]\n", context, context);
  return results;
}

}  // namespace tt
