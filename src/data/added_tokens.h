// The added tokens of a Hugging Face tokenizer.json ("added_tokens"), found in a text as the
// tokenizers library finds them before its pre-tokenizer and model see it: the text is cut around
// them, and the pieces between are encoded each on its own. Only tokens that are not special
// ("special": false, as CodeGen's runs of spaces or many chat tokenizers' <|im_start|>) are
// taken; special tokens stay text, as the library does with split_special_tokens (its
// encode_special_tokens) on, but they still take their place in the search, so a token that
// overlaps one is not found there either. The search, as the library's:
//   1. the tokens with "normalized": false over the whole text, then those with "normalized":
//      true over each piece between the first ones (there is no normalizer: the text is itself);
//   2. in each, from left to right, the longest token that starts first, then on after it;
//   3. "lstrip" takes the white space before the token into it (not before the previous
//      token's end), "rstrip" the white space after it (White_Space, as \s).
#pragma once
#include <cstddef>
#include <bitset>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace tt {

struct AddedToken {
  std::string content;
  int id = -1;
  bool special = false, lstrip = false, rstrip = false, normalized = true;
};

// A piece of a text, bytes [begin, end): the added token `id`, or (-1) text for the model.
struct TextPiece {
  size_t begin, end;
  int id;
};

class AddedTokens {
 public:
  explicit AddedTokens(const std::vector<AddedToken>& tokens);  // an empty one is left out, as the library does
  // The pieces of `text`, in order, covering it (an rstrip token's white space may also begin
  // the next token, as in the library); one piece of text where no token is found.
  std::vector<TextPiece> split(const std::string& text) const;

 private:
  // The tokens of one step of the search as a trie of their bytes.
  struct Trie {
    std::unordered_map<uint64_t, int32_t> next;  // node << 8 | byte -> node
    std::vector<int32_t> token = {-1};            // node -> the token ending there (its index), -1 none
    std::bitset<256> first;                       // the bytes a token starts with
    bool any_taken = false;                       // a token that is not special: the search can find something
    void add(const std::string& content, int32_t index);
  };
  void find(const Trie& trie, const std::string& text, size_t begin, size_t end, std::vector<TextPiece>& out) const;

  std::vector<AddedToken> tokens_;
  Trie raw_, normalized_;  // "normalized": false, then true
};

}  // namespace tt
