// String helpers that several stages need alike.
#pragma once

#include <cstdint>
#include <ctime>
#include <string>
#include <string_view>
#include <vector>

namespace sb {

// `s` without the leading and trailing characters that are in `chars`: a
// view into `s` (for parsers that keep to views), or a string of its own.
inline std::string_view trim_view(std::string_view s, std::string_view chars = " \t\r\n") {
  size_t b = s.find_first_not_of(chars);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(chars) - b + 1);
}
inline std::string trim(std::string_view s, std::string_view chars = " \t\r\n") {
  return std::string(trim_view(s, chars));
}

// `s` with ASCII letters in lower case (names that compare without case).
inline std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

// The lines of `text`, without their '\n' (a last line without one counts;
// a final '\n' does not start another): views into `text`.
inline std::vector<std::string_view> lines(std::string_view text) {
  std::vector<std::string_view> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    out.push_back(text.substr(pos, end - pos));
    pos = end + 1;
  }
  return out;
}

// RFC 3339 UTC time of a Unix timestamp: "2024-05-01T00:00:00Z" (image
// configs, SBOMs, eStargz and zstd:chunked tables of contents).
inline std::string rfc3339(int64_t epoch) {
  time_t t = static_cast<time_t>(epoch);
  struct tm tm;
  gmtime_r(&t, &tm);
  char buf[32];
  strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace sb
