#include "core/json_input.h"

#include <algorithm>

#include "core/error.h"
#include "core/files.h"

namespace tt {

namespace {

// The offset of the first byte that is not part of well-formed UTF-8, or npos.
size_t first_non_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const uint8_t b = uint8_t(s[i]);
    const size_t len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    if (len == 0 || i + len > s.size()) return i;
    uint32_t c = len == 1 ? b : len == 2 ? (b & 0x1F) : len == 3 ? (b & 0x0F) : (b & 0x07);
    for (size_t k = 1; k < len; ++k) {
      if ((uint8_t(s[i + k]) & 0xC0) != 0x80) return i;
      c = (c << 6) | (uint8_t(s[i + k]) & 0x3F);
    }
    static const uint32_t kSmallest[] = {0, 0, 0x80, 0x800, 0x10000};  // shorter forms are not UTF-8
    if (c < kSmallest[len] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return i;
    i += len;
  }
  return std::string::npos;
}

struct TooDeep {};

}  // namespace

nlohmann::json parse_json_input(const std::string& text, const std::string& what, int max_depth) {
  if (const size_t bad = first_non_utf8(text); bad != std::string::npos)
    usage_fail(what + " is not JSON (not UTF-8 at byte " + std::to_string(bad) + ")");
  try {
    return nlohmann::json::parse(text, [max_depth](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
      if (depth > max_depth) throw TooDeep{};
      return true;
    });
  } catch (const TooDeep&) {
    usage_fail(what + " is not JSON this program reads (nested deeper than " + std::to_string(max_depth) + " levels)");
  } catch (const nlohmann::json::parse_error& e) {
    usage_fail(what + " is not JSON (a syntax error at byte " + std::to_string(e.byte) + ")");
  } catch (const nlohmann::json::out_of_range&) {  // a number beyond a double's range
    usage_fail(what + " is not JSON this program reads (a number out of range)");
  }
}

nlohmann::json read_json_file(const std::string& path, const std::string& what, size_t max_bytes, int max_depth) {
  return parse_json_input(read_input_file(path, what, max_bytes), what + ": '" + path + "'", max_depth);
}

const nlohmann::json& json_member(const nlohmann::json& object, const std::string& key) {
  static const nlohmann::json null;
  if (!object.is_object()) return null;
  const auto it = object.find(key);
  return it == object.end() ? null : *it;
}

std::string json_brief(const nlohmann::json& value) {
  if (value.is_object()) return "an object of " + std::to_string(value.size()) + " member(s)";
  if (value.is_array()) return "an array of " + std::to_string(value.size()) + " item(s)";
  if (!value.is_string()) return value.dump();  // a number, true, false or null: a few bytes
  const std::string& s = value.get_ref<const std::string&>();
  size_t end = std::min<size_t>(s.size(), 40);
  while (end < s.size() && end > 0 && (uint8_t(s[end]) & 0xC0) == 0x80) --end;  // a whole character last
  std::string out = nlohmann::json(s.substr(0, end)).dump();  // quoted and escaped as JSON writes it
  if (end < s.size()) out.insert(out.size() - 1, "...");
  return out;
}

}  // namespace tt
