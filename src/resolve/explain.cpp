// Conflicts in words: what clashed, and where each clashing constraint was
// written (catalog file:line:col, or the recipe location of a want).
#include <algorithm>

#include "resolve/solver.hpp"

namespace sb::resolve::detail {

namespace {

constexpr size_t kMaxReasons = 12;

std::string join(const std::vector<std::string>& items, const std::string& sep,
                 const std::string& last_sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i)
    out += (i == 0 ? "" : i + 1 == items.size() ? last_sep : sep) + items[i];
  return out;
}

// "cuda 12.6" as the recipe asked it; "" when the component is not pinned.
std::string asked(const Slot& slot) {
  std::vector<std::string> specs;
  for (const Want* w : slot.wants)
    if (!w->version.empty()) specs.push_back(w->version);
  return join(specs, ", ", " and ");
}

std::string asked_at(const Want& w) {
  std::string s = w.component + " " + (w.version.empty() ? "(any version)" : w.version) + " asked";
  if (w.where.known() || !w.where.file.empty()) s += " at " + w.where.str();
  return s;
}

void cap(std::vector<std::string>& reasons) {
  if (reasons.size() <= kMaxReasons) return;
  size_t more = reasons.size() - (kMaxReasons - 1);
  reasons.resize(kMaxReasons - 1);
  reasons.push_back("... and " + std::to_string(more) + " more");
}

// "cuda 13.2.2", "cudnn 9.17.0 (cuda13, cuda12)" or "cuda 13.0.0 ... 13.2.2 (8 records)"
// for records of one component.
std::string labels(const std::vector<const catalog::Record*>& records) {
  if (records.size() == 1) return records.front()->label();
  bool one_version = std::all_of(records.begin(), records.end(), [&](auto* r) {
    return r->version.str() == records.front()->version.str();
  });
  if (one_version) {  // builds of one version: "cudnn 9.17.0 (cuda13, cuda12)"
    std::vector<std::string> builds;
    for (auto* r : records) builds.push_back(r->build);
    return records.front()->component + " " + records.front()->version.str() + " (" +
           join(builds, ", ", ", ") + ")";
  }
  auto [lo, hi] = std::minmax_element(records.begin(), records.end(),
                                      [](auto* a, auto* b) { return a->version < b->version; });
  return (*lo)->component + " " + (*lo)->version.str() + " ... " + (*hi)->version.str() + " (" +
         std::to_string(records.size()) + " records)";
}

// Why `records` (all of one component, all alike in what they list) cannot
// build for / run on the compute capability `bit`.
std::string arch_reason(const catalog::Catalog& cat,
                        const std::vector<const catalog::Record*>& records, int bit) {
  const catalog::Record& r = *records.front();
  const std::string& arch = cat.arch_names[bit];
  const catalog::Component& comp = *cat.find(r.component);
  if (comp.arch_support.empty())
    return labels(records) + " does not support compute capability " + arch + " (it lists " +
           join(r.compute_capability, ", ", ", ") + "; " + r.where.str() + ")";
  std::string text = labels(records) + " cannot compile for compute capability " + arch;
  std::vector<std::string> ranges;
  for (const auto& s : comp.arch_support)
    if (std::find(s.arch.begin(), s.arch.end(), arch) != s.arch.end())
      ranges.push_back(r.component + " " + s.versions.str() + " (" + s.where.str() + ")");
  if (ranges.empty()) return text + " (no arch_support entry names it)";
  return text + "; " + arch + " needs " + join(ranges, ", ", " or ");
}

}  // namespace

void Why::reason(std::string r) {
  if (std::find(reasons.begin(), reasons.end(), r) == reasons.end())
    reasons.push_back(std::move(r));
}

void Why::culprit(int component) {
  if (std::find(culprits.begin(), culprits.end(), component) == culprits.end())
    culprits.push_back(component);
}

