// Internal to pipeline/: the Python index stackbuild resolves wheels from,
// read once from the machine's settings, for the pip kind (pip_layer.cpp)
// and for build steps that run pip (step_layer.cpp).
#pragma once

#include <map>
#include <string>

#include "fetch/pip/index.hpp"
#include "store/store.hpp"

namespace sb {

// STACKBUILD_PIP_INDEX_URL (or `explicit_url`), else pip's configuration on
// the machine, else pip's default.
pip::IndexConfig index_config(const Store& store, const std::string& explicit_url = "");

// The Python index stackbuild resolves from (STACKBUILD_PIP_INDEX_URL, else
// pip's configuration on the machine, else pip's default), as pip's own
// variables for a build step with the network that runs pip:
// PIP_INDEX_URL and, with extra indexes, PIP_EXTRA_INDEX_URL; empty when
// no index is configured anywhere.
std::map<std::string, std::string> pip_index_environment(const Store& store);

}  // namespace sb
