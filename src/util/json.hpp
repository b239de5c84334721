// Small readers of JSON values for documents stackbuild reads back (the
// lockfile, records), where nlohmann's conversions would accept too much.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "util/error.hpp"

namespace sb {

// What a JSON value is, for "X is an array, not a string" messages: "an
// array", "an object", "a number", "a string", "a boolean", "null". Never the
// value itself, which may be a secret.
inline std::string json_kind(const nlohmann::json& v) {
  if (v.is_null()) return "null";
  std::string type = v.type_name();  // "array", "object", "number", "string", "boolean"
  return (type[0] == 'a' || type[0] == 'o' ? "an " : "a ") + type;
}

// j[key] as a byte count: a JSON integer >= 0. nlohmann's get<uint64_t>()
// would turn -5 into 18446744073709551611 and 1.5 into 1.
inline uint64_t json_size(const nlohmann::json& j, const char* key) {
  const nlohmann::json& v = j.at(key);
  // A parsed 5 is unsigned; a 5 built in C++ from an int is signed.
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0))
    throw Error(std::string(key) + " is " + v.dump() + ", not a size in bytes");
  return v.get<uint64_t>();
}

}  // namespace sb
