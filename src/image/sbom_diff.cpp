// What changed between two images' packages, for release notes.
#include <map>
#include <set>
#include <tuple>
#include <vector>

#include "image/sbom.hpp"
#include "fetch/pip/version.hpp"

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

PackageChanges package_changes(const Contents& before, const Contents& after) {
  auto a = versions_of(before), b = versions_of(after);
  PackageChanges out;
  std::set<Key> keys;
  for (const auto& [k, v] : a) keys.insert(k);
  for (const auto& [k, v] : b) keys.insert(k);
  // The architecture is shown only where one name has several (multiarch).
  std::map<std::pair<std::string, std::string>, int> archs;
  for (const auto& [type, name, arch] : keys) ++archs[{type, name}];
  for (const auto& k : keys) {
    auto ia = a.find(k), ib = b.find(k);
    if (ia != a.end() && ib != b.end() && ia->second == ib->second) {
      ++out.unchanged;
      continue;
    }
    (ia == a.end() ? out.added : ib == b.end() ? out.removed : out.changed)++;
    const auto& [type, name, arch] = k;
    bool show_arch = archs[{type, name}] > 1 && !arch.empty();
    out.rows.push_back({show_arch ? name + ":" + arch : name, type, ia == a.end() ? "" : joined(ia->second),
                        ib == b.end() ? "" : joined(ib->second)});
  }
  return out;
}

std::string markdown_cell(const std::string& s) { return cell(s); }

std::string contents_diff(const Contents& before, const Contents& after, const std::string& before_name,
                          const std::string& after_name) {
  PackageChanges c = package_changes(before, after);
  std::string out = "## Packages: " + cell(before_name) + " to " + cell(after_name) + "\n\n";
  out += std::to_string(c.changed) + " changed, " + std::to_string(c.added) + " added, " + std::to_string(c.removed) +
         " removed, " + std::to_string(c.unchanged) + " unchanged.\n";
  if (c.rows.empty()) return out;
  out += "\n| package | kind | " + cell(before_name) + " | " + cell(after_name) + " |\n|---|---|---|---|\n";
  for (const auto& r : c.rows)
    out += "| " + cell(r.name) + " | " + r.kind + " | " + cell(r.before.empty() ? "-" : r.before) + " | " +
           cell(r.after.empty() ? "-" : r.after) + " |\n";
  return out;
}

}  // namespace sb::sbom
