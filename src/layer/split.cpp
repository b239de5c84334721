#include "layer/split.hpp"

#include <map>
#include <set>
#include <utility>

namespace sb {

std::string whiteout_target(const std::string& path) {
  auto slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  if (!name.starts_with(".wh.") || name == ".wh..wh..opq") return "";
  return dir + name.substr(4);
}

std::string opaque_dir(const std::string& path) {
  static const std::string marker = ".wh..wh..opq";
  if (path == marker) return ".";
  if (path.size() > marker.size() && path.ends_with("/" + marker)) return path.substr(0, path.size() - marker.size() - 1);
  return "";
}

GroupFn group_by_owner(std::map<std::string, std::string> owner, GroupFn unowned) {
  return [owner = std::move(owner), unowned = std::move(unowned)](const std::string& path) {
    auto it = owner.find(path);
    return it != owner.end() ? it->second : unowned(path);
  };
}

namespace {

// Every ancestor directory path of `path` ("a/b/c" -> "a", "a/b").
std::vector<std::string> ancestors(const std::string& path) {
  std::vector<std::string> out;
  for (size_t i = path.find('/'); i != std::string::npos; i = path.find('/', i + 1)) out.push_back(path.substr(0, i));
  return out;
}

// Groups that must stay together, merged under the smallest name (so the
// result does not depend on the order they were joined in).
class Joined {
 public:
  void add(const std::string& g) { parent_.emplace(g, g); }
  std::string find(const std::string& g) {
    std::string root = g;
    while (parent_.at(root) != root) root = parent_.at(root);
    for (std::string at = g; parent_.at(at) != root;) at = std::exchange(parent_.at(at), root);
    return root;
  }
  void join(const std::string& a, const std::string& b) {
    std::string ra = find(a), rb = find(b);
    if (ra == rb) return;
    if (rb < ra) std::swap(ra, rb);
    parent_[rb] = ra;
  }

 private:
  std::map<std::string, std::string> parent_;
};

// The entries at `dir` and below it ("" or "." : all).
template <typename Fn>
void each_under(const EntryMap& entries, const std::string& dir, bool self, Fn&& fn) {
  if (dir.empty() || dir == ".") {
    for (const auto& [p, e] : entries) fn(p);
    return;
  }
  if (self && entries.count(dir)) fn(dir);
  const std::string prefix = dir + "/";
  for (auto it = entries.lower_bound(prefix); it != entries.end() && it->first.starts_with(prefix); ++it) fn(it->first);
}

}  // namespace

std::vector<EntryMap> split_entries(const EntryMap& entries, uint64_t budget, const GroupFn& group_of,
                                    std::vector<std::vector<std::string>>* groups_out) {
  uint64_t total = 0;
  for (const auto& [p, e] : entries)
    if (e.type == TarEntry::Type::File) total += e.size;
  if (budget == 0 || total <= budget) {
    if (groups_out) *groups_out = {{}};
    return {entries};
  }

  // 1. The group of every non-directory entry (a whiteout: of the path it
  //    hides); a directory with nothing below it is its own group's, others
  //    come with their contents.
  std::map<std::string, std::string> group;  // path -> group
  for (const auto& [p, e] : entries)
    if (e.type != TarEntry::Type::Dir && e.type != TarEntry::Type::Hardlink) {
      std::string hidden = whiteout_target(p);
      group[p] = group_of(hidden.empty() ? p : hidden);
    }
  for (const auto& [p, e] : entries)
    if (e.type == TarEntry::Type::Hardlink) {
      auto it = group.find(e.link);
      group[p] = it != group.end() ? it->second : group_of(p);  // with its target
    }
  std::set<std::string> has_below;
  for (const auto& [p, e] : entries)
    for (const auto& a : ancestors(p)) has_below.insert(a);
  for (const auto& [p, e] : entries)
    if (e.type == TarEntry::Type::Dir && !has_below.count(p)) group[p] = group_of(p);

  // 2. Groups that must share a part: a whiteout's and those of what it
  //    hides in this layer (the path and all below it); an opaque marker's and
  //    those of everything under its directory. So no part ever hides what an
  //    earlier part of the same split holds.
  Joined joined;
  for (const auto& [p, g] : group) joined.add(g);
  for (const auto& entry : entries) {
    const std::string& p = entry.first;  // not a structured binding: clang 14 cannot capture one
    if (!group.count(p)) continue;
    if (std::string hidden = whiteout_target(p); !hidden.empty())
      each_under(entries, hidden, true, [&](const std::string& q) {
        if (auto it = group.find(q); it != group.end()) joined.join(group[p], it->second);
      });
    if (std::string dir = opaque_dir(p); !dir.empty())
      each_under(entries, dir, false, [&](const std::string& q) {
        if (auto it = group.find(q); it != group.end()) joined.join(group[p], it->second);
      });
  }

  // 3. Groups in sorted order, packed in turn.
  std::map<std::string, uint64_t> size_of;
  std::map<std::string, std::vector<std::string>> members;
  std::map<std::string, std::set<std::string>> names;  // merged group -> the groups in it
  for (const auto& [p, g] : group) {
    const TarEntry& e = entries.at(p);
    std::string root = joined.find(g);
    size_of[root] += e.type == TarEntry::Type::File ? e.size : 0;
    members[root].push_back(p);
    names[root].insert(g);
  }
  std::vector<EntryMap> parts;
  std::vector<std::vector<std::string>> part_groups;
  uint64_t filled = 0;
  for (const auto& [g, paths] : members) {
    uint64_t s = size_of[g];
    if (parts.empty() || (filled > 0 && filled + s > budget)) {
      parts.emplace_back();
      part_groups.emplace_back();
      filled = 0;
    }
    EntryMap& part = parts.back();
    for (const auto& p : paths) {
      part[p] = entries.at(p);
      for (const auto& a : ancestors(p))
        if (auto it = entries.find(a); it != entries.end()) part[a] = it->second;
    }
    part_groups.back().insert(part_groups.back().end(), names[g].begin(), names[g].end());
    filled += s;
  }
  if (groups_out) *groups_out = std::move(part_groups);
  return parts;
}

}  // namespace sb
