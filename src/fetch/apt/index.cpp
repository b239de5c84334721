#include "fetch/apt/index.hpp"

#include <algorithm>
#include <charconv>

#include "fetch/apt/version.hpp"
#include "util/error.hpp"
#include "util/text.hpp"

namespace sb::apt {

namespace {

const std::vector<const Package*> kNoPackages;
const std::vector<Provider> kNoProviders;

bool field_is(std::string_view line, std::string_view name) {
  return line.size() > name.size() && line[name.size()] == ':' && line.compare(0, name.size(), name) == 0;
}

}  // namespace

// One pass over the record; multi-line values (Description, Conffiles) are
// kept only in `paragraph`, the fields the resolver needs are single-line in
// Packages indexes (dependency fields may continue; those are joined in views
// of the raw text, which parse_depends reads across newlines).
void parse_package(std::string_view rec, Package& p) {
  p.paragraph = rec;
  size_t pos = 0;
  std::string_view* last = nullptr;
  while (pos < rec.size()) {
    size_t end = rec.find('\n', pos);
    if (end == std::string_view::npos) end = rec.size();
    std::string_view line = rec.substr(pos, end - pos);
    size_t line_start = pos;
    pos = end + 1;
    if (line.empty()) continue;
    if (line[0] == ' ' || line[0] == '\t') {  // continuation: extend the last view
      if (last && !last->empty()) *last = std::string_view(last->data(), rec.data() + end - last->data());
      continue;
    }
    last = nullptr;
    auto colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view value = trim_view(line.substr(colon + 1));
    (void)line_start;
    switch (line[0]) {
      case 'P':
        if (field_is(line, "Package")) p.name = value;
        else if (field_is(line, "Pre-Depends")) p.pre_depends = value, last = &p.pre_depends;
        else if (field_is(line, "Provides")) p.provides = value, last = &p.provides;
        else if (field_is(line, "Priority")) p.priority = value;
        break;
      case 'R':
        if (field_is(line, "Recommends")) p.recommends = value, last = &p.recommends;
        break;
      case 'V':
        if (field_is(line, "Version")) p.version = value;
        break;
      case 'A':
        if (field_is(line, "Architecture")) p.architecture = value;
        break;
      case 'M':
        if (field_is(line, "Multi-Arch")) p.multi_arch = value;
        break;
      case 'D':
        if (field_is(line, "Depends")) p.depends = value, last = &p.depends;
        break;
      case 'C':
        if (field_is(line, "Conflicts")) p.conflicts = value, last = &p.conflicts;
        break;
      case 'B':
        if (field_is(line, "Breaks")) p.breaks = value, last = &p.breaks;
        break;
      case 'F':
        if (field_is(line, "Filename")) p.filename = value;
        break;
      case 'S':
        if (field_is(line, "SHA256")) p.sha256 = value;
        else if (field_is(line, "Size")) std::from_chars(value.data(), value.data() + value.size(), p.size);
        else if (field_is(line, "Section")) p.section = value;
        break;
      case 'E':
        if (field_is(line, "Essential")) p.essential = value == "yes";
        break;
      default:
        break;
    }
  }
}

int PackageIndex::add_repository(const Repository& repo) {
  repos_.push_back(repo);
  return static_cast<int>(repos_.size() - 1);
}

void PackageIndex::add_packages(int repo, std::string text) {
  texts_.push_back(std::make_unique<std::string>(std::move(text)));
  std::string_view t = *texts_.back();
  size_t pos = 0;
  while (pos < t.size()) {
    size_t end = t.find("\n\n", pos);
    if (end == std::string_view::npos) end = t.size();
    std::string_view rec = t.substr(pos, end - pos);
    pos = end + 2;
    while (!rec.empty() && rec.front() == '\n') rec.remove_prefix(1);
    if (rec.empty()) continue;
    Package p;
    parse_package(rec, p);
    p.repo = repo;
    if (p.name.empty() || p.version.empty()) continue;
    if (p.architecture != arch_ && p.architecture != "all") continue;
    packages_.push_back(p);
  }
}

void PackageIndex::finish() {
  by_name_.clear();
  providers_.clear();
  for (const auto& p : packages_) by_name_[p.name].push_back(&p);
  for (auto& [name, list] : by_name_) {
    std::stable_sort(list.begin(), list.end(), [&](const Package* a, const Package* b) {
      int pa = repos_[a->repo].priority, pb = repos_[b->repo].priority;
      if (pa != pb) return pa > pb;
      return compare_versions(a->version, b->version) > 0;
    });
    // The same version from two repositories: keep the first (best pinned).
    list.erase(std::unique(list.begin(), list.end(),
                           [](const Package* a, const Package* b) { return a->version == b->version; }),
               list.end());
  }
  for (const auto& p : packages_) {
    if (p.provides.empty()) continue;
    for (const auto& group : parse_depends(p.provides))
      for (const auto& atom : group) providers_[atom.name].push_back({&p, atom.version});
  }
}

const std::vector<const Package*>& PackageIndex::versions(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? kNoPackages : it->second;
}

const std::vector<Provider>& PackageIndex::providers(std::string_view name) const {
  auto it = providers_.find(std::string(name));
  return it == providers_.end() ? kNoProviders : it->second;
}

const Package* PackageIndex::candidate(std::string_view name) const {
  const auto& v = versions(name);
  return v.empty() ? nullptr : v.front();
}

std::vector<const Package*> PackageIndex::essential() const {
  std::vector<const Package*> out;
  for (const auto& [name, list] : by_name_)
    if (list.front()->essential) out.push_back(list.front());
  std::sort(out.begin(), out.end(), [](auto* a, auto* b) { return a->name < b->name; });
  return out;
}

std::vector<const Package*> PackageIndex::by_priority(std::string_view priority) const {
  std::vector<const Package*> out;
  for (const auto& [name, list] : by_name_)
    if (list.front()->priority == priority) out.push_back(list.front());
  std::sort(out.begin(), out.end(), [](auto* a, auto* b) { return a->name < b->name; });
  return out;
}

}  // namespace sb::apt
