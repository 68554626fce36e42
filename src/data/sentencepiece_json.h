// A SentencePiece model as a Hugging Face tokenizer.json, and back.
//
// Out: the export writes a tokenizer-train model for transformers (src/train/hf.cpp): the same
// pieces and ids, the dummy space and the space's "▁" as the normalizer, byte fallback, BOS added
// in front, and the decoder that undoes it all. A BPE model becomes a BPE model with merges
// derived from the pieces (each split of a piece into two pieces of the vocabulary, ranked by the
// piece's score, as transformers' converter derives them); a unigram model a Unigram model, the
// pieces with their scores. The tokenizers library encodes it as SentencePiece encodes the model
// (tests/gpu/test_gpu_tokenizers.cpp).
//
// Back: a tokenizer.json of that form (the export's, and LLaMA-2's, built the same way) becomes a
// SentencePiece model again, serialized as a .model file is, and SentencePiece encodes with it.
// The pieces keep their ids; <unk>, the special added tokens and the byte pieces <0x00>..<0xFF>
// get their kinds back; a unigram model's scores are the file's, and a BPE model's piece scores
// the merges' order (a piece ranks by its first merge: SentencePiece merges the best-scored pair,
// the library the lowest-ranked one, and the export ranked merges by score). Anything else in the
// file (another normalizer, a pre-tokenizer, non-special added tokens, dropout) is refused with
// one line naming the field: its encoding would not be SentencePiece's.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace tt {

// The SentencePiece model at `model_path` as a tokenizer.json (its text).
std::string sentencepiece_tokenizer_json(const std::string& model_path);

// What a SentencePiece model (serialized) is as a tokenizer, for telling whether two files are the
// same one: its tokenizer.json and its EOS, where the export is faithful to it (the text as it is:
// the identity normalizer, spaces kept, the dummy space); "" where it is not, or the bytes do not
// load. A model and the model that its tokenizer.json reads back as have the same.
std::string sentencepiece_identity(const std::string& serialized_model);

// Whether a parsed tokenizer.json is of SentencePiece's form as far as the readers go: it has a
// normalizer or a Unigram model (a byte-level BPE has neither).
bool is_sentencepiece_json(const nlohmann::json& file);

// The SentencePiece model (a serialized ModelProto) a tokenizer.json of SentencePiece's form
// makes; `path` is where it was read from (its BOS and EOS come from tokenizer_config.json beside
// it where there is one, else the post-processor's first token and "</s>"). UsageError naming
// `flag`, the path and the field for a file of another form.
std::string sentencepiece_model_from_json(const nlohmann::json& file, const std::string& path, const std::string& flag);

}  // namespace tt
