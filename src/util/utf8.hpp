// UTF-8 as RFC 3629 has it (what nlohmann::json accepts when it writes a
// string): no overlong forms, no surrogates, nothing past U+10FFFF.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace sb {

// The offset of the first byte that is not part of a valid UTF-8 sequence,
// or npos when all of `s` is UTF-8.
inline size_t utf8_error_at(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
    unsigned char c = byte(i);
    size_t n;
    unsigned char lo = 0x80, hi = 0xBF;  // the range of the second byte
    if (c < 0x80) {
      ++i;
      continue;
    } else if (c >= 0xC2 && c <= 0xDF) {
      n = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      n = 3;
      if (c == 0xE0) lo = 0xA0;       // overlong
      if (c == 0xED) hi = 0x9F;       // surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      n = 4;
      if (c == 0xF0) lo = 0x90;       // overlong
      if (c == 0xF4) hi = 0x8F;       // past U+10FFFF
    } else {
      return i;
    }
    if (i + n > s.size() || byte(i + 1) < lo || byte(i + 1) > hi) return i;
    for (size_t k = 2; k < n; ++k)
      if ((byte(i + k) & 0xC0) != 0x80) return i;
    i += n;
  }
  return std::string_view::npos;
}

inline bool valid_utf8(std::string_view s) { return utf8_error_at(s) == std::string_view::npos; }

// `s` as UTF-8 text that JSON, XML and a terminal take: every byte that does
// not start a valid sequence becomes `\xHH`, the rest is kept. For showing
// bytes from outside (a base image's file names are bytes, not always
// UTF-8). Not one-to-one: a name that holds the text `\xFF` shows alike.
inline std::string printable_utf8(std::string_view s) {
  static const char hex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (size_t at; !s.empty(); s.remove_prefix(at + 1)) {
    at = utf8_error_at(s);
    if (at == std::string_view::npos) {
      out += s;
      break;
    }
    auto c = static_cast<unsigned char>(s[at]);
    out.append(s.substr(0, at)).append("\\x").append(1, hex[c >> 4]).append(1, hex[c & 15]);
  }
  return out;
}

// Appends code point `c` (at most U+10FFFF, no surrogate) as UTF-8.
inline void append_utf8(std::string& out, uint32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

}  // namespace sb
