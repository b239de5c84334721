// A pip layer's work after resolution: every wheel fetched at once through
// the fetcher (sha256 and size from the index checked before the store), then
// unpacked into a staging tree that becomes the layer's entries.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "archive/entry.hpp"
#include "fetch/fetcher.hpp"
#include "fetch/pip/resolver.hpp"
#include "fetch/pip/wheel.hpp"

namespace sb::pip {

struct Installed {
  std::vector<InstalledWheel> wheels;
  uint64_t bytes = 0;
};

// Fetches `wheels` and installs them into `staging` (an empty directory, the
// image root). A wheel without a sha256 from the index is refused unless
// `allow_unhashed` (the lockfile then pins what arrived).
Installed install_wheels(const std::vector<PinnedWheel>& wheels, const Target& target, const fs::path& staging,
                         const Store& store, fetch::Fetcher& fetcher, bool allow_unhashed = false);

// The same requirements as pip's `pip check` over what was resolved: every
// applicable Requires-Dist of every wheel is installed at a matching version.
// Returns one line per problem ("torch 2.6.0 requires sympy>=1.13, which is not installed").
std::vector<std::string> check_wheels(const std::vector<PinnedWheel>& wheels, const Target& target,
                                      const std::set<std::string>& provided = {});

}  // namespace sb::pip
