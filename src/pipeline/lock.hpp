// The lockfile's entries of what layers fetch, per matrix point: the apt
// packages, the pip wheels and the NVIDIA redist archives, each with URL,
// size and sha256, each kind's in the section it names (LayerKind::lock,
// layer_kind.hpp), and the source trees' pins ("source", source_tree.hpp).
// `stackbuild lock` writes them (lock_extras); `build --locked` reads them
// back (locked_point_inputs) so that exactly the pinned files are fetched,
// and refuses entries written for other inputs.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipeline/build_options.hpp"
#include "pipeline/plan.hpp"
#include "resolve/plan.hpp"
#include "util/error.hpp"

namespace sb {

// For `stackbuild lock`: per plan point, {"apt": ..., "pip": ..., "redist": ...,
// "source": ...}, a section for each kind of layer the recipe has that pins
// its inputs; null for unresolved points.
// What must be measured is fetched with the services' fetchers (tests: fakes).
// `which` (one flag a plan point; empty: all) limits it to those points.
std::vector<nlohmann::json> lock_extras(const Planned& planned, const Store& store, Status& status,
                                        const BuildServices& services = {}, const std::vector<bool>& which = {});

struct LockRequest {
  // --only KEY=VALUE: lock these points again; the others keep their entries
  // (each must still resolve as its entry says). Empty: every point.
  std::vector<std::string> only;
  registry::SessionOptions registry;  // for a base image's digest (--creds, --ca-cert, ...)
};

struct LockOutcome {
  fs::path path;                     // RECIPE.lock
  std::vector<std::string> changes;  // resolve::lock_diff of the old lockfile and the new
};

// `stackbuild lock`: lock_extras() and the base image's digest (`from:`,
// resolved against its registry, with the services' registry transport) of
// each point, written as RECIPE.lock. When a lockfile was there, what
// changes is told (a message and a "lock_changes" event) before it is
// replaced.
LockOutcome lock_recipe(const Planned& planned, const Store& store, const LockRequest& request, Status& status,
                        const BuildServices& services = {});

// `stackbuild lock --check`, offline: what makes RECIPE.lock stale for the
// recipe and catalog as they are (the resolved versions, each fetching
// layer's entry against what it asks, the base image's pin); empty: current.
std::vector<std::string> lock_problems(const Planned& planned);

// For `build --locked`: the point's inputs with the lockfile's entries. Throws
// Error(ErrorKind::Input) when a layer that fetches has no entry in the lockfile, or
// its entry was written for other requirements, manifests or targets, naming
// the layer and what changed. Call after check_lock().
PointInputs locked_point_inputs(const Planned& planned, const resolve::PlanPoint& point);

// entry[key], a list of pins (wheels, packages, archives), each read with T's
// from_json. An item that does not read is named: "wheels[2]: bad digest ...".
template <class T>
std::vector<T> pinned_list(const nlohmann::json& entry, const char* key) {
  if (!entry.is_object() || !entry.contains(key) || !entry[key].is_array())
    throw Error("the entry has no " + std::string(key) + " list");
  const nlohmann::json& list = entry[key];
  std::vector<T> out;
  out.reserve(list.size());
  for (size_t i = 0; i < list.size(); ++i) {
    std::string item = std::string(key) + "[" + std::to_string(i) + "]: ";
    try {
      out.push_back(list[i].get<T>());
    } catch (const nlohmann::json::exception& e) {
      throw Error(item + e.what());
    } catch (const Error& e) {
      throw Error(item + e.what());
    }
  }
  return out;
}

// "" when `read` reads a lockfile entry, else "a malformed entry: WHY" (from
// the Error it threw): how the kinds' lock_mismatch() (layer_kind.hpp)
// report an entry that the layer could not use.
template <class Read>
std::string malformed_entry(Read&& read) {
  try {
    read();
    return "";
  } catch (const Error& e) {
    return std::string("a malformed entry: ") + e.what();
  }
}

}  // namespace sb
