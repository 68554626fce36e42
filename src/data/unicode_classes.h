// The three Unicode character classes byte-level BPE pre-tokenizers split text by (the \p{L},
// \p{N} and \s of GPT-2's and LLaMA-3's patterns), as tables of code point ranges generated
// from the Unicode Character Database by scripts/gen-unicode-classes.py.
#pragma once

namespace tt {

const char* unicode_version();  // of the tables, e.g. "15.0.0"
bool is_letter(char32_t c);     // general category L: Lu, Ll, Lt, Lm, Lo
bool is_number(char32_t c);     // general category N: Nd, Nl, No
bool is_space(char32_t c);      // the White_Space property (what \s matches)

}  // namespace tt
