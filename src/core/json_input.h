// JSON the program did not write (a tokenizer.json, a tokenizer_config.json, a Hugging Face
// config.json or shard index, a record of a JSON-lines corpus, a benchmark baseline) goes through
// one parser, which bounds the nesting while it parses: nlohmann's copies, comparisons and dump()
// recurse once per level, so 100,000 nested brackets in one field overflowed the stack
// (SIGSEGV) wherever a subtree was copied or printed. Errors name the input and say why in
// words (never the library's message, which quotes raw bytes); values in error messages are
// described briefly (json_brief), never printed whole.
#pragma once
#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>

namespace tt {

// Deeper than any real file of these kinds (a tokenizer.json nests 7 levels).
constexpr int kMaxJsonDepth = 64;

// `text` as JSON. UsageError "<what> is not JSON (<why>)", why one of: not UTF-8 at byte N,
// nested deeper than max_depth levels, a syntax error at byte N, a number out of range. A UTF-8
// byte-order mark first is allowed.
nlohmann::json parse_json_input(const std::string& text, const std::string& what, int max_depth = kMaxJsonDepth);

// The file at `path` (read_input_file's rules: a regular file of at most max_bytes) as JSON;
// errors begin "<what>: '<path>'".
nlohmann::json read_json_file(const std::string& path, const std::string& what, size_t max_bytes,
                              int max_depth = kMaxJsonDepth);

// `object`'s member `key`, or null when `object` is not an object or has no such member: a
// reference, never a copy.
const nlohmann::json& json_member(const nlohmann::json& object, const std::string& key);

// A value as an error message shows it: a number, true, false or null as it is written; a string
// quoted and escaped as JSON writes it, cut to 40 bytes (whole characters); an object or array by its type
// and size. Never a whole subtree.
std::string json_brief(const nlohmann::json& value);

}  // namespace tt
