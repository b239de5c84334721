#include "layer/split.hpp"

#include <map>
#include <set>


namespace sb {

std::string top_level_group(const std::string& path) {
  auto slash = path.find('/');
  return slash == std::string::npos ? path : path.substr(0, slash);
}

namespace {

// Every ancestor directory path of `path` ("a/b/c" -> "a", "a/b").
std::vector<std::string> ancestors(const std::string& path) {
  std::vector<std::string> out;
  for (size_t i = path.find('/'); i != std::string::npos; i = path.find('/', i + 1)) out.push_back(path.substr(0, i));
  return out;
}

}  // namespace

std::vector<EntryMap> split_entries(const EntryMap& entries, uint64_t budget, const GroupFn& group_of) {
  uint64_t total = 0;
  for (const auto& [p, e] : entries)
    if (e.type == TarEntry::Type::File) total += e.size;
  if (budget == 0 || total <= budget) return {entries};

  // 1. The group of every non-directory entry; a hardlink follows its target.
  std::map<std::string, std::string> group;  // path -> group
  for (const auto& [p, e] : entries)
    if (e.type != TarEntry::Type::Dir && e.type != TarEntry::Type::Hardlink) group[p] = group_of(p);
  for (const auto& [p, e] : entries)
    if (e.type == TarEntry::Type::Hardlink) {
      auto it = group.find(e.link);
      group[p] = it != group.end() ? it->second : group_of(p);
    }
  // A directory with nothing below it is its own group's; others come with their contents.
  std::set<std::string> has_below;
  for (const auto& [p, g] : group)
    for (const auto& a : ancestors(p)) has_below.insert(a);
  for (const auto& [p, e] : entries)
    if (e.type == TarEntry::Type::Dir && !has_below.count(p)) {
      group[p] = group_of(p);
      for (const auto& a : ancestors(p)) has_below.insert(a);
    }

  // 2. Groups in sorted order, packed in turn.
  std::map<std::string, uint64_t> size_of;
  std::map<std::string, std::vector<std::string>> members;
  for (const auto& [p, g] : group) {
    const TarEntry& e = entries.at(p);
    size_of[g] += e.type == TarEntry::Type::File ? e.size : 0;
    members[g].push_back(p);
  }
  std::vector<EntryMap> parts;
  uint64_t filled = 0;
  for (const auto& [g, paths] : members) {
    uint64_t s = size_of[g];
    if (parts.empty() || (filled > 0 && filled + s > budget)) {
      parts.emplace_back();
      filled = 0;
    }
    EntryMap& part = parts.back();
    for (const auto& p : paths) {
      part[p] = entries.at(p);
      for (const auto& a : ancestors(p))
        if (auto it = entries.find(a); it != entries.end()) part[a] = it->second;
    }
    filled += s;
  }
  return parts;
}

}  // namespace sb
