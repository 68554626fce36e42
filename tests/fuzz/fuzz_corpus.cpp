// The deterministic fuzz run of CI (built with AddressSanitizer and UndefinedBehaviorSanitizer
// by .ci/run): valid seeds (a checkpoint, token files of both widths, a text corpus, a
// safetensors file in bf16, a Hugging Face config.json and shard index, a SentencePiece
// model, a tokenizer.json and its tokenizer_config.json, a multiple-choice task file), then
// mutations of them (bit flips, byte overwrites, truncations, extensions, edits of the header's
// numbers and brackets, deep nesting, huge numbers), each through every reader (fuzz_inputs.h).
// Exit 0 when every case was accepted or refused cleanly
// and none took longer than a few seconds.
//   fuzz_corpus [CASES] [SEED]      default 100000 cases
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/rng.h"
#include "data/safetensors.h"
#include "data/token_file.h"
#include "fuzz_inputs.h"
#include "model/llama.h"
#include "train/checkpoint.h"

namespace fs = std::filesystem;
using namespace tt;

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::vector<std::string> seeds(const fs::path& dir) {
  std::vector<std::string> out;
  ModelConfig c;
  c.vocab_size = 11, c.hidden = 8, c.layers = 1, c.heads = 2, c.kv_heads = 1, c.intermediate = 8;
  auto be = make_backend({DeviceKind::Cpu, plan_for_version(1)});
  Llama m(c, *be, 1, 4);
  m.init_weights(1);
  save_checkpoint((dir / "ck").string(), m, CheckpointInfo{c, 3, 17, 0, "text bytes=100 fnv1a=1 seq_len=4", 42, 4, "0123456789abcdef", {{"--learning-rate", 0.0003}, {"--shuffle", true}}});
  out.push_back(slurp(dir / "ck"));
  write_token_file((dir / "t16").string(), {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20});
  out.push_back(slurp(dir / "t16"));
  write_token_file((dir / "t32").string(), {70000, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16});
  out.push_back(slurp(dir / "t32"));
  write_safetensors((dir / "st").string(), {{"a", {2, 3}, {1, 2, 3, 4, 5, 6}}, {"b", {1}, {7}}}, {{"format", "pt"}}, true);
  out.push_back(slurp(dir / "st"));
  out.push_back("The quick brown fox jumps over the lazy dog. Pack my box with five dozen liquor jugs.\n");
  const fuzz::HfSeed& hf = fuzz::hf_seed();
  out.push_back(hf.config);
  out.push_back(hf.index);
  out.push_back(hf.tokenizer_model);
  out.push_back(hf.tokenizer_json);
  out.push_back("{\"ctx\": \"A man sits on a roof. he\", \"endings\": [\"fixes it.\", \"flies.\"], \"label\": 0}\n"
                "{\"context\": \"She  \", \"endings\": [\"a\", \"b\", \"c\"], \"label\": \"2\"}\n");
  out.push_back(hf.tokenizer_config);
  // A checkpoint that stores its tokenizer (a SentencePiece model) after its tensors.
  const TokenizerFiles stored{TokenizerKind::SentencePiece, {{"tokenizer.model", hf.tokenizer_model}}};
  save_checkpoint((dir / "ckt").string(), m, CheckpointInfo{c, 3, 17, 0, "tokens", 42, 4, "0123456789abcdef", {}}, &stored);
  out.push_back(slurp(dir / "ckt"));
  return out;
}

// One mutation of `s`, drawn from the case number.
std::string mutate(std::string s, const CounterRng& rng, uint64_t n) {
  uint64_t d = n * 16;
  auto below = [&](uint64_t k) { return k ? rng.below(d++, uint32_t(std::min<uint64_t>(k, 0xffffffffu))) : 0u; };
  const int kind = int(below(9));
  const size_t header_end = s.size() > 8 ? std::min(s.size(), size_t(8) + size_t(s[0] & 0xff) + 256 * size_t(s[1] & 0xff)) : s.size();
  switch (kind) {
    case 0:  // flip bits anywhere
      for (int i = 0, k = 1 + int(below(8)); i < k && !s.empty(); ++i) s[below(s.size())] ^= char(1 << below(8));
      break;
    case 1:  // flip bits in the header
      for (int i = 0, k = 1 + int(below(4)); i < k && header_end > 0; ++i) s[below(header_end)] ^= char(1 << below(8));
      break;
    case 2:  // truncate
      s.resize(below(s.size() + 1));
      break;
    case 3:  // extend
      s.append(below(64), char(below(256)));
      break;
    case 4: {  // a digit of the header changed (offsets, shapes, counts)
      std::vector<size_t> digits;
      for (size_t i = 8; i < header_end; ++i)
        if (s[i] >= '0' && s[i] <= '9') digits.push_back(i);
      if (!digits.empty()) s[digits[below(digits.size())]] = char('0' + below(10));
      break;
    }
    case 5: {  // a huge number spliced in
      std::vector<size_t> digits;
      for (size_t i = 8; i < header_end; ++i)
        if (s[i] >= '0' && s[i] <= '9') digits.push_back(i);
      const char* huge[] = {"18446744073709551615", "9223372036854775807", "4294967296", "2147483648", "-1", "1e308"};
      if (!digits.empty()) s.insert(digits[below(digits.size())], huge[below(6)]);
      break;
    }
    case 6: {  // brackets: deep nesting or removed
      const size_t at = 8 + below(header_end > 8 ? header_end - 8 : 1);
      if (below(2)) s.insert(std::min(at, s.size()), std::string(below(3) ? 50 : 100000, '['));
      else if (at < s.size()) s.erase(at, 1);
      break;
    }
    case 7:  // the header length rewritten
      if (s.size() >= 8)
        for (int i = 0; i < 8; ++i) s[size_t(i)] = char(below(2) ? below(256) : (i < 2 ? below(256) : 0));
      break;
    default:  // bytes overwritten with random values
      for (int i = 0, k = 1 + int(below(32)); i < k && !s.empty(); ++i) s[below(s.size())] = char(below(256));
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  const uint64_t cases = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 100000;
  const uint64_t seed = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1;
  const fs::path dir = fs::temp_directory_path() / ("tt_fuzz_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::vector<std::string> base = seeds(dir);
  const CounterRng rng(seed, kStreamTest);
  const std::string scratch = (dir / "case").string();
  using clock = std::chrono::steady_clock;
  double slowest = 0;
  const auto start = clock::now();
  for (uint64_t n = 0; n < cases; ++n) {
    const std::string& s = base[n % base.size()];
    const std::string m = n < base.size() ? s : mutate(s, rng, n);
    const auto t0 = clock::now();
    try {
      fuzz::run_case(reinterpret_cast<const uint8_t*>(m.data()), m.size(), scratch);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "case %llu: a reader threw %s instead of refusing the input\n", (unsigned long long)n, e.what());
      std::ofstream(dir.parent_path() / "tt_fuzz_failure", std::ios::binary) << m;
      return 1;
    }
    const double s_case = std::chrono::duration<double>(clock::now() - t0).count();
    slowest = std::max(slowest, s_case);
    if (s_case > 5.0) {
      std::fprintf(stderr, "case %llu took %.1f s\n", (unsigned long long)n, s_case);
      return 1;
    }
  }
  fs::remove_all(dir);
  fs::remove_all(fs::path(fuzz::hf_seed().dir).parent_path());
  std::printf("fuzz: %llu cases through every reader in %.1f s (slowest %.3f s): none crashed or failed to refuse\n",
              (unsigned long long)cases, std::chrono::duration<double>(clock::now() - start).count(), slowest);
  return 0;
}
