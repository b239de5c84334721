#include "layer/write.hpp"

namespace sb {

Layer write_layer(const EntryMap& entries, const Store& store, const LayerOptions& options,
                  const ProgressFn& progress) {
  LayerBlobWriter out(store, options);
  write_canonical_tar(entries, out, progress);
  return out.finish();
}

uint64_t content_bytes(const EntryMap& entries) {
  uint64_t total = 0;
  for (const auto& [path, e] : entries) total += e.type == TarEntry::Type::File ? e.size : 0;
  return total;
}

void hash_entries(const EntryMap& entries, KeyHasher& key) {
  key.field("entries", static_cast<int64_t>(entries.size()));
  for (const auto& [path, e] : entries) {
    key.field("path", path)
        .field("type", static_cast<int64_t>(e.type))
        .field("mode", e.mode)
        .field("uid", e.uid)
        .field("gid", e.gid)
        .field("mtime", e.mtime)
        .field("size", static_cast<int64_t>(e.size))
        .field("link", e.link)
        .field("dev", static_cast<int64_t>(e.dev_major) << 32 | e.dev_minor);
    for (const auto& [name, value] : e.xattrs) key.field("xattr", name).field("value", value);
    // Whiteouts and other empty entries have no host file behind them.
    if (e.type == TarEntry::Type::File && !e.source.empty()) key.field("content", Digest::of_file(e.source).str());
  }
}

}  // namespace sb
