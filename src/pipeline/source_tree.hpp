// Internal to pipeline/: the source tree a layer's build steps compile
// (`source:`, or `use: X` + `from: source` with the catalog's source of X),
// or the one a `use:` layer keeps beside its packages (`keep_source:`
// without steps), described before anything is fetched so that the layer's
// cache key covers it.
#pragma once

#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "fetch/fetcher.hpp"
#include "pipeline/point_inputs.hpp"
#include "recipe/recipe.hpp"
#include "fetch/source/source.hpp"
#include "store/store.hpp"
#include "util/status.hpp"

namespace sb {

struct LayerSource {
  source::SourceSpec spec;
  std::string what;  // "local directory /x", "archive URL", "git URL at REF", for messages
  // Everything that decides the tree: kind, URL, sha256 or ref, a local
  // directory's tree digest, each patch's sha256. Known without fetching.
  Digest identity = Digest::of_bytes("");
  std::optional<Digest> local_tree;  // a local directory's tree digest
  // Where the steps find it in the image: keep_source, else /usr/src/<layer>
  // (bound there from outside: it stays out of the layer).
  std::string image_path;
  bool kept = false;
  // git: the ref as the recipe (or the catalog) names it; spec.ref is the
  // lockfile's commit under --locked.
  std::string named_ref;
  // Debian under --locked: the tree the lockfile pins; another is refused.
  std::optional<Digest> locked_tree;
};

// nullopt for a layer not built from source. `variables` are the point's
// ${vars}: the record of `use:` in the plan's catalog (point.catalog) is the
// one of that version. Throws InputError/Error when the catalog names no
// source for it, or an archive there is not pinned.
//
// With `build --locked`, point.lock holds the point's lockfile entries for
// sources ({"<layer>": {"git", "ref", "commit"}}, from lock_source_layers):
// a git source whose URL and ref the entry names is fetched at its commit.
std::optional<LayerSource> layer_source(const LayerSpec& spec, const std::map<std::string, std::string>& variables,
                                        const PointInputs& point);

// nullopt for a layer that keeps no source beside its packages
// (LayerSpec::keeps_source_beside()); else its `source:`, or the catalog's
// source of its component at the point's version. Throws InputError at
// `keep_source` when the catalog names none.
std::optional<LayerSource> kept_source(const LayerSpec& spec, const std::map<std::string, std::string>& variables,
                                       const PointInputs& point);

// Fetches (or copies) `source` of layer `spec` and applies its patches into
// `dest`, as one status task, with a fetcher `make_fetcher` makes;
// STACKBUILD_OFFLINE=1 takes only the store.
source::SourceLock fetch_layer_source(const LayerSpec& spec, const LayerSource& source, const fs::path& dest,
                                      const Store& store, Status& status,
                                      const fetch::FetcherFactory& make_fetcher = fetch::make_fetcher);

// For `stackbuild lock`: the exact inputs of each layer of `recipe` built
// from or keeping a source tree, {"<layer>": ENTRY}, ENTRY being
// {"git": URL, "ref": REF, "commit": HEX} (the commit the ref names now, `git
// ls-remote`, a tag peeled; tags and branches move, `build --locked` fetches
// the commit), {"archive": URL, "sha256": HEX, "size": N} (fetched now into
// the store) or {"path": DIR, "tree": DIGEST} (source::tree_digest), each with
// "patches": [{"path", "sha256"}] in the order they apply. Archives are
// fetched with a fetcher `make_fetcher` makes.
nlohmann::json lock_source_layers(const Recipe& recipe, const std::map<std::string, std::string>& variables,
                                  const PointInputs& point, const Store& store, Status& status,
                                  const fetch::FetcherFactory& make_fetcher = fetch::make_fetcher);

// For `build --locked`: "" when `entry` pins the source of `spec` as the
// recipe names it now (same URL and ref, archive sha256, local tree, patches
// and their contents), else what differs.
std::string source_lock_mismatch(const LayerSpec& spec, const std::map<std::string, std::string>& variables,
                                 const PointInputs& point, const nlohmann::json& entry);

// The value of the image label dev.stackbuild.source.<layer> (JSON): the
// source tree the layer was compiled from (`built`) or keeps, for the SBOM
// (image/sbom.hpp, source_packages): its component and version (`use:`),
// where it comes from (git URL, ref and, when pinned, commit; archive URL and
// sha256; a local directory's tree digest, never its host path), each patch's
// path as the recipe names it and sha256, and its path in the image when kept.
// The same with or without --locked (the ref as named, and the commit
// fetched), so that a locked build gives the unlocked one's image.
//
// `fetched` is its layer's source-commit record (below), "" when not known:
// the commit a git source was fetched at, so that a source named by a tag is
// described by the commit the image holds; or the version, .dsc and files of
// a Debian source package (label key "debian").
std::string source_label(const LayerSpec& spec, const LayerSource& source,
                         const std::map<std::string, std::string>& variables, bool built,
                         const std::string& fetched = "");

// The record "source-commit" under source_commit_key(K): {"commit": HEX}, the
// commit a git source was fetched at into the layer whose cache key
// (LayerReport::key) is K. Written when the layer is built, carried with it
// by a registry cache (the steps kind names it, step_layer.cpp), read when
// it is reused: the same label either way. Kept-source layers write it too.
constexpr const char* kSourceCommitRecord = "source-commit";
Digest source_commit_key(const Digest& layer_key);
// Throws sb::Error when `value` is not such a record.
void check_source_commit_record(const std::string& value);
// A Debian source's record is {"debian": DebianSource} instead: the version,
// .dsc and files the layer was made from.
void record_source_commit(const Store& store, const Digest& layer_key,
                          const std::optional<source::SourceLock>& fetched);  // none for nullopt or no commit
// The record's JSON text, "" when none (or not one); source_label()'s `fetched`.
std::string recorded_source_commit(const Store& store, const Digest& layer_key);

// Refuses, as an InputError at the line of the recipe or catalog that wrote
// it, a git source (a layer's own or the catalog's) whose URL or ref git
// would read as an option, or whose URL is no allowed kind
// (source::git_url_problem()). plan, lock and build call it (through
// plan_recipe()) before anything runs git; other problems of a source are
// left to the stage that uses it, as before.
void check_git_sources(const Recipe& recipe, const std::map<std::string, std::string>& variables,
                       const PointInputs& point);

// Whether the layer's tree comes from a git source (its own or the catalog's).
bool has_git_source(const LayerSpec& spec, const std::map<std::string, std::string>& variables,
                    const PointInputs& point);
// Whether the layer builds from or keeps a source tree (any kind).
bool has_source(const LayerSpec& spec);

}  // namespace sb
