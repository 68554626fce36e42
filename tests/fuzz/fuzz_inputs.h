// One fuzz case for the readers of untrusted files: the bytes are written to a file, which is
// then opened as a safetensors file, a checkpoint, a token file, a text corpus, a tokenizer
// (SentencePiece or tokenizer.json), a prompts file and a multiple-choice task file, and written
// as a Hugging Face directory's config.json and as its model.safetensors.index.json (beside a
// valid config and two shards), and as the tokenizer_config.json beside a valid tokenizer.json.
// Each reader must accept
// it or refuse it with UsageError; anything else (a crash, a sanitizer report, another
// exception, a hang) is a defect.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "model/config.h"

namespace tt::fuzz {

// A valid Hugging Face directory of a tiny model (sharded), made once per process, and the seeds
// of the text readers: its config.json, its index, a SentencePiece model, a tokenizer.json of
// GPT-2's kind and its tokenizer_config.json (written in `dir`).
struct HfSeed {
  std::string dir, config, index, tokenizer_model, tokenizer_json, tokenizer_config;
};
const HfSeed& hf_seed();
const ModelConfig& hf_model();

// `path` is a scratch file the case may overwrite.
void run_case(const uint8_t* data, size_t size, const std::string& path);

}  // namespace tt::fuzz
