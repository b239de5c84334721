// The backtracking search behind resolve_point(). Internal to resolve/.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "catalog/catalog.hpp"
#include "resolve/resolve.hpp"

namespace sb::resolve::detail {

// One component during the search.
struct Slot {
  std::vector<const catalog::Record*> domain;  // records the wants allow, newest first
  std::vector<const Want*> wants;
  const catalog::Record* chosen = nullptr;
  int needed_by = 0;  // how many chosen records require this component
};

// Why candidates were turned down; filled only when explaining a conflict.
struct Why {
  std::vector<std::string> reasons;  // catalog constraints, in the order met
  std::vector<int> culprits;         // components whose choice or wants clashed
  std::vector<int> missing_arch;     // requested compute capabilities (arch bits) not met
  // Records turned down for lacking those capabilities (own or forward-checked).
  std::vector<const catalog::Record*> arch_misfits;

  void reason(std::string r);
  void culprit(int component);
};

class Solver {
 public:
  // Throws sb::InputError when the request is malformed.
  Solver(const catalog::Catalog& catalog, const Request& request);

  // Chooses a record for every needed component; false when none exists.
  bool solve();

  // Whether `r` can be chosen for component `c` given the choices so far;
  // when `why` is set, records every reason it cannot.
  bool accepts(int c, const catalog::Record& r, Why* why) const;
  // Whether an `explicit` record `x` of component `c` is asked for by its
  // exact version: by a want, a chosen record's requirement, or `extra` (the
  // candidate's requirement under test). Any other record: true.
  bool named(int c, const catalog::Record& x, const catalog::VersionRange* extra = nullptr) const;

  const catalog::Catalog& catalog;
  const Request& request;
  std::vector<Slot> slots;        // by component index
  std::vector<int> chosen_order;  // components chosen so far, in order
  uint64_t arch_mask = 0;         // requested compute capabilities, as catalog arch bits

  // The first component the search found with no acceptable version, and the
  // choices at that moment: the conflict reported when solve() fails.
  int dead_end = -1;
  std::vector<const catalog::Record*> dead_end_choices;

  // Restores the choices saved with the dead end, for explaining it.
  void restore_dead_end();

 private:
  bool search();
  int next_component() const;
  const catalog::VersionRange* preference(int c) const;
  bool supported(int target, const catalog::VersionRange& range, int c, const catalog::Record& r,
                 bool check_arch = true) const;
  bool arch_ok(const catalog::Record& r) const {
    return !r.arch_mask || (arch_mask & ~*r.arch_mask) == 0;
  }
  void choose(int c, const catalog::Record* r);
  void unchoose(int c);

  std::vector<int> order_;  // component indices by priority, then name
  std::vector<bool> wanted_;
};

// When a wanted component's version matches no record at all.
std::optional<Conflict> unmatched_want(const Solver& solver);
// The conflict at the solver's first dead end.
Conflict explain_dead_end(Solver& solver);
// The stack from a solved search.
ResolvedStack make_stack(const Solver& solver);

}  // namespace sb::resolve::detail
