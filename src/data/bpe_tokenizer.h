// Byte-level BPE tokenizers read from a Hugging Face tokenizer.json: GPT-2's and LLaMA-3's, and
// the many built like them. Encoding is the tokenizers library's (0.23.2), in four steps:
//   1. the added tokens that are not special are found in the text (data/added_tokens.h), and
//      each piece of text between them goes through the next steps on its own;
//   2. the piece is cut into words by the family's pattern (split_words below: GPT-2's or
//      LLaMA-3's regular expression, written out by hand over the Unicode 16.0 classes of
//      data/unicode_classes.h), a space put in front where the pre-tokenizer's
//      add_prefix_space says (of the piece, or after a Split of each word);
//   3. each word's bytes become the byte tokens (GPT-2's map of the 256 bytes to printable
//      characters, byte_characters below, is how tokenizer.json spells them);
//   4. the merges are applied, the lowest ranked pair first (leftmost among equals; a merge listed
//      twice ranks by its last copy), or, where the file says ignore_merges, a word that is a
//      token of its own is taken whole.
// Special tokens in the text are encoded as the text they are (as tiktoken's encode_ordinary, and
// the library with split_special_tokens): a corpus cannot plant a document end. What the file asks
// for that this does not do (another pre-tokenizer or pattern, dropout, a word
// prefix or suffix, single_word added tokens) is refused with one line naming the field.
// tests/gpu/test_gpu_tokenizers.cpp checks the ids against the tokenizers library.
#pragma once
#include <cstddef>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "data/tokenizer.h"

namespace tt {

// The word patterns of the two families, and none (the text is one word: a ByteLevel
// pre-tokenizer without its pattern, as the export of a bytes model writes):
//   Gpt2    's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//   Llama3  (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//           ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
enum class WordPattern { Gpt2, Llama3, Whole };

// The words of `text` as [begin, end) byte offsets, in order, covering it all. Bytes that are not
// UTF-8 are characters of no class (punctuation, as far as the patterns go).
std::vector<std::pair<size_t, size_t>> split_words(const std::string& text, WordPattern pattern);

// One entry of a tokenizer.json's model.merges, "left right" (older files) or ["left", "right"],
// as its two sides; false for anything else (no space, two spaces, another type).
bool merge_sides(const nlohmann::json& merge, std::string& left, std::string& right);

// GPT-2's characters for the 256 bytes, as UTF-8: the printable ones are themselves, the others
// are the code points from 256 on, in byte order.
std::vector<std::string> byte_characters();

// Loads a tokenizer.json (`file`, read from `path`) of this kind (Tokenizer::load sends one with a
// normalizer, SentencePiece's form, to data/sentencepiece_json.h); UsageError naming `flag` and
// the field for a file it cannot read. BOS
// and EOS come from tokenizer_config.json beside it when there is one (its bos_token and
// eos_token), else from the file: the token its post-processor puts first, and the first of
// <|endoftext|>, <|end_of_text|>, </s> among its special tokens.
std::unique_ptr<Tokenizer> load_byte_level_bpe(const nlohmann::json& file, const std::string& path,
                                               const std::string& flag);

}  // namespace tt
