// The source a `use:` layer keeps beside its packages (`keep_source:` on a
// layer installed from wheels, redist archives or apt, as NGC images keep
// /opt/pytorch): the component's source tree, patched, in a layer of its own
// directly above the packages' layer. The packages' layer is then cached and
// shared without the source, and the source layer is shared by every point
// with the same source.
#include <chrono>

#include "layer/tree.hpp"
#include "pipeline/layer_cache.hpp"
#include "pipeline/layer_kind.hpp"
#include "pipeline/source_tree.hpp"
#include "util/error.hpp"

namespace sb {

namespace {

// The source layer of `spec`: from the cache when its key is there, else the
// tree is fetched (or copied), patched (src/fetch/source/) and written at
// source.image_path, root-owned, modes normalized (0755 directories and
// executables, 0644 the rest), mtimes clamped to `epoch`, parents 0755.
// The cache key covers what the tree is (LayerSource::identity), the path,
// compression, epoch and budget, and not the layers below: points with the
// same source share the layer, and it is the report's `key` (the layer's
// records, a registry cache's entry). `key_out` receives the key the layers
// above chain on (the packages' key `key_parent` and this layer's).
LayerReport build_kept_source_layer(const LayerContext& c, const LayerSource& source, Digest& key_out) {
  const LayerSpec& spec = c.spec;
  const Digest& key_parent = c.parent_key;
  const Store& store = c.store;
  const BuildOptions& options = c.options;
  const uint64_t budget = layer_budget(c.recipe, c.options);
  const int64_t epoch = c.epoch;
  Status& status = c.status;
  auto start = std::chrono::steady_clock::now();
  auto seconds = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  const std::string name = spec.name + " (source)";
  const std::string root = canonical_archive_path(source.image_path);  // "opt/pytorch"
  KeyHasher k;
  k.field("stackbuild-kept-source", "1").field("source", source.identity.str()).field("path", root);
  const Digest key = hash_layer_options(k, options.layer)
                         .field("epoch", epoch)
                         .field("budget", static_cast<int64_t>(budget))
                         .finish();
  key_out = KeyHasher()
                .field("stackbuild-kept-source-chain", "1")
                .field("parent", key_parent.str())
                .field("layer", key.str())
                .finish();

  // Its report carries `key`, under which the layer is recorded (here and in
  // a registry cache), not the chain key; its history names the path; its
  // label, the tree and the commit it was fetched at.
  auto report = [&](LayerReport r) {
    r.key = key;
    r.history = "source at " + source.image_path;
    r.source = source_label(spec, source, options.variables, false, recorded_source_commit(store, key));
    return r;
  };
  auto found = find_layers(store, key, name, status, options.cache_from);  // another point may be writing it
  if (found.hit) return report(layer_report(name, *found.hit, true, seconds()));

  auto scratch = store.temp_dir();
  const fs::path tree = scratch->path() / "tree";
  const source::SourceLock fetched =
      fetch_layer_source(spec, source, tree, store, status, options.services.make_fetcher);

  ScanOptions so;
  so.source_date_epoch = epoch;
  so.normalize_modes = true;  // git and archives carry modes and owners of their own
  so.uid = 0, so.gid = 0;
  EntryMap entries;
  add_path(tree, root, so, entries);
  add_parent_dirs(so, entries);
  link_hardlinks(entries);
  // Over the budget: split by the tree's top-level directories (third_party/, aten/, ...).
  auto by_top = [root](const std::string& path) {
    if (path.size() <= root.size() + 1 || path.compare(0, root.size() + 1, root + "/") != 0)
      return std::string();
    std::string rest = path.substr(root.size() + 1);
    return rest.substr(0, rest.find('/'));
  };
  // Written now, or beside the build (pipeline/layer_writes.hpp), the tree
  // kept until then. A kept tree is not a library's copy: no duplicate check.
  LayerTail tail{budget, by_top, "layer " + name + " at " + source.image_path, "by top-level directory"};
  tail.check_duplicates = false;
  record_source_commit(store, key, fetched);  // for the label, which report() reads now
  tail.hold = std::shared_ptr<TempDir>(std::move(scratch));
  LayerParts parts = finish_layer(c, std::move(entries), key, std::move(found), std::move(tail));
  return report(layer_report(name, parts, seconds()));
}

class KeptSourceKind final : public LayerKind {
 public:
  const char* name() const override { return "source"; }
  bool handles(const LayerSpec& spec) const override { return spec.keeps_source_beside(); }
  LayerReport build(const LayerContext& c, Digest& key_out) const override {
    auto source = kept_source(c.spec, c.options.variables, c.options.point);
    if (!source) throw Error("layer '" + c.spec.name + "' keeps no source");
    return build_kept_source_layer(c, *source, key_out);
  }
  bool reads_below(const LayerSpec&, const BuildOptions&) const override { return false; }
  std::vector<RecordKind> record_kinds() const override {
    return {{kSourceCommitRecord,  // the commit its git source was fetched at, for the label
             [](const Digest& key, const std::vector<Layer>&) -> std::optional<Digest> {
               return source_commit_key(key);
             },
             check_source_commit_record}};
  }
};

}  // namespace

const LayerKind& kept_source_layer_kind() {
  static const KeptSourceKind kind;
  return kind;
}

}  // namespace sb
