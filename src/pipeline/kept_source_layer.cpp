#include "pipeline/kept_source_layer.hpp"

#include <chrono>

#include "layer/tree.hpp"
#include "pipeline/layer_cache.hpp"
#include "util/error.hpp"

namespace sb {

LayerReport build_kept_source_layer(const LayerSpec& spec, const LayerSource& source,
                                    const Digest& key_parent, const Store& store,
                                    const BuildOptions& options, uint64_t budget, int64_t epoch,
                                    Status& status, Digest& key_out) {
  auto start = std::chrono::steady_clock::now();
  auto seconds = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  const std::string name = spec.name + " (source)";
  const std::string root = canonical_archive_path(source.image_path);  // "opt/pytorch"
  const Digest key = KeyHasher()
                         .field("stackbuild-kept-source", "1")
                         .field("source", source.identity.str())
                         .field("path", root)
                         .field("compression", to_string(options.layer.compression))
                         .field("level", options.layer.level)
                         .field("epoch", epoch)
                         .field("budget", static_cast<int64_t>(budget))
                         .finish();
  key_out = KeyHasher()
                .field("stackbuild-kept-source-chain", "1")
                .field("parent", key_parent.str())
                .field("layer", key.str())
                .finish();

  // Its report carries `key`, under which the layer is recorded (here and in
  // a registry cache), not the chain key.
  auto report = [&](LayerReport r) {
    r.key = key;
    return r;
  };
  auto found = find_layers(store, key, name, status, options.cache_from);  // another point may be writing it
  if (found.hit) return report(layer_report(name, *found.hit, true, seconds()));

  auto scratch = store.temp_dir();
  const fs::path tree = scratch->path() / "tree";
  const std::string fetched =
      fetch_layer_source(spec, source, tree, store, status, options.services.make_fetcher).commit;

  ScanOptions so;
  so.source_date_epoch = epoch;
  so.normalize_modes = true;  // git and archives carry modes and owners of their own
  so.uid = 0, so.gid = 0;
  EntryMap entries;
  add_path(tree, root, so, entries);
  add_parent_dirs(so, entries);
  link_hardlinks(entries);
  // Over the budget: split by the tree's top-level directories (third_party/, aten/, ...).
  auto by_top = [&root](const std::string& path) {
    if (path.size() <= root.size() + 1 || path.compare(0, root.size() + 1, root + "/") != 0)
      return std::string();
    std::string rest = path.substr(root.size() + 1);
    return rest.substr(0, rest.find('/'));
  };
  std::vector<Layer> parts =
      store_layers(entries, store, options.layer, key, budget, by_top, status,
                   "layer " + name + " at " + source.image_path, "by top-level directory");
  record_source_commit(store, key, fetched);
  return report(layer_report(name, parts, false, seconds()));
}

}  // namespace sb
