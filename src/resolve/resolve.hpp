// Per-point version resolution: given what one matrix point of a recipe asks
// for, choose one catalog record per component so that every `requires:` of
// every chosen record holds, or explain in words why no choice exists.
//
// The search (resolve.cpp) decides components in catalog priority order
// (pytorch before cuda before cudnn ... before python), trying each
// component's versions newest first, so the newest version of an earlier
// component wins over the newest of a later one; it backtracks when a choice
// leaves a later component with no version. Components join the search when
// the recipe wants them or a chosen record requires them.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "catalog/catalog.hpp"
#include "util/error.hpp"

namespace sb::resolve {

struct Want {                // one component the recipe asks for
  std::string component;     // "os", "python", "cuda", "cudnn", "nccl", "cublas", "pytorch", ...
  std::string version;       // "" = any (newest allowed); "12.6" prefix; a range; or an
                             // alias the catalog defines ("trixie", "debian")
  sb::SourceLocation where;  // where in the recipe it was asked, for explanations
  std::string source;        // "" = any; "redist", "pip" or "apt": only records with that kind
                             // of source (the layer's `from:`), so the version exists there
};

// Whether `r` lists a source of `kind` ("redist", "pip", "apt"; "" = any).
bool has_source(const sb::catalog::Record& r, const std::string& kind);

struct Request {
  std::vector<Want> wants;        // several wants of one component must all hold
  std::vector<std::string> arch;  // compute capabilities, e.g. {"8.0","9.0"}; "+PTX" allowed
  sb::SourceLocation arch_where;
};

struct ResolvedStack {
  std::map<std::string, std::string> versions;  // component -> chosen exact version
  std::map<std::string, std::string> builds;    // component -> build, where the record has one
  std::string driver_min;           // minimum Linux driver for the whole stack, e.g. "560.28.03"
  std::string driver_min_compat;    // the same under CUDA minor version compatibility
  std::string nvidia_require_cuda;  // NVIDIA_REQUIRE_CUDA as NVIDIA's images set it
  std::vector<std::string> arch;

  friend bool operator==(const ResolvedStack&, const ResolvedStack&) = default;
};
void to_json(nlohmann::json& j, const ResolvedStack& s);
void from_json(const nlohmann::json& j, ResolvedStack& s);

struct Conflict {                    // why no choice exists, in words
  std::string summary;               // e.g. "no cudnn 9.0 version works with cuda 12.6"
  std::vector<std::string> reasons;  // each names a clashing constraint and where it came from

  std::string str() const;  // summary, then one indented reason a line
};
void to_json(nlohmann::json& j, const Conflict& c);

struct Result {
  std::optional<ResolvedStack> stack;
  std::optional<Conflict> conflict;
};

// Throws sb::InputError (at the want's or arch's location) when the request
// itself is malformed: an unknown component, a bad version range, an unknown
// compute capability. A request the catalog cannot satisfy is a Conflict.
Result resolve_point(const sb::catalog::Catalog& catalog, const Request& request);

// The catalog records behind a resolved stack, in component order (for the
// fetch stage: their `sources`).
std::vector<const sb::catalog::Record*> records_of(const sb::catalog::Catalog& catalog,
                                                   const ResolvedStack& stack);

}  // namespace sb::resolve
