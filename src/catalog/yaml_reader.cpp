#include "catalog/yaml_reader.hpp"

#include <cctype>

namespace sb::catalog::detail {

const char* describe(const YAML::Node& node) {
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

SourceLocation YamlReader::at(const YAML::Node& node) const {
  YAML::Mark m = node.Mark();
  if (m.is_null()) return {file_, 0, 0};
  return {file_, m.line + 1, m.column + 1};
}

void YamlReader::fail(const YAML::Node& node, const std::string& message,
                      const std::string& hint) const {
  throw InputError(at(node), message, hint);
}

void YamlReader::expect_map(const YAML::Node& node, std::string_view what) const {
  if (!node.IsMap())
    fail(node, "expected a map for " + std::string(what) + ", got " + describe(node));
}

void YamlReader::expect_list(const YAML::Node& node, std::string_view what) const {
  if (!node.IsSequence())
    fail(node, "expected a list for " + std::string(what) + ", got " + describe(node));
}

std::string YamlReader::string(const YAML::Node& node, std::string_view what) const {
  if (!node.IsScalar())
    fail(node, "expected a string for " + std::string(what) + ", got " + describe(node));
  return node.Scalar();
}

int YamlReader::integer(const YAML::Node& node, std::string_view what) const {
  std::string s = string(node, what);
  bool digits = !s.empty() && s.size() < 7;
  for (char c : s) digits = digits && std::isdigit(static_cast<unsigned char>(c));
  if (!digits) fail(node, "expected a whole number for " + std::string(what) + ", got '" + s + "'");
  return std::stoi(s);
}

std::vector<std::string> YamlReader::strings(const YAML::Node& node, std::string_view what) const {
  expect_list(node, what);
  std::vector<std::string> out;
  for (const auto& item : node) out.push_back(string(item, std::string("an item of ") += what));
  return out;
}

std::vector<std::string> YamlReader::string_or_strings(const YAML::Node& node,
                                                       std::string_view what) const {
  if (node.IsScalar()) return {node.Scalar()};
  if (!node.IsSequence())
    fail(node, "expected a string or a list of strings for " + std::string(what) + ", got " +
                   describe(node));
  return strings(node, what);
}

Version YamlReader::version(const YAML::Node& node, std::string_view what) const {
  std::string why;
  auto v = Version::parse(string(node, what), &why);
  if (!v)
    fail(node, why, "versions are dotted numbers with an optional -revision: 12.6.3, 2.23.4-1");
  return *v;
}

VersionRange YamlReader::range(const YAML::Node& node, std::string_view what) const {
  std::vector<std::string> texts = string_or_strings(node, what);
  std::string why;
  auto r = VersionRange::parse_any_of(texts, &why);
  if (!r)
    fail(node, why,
         "ranges look like \"12.6\", \">=12.0,<12.4\", \"12.0 - 12.3\" or a list of them");
  return *r;
}

std::string YamlReader::arch(const YAML::Node& node) const {
  std::string s = string(node, "a compute capability");
  size_t dot = s.find('.');
  bool ok = dot != std::string::npos && dot > 0 && dot + 1 < s.size();
  for (size_t i = 0; ok && i < s.size(); ++i) {
    char c = s[i];
    if (i == dot) continue;
    bool letter_suffix = i + 1 == s.size() && i > dot + 1 && (c == 'a' || c == 'f');
    ok = std::isdigit(static_cast<unsigned char>(c)) || letter_suffix;
  }
  if (!ok)
    fail(node, "bad compute capability '" + s + "'", "write it as major.minor: 8.0, 9.0a, 12.0");
  return s;
}

void YamlReader::check_keys(const YAML::Node& map, std::string_view what,
                            std::initializer_list<std::string_view> allowed,
                            std::initializer_list<std::string_view> required) const {
  expect_map(map, what);
  for (auto it = map.begin(); it != map.end(); ++it) {
    std::string key = string(it->first, "a key");
    bool known = false;
    for (auto a : allowed) known = known || a == key;
    if (known) continue;
    std::vector<std::string> names(allowed.begin(), allowed.end());
    std::string best = suggest(key, names);
    std::string message = "unknown key '" + key + "' in " + std::string(what);
    if (!best.empty()) message += " (did you mean '" + best + "'?)";
    std::string keys;
    for (const auto& n : names) keys += (keys.empty() ? "" : ", ") + n;
    fail(it->first, message, "the keys of " + std::string(what) + " are: " + keys);
  }
  for (auto r : required)
    if (!map[std::string(r)])
      fail(map, "missing key '" + std::string(r) + "' in " + std::string(what));
}

}  // namespace sb::catalog::detail
