#include "util/c_header.hpp"

#include <algorithm>
#include <sstream>

namespace sb {

namespace {

bool only_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

std::map<std::string, std::string> c_defines(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string hash, name, value;
    words >> hash;
    if (hash == "#") words >> hash, hash = "#" + hash;  // "#  define"
    if (hash != "#define" || !(words >> name >> value)) continue;
    out.emplace(name, value);
  }
  return out;
}

std::string c_header_version(const std::string& text, const std::string& prefix) {
  auto d = c_defines(text);
  std::string v;
  for (const char* part : {"MAJOR", "MINOR", "PATCH"}) {
    auto it = d.find(prefix + part);
    if (it == d.end() || !only_digits(it->second)) it = d.find(prefix + part + "LEVEL");
    if (it == d.end() || !only_digits(it->second)) return {};
    v += (v.empty() ? "" : ".") + it->second;
  }
  return v;
}

}  // namespace sb