std::optional<Conflict> unmatched_want(const Solver& solver) {
  for (size_t c = 0; c < solver.slots.size(); ++c) {
    const Slot& slot = solver.slots[c];
    if (slot.wants.empty() || !slot.domain.empty()) continue;
    const catalog::Component& comp = solver.catalog.components[c];
    std::vector<std::string> specs;
    std::string kind;  // what `from:` asked of the source, if anything
    for (const Want* w : slot.wants) {
      specs.push_back("'" + w->version + "'");
      if (!w->source.empty()) kind = w->source;
    }
    Conflict conflict;
    conflict.summary = "no " + comp.name + " version matches " + join(specs, ", ", " and ") +
                       (kind.empty() ? "" : " with a " + kind + " source");
    for (const Want* w : slot.wants) conflict.reasons.push_back(asked_at(*w));
    std::vector<std::string> have;
    for (const auto& r : comp.records)
      if (std::find(have.begin(), have.end(), r.version.str()) == have.end() && has_source(r, kind))
        have.push_back(r.version.str());
    if (have.empty()) have.push_back("no version with a " + kind + " source");
    if (have.size() > 12) have.resize(12), have.push_back("...");
    conflict.reasons.push_back("the catalog has " + comp.name + " " + join(have, ", ", ", ") +
                               " (" + comp.where.str() + ")");
    return conflict;
  }
  return std::nullopt;
}

Conflict explain_dead_end(Solver& solver) {
  solver.restore_dead_end();
  const int c = solver.dead_end;
  const catalog::Catalog& cat = solver.catalog;
  const std::string& name = cat.components[c].name;

  Why why;
  for (const catalog::Record* r : solver.slots[c].domain) {
    Why one;
    solver.accepts(c, *r, &one);
    for (auto& text : one.reasons) why.reason(std::move(text));
    for (int d : one.culprits) why.culprit(d);
    for (const catalog::Record* x : one.arch_misfits)
      if (std::find(why.arch_misfits.begin(), why.arch_misfits.end(), x) == why.arch_misfits.end())
        why.arch_misfits.push_back(x);
  }
  // Arch misfits grouped per missing capability and component, so eight CUDA
  // 13 releases make one line. They go first: they are the root facts the
  // per-candidate lines refer to, and must survive the cap.
  std::vector<std::string> arch_lines;
  for (size_t bit = 0; bit < cat.arch_names.size(); ++bit) {
    if (!(solver.arch_mask >> bit & 1)) continue;
    for (size_t comp = 0; comp < cat.components.size(); ++comp) {
      std::vector<const catalog::Record*> group;
      for (const catalog::Record* x : why.arch_misfits)
        if (x->component == cat.components[comp].name && !(*x->arch_mask >> bit & 1))
          group.push_back(x);
      if (group.empty()) continue;
      arch_lines.push_back(arch_reason(cat, group, static_cast<int>(bit)));
      if (std::find(why.missing_arch.begin(), why.missing_arch.end(), bit) ==
          why.missing_arch.end())
        why.missing_arch.push_back(static_cast<int>(bit));
    }
  }

  // The summary names what the component clashed with, as the user knows it.
  std::vector<std::string> with;
  for (int d : why.culprits) {
    if (d == c) continue;
    const Slot& slot = solver.slots[d];
    std::string spec = asked(slot);
    if (spec.empty() && slot.chosen) spec = slot.chosen->version.str();
    if (spec.empty()) continue;  // neither pinned nor chosen: the chosen culprits narrowed it
    with.push_back(cat.components[d].name + " " + spec);
  }
  std::vector<std::string> archs;
  for (int bit : why.missing_arch) archs.push_back(cat.arch_names[bit]);
  if (!archs.empty()) with.push_back("arch " + join(archs, ", ", ", "));

  Conflict conflict;
  std::string own = asked(solver.slots[c]);
  conflict.summary = "no " + name + (own.empty() ? "" : " " + own) + " version works";
  conflict.summary +=
      with.empty() ? " with the other choices" : " with " + join(with, ", ", " and ");
  conflict.reasons = std::move(arch_lines);
  conflict.reasons.insert(conflict.reasons.end(), why.reasons.begin(), why.reasons.end());
  cap(conflict.reasons);

  // Then where the user asked for the clashing things.
  std::vector<int> involved = {c};
  for (int d : why.culprits)
    if (d != c) involved.push_back(d);
  for (int d : involved)
    for (const Want* w : solver.slots[d].wants)
      if (!w->version.empty()) conflict.reasons.push_back(asked_at(*w));
  if (!archs.empty()) {
    std::string line = "arch " + join(solver.request.arch, ", ", ", ") + " asked";
    if (!solver.request.arch_where.file.empty()) line += " at " + solver.request.arch_where.str();
    conflict.reasons.push_back(line);
  }
  return conflict;
}

}  // namespace sb::resolve::detail
