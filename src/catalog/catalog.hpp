// The component catalog: what versions of os, python, cuda, cudnn, nccl,
// cublas, pytorch, ... exist, where each comes from and what it requires.
//
// It is read from layers/<component>.yaml, one file per component (schema in
// docs/catalog.md), by load_catalog(), which validates like a compiler: any
// mistake is an sb::InputError at file:line:col. The types below are plain
// values; no YAML type leaves the loader.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "catalog/version.hpp"
#include "util/error.hpp"

namespace sb::catalog {

// "this record needs <component> in <range>", e.g. cudnn 9.0.0 needs cuda 12.0 - 12.3.
struct Requirement {
  std::string component;
  VersionRange range;
  SourceLocation where;  // the requirement's line in the catalog
  int target = -1;       // index of `component` in Catalog::components
};

// Where a version's files come from. Only the kinds a record lists are set.
// NVIDIA's redistributables below the redist base URL (NVIDIA's compute/):
// a manifest <product>/redist/redistrib_<manifest_version>.json, or (NCCL,
// which has no manifests) one archive at `archive`, "{arch}" standing for
// x86_64 or aarch64; its sha256 is pinned by the lockfile.
struct Redist {
  std::string product;  // cuda, cudnn, nccl
  std::string manifest_version;         // e.g. "12.6.3"; "" with `archive`
  std::string archive;                  // e.g. redist/nccl/v2.21.5/nccl_2.21.5-1+cuda12.4_{arch}.txz
  std::vector<std::string> components;  // e.g. libcublas; empty = chosen by the recipe
};
struct GitSource {
  std::string url;
  std::string ref;  // tag or commit
};
struct ArchiveSource {
  std::string url;
  std::string sha256;  // may be empty; the lockfile pins it
};
// A Debian source package (fetch/source/debian.hpp), from the machine's
// Debian repositories: its name, and the suite ("" = the machine's release).
struct DebianSource {
  std::string name;
  std::string suite;
};
struct Sources {
  std::vector<std::string> apt;  // package names, optionally name=version
  std::vector<std::string> pip;  // requirement strings, e.g. nvidia-cudnn-cu12==9.5.1.17
  std::optional<Redist> redist;
  std::optional<GitSource> git;
  std::optional<ArchiveSource> archive;
  std::optional<DebianSource> debian;  // taken by from: source/keep_source when there is no archive or git
};

// One installable version of a component, possibly one of several builds of
// it (cudnn 9.5.1.17 for CUDA 12 and for CUDA 11 are two records).
struct Record {
  std::string component;
  Version version;
  std::string build;                 // "" or e.g. "cuda12", "cu126"
  std::vector<std::string> aliases;  // other names that select it: "trixie", "debian"
  std::vector<Requirement> requirements;
  std::map<std::string, VersionRange>
      prefers;                               // tried first when not pinned: python 3.13 on trixie
  std::string driver_min;                    // minimum Linux driver, "" = none stated
  std::vector<std::string> driver_branches;  // NVIDIA_REQUIRE_CUDA brand branches ("535", ...)
  std::vector<std::string> compute_capability;  // what it runs on; empty = not stated
  Sources sources;
  std::map<std::string, std::string> info;  // facts kept for people and templates (glibc, ...)
  std::string notes;
  // `explicit: true`: never chosen as the newest of a range, only where the
  // recipe or a chosen record asks for exactly its version (Debian's own
  // build of a release, whose packages exist only in Debian's archive).
  bool explicit_only = false;
  std::vector<std::string> cite;  // where each fact was read
  SourceLocation where;           // the record's first line

  // Derived by the loader: the compute capabilities this record can build
  // for (cuda: from arch_support) or run on (compute_capability), as bits of
  // Catalog::arch_names. Unset when the catalog says nothing.
  std::optional<uint64_t> arch_mask;

  // "cudnn 9.5.1.17 (cuda12)"
  std::string label() const;
};

// cuda's "which compute capabilities can this release compile for".
struct ArchSupport {
  std::vector<std::string> arch;  // "7.0", "9.0a", ...
  VersionRange versions;          // the component's versions that support them
  std::vector<std::string> cite;
  SourceLocation where;
};

// CUDA minor version compatibility: a driver floor per major version.
struct MinorCompat {
  VersionRange versions;
  std::string driver_min;
  std::string driver_below;  // informational upper bound from the table, may be ""
  std::string notes;
  std::vector<std::string> cite;
  SourceLocation where;
};

struct Component {
  std::string name;
  std::string description;
  int priority = 100;           // lower = decided first, so its newest version wins ties
  std::vector<Record> records;  // newest first; builds of one version in file order
  std::vector<ArchSupport> arch_support;
  std::vector<MinorCompat> minor_compat;
  std::vector<std::string> require_brands;  // brands in NVIDIA_REQUIRE_CUDA
  std::vector<std::string> require_brands_cite;
  SourceLocation where;  // the file
};

struct Catalog {
  std::filesystem::path dir;
  std::vector<Component> components;    // sorted by name
  std::vector<std::string> arch_names;  // every compute capability named (at most 64)

  int index_of(std::string_view component) const;  // -1 if absent
  const Component* find(std::string_view component) const;
  // The record with this exact version text and build, or nullptr.
  const Record* find(std::string_view component, std::string_view version,
                     std::string_view build = {}) const;
  int arch_index(std::string_view arch) const;  // -1 if absent
  std::vector<std::string> component_names() const;
};

// Reads every *.yaml in `dir`. Throws sb::InputError on any schema mistake.
Catalog load_catalog(const std::filesystem::path& dir);

void to_json(nlohmann::json& j, const Requirement& r);
void to_json(nlohmann::json& j, const Sources& s);
void to_json(nlohmann::json& j, const Record& r);
void to_json(nlohmann::json& j, const Component& c);
void to_json(nlohmann::json& j, const Catalog& c);

}  // namespace sb::catalog
