// eStargz prefetch orders (docs/partial-pulls.md): `stackbuild test
// --record-prefetch` records the files an image's tests open and attaches
// the list to the image in its OCI layout, as an artifact; a build of that
// point whose layers are eStargz takes the list from the image its tag names
// in the output layout, puts those files first in each layer (before the
// prefetch landmark) and attaches the list to the image it writes, so the
// next build keeps the order without running the tests again.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "image/layout.hpp"
#include "recipe/recipe.hpp"

namespace sb {

struct BuildOptions;

inline constexpr const char* kPrefetchOrderType = "application/vnd.stackbuild.prefetch-order.v1+json";

// The artifact's document: {"paths": ["/usr/bin/python3", ...]}, image paths.
std::string prefetch_document(const std::vector<std::string>& paths);

// The paths of a document as layer entries name them ("usr/bin/python3"),
// checked: absolute, normalised, at most 1,000,000 of at most 4,096 bytes;
// else an error naming `where`.
std::vector<std::string> parse_prefetch_document(const std::string& text, const std::string& where);

// Attaches `paths` (as layer entries name them) to `subject` in `layout`,
// replacing an earlier order of that image. Returns the artifact's digest.
Digest add_prefetch_to_layout(const fs::path& layout, const Descriptor& subject, const std::vector<std::string>& paths);

// The order attached to the image `ref` names in `layout` (for `platform`),
// if the layout, the image and an order of it are there.
std::optional<std::vector<std::string>> layout_prefetch(const fs::path& layout, const std::string& ref,
                                                        const std::string& platform, const Store& store);

// Whether any layer of the recipe is written as eStargz (the build's
// --compression, or a layer's own compression:).
bool has_estargz_layers(const Recipe& recipe, const BuildOptions& options);

}  // namespace sb
