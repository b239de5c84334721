// Layers made of Debian/Ubuntu packages: a catalog `os` layer (`use: debian`
// or `ubuntu`, with `packages:`) installs the distribution's Essential set,
// apt and the packages; a layer with `apt:` installs those packages and what
// they need that the layers below do not have. See docs/apt.md.
//
// Settings (environment): STACKBUILD_APT_SOURCES (a .list or .sources file
// naming the repositories exactly, e.g. a snapshot), STACKBUILD_APT_ROOT (the
// root whose etc/apt and os-release give the defaults; "/"),
// STACKBUILD_APT_PINS ("Origin=990,Other=100"), STACKBUILD_OFFLINE=1 (use only
// the store).
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "layer/layer.hpp"
#include "pipeline/build.hpp"
#include "pipeline/plan.hpp"

namespace sb {

// Whether the driver builds `spec` through the apt source: `apt:` packages,
// an os layer, or `from: apt` on catalog components (their records' packages).
bool is_apt_layer(const LayerSpec& spec);

// Builds one apt layer on top of `below` (the image's layers so far, whose
// dpkg state was recorded when they were built). `key_parent`/`key_out` as
// for copy layers. With options.point.lock (the lockfile's entries of the
// point, pipeline/lock.hpp) the exact packages pinned there are fetched; otherwise the
// repositories are read and the packages resolved now.
LayerReport build_apt_layer(const Recipe& recipe, const LayerSpec& spec, const Digest& key_parent,
                            const std::vector<Layer>& below, const Store& store, const BuildOptions& options,
                            int64_t epoch, Status& status, Digest& key_out);

// The "apt" object of one resolved point for the lockfile: for each apt layer
// {"repositories": [...], "packages": [{name, version, architecture, url,
// sha256, size}, ...]}, resolved now against the repositories.
nlohmann::json lock_apt_layers(const Recipe& instantiated, const std::map<std::string, std::string>& variables,
                               const PointInputs& point, const Store& store, Status& status);

// For `stackbuild apt-resolve`: the packages `packages` (plus the Essential
// set and apt with `base`) resolve to over `distro` `codename`'s repositories
// (configured as for layers), by name, each "name version url sha256".
std::vector<std::string> apt_resolve(const std::string& distro, const std::string& codename,
                                     const std::vector<std::string>& packages, bool base, const Store& store,
                                     Status& status);

}  // namespace sb
