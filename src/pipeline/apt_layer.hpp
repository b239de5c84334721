// Layers made of Debian/Ubuntu packages: a catalog `os` layer (`use: debian`
// or `ubuntu`, with `packages:`) installs the distribution's Essential set,
// apt and the packages; a layer with `apt:` installs those packages and what
// they need that the layers below do not have. See docs/apt.md.
//
// The recipe's `repositories:` and `pins:` (recipe-wide or per layer) say
// where packages come from; without them, the defaults. Settings
// (environment): STACKBUILD_APT_SOURCES (a .list or .sources file naming the
// default repositories exactly, e.g. a snapshot), STACKBUILD_APT_ROOT (the
// root whose etc/apt and os-release give the defaults; "/"),
// STACKBUILD_APT_MIRROR / STACKBUILD_APT_SECURITY_MIRROR (the public archives
// used when the machine has no apt configuration for the distribution),
// STACKBUILD_APT_PINS ("Origin=990,Other=100"), STACKBUILD_OFFLINE=1 (use only
// the store).
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "layer/layer.hpp"
#include "pipeline/build_options.hpp"
#include "pipeline/plan.hpp"

namespace sb {

// Whether the driver builds `spec` through the apt source: `apt:` packages,
// an os layer, or `from: apt` on catalog components (their records' packages).
bool is_apt_layer(const LayerSpec& spec);



struct AptResolveOptions {
  bool base = false;        // the Essential set and apt, as an os layer
  bool recommends = false;  // Recommends too
  std::string priority;     // "", required, important, standard
};

// For `stackbuild apt-resolve`: the packages `packages` (plus what the
// options add) resolve to over `distro` `codename`'s default repositories
// (configured as for layers), by name, each "name version url sha256".
std::vector<std::string> apt_resolve(const std::string& distro, const std::string& codename,
                                     const std::vector<std::string>& packages, const AptResolveOptions& options,
                                     const Store& store, Status& status);

}  // namespace sb
