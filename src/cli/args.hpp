// A small, strict command-line parser: options are declared, anything else
// is an error (exit 2) that names the bad word.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace sb::cli {

class Args {
 public:
  // `flags` take no value; `options` take one ("--opt V" or "--opt=V"); an
  // option listed in `repeatable` may appear several times.
  Args(const std::vector<std::string>& argv, const std::vector<std::string>& flags,
       const std::vector<std::string>& options, const std::vector<std::string>& repeatable = {});

  bool has(const std::string& name) const { return values_.count(name) > 0; }
  std::optional<std::string> get(const std::string& name) const;
  std::vector<std::string> all(const std::string& name) const;
  std::optional<int64_t> integer(const std::string& name, int64_t min, int64_t max) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  std::map<std::string, std::vector<std::string>> values_;
  std::vector<std::string> positional_;
};

}  // namespace sb::cli
