// The copy kind (pipeline/layer_kind.hpp): a layer of local files, `copy:
// [{src, dst, ...}]`, read from the recipe's tree (confined to it unless
// --allow-host-paths), written as one canonical layer, or several over the
// layer budget.
#include <chrono>

#include "layer/split.hpp"
#include "layer/write.hpp"
#include "pipeline/duplicate_libraries.hpp"
#include "pipeline/layer_cache.hpp"
#include "pipeline/layer_kind.hpp"
#include "pipeline/recipe_paths.hpp"
#include "util/error.hpp"
#include "util/status.hpp"

namespace sb {

namespace {

// A recipe reads only its own files (pipeline/recipe_paths.hpp), unless --allow-host-paths.
void check_copy_source(const CopySpec& c, const fs::path& src) {
  check_recipe_path(c.base, src, c.src, c.where, "copy source", "copies");
}

// The entries of a layer made of `copy:` items. Sources are relative to the
// directory of the recipe that wrote them (a parent's, under `extends:`); a
// destination ending in '/' receives the source inside it.
EntryMap copy_entries(const Recipe& recipe, const LayerSpec& spec, int64_t epoch, bool allow_host_paths) {
  ScanOptions o;
  o.source_date_epoch = epoch;
  o.uid = spec.uid.value_or(0);
  o.gid = spec.gid.value_or(0);
  o.normalize_modes = !spec.preserve_modes;
  EntryMap entries;
  for (const auto& c : spec.copy) {
    fs::path src = fs::path(c.src).is_absolute() ? fs::path(c.src) : c.base / c.src;
    std::error_code ec;
    if (!fs::exists(fs::symlink_status(src, ec)))
      throw InputError(c.where, "copy source '" + c.src + "' does not exist (looked for " + src.string() + ")");
    if (!allow_host_paths) check_copy_source(c, src);
    std::string dst = c.dst;
    if (dst.back() == '/' && !fs::is_directory(src)) dst += src.filename().string();
    EntryMap one;
    add_path(src, dst, o, one);
    if (c.mode)
      for (auto& [path, e] : one)
        if (e.type == TarEntry::Type::File) e.mode = *c.mode;
    for (auto& [path, e] : one) entries[path] = std::move(e);  // later copies win, as in a Dockerfile
  }
  add_parent_dirs(o, entries);
  link_hardlinks(entries);
  return entries;
}

Digest layer_key(const Digest& parent, const LayerSpec& spec, const LayerOptions& lo, int64_t epoch,
                 const EntryMap& entries) {
  KeyHasher key;
  key.field("stackbuild-layer", "1")
      .field("parent", parent.str())
      .field("spec", nlohmann::json(spec).dump());
  hash_layer_options(key, lo)
      .field("epoch", epoch)
      .field("duplicates", to_string(duplicate_policy(spec)));
  hash_entries(entries, key);
  return key.finish();
}

// A copy layer over the budget, as several layers split by top-level path
// (layer/split.hpp). Its key adds the budget to the whole layer's key.
LayerReport build_split_copy_layer(const LayerContext& c, EntryMap entries, const Digest& whole_key, uint64_t budget,
                                   std::chrono::steady_clock::time_point start, Digest& key_out) {
  const Digest key = KeyHasher()
                         .field("stackbuild-split-layer", "1")
                         .field("layer", whole_key.str())
                         .field("budget", static_cast<int64_t>(budget))
                         .finish();
  key_out = key;
  auto found = find_layers(c.store, key, c.spec.name, c.status, c.options.cache_from);
  if (found.hit) return layer_report(c.spec.name, *found.hit, true, seconds_since(start));
  LayerTail tail{budget, top_level_group, "layer " + c.spec.name, "by top-level path"};
  return layer_report(c.spec.name, finish_layer(c, std::move(entries), key, std::move(found), std::move(tail)),
                      seconds_since(start));
}

// One copy layer: from the cache when its key is there, else written now
// (or beside the build, pipeline/layer_writes.hpp). The key covers the
// parent's key, so a changed lower layer rebuilds the rest.
LayerReport build_copy_layer(const LayerContext& c, Digest& key_out) {
  auto start = std::chrono::steady_clock::now();
  const LayerSpec& spec = c.spec;
  EntryMap entries = copy_entries(c.recipe, spec, c.epoch, c.options.allow_host_paths);
  Digest key = layer_key(c.parent_key, spec, c.options.layer, c.epoch, entries);
  key_out = key;
  const uint64_t budget = layer_budget(c.recipe, c.options);
  if (budget > 0 && content_bytes(entries) > budget)
    return build_split_copy_layer(c, std::move(entries), key, budget, start, key_out);
  auto found = find_layers(c.store, key, spec.name, c.status, c.options.cache_from);
  if (found.hit) return layer_report(spec.name, *found.hit, true, seconds_since(start));
  LayerTail tail{0, top_level_group, "layer " + spec.name, ""};  // within the budget: one layer
  return layer_report(spec.name, finish_layer(c, std::move(entries), key, std::move(found), std::move(tail)),
                      seconds_since(start));
}

class CopyKind final : public LayerKind {
 public:
  const char* name() const override { return "copy"; }
  bool handles(const LayerSpec&) const override { return true; }
  LayerReport build(const LayerContext& c, Digest& key_out) const override { return build_copy_layer(c, key_out); }
  // It reads the layers below only for the duplicate check, in finish_layer().
  bool reads_below(const LayerSpec&, const BuildOptions&) const override { return false; }
};

}  // namespace

const LayerKind& copy_layer_kind() {
  static const CopyKind kind;
  return kind;
}

}  // namespace sb
