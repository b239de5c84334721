#include "util/limits.hpp"

#include <cstdlib>

#include "util/error.hpp"
#include "util/status.hpp"

namespace sb {

std::string SizeLimit::describe() const {
  return "the " + human_bytes(static_cast<double>(bytes)) + " cap (" + variable + " raises it)";
}

SizeLimit size_limit(const char* variable, uint64_t fallback) {
  const char* v = std::getenv(variable);
  if (!v || !*v) return {fallback, variable};
  auto bytes = parse_bytes(v);
  if (!bytes || *bytes == 0)
    throw Error(std::string(variable) + "='" + v + "' is not a size (bytes, or e.g. 64MiB, 32GiB)");
  return {*bytes, variable};
}

}  // namespace sb
