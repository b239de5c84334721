// The layer cache every kind of layer shares: a record in the store maps a
// layer's cache key to the Layer it produced (its blob must still be there),
// and a newly written layer is recorded under its key.
#pragma once

#include <optional>
#include <string>

#include "layer/write.hpp"
#include "pipeline/build.hpp"

namespace sb {

// The layer recorded under `key`, when its blob is in the store.
std::optional<Layer> cached_layer(const Store& store, const Digest& key);

// Writes `entries` as a layer, records it under `key` and reports it as a
// task labelled `label` ("layer app (3 wheels)").
Layer store_layer(const EntryMap& entries, const Store& store, const LayerOptions& options, const Digest& key,
                  Status& status, const std::string& label);

}  // namespace sb
