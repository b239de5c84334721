// What changed between two images' packages, for release notes.
#include <map>
#include <set>
#include <tuple>
#include <vector>

#include "image/sbom.hpp"
#include "pip/version.hpp"

namespace sb::sbom {

namespace {

// A package's identity across images: its kind, name (a Python project's
// normalized) and architecture; the versions of it the image holds.
using Key = std::tuple<std::string, std::string, std::string>;

std::map<Key, std::set<std::string>> versions_of(const Contents& c) {
  std::map<Key, std::set<std::string>> out;
  for (const auto& p : c.packages) {
    std::string name = p.type == "python" ? pip::normalize_name(p.name) : p.name;
    out[{p.type, name, p.arch}].insert(p.version);
  }
  return out;
}

std::string joined(const std::set<std::string>& vs) {
  std::string s;
  for (const auto& v : vs) s += (s.empty() ? "" : ", ") + (v.empty() ? std::string("(no version)") : v);
  return s;
}

// A Markdown table cell: '|' escaped, no line breaks.
std::string cell(std::string s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += "\\|";
    else if (c == '\n' || c == '\r') out += ' ';
    else out += c;
  }
  return out;
}

}  // namespace

std::string contents_diff(const Contents& before, const Contents& after, const std::string& before_name,
                          const std::string& after_name) {
  auto a = versions_of(before), b = versions_of(after);
  std::vector<std::string> rows;
  size_t changed = 0, added = 0, removed = 0, same = 0;
  std::set<Key> keys;
  for (const auto& [k, v] : a) keys.insert(k);
  for (const auto& [k, v] : b) keys.insert(k);
  // The architecture is shown only where one name has several (multiarch).
  std::map<std::pair<std::string, std::string>, int> archs;
  for (const auto& [type, name, arch] : keys) ++archs[{type, name}];
  for (const auto& k : keys) {
    auto ia = a.find(k), ib = b.find(k);
    std::string old_v = ia == a.end() ? "-" : joined(ia->second);
    std::string new_v = ib == b.end() ? "-" : joined(ib->second);
    if (ia != a.end() && ib != b.end() && ia->second == ib->second) {
      ++same;
      continue;
    }
    (ia == a.end() ? added : ib == b.end() ? removed : changed)++;
    const auto& [type, name, arch] = k;
    bool show_arch = archs[{type, name}] > 1 && !arch.empty();
    rows.push_back("| " + cell(name) + (show_arch ? ":" + cell(arch) : "") + " | " + type + " | " +
                   cell(old_v) + " | " + cell(new_v) + " |\n");
  }
  std::string out = "## Packages: " + cell(before_name) + " to " + cell(after_name) + "\n\n";
  out += std::to_string(changed) + " changed, " + std::to_string(added) + " added, " + std::to_string(removed) +
         " removed, " + std::to_string(same) + " unchanged.\n";
  if (rows.empty()) return out;
  out += "\n| package | kind | " + cell(before_name) + " | " + cell(after_name) + " |\n|---|---|---|---|\n";
  for (const auto& r : rows) out += r;
  return out;
}

}  // namespace sb::sbom
