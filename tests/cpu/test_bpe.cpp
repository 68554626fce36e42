// Byte-level BPE tokenizers read from a tokenizer.json (src/data/bpe_tokenizer.h): the two word
// patterns on texts whose words follow from the regular expressions by hand, the merges applied
// by rank, ignore_merges, exact round trips of any bytes, BOS and EOS from tokenizer_config.json
// or the file, each refused field named, and tokenize writing documents with a GPT-2-style
// tokenizer. The smallest cases where the tokenizers library (0.23.2) and an earlier reader
// differed hold the library's ids (from its Node binding, on these very files); the ids against
// the library on every configuration and code point: tests/gpu/test_gpu_tokenizers.cpp.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <filesystem>
#include <random>

#include "core/error.h"
#include "data/bpe_tokenizer.h"
#include "data/token_file.h"
#include "data/unicode_classes.h"
#include "run_outputs.h"

namespace tt::test {
namespace {

using json = nlohmann::ordered_json;
namespace fs = std::filesystem;

std::vector<std::string> words(const std::string& text, WordPattern p) {
  std::vector<std::string> out;
  size_t at = 0;
  for (const auto& [begin, end] : split_words(text, p)) {
    EXPECT_EQ(begin, at) << "the words cover the text";
    out.push_back(text.substr(begin, end - begin));
    at = end;
  }
  EXPECT_EQ(at, text.size());
  return out;
}

using Words = std::vector<std::string>;

TEST(Bpe, UnicodeClasses) {
  EXPECT_TRUE(is_letter(U'a') && is_letter(U'\u00e9') && is_letter(U'\u4e2d') && is_letter(U'\u00aa'));
  EXPECT_TRUE(is_number(U'7') && is_number(U'\u0663') && is_number(U'\u00bd') && is_number(U'\u2167'));
  EXPECT_TRUE(is_space(U' ') && is_space(U'\t') && is_space(U'\u0085') && is_space(U'\u3000') && is_space(U'\u000b'));
  EXPECT_FALSE(is_letter(U'1') || is_letter(U'_') || is_number(U'x') || is_space(U'\u200b') || is_letter(U'\u0301'));
  EXPECT_EQ(std::string(unicode_version()), "16.0.0");
  EXPECT_TRUE(is_letter(U'\U0002EBF0') && is_number(U'\U0001CCF1')) << "15.1's and 16.0's";
}

// GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
TEST(Bpe, Gpt2Words) {
  const auto g = [](const std::string& t) { return words(t, WordPattern::Gpt2); };
  EXPECT_EQ(g("Hello world"), (Words{"Hello", " world"}));
  EXPECT_EQ(g("I'm here's don't"), (Words{"I", "'m", " here", "'s", " don", "'t"}));
  EXPECT_EQ(g("DON'T they'RE"), (Words{"DON", "'", "T", " they", "'", "RE"})) << "case matters";
  EXPECT_EQ(g("a  b"), (Words{"a", " ", " b"})) << "the last space goes with the word after it";
  EXPECT_EQ(g("x   \n"), (Words{"x", "   \n"})) << "spaces at the end stay together";
  EXPECT_EQ(g("2024 numbers!! 3.5"), (Words{"2024", " numbers", "!!", " 3", ".", "5"}));
  EXPECT_EQ(g("a\tb\n\nc"), (Words{"a", "\t", "b", "\n", "\n", "c"}));
  EXPECT_EQ(g("caf\u00e9 \u4e2d\u6587 \u0661\u0662\u0663"), (Words{"caf\u00e9", " \u4e2d\u6587", " \u0661\u0662\u0663"}));
  EXPECT_EQ(g(" "), (Words{" "}));
  EXPECT_EQ(g(""), (Words{}));
  EXPECT_EQ(g("a\xff\xfe b"), (Words{"a", "\xff\xfe", " b"})) << "bytes that are not UTF-8 are punctuation";
}

// LLaMA-3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
//          \s*[\r\n]+|\s+(?!\S)|\s+
TEST(Bpe, Llama3Words) {
  const auto l = [](const std::string& t) { return words(t, WordPattern::Llama3); };
  EXPECT_EQ(l("Hello world"), (Words{"Hello", " world"}));
  EXPECT_EQ(l("DON'T they'Re I\u017fs"), (Words{"DON", "'T", " they", "'Re", " I\u017fs"}));
  EXPECT_EQ(l("'\u017f"), (Words{"'\u017f"})) << "the long s folds to s";
  EXPECT_EQ(l("12345 1.5"), (Words{"123", "45", " ", "1", ".", "5"})) << "digits by threes; a space alone";
  EXPECT_EQ(l("x  \n  y"), (Words{"x", "  \n", " ", " y"}));
  EXPECT_EQ(l("!!!\n\nabc"), (Words{"!!!\n\n", "abc"}));
  EXPECT_EQ(l("\tword x.Net"), (Words{"\tword", " x", ".Net"})) << "any one character but a line break or a digit leads";
  EXPECT_EQ(l("a\n\nb"), (Words{"a", "\n\n", "b"}));
  EXPECT_EQ(l("end  "), (Words{"end", "  "}));
  EXPECT_EQ(l("\u4e2d\u6587\u0661\u0662\u0663\u0664"), (Words{"\u4e2d\u6587", "\u0661\u0662\u0663", "\u0664"}));
}

TEST(Bpe, ByteCharacters) {
  const std::vector<std::string> c = byte_characters();
  ASSERT_EQ(c.size(), 256u);
  EXPECT_EQ(std::set<std::string>(c.begin(), c.end()).size(), 256u);
  EXPECT_EQ(c['A'], "A");
  EXPECT_EQ(c[' '], "\u0120");  // Ġ
  EXPECT_EQ(c['\n'], "\u010a");  // Ċ
  EXPECT_EQ(c[0xFF], "\u00ff");
}

// An added token of a tokenizer.json.
struct Added {
  std::string content;
  bool special = false, normalized = true, lstrip = false, rstrip = false;
};

class BpeFile : public ::testing::Test {
 protected:
  // A tokenizer.json of GPT-2's kind: the 256 bytes, then the merges' tokens in order, then the
  // extra tokens; then the added tokens, <|endoftext|> (special) and `added`.
  json file(const std::vector<std::pair<std::string, std::string>>& merges, const std::vector<std::string>& extra = {},
            bool ignore_merges = false, const std::vector<Added>& added = {}) {
    const std::vector<std::string> chars = byte_characters();
    json vocab = json::object(), merge_list = json::array();
    for (int b = 0; b < 256; ++b) vocab[chars[size_t(b)]] = b;
    int next = 256;
    for (const auto& [l, r] : merges) {
      if (!vocab.contains(l + r)) vocab[l + r] = next++;
      merge_list.push_back(json::array({l, r}));
    }
    for (const std::string& t : extra) vocab[t] = next++;
    json added_tokens = json::array();
    std::vector<Added> all = {{"<|endoftext|>", true, false}};
    all.insert(all.end(), added.begin(), added.end());
    for (const Added& a : all)
      added_tokens.push_back({{"id", next++}, {"content", a.content}, {"single_word", false}, {"lstrip", a.lstrip},
                              {"rstrip", a.rstrip}, {"normalized", a.normalized}, {"special", a.special}});
    return {{"version", "1.0"},
            {"added_tokens", added_tokens},
            {"normalizer", nullptr},
            {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
            {"post_processor", {{"type", "ByteLevel"}}},
            {"decoder", {{"type", "ByteLevel"}}},
            {"model", {{"type", "BPE"}, {"dropout", nullptr}, {"ignore_merges", ignore_merges}, {"vocab", vocab},
                       {"merges", merge_list}}}};
  }
  // The same with LLaMA-3's pattern: a Split, then a ByteLevel without its own.
  static json llama3(json j) {
    j["pre_tokenizer"] = {{"type", "Sequence"},
                          {"pretokenizers", json::array({{{"type", "Split"}, {"pattern", {{"Regex", kLlama3}}},
                                                          {"behavior", "Isolated"}, {"invert", false}},
                                                         {{"type", "ByteLevel"}, {"add_prefix_space", false},
                                                          {"use_regex", false}}})}};
    return j;
  }
  static json prefix_space(json j) {
    json& byte_level = j["pre_tokenizer"]["type"] == "Sequence" ? j["pre_tokenizer"]["pretokenizers"][1] : j["pre_tokenizer"];
    byte_level["add_prefix_space"] = true;
    return j;
  }
  static constexpr const char* kLlama3 =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  std::string save(const json& j, const std::string& name = "tokenizer.json") {
    std::ofstream((scratch.path() / name).string()) << j.dump();
    return (scratch.path() / name).string();
  }
  std::unique_ptr<Tokenizer> load(const json& j) { return Tokenizer::load(save(j), "--tokenizer"); }
  std::string why_refused(const json& j) {
    return refusal([&] { load(j); });
  }
  ScratchDir scratch{"bpe"};
};

TEST_F(BpeFile, MergesApplyByRank) {
  // " the": Ġ t -> Ġt, h e -> he, Ġt he -> Ġthe
  const auto tok = load(file({{"\u0120", "t"}, {"h", "e"}, {"\u0120t", "he"}}));
  EXPECT_EQ(tok->vocab_size(), 260);
  EXPECT_EQ(tok->encode(" the the"), (std::vector<int32_t>{258, 258}));
  EXPECT_EQ(tok->encode("the"), (std::vector<int32_t>{'t', 257}));
  // The lowest rank first: a b before b c gives ab c; the other order a bc.
  EXPECT_EQ(load(file({{"a", "b"}, {"b", "c"}}))->encode("abc"), (std::vector<int32_t>{256, 'c'}));
  EXPECT_EQ(load(file({{"b", "c"}, {"a", "b"}}))->encode("abc"), (std::vector<int32_t>{'a', 256}));
  // Equal ranks: the leftmost pair first (a a a -> aa a).
  EXPECT_EQ(load(file({{"a", "a"}}))->encode("aaa"), (std::vector<int32_t>{256, 'a'}));
  // Older files spell a merge "left right".
  json j = file({{"a", "b"}});
  j["model"]["merges"] = json::array({"a b"});
  EXPECT_EQ(load(j)->encode("ab"), (std::vector<int32_t>{256}));
}

TEST_F(BpeFile, IgnoreMergesTakesAWholeWord) {
    // " abc" is no token: its bytes are merged as ever.
  EXPECT_EQ(load(file({{"a", "b"}}, {"abc"}, true))->encode("abc abc"), (std::vector<int32_t>{257, ' ', 256, 'c'}));
  EXPECT_EQ(load(file({{"a", "b"}}, {"abc"}, false))->encode("abc"), (std::vector<int32_t>{256, 'c'}));
}

// Letters and digits of Unicode 15.1 and 16.0: U+2EBF0 (a CJK ideograph) is a word of its own
// before 's (the library: ð ® ¯ ° 's; Unicode 15.0: the apostrophe went with it); "1" U+1CCF1
// (an outlined digit) "1" is one number of three digits under LLaMA-3's pattern.
TEST_F(BpeFile, Unicode16LettersAndDigits) {
  EXPECT_EQ(load(file({{"'", "s"}}))->encode("\U0002EBF0's"), (std::vector<int32_t>{240, 174, 175, 176, 256}));
  EXPECT_EQ(load(llama3(file({{"1", "\u00f0"}})))->encode("1\U0001CCF11"), (std::vector<int32_t>{256, 156, 179, 177, 49}));
}

// Added tokens that are not special are found in ordinary text, before the pattern cuts it, the
// longest first, "normalized": false ones before the others, lstrip and rstrip taking the white
// space beside them; the pieces between go on each its own. Special ones stay text.
TEST_F(BpeFile, AddedTokensThatAreNotSpecialAreFound) {
  const std::vector<Added> words = {{"xyzzy"}, {"    ", false, false}, {" the cat"}};
  const std::vector<int32_t> want = {97, 32, 258, 32, 98, 259, 99, 260, 32, 258, 113};  // a Ġ xyzzy Ġ b ␣␣␣␣ c ␣the␣cat Ġ xyzzy q
  EXPECT_EQ(load(file({{"\u0120", "t"}}, {}, false, words))->encode("a xyzzy b    c the cat xyzzyq"), want);
  EXPECT_EQ(load(llama3(file({{"\u0120", "t"}}, {}, false, words)))->encode("a xyzzy b    c the cat xyzzyq"), want);
  const std::vector<Added> chat = {{"<|im_start|>", false, false, true}, {"<|im_end|>", false, false, false, true}, {"<|im"}};
  // a, "  <|im_start|>", Ġ b Ġ, "<|im_end|>  ", c Ġ, "<|im", _ x
  EXPECT_EQ(load(file({}, {}, false, chat))->encode("a  <|im_start|> b <|im_end|>  c <|im_x"),
            (std::vector<int32_t>{97, 257, 32, 98, 32, 258, 99, 32, 259, 95, 120}));
  EXPECT_EQ(load(file({}))->encode("a<|endoftext|>"),
            (std::vector<int32_t>{97, 60, 124, 101, 110, 100, 111, 102, 116, 101, 120, 116, 124, 62}));
  // A special token found first takes its place in the search, and nothing is found inside it:
  // "x<|im" (special) is found before "<|im_start|>", and the text stays text. (From the
  // library's find_matches, which skips a special match and searches on after it: its Node
  // binding cannot split special tokens, tests/gpu/test_gpu_tokenizers.cpp checks it in Python.)
  EXPECT_EQ(load(file({}, {}, false, {{"<|im_start|>", false, false}, {"x<|im", true, false}}))->encode("x<|im_start|>"),
            (std::vector<int32_t>{120, 60, 124, 105, 109, 95, 115, 116, 97, 114, 116, 124, 62}));
}

// ByteLevel's add_prefix_space puts a space in front of each piece it is given: after a Split,
// each word (Ġ,), else the text between added tokens.
TEST_F(BpeFile, PrefixSpaceGoesOnEachPiece) {
  EXPECT_EQ(load(prefix_space(llama3(file({}))))->encode("Hello, world."),
            (std::vector<int32_t>{32, 72, 101, 108, 108, 111, 32, 44, 32, 119, 111, 114, 108, 100, 32, 46}));
  EXPECT_EQ(load(prefix_space(file({})))->encode("Hello, world."),
            (std::vector<int32_t>{32, 72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108, 100, 46}));
  EXPECT_EQ(load(prefix_space(file({}, {}, false, {{"<t>", false, false}})))->encode("a<t>b <t> c"),
            (std::vector<int32_t>{32, 97, 257, 32, 98, 32, 257, 32, 99}));
}

// A merge listed twice ranks by its last copy: "5 5" after "5 9" here, so 559 is 5 59.
TEST_F(BpeFile, AMergeListedTwiceRanksByItsLastCopy) {
  EXPECT_EQ(load(file({{"5", "5"}, {"5", "9"}, {"5", "5"}}))->encode("559"), (std::vector<int32_t>{53, 257}));
}

TEST_F(BpeFile, RoundTripsAnyBytes) {
  const auto tok = load(file({{"\u0120", "t"}, {"h", "e"}, {"\u0120t", "he"}, {"e", "r"}}));
  std::mt19937 rng(7);
  for (int i = 0; i < 200; ++i) {
    std::string text(size_t(rng() % 64), '\0');
    for (char& c : text) c = char(i % 2 ? rng() % 256 : " thera\n\t\xc3\xa9"[rng() % 11]);
    EXPECT_EQ(tok->decode(tok->encode(text)), text);
  }
  EXPECT_EQ(tok->decode({260}), "<|endoftext|>") << "a special token decodes to its text";
  // A word of a million bytes (a run of punctuation is one word) merges in n log n: a run of 'a'
  // with a a -> aa, aa aa -> aaaa takes a quarter of the tokens.
  const auto runs = load(file({{"a", "a"}, {"aa", "aa"}}));
  const std::string long_word(size_t(1) << 20, 'a');
  const std::vector<int32_t> ids = runs->encode(long_word);
  EXPECT_EQ(ids.size(), long_word.size() / 4);
  EXPECT_EQ(runs->decode(ids), long_word);
  EXPECT_EQ(tok->encode("<|endoftext|>").size(), 13u) << "special tokens in the text are text";
}

TEST_F(BpeFile, BosAndEos) {
  const auto gpt2 = load(file({}));
  EXPECT_EQ(gpt2->bos(), -1) << "no post-processor template, no BOS";
  EXPECT_EQ(gpt2->eos(), 256);
  json j = file({}, {}, false, {{"<|begin_of_text|>", true, false}, {"<|end_of_text|>", true, false}});
  j["added_tokens"].erase(0);  // no <|endoftext|>
  j["added_tokens"][0]["id"] = 256, j["added_tokens"][1]["id"] = 257;
  j["post_processor"] = {{"type", "TemplateProcessing"},
                         {"single", json::array({{{"SpecialToken", {{"id", "<|begin_of_text|>"}, {"type_id", 0}}}}})}};
  auto tok = load(j);
  EXPECT_EQ(tok->bos(), 256);
  EXPECT_EQ(tok->eos(), 257);
  EXPECT_EQ(tok->vocab_size(), 258);
  save({{"bos_token", {{"content", "<|end_of_text|>"}}}, {"eos_token", "<|begin_of_text|>"}}, "tokenizer_config.json");
  tok = load(j);
  EXPECT_EQ(tok->bos(), 257) << "tokenizer_config.json decides";
  EXPECT_EQ(tok->eos(), 256);
}

TEST_F(BpeFile, RefusesWhatItDoesNotRead) {
  const auto refused = [&](json j, const std::string& field, const json& patch = json()) {
    if (!patch.is_null()) j.merge_patch(patch);
    const std::string why = why_refused(j);
    EXPECT_NE(why.find(field), std::string::npos) << "'" << why << "' should name " << field;
  };
  json j = file({{"a", "b"}});
  refused(j, "normalizer \"NFC\"", {{"normalizer", {{"type", "NFC"}}}});
  refused(j, "model.type", {{"model", {{"type", "WordPiece"}}}});
  refused(j, "model.dropout", {{"model", {{"dropout", 0.1}}}});
  refused(j, "model.continuing_subword_prefix", {{"model", {{"continuing_subword_prefix", "##"}}}});
  refused(j, "decoder", {{"decoder", {{"type", "WordPiece"}}}});
  refused(j, "pre_tokenizer", {{"pre_tokenizer", {{"type", "Whitespace"}}}});
  json split = j;
  split["pre_tokenizer"] = {{"type", "Sequence"},
                            {"pretokenizers", json::array({{{"type", "Split"}, {"pattern", {{"Regex", "\\w+"}}}, {"behavior", "Isolated"}},
                                                           {{"type", "ByteLevel"}, {"use_regex", false}}})}};
  refused(split, "the Split pattern \"\\\\w+\" is neither GPT-2's nor LLaMA-3's");
  json merges = j;
  merges["model"]["merges"] = json::array({json::array({"a", "zz"})});
  refused(merges, "model.merges: 'a zz'");
  json bytes = j;
  bytes["model"]["vocab"].erase("A");
  refused(bytes, "no token for the byte 65");
  json not_bytes = j;
  not_bytes["model"]["vocab"]["\u4e2d"] = 300;
  refused(not_bytes, "is not a byte-level token");
  refused(file({}, {}, false, {{"<a>"}}), "added_tokens: '<a>' has single_word true, which is not read",
          {{"added_tokens", json::array({file({})["added_tokens"][0], {{"id", 257}, {"content", "<a>"}, {"single_word", true},
                                                                       {"lstrip", false}, {"rstrip", false},
                                                                       {"normalized", true}, {"special", false}}})}});
  json ids = file({}, {}, false, {{"<a>"}});
  ids["added_tokens"][1]["id"] = 300;
  refused(ids, "added_tokens: '<a>' has id 300, where the tokenizers library gives it 257");
  json twice = file({}, {}, false, {{"<a>"}});
  twice["added_tokens"].push_back(twice["added_tokens"][1]);
  refused(twice, "added_tokens: '<a>' is listed twice");
  json no_flag = file({});
  no_flag["added_tokens"][0].erase("lstrip");
  refused(no_flag, "has no \"lstrip\" (true or false)");
  std::ofstream((scratch.path() / "broken.json").string()) << "{\"model\": ";
  const std::string why = refusal([&] { Tokenizer::load((scratch.path() / "broken.json").string(), "--tokenizer"); });
  EXPECT_NE(why.find("not JSON"), std::string::npos) << why;
}

// A directory names its tokenizer file; tokenize writes documents as the text then EOS where BOS
// is EOS (GPT-2's <|endoftext|>: one token between documents), and the run line says so.
TEST_F(BpeFile, TokenizeWithAGpt2StyleTokenizer) {
  save(file({{"\u0120", "t"}, {"h", "e"}, {"\u0120t", "he"}}));
  save({{"bos_token", "<|endoftext|>"}, {"eos_token", "<|endoftext|>"}}, "tokenizer_config.json");
  const auto tok = Tokenizer::load(scratch.path().string(), "--tokenizer");
  EXPECT_NE(tok->describe().find("byte-level BPE"), std::string::npos);
  std::ofstream((scratch.path() / "docs.txt").string()) << "the one\nthe other\n";
  const Outcome r = run_binary("tokenize --val-fraction 0 --documents line --tokenizer " + scratch.path().string() +
                                   " --out " + (scratch.path() / "tokens").string() + " " +
                                   (scratch.path() / "docs.txt").string(),
                               scratch.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const TokenFile f((scratch.path() / "tokens" / "train_000000.bin").string(), tok->vocab_size(), "--data");
  std::vector<int32_t> t(size_t(f.size()));
  f.read(0, f.size(), t.data());
  std::vector<int32_t> want = tok->encode("the one");
  want.push_back(259);
  const std::vector<int32_t> other = tok->encode("the other");
  want.insert(want.end(), other.begin(), other.end());
  want.push_back(259);
  EXPECT_EQ(t, want);
}

// tokenize, a short training run and export with the tokenizer in the scratch directory: the
// token files' tokens and the exported directory ("hf").
std::vector<int32_t> tokenize_train_export(const fs::path& d, int vocab) {
  std::string text;
  for (int i = 0; i < 200; ++i) text += "the one and the other one\n";
  std::ofstream((d / "docs.txt").string()) << text;
  Outcome r = run_binary("tokenize --val-fraction 0 --documents line --tokenizer " + d.string() + " --out " +
                             (d / "tokens").string() + " " + (d / "docs.txt").string(), d);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = run_binary("--device cpu --data '" + (d / "tokens").string() + "/*.bin' --vocab-size " + std::to_string(vocab) +
                     " --hidden-dim 32 --num-layers 1 --num-heads 2 --num-kv-heads 2 --intermediate-size 48 --seq-len 16 "
                     "--batch-size 2 --num-steps 2 --save " + (d / "m.safetensors").string(), d);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = run_binary("export " + (d / "m.safetensors").string() + " --hf " + (d / "hf").string() + " --tokenizer " +
                     (d / "tokenizer.json").string(), d);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const TokenFile f((d / "tokens" / "train_000000.bin").string(), vocab, "--data");
  std::vector<int32_t> tokens(size_t(f.size()));
  f.read(0, f.size(), tokens.data());
  return tokens;
}

// A GPT-2-style tokenizer end to end on the CPU: tokenize, train, export (the tokenizer.json
// itself, its BOS, EOS and padding in tokenizer_config.json and config.json), generate from the
// export. Its <|endoftext|> is BOS and EOS: documents end with it, and the export's post-processor
// puts nothing first, as transformers then does (add_bos_token false).
TEST_F(BpeFile, TrainExportAndGenerate) {
  json tokenizer = file({{"\u0120", "t"}, {"h", "e"}, {"\u0120t", "he"}, {"o", "n"}});
  save(tokenizer);
  save({{"bos_token", "<|endoftext|>"}, {"eos_token", "<|endoftext|>"}}, "tokenizer_config.json");
  const fs::path& d = scratch.path();
  const std::vector<int32_t> tokens = tokenize_train_export(d, 261);
  EXPECT_EQ(tokens[0], 't') << "no <|endoftext|> first ('the' is t he)";
  const json exported = json::parse(read_text(d / "hf" / "tokenizer.json"));
  EXPECT_EQ(exported["post_processor"], json::parse(R"({"type": "TemplateProcessing", "single": [{"Sequence": {"id": "A", "type_id": 0}}],
      "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}], "special_tokens": {}})"));
  tokenizer["post_processor"] = exported["post_processor"];
  EXPECT_EQ(exported, tokenizer) << "the rest is the file as it was";
  const nlohmann::json config = nlohmann::json::parse(read_text(d / "hf" / "config.json"));
  EXPECT_EQ(config["vocab_size"], 261) << "the model's vocabulary may be larger than the tokenizer's";
  EXPECT_EQ(config["bos_token_id"], 260);
  EXPECT_EQ(config["eos_token_id"], 260);
  EXPECT_EQ(config["pad_token_id"], 260);
  const nlohmann::json tok_config = nlohmann::json::parse(read_text(d / "hf" / "tokenizer_config.json"));
  EXPECT_EQ(tok_config["eos_token"], "<|endoftext|>");
  EXPECT_EQ(tok_config["pad_token"], "<|endoftext|>");
  EXPECT_EQ(tok_config["add_bos_token"], false);
  EXPECT_EQ(tok_config["add_eos_token"], false);
  EXPECT_FALSE(tok_config.contains("model_max_length")) << "RoPE has no limit: transformers then sets none";
  EXPECT_EQ(tok_config["tokenizer_class"], "PreTrainedTokenizerFast");
  Outcome r = run_binary("generate " + (d / "hf").string() + " --prompt 'the' --max-new-tokens 5 --seed 3", d);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("the", 0), 0u) << r.out;
  fs::create_directories(d / "big");
  save(file({{"a", "b"}, {"c", "d"}, {"e", "f"}, {"g", "h"}, {"i", "j"}, {"k", "l"}}), "big/tokenizer.json");
  // The checkpoint stores the tokenizer of its shards: another is refused naming both, and the
  // export without --tokenizer is the export with it.
  r = run_binary("generate " + (d / "m.safetensors").string() + " --prompt 'the' --tokenizer " + (d / "big").string(), d);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("big/tokenizer.json (vocabulary 263) is not the tokenizer the model was trained with, byte-level BPE "
                       "tokenizer.json (vocabulary 261) stored in '" + (d / "m.safetensors").string() + "'"),
            std::string::npos) << r.err;
  r = run_binary("export " + (d / "m.safetensors").string() + " --hf " + (d / "hf2").string(), d);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (const char* file : {"tokenizer.json", "tokenizer_config.json", "config.json", "model.safetensors"})
    EXPECT_EQ(read_text(d / "hf2" / file), read_text(d / "hf" / file)) << file;
}

// A LLaMA-3-style tokenizer whose post-processor adds no BOS, though tokenizer_config.json names
// one: tokenize puts BOS first in every document, and so does the export's tokenizer (its
// post-processor and add_bos_token), for transformers to encode as the model was trained.
TEST_F(BpeFile, TheExportPutsBosFirstWhereTokenizeDoes) {
  save(llama3(file({{"\u0120", "t"}, {"h", "e"}, {"\u0120t", "he"}, {"o", "n"}}, {}, false,
                   {{"<|begin_of_text|>", true, false}, {"<|end_of_text|>", true, false}})));
  save({{"bos_token", "<|begin_of_text|>"}, {"eos_token", "<|end_of_text|>"}}, "tokenizer_config.json");
  const fs::path& d = scratch.path();
  const std::vector<int32_t> tokens = tokenize_train_export(d, 263);
  EXPECT_EQ(tokens[0], 261) << "BOS first";
  const json exported = json::parse(read_text(d / "hf" / "tokenizer.json"));
  EXPECT_EQ(exported["post_processor"]["single"][0]["SpecialToken"]["id"], "<|begin_of_text|>");
  EXPECT_EQ(exported["post_processor"]["special_tokens"]["<|begin_of_text|>"]["ids"], json::array({261}));
  const nlohmann::json tok_config = nlohmann::json::parse(read_text(d / "hf" / "tokenizer_config.json"));
  EXPECT_EQ(tok_config["add_bos_token"], true);
  EXPECT_EQ(tok_config["bos_token"], "<|begin_of_text|>");
  EXPECT_EQ(tok_config["pad_token"], "<|end_of_text|>");
  EXPECT_EQ(Tokenizer::load((d / "hf").string(), "--tokenizer")->bos(), 261) << "the export reads back";
}

}  // namespace
}  // namespace tt::test
