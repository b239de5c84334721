#include "archive/entry.hpp"

#include "util/error.hpp"

namespace sb {

std::string canonical_archive_path(const std::string& path) {
  if (path.find('\0') != std::string::npos) throw Error("path contains a NUL byte");
  std::string p = path;
  while (p.rfind("./", 0) == 0 || (!p.empty() && p[0] == '/')) p.erase(0, p[0] == '/' ? 1 : 2);
  while (!p.empty() && p.back() == '/') p.pop_back();
  std::string out;
  size_t start = 0;
  while (start <= p.size()) {
    size_t end = p.find('/', start);
    if (end == std::string::npos) end = p.size();
    std::string comp = p.substr(start, end - start);
    if (comp == "..") throw Error("path '" + path + "' contains '..'");
    if (!comp.empty() && comp != ".") out += (out.empty() ? "" : "/") + comp;
    start = end + 1;
  }
  return out;
}

void add_parent_dirs(const ScanOptions& o, EntryMap& out) {
  std::vector<std::string> missing;
  for (const auto& [path, e] : out) {
    for (size_t slash = path.find('/'); slash != std::string::npos;
         slash = path.find('/', slash + 1)) {
      std::string parent = path.substr(0, slash);
      if (!out.count(parent)) missing.push_back(parent);
    }
  }
  for (const auto& p : missing) {
    TarEntry d;
    d.type = TarEntry::Type::Dir;
    d.mode = 0755;
    d.mtime = o.source_date_epoch;
    if (o.uid) d.uid = *o.uid;
    if (o.gid) d.gid = *o.gid;
    out.emplace(p, d);
  }
}

void link_hardlinks(EntryMap& entries) {
  std::map<std::pair<uint64_t, uint64_t>, std::string> first;
  for (auto& [path, e] : entries) {
    if (e.type != TarEntry::Type::File || e.host_ino == 0) continue;
    auto [pos, inserted] = first.emplace(std::make_pair(e.host_dev, e.host_ino), path);
    if (inserted) continue;
    e.type = TarEntry::Type::Hardlink;
    e.link = pos->second;
    e.size = 0;
    e.source.clear();
  }
}

std::string top_level_group(const std::string& path) {
  auto slash = path.find('/');
  return slash == std::string::npos ? path : path.substr(0, slash);
}

}  // namespace sb
