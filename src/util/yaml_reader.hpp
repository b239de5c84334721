// Location-aware, strict reading of YAML nodes: every mistake becomes an
// sb::InputError at the offending node's file:line:col, with the line quoted
// and a did-you-mean where one fits. The one YAML vocabulary of stackbuild;
// recipe/ and catalog/ parse with it, and no YAML type leaves them.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "util/error.hpp"

namespace sb::yaml {

class Reader {
 public:
  explicit Reader(std::string file) : file_(std::move(file)) {}

  const std::string& file() const { return file_; }

  // Parses `text` (the contents of file()); a syntax error is an InputError.
  YAML::Node parse(const std::string& text) const;

  SourceLocation at(const YAML::Node& node) const;
  [[noreturn]] void fail(const YAML::Node& node, const std::string& message,
                         const std::string& hint = {}) const;

  // `what` names the value in messages, e.g. "'driver_min'".
  void expect_map(const YAML::Node& node, std::string_view what) const;
  void expect_list(const YAML::Node& node, std::string_view what) const;

  // A map whose keys are all in `allowed` (an unknown key is an error with a
  // did-you-mean), with no key twice, holding every key in `required`.
  void check_keys(const YAML::Node& map, std::string_view what,
                  std::initializer_list<std::string_view> allowed,
                  std::initializer_list<std::string_view> required = {}) const;

  std::string string(const YAML::Node& node, std::string_view what) const;
  int64_t integer(const YAML::Node& node, std::string_view what) const;
  bool boolean(const YAML::Node& node, std::string_view what) const;
  uint32_t octal_mode(const YAML::Node& node, std::string_view what) const;  // "0755"
  std::vector<std::string> strings(const YAML::Node& node, std::string_view what) const;
  // A string, or a list of strings.
  std::vector<std::string> string_or_strings(const YAML::Node& node, std::string_view what) const;
  // A map of string to string, keys unique.
  std::map<std::string, std::string> string_map(const YAML::Node& node, std::string_view what) const;

 private:
  std::string file_;
};

// "a list", "a map", "a string", "nothing"
const char* describe(const YAML::Node& node);

}  // namespace sb::yaml
