#include "layer/write.hpp"

#include <algorithm>

#include "util/resources.hpp"

namespace sb {

Layer write_layer(const EntryMap& entries, const Store& store, const LayerOptions& options,
                  const ProgressFn& progress, LayerStages* stages) {
  LayerBlobWriter out(store, options);
  if (!progress) {
    write_canonical_tar(entries, out);
    Layer l = out.finish();
    if (stages) *stages = out.stages();
    return l;
  }
  // Progress is the content read, scaled by how much of the tar stream the
  // compressor has finished with: zstd's workers hold tens of MiB, so a small
  // layer at a high level is read at once and compressed afterwards, during
  // finish(), and would otherwise sit at 100% with no line in plain mode.
  uint64_t read = 0, shown = 0;
  auto report = [&] {
    uint64_t in = out.bytes_in();
    uint64_t now = in ? static_cast<uint64_t>(static_cast<double>(read) * static_cast<double>(out.bytes_compressed()) /
                                              static_cast<double>(in))
                      : read;
    shown = std::max(shown, std::min(now, read));  // never backwards, as a bar would jump
    progress(shown);
  };
  write_canonical_tar(entries, out, [&](uint64_t done) {
    read = done;
    report();
  });
  Layer l = out.finish(report);
  progress(read);
  if (stages) *stages = out.stages();
  return l;
}

uint64_t content_bytes(const EntryMap& entries) {
  uint64_t total = 0;
  for (const auto& [path, e] : entries) total += e.type == TarEntry::Type::File ? e.size : 0;
  return total;
}

void hash_entries(const EntryMap& entries, KeyHasher& key) {
  // The files' contents first, on every core (a copy layer of a 2.4 GiB tree:
  // 1.3 s of sha256 on one), then the key in entry order as before.
  std::vector<fs::path> files;
  for (const auto& [path, e] : entries)
    if (e.type == TarEntry::Type::File && !e.source.empty()) files.push_back(e.source);
  const std::vector<Digest> contents = Digest::of_files(files, usable_cores());
  size_t next = 0;
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
    if (e.type == TarEntry::Type::File && !e.source.empty()) key.field("content", contents[next++].str());
  }
}

}  // namespace sb
