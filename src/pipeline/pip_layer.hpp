// Layers made of Python wheels: a layer with `pip:` requirements (and no
// `apt:`, `copy:` or `build:`), or a catalog layer `from: wheel` whose
// records name wheels (nvidia-cudnn-cu12==9.1.0.70, torch==2.6.0). The
// wheels are resolved for the image's Python, glibc and architecture and
// installed without running pip. See docs/pip.md.
//
// Settings (environment): STACKBUILD_PIP_INDEX_URL (else pip's own
// configuration), STACKBUILD_PIP_PYTHON / STACKBUILD_PIP_GLIBC (override
// what the recipe's `platform:` and the catalog say), STACKBUILD_PIP_SITE
// (site-packages path), STACKBUILD_OFFLINE=1. Duplicate libraries: see
// pipeline/duplicate_libraries.hpp.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fetch/pip/resolver.hpp"
#include "pipeline/build_options.hpp"

namespace sb {

// Whether the driver builds `spec` through the pip source.
bool is_pip_layer(const LayerSpec& spec);


// The image a pip layer installs into at this point: Python from ${python}
// (else the recipe's `platform: {python}`, else the os record's default),
// glibc from `platform: {glibc}` (else the os record), the recipe's
// architecture, Debian's dist-packages layout for debian/ubuntu (the os
// record is the plan's catalog's, point.catalog). STACKBUILD_PIP_PYTHON /
// STACKBUILD_PIP_GLIBC override. Throws InputError naming the `platform:`
// key when neither says it.
pip::Target pip_target(const Recipe& recipe, const std::map<std::string, std::string>& variables,
                       const PointInputs& point);

// The requirements of a pip layer: `pip:` plus, `from: wheel`, the `pip`
// sources of the catalog records chosen for the point.
std::vector<std::string> pip_requirements(const LayerSpec& spec, const std::map<std::string, std::string>& variables,
                                          const PointInputs& point);

// A `from: wheel` layer whose catalog record is built with CUDA (requires
// cuda) must resolve to NVIDIA's CUDA runtime wheel among its wheels; throws
// sb::Error naming the wheel and the target otherwise. The index may carry a
// release for another machine only as a CPU build: torch before 2.11 for
// aarch64, whose nvidia-* requirements are marked for x86_64 only.
void check_cuda_wheels(const LayerSpec& spec, const std::map<std::string, std::string>& variables,
                       const PointInputs& point, const pip::Target& target,
                       const std::vector<pip::PinnedWheel>& wheels);

// What the point's resolved components hold wheels to: each chosen record's
// `pip` source that pins a version (nvidia-cudnn-cu12==9.1.0.70,
// nvidia-cublas-cu12==12.4.*), as a constraint that narrows the wheel when a
// layer's requirements pull it in and adds nothing otherwise. Each with who set it.
std::vector<std::pair<std::string, std::string>> pip_constraints(const PointInputs& point);


// How wheels are fetched: STACKBUILD_OFFLINE, and pip's `cert` (a private
// CA) trusted as pip trusts it, since wheels come from the index's hosts.
fetch::FetchOptions wheel_fetch_options();

// For `stackbuild pip` and the pip layers: resolves `requirements` for
// `target`, fetching metadata with a fetcher the services' factory makes and
// reading index pages through their index transport.
std::vector<pip::PinnedWheel> pip_resolve(const std::vector<std::string>& requirements, const pip::Target& target,
                                          const std::string& index_url, bool pre, const Store& store, Status& status,
                                          const std::vector<std::pair<std::string, std::string>>& constraints = {},
                                          const std::map<std::string, pip::ResolveOptions::Installed>& installed = {},
                                          const BuildServices& services = {});

}  // namespace sb
