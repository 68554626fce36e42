// A tokenizer as the bytes of the files that make it, so that it goes where what it made goes:
// `tokenize` copies them beside its shards (listed in manifest.json with their hashes), a training
// run on those shards stores them in its checkpoints, and generate, export and eval load them from
// there (src/train/bound_tokenizer.h).
//
// The readers load from paths (SentencePiece's loader; the tokenizer.json reader, which reads the
// tokenizer_config.json beside it). So stored files are written into a private temporary
// directory, made by mkdtemp under $TMPDIR (else /tmp) as tiny_llama-tokenizer.XXXXXX with mode
// 0700, loaded from there, and the directory is removed before the load returns, failed or not:
// the tokenizer then lives in memory. Their names are the kind's fixed ones, never a path that a
// file (a checkpoint, a manifest) names.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "data/tokenizer.h"

namespace tt {

struct TokenizerFiles {
  TokenizerKind kind = TokenizerKind::Bytes;
  // (name, bytes), in the order of tokenizer_file_names: none for bytes; tokenizer.model for
  // SentencePiece; tokenizer.json and, where one stood beside it, tokenizer_config.json (its BOS
  // and EOS) for a byte-level BPE.
  std::vector<std::pair<std::string, std::string>> files;
  bool operator==(const TokenizerFiles& other) const { return kind == other.kind && files == other.files; }
  bool operator!=(const TokenizerFiles& other) const { return !(*this == other); }
  const std::string* find(const std::string& name) const;
};

// Whether two tokenizers' files make the same tokenizer: the same bytes, or two SentencePiece
// models that encode and decode alike (sentencepiece_identity: a .model and the model its
// exported tokenizer.json reads back as).
bool same_tokenizer(const TokenizerFiles& a, const TokenizerFiles& b);

// How manifests and checkpoints name a kind: "bytes", "sentencepiece", "byte-level-bpe"; false for
// a name that is none of them.
std::string tokenizer_kind_name(TokenizerKind kind);
bool tokenizer_kind_named(const std::string& name, TokenizerKind* kind);

// The files a kind may have, in order, and whether each must be there.
struct TokenizerFileName {
  std::string name;
  bool required;
};
std::vector<TokenizerFileName> tokenizer_file_names(TokenizerKind kind);

// The files of a tokenizer: a loaded one's, read again from its path (its tokenizer_config.json
// too, where one is beside it), or the ones a stored tokenizer was loaded from.
TokenizerFiles tokenizer_files(const Tokenizer& tok);

// The tokenizer `files` make, loaded as above. Its describe() names the file and `origin` where the
// path would be ("SentencePiece tokenizer.model (vocabulary 4000) stored in 'ck.safetensors'"), its
// path() is "" (the file is gone), and tokenizer_files() gives `files` back. UsageError naming
// `flag` and `origin` for files that do not load.
std::unique_ptr<Tokenizer> load_tokenizer_files(const TokenizerFiles& files, const std::string& origin,
                                                const std::string& flag);

}  // namespace tt
