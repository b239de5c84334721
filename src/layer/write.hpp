// Entries in, a layer blob in the store out: the canonical tar streamed
// through the compressor, both digests computed on the way.
#pragma once

#include "layer/blob_writer.hpp"
#include "layer/tar_writer.hpp"
#include "layer/tree.hpp"

namespace sb {

// `stages`, when given, gets where the time went (LayerStages).
Layer write_layer(const EntryMap& entries, const Store& store, const LayerOptions& options,
                  const ProgressFn& progress = {}, LayerStages* stages = nullptr);

// Total bytes of file content in `entries` (for progress totals).
uint64_t content_bytes(const EntryMap& entries);

// Hashes everything that decides the tar's bytes (metadata and file contents)
// into `key`, for cache keys.
void hash_entries(const EntryMap& entries, KeyHasher& key);

}  // namespace sb
