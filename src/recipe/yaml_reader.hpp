// Location-aware reading of YAML nodes, with strict key checking: the small
// vocabulary recipe parsers are written in. Internal to recipe/.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <vector>

#include "util/error.hpp"

namespace sb::yaml {

class Reader {
 public:
  explicit Reader(std::string file) : file_(std::move(file)) {}

  SourceLocation where(const YAML::Node& n) const;
  [[noreturn]] void fail(const YAML::Node& n, const std::string& message, const std::string& hint = {}) const;

  // A mapping whose keys must all be in `allowed`; unknown keys are errors
  // with a did-you-mean. Required keys missing are errors at the mapping.
  void expect_map(const YAML::Node& n, const std::string& what, std::initializer_list<const char*> allowed,
                  std::initializer_list<const char*> required = {}) const;

  std::string str(const YAML::Node& n, const std::string& what) const;
  int64_t integer(const YAML::Node& n, const std::string& what) const;
  bool boolean(const YAML::Node& n, const std::string& what) const;
  uint32_t octal_mode(const YAML::Node& n, const std::string& what) const;  // "0755" or 0755
  std::vector<std::string> str_list(const YAML::Node& n, const std::string& what) const;  // a string or a list
  std::map<std::string, std::string> str_map(const YAML::Node& n, const std::string& what) const;
  const YAML::Node& seq(const YAML::Node& n, const std::string& what) const;

  const std::string& file() const { return file_; }

 private:
  std::string file_;
};

}  // namespace sb::yaml
