// resolve_point(): a backtracking search with forward checking over the
// catalog's records.
//
// State: for each component, the records its wants allow (its domain) and the
// record chosen so far. A component is needed when the request wants it or a
// chosen record requires it. Step: take the needed, unchosen component of
// lowest priority number; try its domain newest first (records a chosen
// record `prefers` go first) and keep a record when
//   - every chosen record's requirement on this component admits it,
//   - each of its own requirements admits the chosen record of that
//     component, or, when that one is not chosen yet, at least one record of
//     it still fits (forward checking: dead branches die early),
//   - it can build for / run on every requested compute capability.
// Then recurse; on failure undo and try the next record.
#include <algorithm>

#include "resolve/solver.hpp"

namespace sb::resolve {

bool has_source(const catalog::Record& r, const std::string& kind) {
  if (kind == "redist") return r.sources.redist.has_value();
  if (kind == "pip") return !r.sources.pip.empty();
  if (kind == "apt") return !r.sources.apt.empty();
  return true;
}

namespace detail {

using catalog::Record;
using catalog::VersionRange;

namespace {

std::string strip_ptx(std::string arch) {  // TORCH_CUDA_ARCH_LIST style "8.6+PTX"
  for (const char* suffix : {"+PTX", "+ptx"})
    if (arch.ends_with(suffix)) arch.resize(arch.size() - 4);
  return arch;
}

// The records of `component` that `want` selects.
std::vector<const Record*> select(const catalog::Component& component, const Want& want) {
  std::vector<const Record*> out;
  std::string why;
  if (auto range = VersionRange::parse(want.version, &why)) {
    for (const auto& r : component.records)
      if (range->contains(r.version)) out.push_back(&r);
    return out;
  }
  std::vector<std::string> aliases;
  for (const auto& r : component.records) {
    for (const auto& a : r.aliases) {
      if (a == want.version) out.push_back(&r);
      aliases.push_back(a);
    }
  }
  if (!out.empty()) return out;
  std::string hint = "write a version such as 12.6, a range such as \">=12.0,<12.4\"";
  if (!aliases.empty()) {
    std::string best = suggest(want.version, aliases);
    if (!best.empty())
      throw InputError(want.where, "unknown " + want.component + " version '" + want.version +
                                       "' (did you mean '" + best + "'?)");
    hint += ", or a name such as " + aliases.front();
  }
  throw InputError(want.where, why, hint);
}

}  // namespace

Solver::Solver(const catalog::Catalog& cat, const Request& req)
    : catalog(cat),
      request(req),
      slots(cat.components.size()),
      wanted_(cat.components.size(), false) {
  for (size_t i = 0; i < cat.components.size(); ++i) order_.push_back(static_cast<int>(i));
  std::stable_sort(order_.begin(), order_.end(), [&](int a, int b) {
    return cat.components[a].priority < cat.components[b].priority;
  });
  for (size_t i = 0; i < slots.size(); ++i)
    for (const auto& r : cat.components[i].records) slots[i].domain.push_back(&r);

  for (const Want& want : req.wants) {
    int c = cat.index_of(want.component);
    if (c < 0) {
      std::string best = suggest(want.component, cat.component_names());
      throw InputError(want.where, "unknown component '" + want.component + "'" +
                                       (best.empty() ? "" : " (did you mean '" + best + "'?)"));
    }
    wanted_[c] = true;
    slots[c].wants.push_back(&want);
    std::vector<const Record*> allowed = select(cat.components[c], want);
    std::erase_if(slots[c].domain, [&](const Record* r) {
      return std::find(allowed.begin(), allowed.end(), r) == allowed.end() || !has_source(*r, want.source);
    });
  }
  for (const auto& a : req.arch) {
    int bit = cat.arch_index(strip_ptx(a));
    if (bit < 0) {
      std::string best = suggest(strip_ptx(a), cat.arch_names);
      throw InputError(req.arch_where,
                       "unknown compute capability '" + a + "'" +
                           (best.empty() ? "" : " (did you mean '" + best + "'?)"),
                       "compute capabilities look like 8.0, 9.0a or 12.0+PTX");
    }
    arch_mask |= uint64_t{1} << bit;
  }
}

bool Solver::solve() {
  return search();
}

int Solver::next_component() const {
  for (int c : order_)
    if (!slots[c].chosen && (wanted_[c] || slots[c].needed_by > 0)) return c;
  return -1;
}

const VersionRange* Solver::preference(int c) const {
  for (int d : chosen_order) {
    const auto& prefers = slots[d].chosen->prefers;
    if (prefers.empty()) continue;
    auto it = prefers.find(catalog.components[c].name);
    if (it != prefers.end()) return &it->second;
  }
  return nullptr;
}

bool Solver::named(int c, const Record& x, const VersionRange* extra) const {
  if (!x.explicit_only) return true;
  const std::string v = x.version.str();
  if (extra && extra->str() == v) return true;
  for (const Want* w : slots[c].wants)
    if (w->version == v) return true;
  for (int d : chosen_order)
    for (const auto& req : slots[d].chosen->requirements)
      if (req.target == c && req.range.str() == v) return true;
  return false;
}

// Whether some record of `target` in `range` fits the choices so far and
// the candidate `r` for component `c`.
bool Solver::supported(int target, const VersionRange& range, int c, const Record& r,
                       bool check_arch) const {
  for (const Record* x : slots[target].domain) {
    if (!range.contains(x->version) || (check_arch && !arch_ok(*x)) || !named(target, *x, &range)) continue;
    bool fits = true;
    for (int d : chosen_order)
      for (const auto& req : slots[d].chosen->requirements)
        if (req.target == target && !req.range.contains(x->version)) fits = false;
    for (const auto& req : x->requirements) {
      if (req.target == c && !req.range.contains(r.version)) fits = false;
      const Record* other = slots[req.target].chosen;
      if (other && !req.range.contains(other->version)) fits = false;
    }
    if (fits) return true;
  }
  return false;
}

bool Solver::accepts(int c, const Record& r, Why* why) const {
  if (!named(c, r)) return false;  // not a candidate at all: no reason to give
  bool ok = true;
  if (!arch_ok(r)) {
    if (!why) return false;
    ok = false;
    why->arch_misfits.push_back(&r);
  }
  for (int d : chosen_order) {
    for (const auto& req : slots[d].chosen->requirements) {
      if (req.target != c || req.range.contains(r.version)) continue;
      if (!why) return false;
      ok = false;
      why->reason(slots[d].chosen->label() + " requires " + req.component + " " + req.range.str() +
                  " (" + req.where.str() + ")");
      why->culprit(d);
    }
  }
  for (const auto& req : r.requirements) {
    const Record* other = slots[req.target].chosen;
    if (other ? req.range.contains(other->version) : supported(req.target, req.range, c, r))
      continue;
    if (!why) return false;
    ok = false;
    std::string text = r.label() + " requires " + req.component + " " + req.range.str() + " (" +
                       req.where.str() + ")";
    if (!other) text += ", which no " + req.component + " version allowed here satisfies";
    if (!other && supported(req.target, req.range, c, r, /*check_arch=*/false)) {
      text += " for the requested arch";  // some would, but not for these GPUs
      for (const Record* x : slots[req.target].domain)
        if (req.range.contains(x->version) && !arch_ok(*x)) why->arch_misfits.push_back(x);
    }
    why->reason(std::move(text));
    why->culprit(req.target);
    if (!other)  // what narrowed the target: the chosen records that require it
      for (int d : chosen_order)
        for (const auto& q : slots[d].chosen->requirements)
          if (q.target == req.target) why->culprit(d);
  }
  return ok;
}

void Solver::choose(int c, const Record* r) {
  slots[c].chosen = r;
  chosen_order.push_back(c);
  for (const auto& req : r->requirements) ++slots[req.target].needed_by;
}

void Solver::unchoose(int c) {
  for (const auto& req : slots[c].chosen->requirements) --slots[req.target].needed_by;
  slots[c].chosen = nullptr;
  chosen_order.pop_back();
}

bool Solver::search() {
  int c = next_component();
  if (c < 0) return true;
  const VersionRange* preferred = preference(c);
  bool any_accepted = false;
  for (int pass = preferred ? 0 : 1; pass < 2; ++pass) {
    for (const Record* r : slots[c].domain) {
      // pass 0: the preferred records; pass 1: the others (or all without a preference)
      if (preferred && preferred->contains(r->version) != (pass == 0)) continue;
      if (!accepts(c, *r, nullptr)) continue;
      any_accepted = true;
      choose(c, r);
      if (search()) return true;
      unchoose(c);
    }
  }
  if (!any_accepted && dead_end < 0) {
    dead_end = c;
    for (const auto& s : slots) dead_end_choices.push_back(s.chosen);
  }
  return false;
}

void Solver::restore_dead_end() {
  for (auto& s : slots) s.chosen = nullptr, s.needed_by = 0;
  chosen_order.clear();
  for (int c : order_)  // same order as the search made them
    if (dead_end_choices[c]) choose(c, dead_end_choices[c]);
}

}  // namespace detail

Result resolve_point(const catalog::Catalog& catalog, const Request& request) {
  detail::Solver solver(catalog, request);
  if (auto conflict = detail::unmatched_want(solver)) return {std::nullopt, std::move(conflict)};
  if (solver.solve()) return {detail::make_stack(solver), std::nullopt};
  return {std::nullopt, detail::explain_dead_end(solver)};
}

std::vector<const catalog::Record*> records_of(const catalog::Catalog& catalog,
                                               const ResolvedStack& stack) {
  std::vector<const catalog::Record*> out;
  for (const auto& [component, version] : stack.versions) {
    auto build = stack.builds.find(component);
    const catalog::Record* r =
        catalog.find(component, version, build == stack.builds.end() ? "" : build->second);
    if (r) out.push_back(r);
  }
  return out;
}

}  // namespace sb::resolve
