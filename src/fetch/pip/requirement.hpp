// PEP 508 requirements ("jax[cuda12]>=0.4; python_version >= '3.10'") and
// their environment markers, evaluated for the image's Python and platform
// rather than the host's.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "fetch/pip/version.hpp"

namespace sb::pip {

// The marker variables of the target (python_version, platform_machine, ...).
struct MarkerEnv {
  std::map<std::string, std::string> vars;
  // A Linux CPython of `python` ("3.12" or "3.12.3") on `machine` (x86_64, aarch64).
  static MarkerEnv linux_cpython(const std::string& python, const std::string& machine);
};

// A parsed marker expression.
class Marker {
 public:
  static Marker parse(const std::string& text);  // throws sb::Error naming the position
  // `extras`: the extras asked of the package whose metadata holds the marker
  // (normalised names); `extra == "x"` is true when x is among them.
  bool evaluate(const MarkerEnv& env, const std::set<std::string>& extras = {}) const;
  const std::string& str() const { return text_; }
  bool empty() const { return !root_; }

  struct Node;

 private:
  std::shared_ptr<const Node> root_;
  std::string text_;
};

struct Requirement {
  std::string name;                 // as written
  std::string key;                  // normalize_name(name)
  std::set<std::string> extras;     // normalised
  SpecifierSet specifier;
  std::string url;                  // name @ URL (refused by the resolver; kept for messages)
  Marker marker;

  static Requirement parse(const std::string& text);  // throws sb::Error quoting the text
  bool applies(const MarkerEnv& env, const std::set<std::string>& extras = {}) const {
    return marker.empty() || marker.evaluate(env, extras);
  }
  std::string str() const;
};

}  // namespace sb::pip
