// The three Unicode character classes byte-level BPE pre-tokenizers split text by (the \p{L},
// \p{N} and \s of GPT-2's and LLaMA-3's patterns), as tables of code point ranges generated
// from the Unicode Character Database by scripts/gen-unicode-classes.py; and the UTF-8 decoding
// the readers of text use them with.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

namespace tt {

const char* unicode_version();  // of the tables, e.g. "16.0.0"
bool is_letter(char32_t c);     // general category L: Lu, Ll, Lt, Lm, Lo
bool is_number(char32_t c);     // general category N: Nd, Nl, No
bool is_space(char32_t c);      // the White_Space property (what \s matches)

constexpr char32_t kNotUtf8 = 0xFFFFFFFF;  // a byte that starts no UTF-8 character: in no class

// The code point at text[at], and its length in bytes (a byte that is not UTF-8: kNotUtf8, 1).
inline std::pair<char32_t, size_t> next_char(const std::string& text, size_t at) {
  const auto byte = [&](size_t i) { return uint8_t(text[i]); };
  const uint8_t b = byte(at);
  const size_t len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
  if (len == 0 || at + len > text.size()) return {kNotUtf8, 1};
  char32_t c = len == 1 ? b : len == 2 ? (b & 0x1F) : len == 3 ? (b & 0x0F) : (b & 0x07);
  for (size_t i = 1; i < len; ++i) {
    if ((byte(at + i) & 0xC0) != 0x80) return {kNotUtf8, 1};
    c = (c << 6) | (byte(at + i) & 0x3F);
  }
  static constexpr char32_t kSmallest[] = {0, 0, 0x80, 0x800, 0x10000};  // shorter forms are not UTF-8
  if (c < kSmallest[len] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return {kNotUtf8, 1};
  return {c, len};
}

}  // namespace tt
