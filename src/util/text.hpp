// String helpers that several stages need alike.
#pragma once

#include <string>
#include <string_view>

namespace sb {

// `s` without the leading and trailing characters that are in `chars`.
inline std::string trim(std::string_view s, std::string_view chars = " \t\r\n") {
  size_t b = s.find_first_not_of(chars);
  if (b == std::string_view::npos) return {};
  return std::string(s.substr(b, s.find_last_not_of(chars) - b + 1));
}

}  // namespace sb
