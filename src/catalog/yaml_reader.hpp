// Strict reading of YAML values for the catalog loader: every mistake becomes
// an sb::InputError at the offending node's file:line:col. Internal to
// catalog/; nothing outside the loader sees a YAML type.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "catalog/version.hpp"
#include "util/error.hpp"

namespace sb::catalog::detail {

class YamlReader {
 public:
  explicit YamlReader(std::string file) : file_(std::move(file)) {}

  const std::string& file() const { return file_; }
  SourceLocation at(const YAML::Node& node) const;
  [[noreturn]] void fail(const YAML::Node& node, const std::string& message,
                         const std::string& hint = {}) const;

  // `what` names the value in messages, e.g. "'driver_min'".
  void expect_map(const YAML::Node& node, std::string_view what) const;
  void expect_list(const YAML::Node& node, std::string_view what) const;
  std::string string(const YAML::Node& node, std::string_view what) const;
  int integer(const YAML::Node& node, std::string_view what) const;
  std::vector<std::string> strings(const YAML::Node& node, std::string_view what) const;
  // A string, or a list of strings.
  std::vector<std::string> string_or_strings(const YAML::Node& node, std::string_view what) const;
  Version version(const YAML::Node& node, std::string_view what) const;
  // A range, or a list of ranges meaning any of them.
  VersionRange range(const YAML::Node& node, std::string_view what) const;
  // A compute capability such as "8.0" or "9.0a".
  std::string arch(const YAML::Node& node) const;

  // Rejects keys not in `allowed` (with a did-you-mean) and requires `required`.
  void check_keys(const YAML::Node& map, std::string_view what,
                  std::initializer_list<std::string_view> allowed,
                  std::initializer_list<std::string_view> required = {}) const;

 private:
  std::string file_;
};

// "a list", "a map", "a string", "nothing"
const char* describe(const YAML::Node& node);

}  // namespace sb::catalog::detail
