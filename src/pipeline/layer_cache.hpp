// The layer cache every kind of layer shares: a record in the store maps a
// layer's cache key to the Layer it produced (its blob must still be there),
// and a newly written layer is recorded under its key.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "layer/split.hpp"
#include "layer/write.hpp"
#include "pipeline/build_options.hpp"
#include "pipeline/layer_writes.hpp"

namespace sb {

class RegistryCache;

// The layer recorded under `key`, when its blob is in the store.
std::optional<Layer> cached_layer(const Store& store, const Digest& key);

// Writes `entries` as a layer, records it under `key` and reports it as a
// task labelled `label` ("layer app (3 wheels)").
Layer store_layer(const EntryMap& entries, const Store& store, const LayerOptions& options, const Digest& key,
                  Status& status, const std::string& label);

// A layer that may be over the layer budget (build.hpp: layer_budget()): the
// layers recorded under `key`, one or a split layer's parts, when every blob
// is still in the store. The key must cover the budget.
std::optional<std::vector<Layer>> cached_layers(const Store& store, const Digest& key);

// A layer from the cache, or the right to build it. `hit` holds the layers
// recorded under `key` (cached_layers(), when `usable` too accepts them);
// without a hit, `lock` holds the key's lock, taken after a first look and
// followed by a second (another stackbuild may have been writing the layer),
// so the layer is built once across processes. Still without one, `remote`
// (--cache-from, when given) may bring the layer into the store. A hit is
// said through `status`: "layer NAME: cached sha256:... [and N more parts]
// [(from the cache REF)]".
struct LayerLookup {
  std::optional<std::vector<Layer>> hit;
  std::unique_ptr<FileLock> lock;
};
LayerLookup find_layers(const Store& store, const Digest& key, const std::string& name, Status& status,
                        const RegistryCache* remote,
                        const std::function<bool(const std::vector<Layer>&)>& usable = {});

// Writes `entries` as one layer, or, when their content is over `budget`, as
// the parts split_entries() makes with `group_of` (`split_by` says how, for
// the message: "by distribution"); records them under `key`.
std::vector<Layer> store_layers(const EntryMap& entries, const Store& store, const LayerOptions& options,
                                const Digest& key, uint64_t budget, const GroupFn& group_of, Status& status,
                                const std::string& label, const std::string& split_by);
// store_layers() in two steps: the blobs written (nothing recorded), then
// the parts recorded under `key` (as one layer, or as a split layer's parts).
std::vector<Layer> write_layers(const EntryMap& entries, const Store& store, const LayerOptions& options,
                                uint64_t budget, const GroupFn& group_of, Status& status, const std::string& label,
                                const std::string& split_by);
void record_layers(const Store& store, const Digest& key, const std::vector<Layer>& parts);

// The report of a layer built (or found) as `parts`.
LayerReport layer_report(const std::string& name, const std::vector<Layer>& parts, bool cached, double seconds);

// A layer written, as its parts, or being written (pipeline/layer_writes.hpp).
struct LayerParts {
  std::vector<Layer> parts;
  std::shared_ptr<PendingLayer> pending;
};
// Its report: with `pending`, its layers are filled in when build_image settles it.
LayerReport layer_report(const std::string& name, const LayerParts& written, double seconds);

}  // namespace sb
