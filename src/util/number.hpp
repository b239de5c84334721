// Whole-text numbers without std::stoll's exceptions, whose messages
// ("stoll", "stoull") say neither what was read nor where.
#pragma once

#include <charconv>
#include <optional>
#include <string_view>
#include <type_traits>

namespace sb {

// The integer `text` spells in `base`, all of it: no sign for unsigned types,
// no spaces, no "0x". nullopt when it is empty, holds anything else, or does
// not fit in T.
template <class T>
std::optional<T> parse_integer(std::string_view text, int base = 10) {
  static_assert(std::is_integral_v<T>);
  if (text.empty() || text.front() == '+') return std::nullopt;
  T value{};
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value, base);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// Two runs of decimal digits compared as the numbers they spell, of any
// length ("007" == "7", "10" > "9").
inline int compare_digit_strings(std::string_view a, std::string_view b) {
  a.remove_prefix(std::min(a.find_first_not_of('0'), a.size()));
  b.remove_prefix(std::min(b.find_first_not_of('0'), b.size()));
  if (a.size() != b.size()) return a.size() < b.size() ? -1 : 1;
  int c = a.compare(b);
  return (c > 0) - (c < 0);
}

}  // namespace sb
