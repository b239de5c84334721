// Images unpacked for verification, cached in the store by manifest digest
// (<store>/roots/<hex>): unpacked once with the safe extractor into a
// temporary directory and renamed into place, so a half-unpacked root is
// never reused.
#pragma once

#include <filesystem>

#include "image/layout.hpp"
#include "store/store.hpp"

namespace sb::verify {

std::filesystem::path unpacked_root(const Store& store, const LayoutImage& image);

}  // namespace sb::verify
