// Layers made of Python wheels: a layer with `pip:` requirements (and no
// `apt:`, `copy:` or `build:`), or a catalog layer `from: wheel` whose
// records name wheels (nvidia-cudnn-cu12==9.1.0.70, torch==2.6.0). The
// wheels are resolved for the image's Python, glibc and architecture and
// installed without running pip. See docs/pip.md.
//
// Settings (environment): STACKBUILD_PIP_INDEX_URL (else pip's own
// configuration), STACKBUILD_PIP_PYTHON / STACKBUILD_PIP_GLIBC (override
// what the catalog says of the point's python and os), STACKBUILD_PIP_SITE
// (site-packages path), STACKBUILD_DUPLICATE_LIBRARIES (report | lower),
// STACKBUILD_OFFLINE=1.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pip/resolver.hpp"
#include "pipeline/build.hpp"

namespace sb {

// Whether the driver builds `spec` through the pip source.
bool is_pip_layer(const LayerSpec& spec);

// The image a pip layer installs into at this point: Python from ${python}
// (else the os record's default), glibc from the os record, the recipe's
// architecture, Debian's dist-packages layout for debian/ubuntu.
pip::Target pip_target(const Recipe& recipe, const std::map<std::string, std::string>& variables);

// The requirements of a pip layer: `pip:` plus, `from: wheel`, the `pip`
// sources of the catalog records chosen for the point.
std::vector<std::string> pip_requirements(const Recipe& recipe, const LayerSpec& spec,
                                          const std::map<std::string, std::string>& variables);

// Builds one pip layer on top of `below`. `locked` is the lockfile's entry
// for this layer (lock_pip_layers()[name]); null = resolve against the index
// now. Duplicate libraries against `below` are reported through `status`
// (and replaced by links to the lower copy with STACKBUILD_DUPLICATE_LIBRARIES=lower).
LayerReport build_pip_layer(const Recipe& recipe, const LayerSpec& spec, const Digest& key_parent,
                            const std::vector<Layer>& below, const Store& store, const BuildOptions& options,
                            int64_t epoch, Status& status, Digest& key_out,
                            const nlohmann::json& locked = nullptr);

// The "pip" object of one point for the lockfile: per pip layer, the target
// and every wheel's name, version, URL, size and sha256.
nlohmann::json lock_pip_layers(const Recipe& instantiated, const std::map<std::string, std::string>& variables,
                               const Store& store, Status& status);

// For `stackbuild pip`: resolves `requirements` for `target`.
std::vector<pip::PinnedWheel> pip_resolve(const std::vector<std::string>& requirements, const pip::Target& target,
                                          const std::string& index_url, bool pre, const Store& store, Status& status,
                                          const std::map<std::string, pip::ResolveOptions::Installed>& installed = {});

}  // namespace sb
