#include "recipe/yaml_reader.hpp"

#include <set>

namespace sb::yaml {

static const char* kind_name(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map: return "a mapping";
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Scalar: return "a scalar";
    case YAML::NodeType::Null: return "nothing (null)";
    default: return "undefined";
  }
}

SourceLocation Reader::where(const YAML::Node& n) const {
  YAML::Mark m = n.Mark();
  if (m.line < 0) return SourceLocation{file_, 0, 0};
  return SourceLocation{file_, m.line + 1, m.column + 1};
}

void Reader::fail(const YAML::Node& n, const std::string& message, const std::string& hint) const {
  throw InputError(where(n), message, hint);
}

void Reader::expect_map(const YAML::Node& n, const std::string& what, std::initializer_list<const char*> allowed,
                        std::initializer_list<const char*> required) const {
  if (!n.IsMap()) fail(n, what + " must be a mapping, not " + kind_name(n));
  std::vector<std::string> names(allowed.begin(), allowed.end());
  std::set<std::string> seen;
  for (const auto& kv : n) {
    const YAML::Node& key = kv.first;
    if (!key.IsScalar()) fail(key, "keys of " + what + " must be strings");
    std::string k = key.Scalar();
    if (!seen.insert(k).second) fail(key, "duplicate key '" + k + "' in " + what);
    if (std::find(names.begin(), names.end(), k) == names.end()) {
      std::string s = suggest(k, names);
      std::string msg = "unknown key '" + k + "' in " + what;
      if (!s.empty()) msg += " (did you mean '" + s + "'?)";
      std::string known;
      for (const auto& a : names) known += (known.empty() ? "" : ", ") + a;
      fail(key, msg, "known keys: " + known);
    }
  }
  for (const char* r : required)
    if (!n[r]) fail(n, what + " needs '" + r + "'");
}

std::string Reader::str(const YAML::Node& n, const std::string& what) const {
  if (!n.IsScalar()) fail(n, what + " must be a string, not " + kind_name(n));
  return n.Scalar();
}

int64_t Reader::integer(const YAML::Node& n, const std::string& what) const {
  std::string s = str(n, what);
  try {
    size_t used = 0;
    long long v = std::stoll(s, &used, 10);
    if (used != s.size()) throw std::invalid_argument(s);
    return v;
  } catch (const std::exception&) {
    fail(n, what + " must be an integer, not '" + s + "'");
  }
}

bool Reader::boolean(const YAML::Node& n, const std::string& what) const {
  std::string s = str(n, what);
  if (s == "true" || s == "yes" || s == "on") return true;
  if (s == "false" || s == "no" || s == "off") return false;
  fail(n, what + " must be true or false, not '" + s + "'");
}

uint32_t Reader::octal_mode(const YAML::Node& n, const std::string& what) const {
  std::string s = str(n, what);
  if (s.empty() || s.size() > 5 || s.find_first_not_of("01234567") != std::string::npos)
    fail(n, what + " must be an octal mode such as \"0755\", not '" + s + "'",
         "quote it (\"0755\") so YAML keeps the leading zero");
  uint32_t v = static_cast<uint32_t>(std::stoul(s, nullptr, 8));
  if (v > 07777) fail(n, what + " " + s + " has bits beyond 07777");
  return v;
}

std::vector<std::string> Reader::str_list(const YAML::Node& n, const std::string& what) const {
  if (n.IsScalar()) return {n.Scalar()};
  if (!n.IsSequence()) fail(n, what + " must be a string or a list of strings, not " + kind_name(n));
  std::vector<std::string> out;
  for (const auto& item : n) out.push_back(str(item, "each item of " + what));
  return out;
}

std::map<std::string, std::string> Reader::str_map(const YAML::Node& n, const std::string& what) const {
  if (!n.IsMap()) fail(n, what + " must be a mapping of strings, not " + kind_name(n));
  std::map<std::string, std::string> out;
  for (const auto& kv : n) {
    std::string k = str(kv.first, "a key of " + what);
    if (out.count(k)) fail(kv.first, "duplicate key '" + k + "' in " + what);
    out[k] = str(kv.second, what + "." + k);
  }
  return out;
}

const YAML::Node& Reader::seq(const YAML::Node& n, const std::string& what) const {
  if (!n.IsSequence()) fail(n, what + " must be a list, not " + kind_name(n));
  return n;
}

}  // namespace sb::yaml
