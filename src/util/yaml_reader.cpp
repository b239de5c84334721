#include "util/yaml_reader.hpp"

#include <algorithm>
#include <cstdio>
#include <set>

#include "util/utf8.hpp"

namespace sb::yaml {

const char* describe(const YAML::Node& node) {
  if (!node.IsDefined()) return "nothing";  // a missing key of a const map: Type() would throw
  switch (node.Type()) {
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a map";
    case YAML::NodeType::Scalar:
      return "a string";
    default:
      return "nothing";
  }
}

YAML::Node Reader::parse(const std::string& text) const {
  // YAML allows UTF-16 and UTF-32 too, but nothing here writes them; and bytes
  // that are no UTF-8 would reach JSON (plans, lockfiles, labels) and fail
  // there, far from the file.
  // The byte at `bad` fails the file: where it is, and its value.
  auto refuse_byte = [&](size_t bad, const std::string& before, const std::string& after, const std::string& hint) {
    size_t line_start = text.rfind('\n', bad == 0 ? 0 : bad - 1);
    line_start = line_start == std::string::npos || bad == 0 ? 0 : line_start + 1;
    int line = 1 + static_cast<int>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(bad), '\n'));
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%02X", static_cast<unsigned char>(text[bad]));
    throw InputError({file_, line, static_cast<int>(bad - line_start) + 1}, before + hex + after, hint);
  };
  if (size_t bad = utf8_error_at(text); bad != std::string::npos)
    refuse_byte(bad, "not UTF-8 text: byte ", " here does not begin a UTF-8 character", "save the file as UTF-8");
  // Nor does YAML allow control characters other than tab and line breaks;
  // yaml-cpp reads a NUL as the start of an escape and mangles what follows
  // it into bytes that are not UTF-8.
  auto control = std::find_if(text.begin(), text.end(), [](char c) {
    auto u = static_cast<unsigned char>(c);
    return (u < 0x20 && c != '\t' && c != '\n' && c != '\r') || u == 0x7F;
  });
  if (control != text.end())
    refuse_byte(static_cast<size_t>(control - text.begin()), "control character ", " here: YAML allows none but tab and line breaks",
                "remove it; inside a double-quoted string, write it as an escape such as \"\\x00\"");
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw InputError({file_, e.mark.line + 1, e.mark.column + 1}, e.msg);
  }
}

SourceLocation Reader::at(const YAML::Node& node) const {
  // A missing key read from a const map is an invalid node, whose Mark()
  // throws yaml-cpp's InvalidNode ("invalid node; first invalid key: ...").
  if (!node.IsDefined()) return {file_, 0, 0};
  YAML::Mark m = node.Mark();
  if (m.is_null() || m.line < 0) return {file_, 0, 0};
  return {file_, m.line + 1, m.column + 1};
}

void Reader::fail(const YAML::Node& node, const std::string& message, const std::string& hint) const {
  throw InputError(at(node), message, hint);
}

void Reader::expect_map(const YAML::Node& node, std::string_view what) const {
  if (!node.IsDefined() || !node.IsMap())
    fail(node, "expected a map for " + std::string(what) + ", got " + describe(node));
}

void Reader::expect_list(const YAML::Node& node, std::string_view what) const {
  if (!node.IsDefined() || !node.IsSequence())
    fail(node, "expected a list for " + std::string(what) + ", got " + describe(node));
}

void Reader::check_keys(const YAML::Node& map, std::string_view what,
                        std::initializer_list<std::string_view> allowed,
                        std::initializer_list<std::string_view> required) const {
  expect_map(map, what);
  std::vector<std::string> names(allowed.begin(), allowed.end());
  std::set<std::string> seen;
  for (auto it = map.begin(); it != map.end(); ++it) {
    std::string key = string(it->first, "a key");
    if (!seen.insert(key).second) fail(it->first, "duplicate key '" + key + "' in " + std::string(what));
    if (std::find(names.begin(), names.end(), key) != names.end()) continue;
    std::string best = suggest(key, names);
    std::string message = "unknown key '" + key + "' in " + std::string(what);
    if (!best.empty()) message += " (did you mean '" + best + "'?)";
    std::string keys;
    for (const auto& n : names) keys += (keys.empty() ? "" : ", ") + n;
    fail(it->first, message, "the keys of " + std::string(what) + " are: " + keys);
  }
  for (auto r : required)
    if (!map[std::string(r)]) fail(map, "missing key '" + std::string(r) + "' in " + std::string(what));
}

std::string Reader::string(const YAML::Node& node, std::string_view what) const {
  if (!node.IsDefined() || !node.IsScalar())
    fail(node, "expected a string for " + std::string(what) + ", got " + describe(node));
  return node.Scalar();
}

int64_t Reader::integer(const YAML::Node& node, std::string_view what) const {
  std::string s = string(node, what);
  try {
    size_t used = 0;
    long long v = std::stoll(s, &used, 10);
    if (used != s.size()) throw std::invalid_argument(s);
    return v;
  } catch (const std::exception&) {
    fail(node, "expected a whole number for " + std::string(what) + ", got '" + s + "'");
  }
}

bool Reader::boolean(const YAML::Node& node, std::string_view what) const {
  std::string s = string(node, what);
  if (s == "true" || s == "yes" || s == "on") return true;
  if (s == "false" || s == "no" || s == "off") return false;
  fail(node, "expected true or false for " + std::string(what) + ", got '" + s + "'");
}

uint32_t Reader::octal_mode(const YAML::Node& node, std::string_view what) const {
  std::string s = string(node, what);
  if (s.empty() || s.size() > 5 || s.find_first_not_of("01234567") != std::string::npos)
    fail(node, "expected an octal mode such as \"0755\" for " + std::string(what) + ", got '" + s + "'",
         "quote it (\"0755\") so YAML keeps the leading zero");
  uint32_t v = static_cast<uint32_t>(std::stoul(s, nullptr, 8));
  if (v > 07777) fail(node, std::string(what) + " " + s + " has bits beyond 07777");
  return v;
}

std::vector<std::string> Reader::strings(const YAML::Node& node, std::string_view what) const {
  expect_list(node, what);
  std::vector<std::string> out;
  for (const auto& item : node) out.push_back(string(item, "an item of " + std::string(what)));
  return out;
}

std::vector<std::string> Reader::string_or_strings(const YAML::Node& node, std::string_view what) const {
  if (node.IsDefined() && node.IsScalar()) return {node.Scalar()};
  if (!node.IsDefined() || !node.IsSequence())
    fail(node, "expected a string or a list of strings for " + std::string(what) + ", got " + describe(node));
  return strings(node, what);
}

std::map<std::string, std::string> Reader::string_map(const YAML::Node& node, std::string_view what) const {
  expect_map(node, what);
  std::map<std::string, std::string> out;
  for (auto it = node.begin(); it != node.end(); ++it) {
    std::string k = string(it->first, "a key of " + std::string(what));
    if (out.count(k)) fail(it->first, "duplicate key '" + k + "' in " + std::string(what));
    out[k] = string(it->second, std::string(what) + "." + k);
  }
  return out;
}

}  // namespace sb::yaml
