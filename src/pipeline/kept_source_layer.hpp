// Internal to pipeline/: the source a `use:` layer keeps beside its packages
// (`keep_source:` on a layer installed from wheels, redist archives or apt,
// as NGC images keep /opt/pytorch): the component's source tree, patched, in
// a layer of its own directly above the packages' layer. The packages' layer
// is then cached and shared without the source, and the source layer is
// shared by every point with the same source.
#pragma once

#include "pipeline/build_options.hpp"
#include "pipeline/source_tree.hpp"

namespace sb {

// The source layer of `spec`: from the cache when its key is there, else the
// tree is fetched (or copied), patched (src/source/) and written at
// source.image_path, root-owned, modes normalized (0755 directories and
// executables, 0644 the rest), mtimes clamped to `epoch`, parents 0755.
// The cache key covers what the tree is (LayerSource::identity), the path,
// compression, epoch and budget, and not the layers below: points with the
// same source share the layer, and it is the report's `key` (the layer's
// records, a registry cache's entry). `key_out` receives the key the layers
// above chain on (the packages' key `key_parent` and this layer's).
LayerReport build_kept_source_layer(const LayerSpec& spec, const LayerSource& source,
                                    const Digest& key_parent, const Store& store,
                                    const BuildOptions& options, uint64_t budget, int64_t epoch,
                                    Status& status, Digest& key_out);

}  // namespace sb
