#include "pipeline/build.hpp"

#include <chrono>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "image/sbom.hpp"
#include "layer/split.hpp"
#include "layer/write.hpp"
#include "pipeline/apt_layer.hpp"
#include "pipeline/duplicate_libraries.hpp"
#include "pipeline/kept_source_layer.hpp"
#include "pipeline/labels.hpp"
#include "pipeline/layer_cache.hpp"
#include "pipeline/pip_layer.hpp"
#include "pipeline/redist_layer.hpp"
#include "pipeline/step_layer.hpp"
#include "util/error.hpp"
#include "util/status.hpp"

namespace sb {

namespace {

// Where a recipe's `copy:` sources may be: the top of the git repository
// its directory is in (the nearest directory above with a .git), else that
// directory. Resolved (no symlinks).
fs::path copy_confinement(const fs::path& recipe_dir, bool& repository) {
  std::error_code ec;
  const fs::path given = recipe_dir.empty() ? fs::path(".") : recipe_dir;  // a recipe named without a directory
  fs::path dir = fs::weakly_canonical(fs::absolute(given), ec);
  if (ec) dir = fs::absolute(given).lexically_normal();
  for (fs::path p = dir;; p = p.parent_path()) {
    if (fs::exists(fs::symlink_status(p / ".git", ec))) {
      repository = true;
      return p;
    }
    if (p == p.parent_path()) break;
  }
  repository = false;
  return dir;
}

// A recipe reads only its own files (DESIGN.md, "Trust boundary": a forked
// recipe is trusted for what it names inside its repository, not for
// ~/.docker/config.json): `src`, every symlink on its way and at its end
// resolved, must be inside copy_confinement(), unless --allow-host-paths.
void check_copy_source(const CopySpec& c, const fs::path& src) {
  bool repository = false;
  fs::path top = copy_confinement(c.base, repository);
  std::error_code ec;
  fs::path real = fs::canonical(src, ec);
  if (ec)
    throw InputError(c.where, "copy source '" + c.src + "' cannot be resolved (" + ec.message() + ")",
                     "a copy source is resolved, symlinks and all, to check it is the recipe's own");
  fs::path rel = real.lexically_relative(top);
  if (!rel.empty() && *rel.begin() != "..") return;
  throw InputError(c.where,
                   "copy source '" + c.src + "' is " + real.string() + ", outside the recipe's " +
                       (repository ? "repository " : "directory ") + top.string(),
                   "a recipe copies only its own files (a symlink out of them counts as out); to copy host "
                   "files on purpose, pass --allow-host-paths to `stackbuild build`");
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
      .field("spec", nlohmann::json(spec).dump())
      .field("compression", to_string(lo.compression))
      .field("level", lo.level)
      .field("epoch", epoch)
      .field("duplicates", to_string(duplicate_policy(spec)));
  hash_entries(entries, key);
  return key.finish();
}

ImageConfig image_config(const Recipe& r) {
  ImageConfig c;
  c.architecture = r.architecture;
  for (const auto& [k, v] : r.config.env) c.env.push_back(k + "=" + v.value);
  c.entrypoint = r.config.entrypoint;
  c.cmd = r.config.cmd;
  c.working_dir = r.config.workdir;
  c.user = r.config.user;
  c.labels = r.config.labels;
  c.exposed_ports = r.config.ports;
  c.stop_signal = r.config.stop_signal;
  return c;
}

ImageAnnotations annotations(const Recipe& r) {
  auto get = [&](const char* k) {
    auto it = r.annotations.find(k);
    return it == r.annotations.end() ? std::string() : it->second;
  };
  ImageAnnotations a{get("title"), get("version"), get("source"), get("revision"), get("description")};
  if (a.title.empty()) a.title = r.stack;
  return a;
}

}  // namespace

uint64_t layer_budget(const Recipe& recipe, const BuildOptions& options) {
  if (options.layer_budget) return *options.layer_budget;
  return recipe.layer_budget.value_or(kDefaultLayerBudget);
}

int64_t choose_source_date_epoch(const Recipe& recipe, std::optional<int64_t> flag) {
  if (flag) return *flag;
  if (recipe.source_date_epoch) return *recipe.source_date_epoch;
  if (const char* env = getenv("SOURCE_DATE_EPOCH"); env && *env) {
    char* end = nullptr;
    long long v = strtoll(env, &end, 10);
    if (*end || v < 0) throw Error("SOURCE_DATE_EPOCH='" + std::string(env) + "' is not a non-negative integer");
    return v;
  }
  return 0;
}

namespace {

// A copy layer over the budget, as several layers split by top-level path
// (layer/split.hpp). Its key adds the budget to the whole layer's key.
LayerReport build_split_copy_layer(const LayerSpec& spec, EntryMap entries, const Digest& whole_key,
                                   const std::vector<Layer>& below, const std::vector<std::string>& below_names,
                                   uint64_t budget, const Store& store, const BuildOptions& options, Status& status,
                                   std::chrono::steady_clock::time_point start, Digest& key_out) {
  const Digest key = KeyHasher()
                         .field("stackbuild-split-layer", "1")
                         .field("layer", whole_key.str())
                         .field("budget", static_cast<int64_t>(budget))
                         .finish();
  key_out = key;
  auto found = find_layers(store, key, spec.name, status, options.cache_from);
  if (found.hit) return layer_report(spec.name, *found.hit, true, seconds_since(start));
  check_duplicate_libraries(spec, below, below_names, store, entries, key);  // pipeline/duplicate_libraries.hpp
  auto parts = store_layers(entries, store, options.layer, key, budget, top_level_group, status,
                            "layer " + spec.name, "by top-level path");
  return layer_report(spec.name, parts, false, seconds_since(start));
}

// One copy layer: from the cache when its key is there, else written now.
// The key covers the parent's key, so a changed lower layer rebuilds the rest.
LayerReport build_copy_layer(const Recipe& recipe, const LayerSpec& spec, const Digest& key_parent,
                             const std::vector<Layer>& below, const std::vector<std::string>& below_names,
                             const Store& store, const BuildOptions& options, int64_t epoch, Status& status,
                             Digest& key_out) {
  auto start = std::chrono::steady_clock::now();
  EntryMap entries = copy_entries(recipe, spec, epoch, options.allow_host_paths);
  Digest key = layer_key(key_parent, spec, options.layer, epoch, entries);
  key_out = key;
  const uint64_t budget = layer_budget(recipe, options);
  if (budget > 0 && content_bytes(entries) > budget)
    return build_split_copy_layer(spec, std::move(entries), key, below, below_names, budget, store, options, status,
                                  start, key_out);
  auto found = find_layers(store, key, spec.name, status, options.cache_from);
  if (found.hit) return layer_report(spec.name, *found.hit, true, seconds_since(start));
  check_duplicate_libraries(spec, below, below_names, store, entries, key);  // pipeline/duplicate_libraries.hpp
  Layer l = store_layer(entries, store, options.layer, key, status, "layer " + spec.name);
  return LayerReport{spec.name, l, false, seconds_since(start), {}, {}};
}

}  // namespace

BuildResult build_image(const Recipe& recipe, const Store& store, const BuildOptions& options, Status& status) {
  BuildResult result;
  const int64_t epoch = choose_source_date_epoch(recipe, options.source_date_epoch);
  result.source_date_epoch = epoch;

  // 1. Tags, checked first so that a bad one costs no work.
  std::vector<std::string> tags = options.tags.empty() ? recipe.tags : options.tags;
  for (const auto& t : tags) {
    try {
      validate_tag(t);
    } catch (Error& e) {
      if (options.tags.empty() && recipe.tags_where.known()) throw InputError(recipe.tags_where, e.what());
      throw Error(e.what(), ErrorKind::Usage);
    }
  }

  // 2. The base image (`from:`, pipeline/base_image.cpp): its layers go first
  //    and its manifest digest starts the chain of cache keys.
  Digest key = Digest::of_bytes("");
  std::vector<Layer> layers;
  std::vector<HistoryEntry> history;
  std::optional<BaseImage> base = load_base_image(recipe, store, options.base, status);
  if (base) key = base->cache_key(), layers = base->layers, history = base->history, result.base = base->pinned;
  std::vector<std::string> names;  // of `layers`, for the duplicate-library report
  for (size_t i = 0; i < layers.size(); ++i) names.push_back("base #" + std::to_string(i + 1));
  std::vector<DuplicateLibrary> duplicates;
  // The source trees layers were compiled from or keep, as labels for the SBOM.
  std::map<std::string, std::string> source_labels;

  // 3. Layers, bottom to top, each keyed by its parent, spec and inputs.
  for (const auto& spec : recipe.layers) {
    const bool steps = !spec.build.empty() && !spec.copies();
    if (spec.from_source() && spec.build.run.empty())
      throw InputError(spec.at("from"), "layer '" + spec.name + "' is built from source and has no 'build:' steps",
                       "give it 'build: {run: [...]}': the commands that compile the tree");
    if (spec.configure && !is_apt_layer(spec))
      throw InputError(spec.at("configure"), "layer '" + spec.name + "': 'configure' runs dpkg --configure -a "
                                             "after the packages of an apt layer, and this layer installs none");
    // `keep_source:` beside packages: known (or refused) before the packages are fetched.
    std::optional<LayerSource> kept;
    try {
      kept = kept_source(spec, options.variables, options.point);
      if (is_apt_layer(spec))  // Debian/Ubuntu packages (issue 4): pipeline/apt_layer.cpp
        result.layers.push_back(build_apt_layer(recipe, spec, key, layers, names, store, options, epoch, status, key));
      else if (is_pip_layer(spec))  // Python wheels (issue 5): pipeline/pip_layer.cpp
        result.layers.push_back(build_pip_layer(recipe, spec, key, layers, names, store, options, epoch, status, key));
      else if (is_redist_layer(spec))  // NVIDIA redist archives (issue 5): pipeline/redist_layer.cpp
        result.layers.push_back(build_redist_layer(recipe, spec, key, layers, names, store, options, epoch, status, key));
      else if (steps)
        result.layers.push_back(build_step_layer(recipe, spec, key, layers, names, store, options, epoch, status, key));
      else
        result.layers.push_back(build_copy_layer(recipe, spec, key, layers, names, store, options, epoch, status, key));
    } catch (Error& e) {
      e.add_trace("while building layer '" + spec.name + "' (" + spec.where.str() + ")");
      throw;
    }
    result.layers.back().key = key;
    const char* kind = is_apt_layer(spec)      ? "apt"
                       : is_pip_layer(spec)    ? "pip"
                       : is_redist_layer(spec) ? "redist"
                       : steps                 ? "build"
                                               : "copy";
    // Every kind splits over the budget (pipeline/layer_cache.hpp: store_layers).
    const LayerReport& done = result.layers.back();
    layers.push_back(done.layer);
    if (!done.source.empty())
      source_labels[std::string(sbom::kSourceLabelPrefix) + spec.name] = done.source;
    const size_t n = 1 + done.more.size();
    for (size_t i = 1; i <= n; ++i)
      names.push_back(n == 1 ? spec.name : spec.name + " (part " + std::to_string(i) + " of " + std::to_string(n) + ")");
    // Libraries a lower layer has too, as found when the layer was written (again when it is cached).
    for (auto& d : duplicates_of(store, key)) {
      status.message(Level::Warning, "layer " + spec.name + ": " + describe(d) + "; " + duplicate_outcome(d));
      duplicates.push_back(std::move(d));
    }
    auto created_by = [&](size_t i) {
      return "stackbuild: layer '" + spec.name + "' (" + kind +
             (n == 1 ? std::string() : ", part " + std::to_string(i) + " of " + std::to_string(n)) + ")";
    };
    history.push_back({created_by(1), spec.comment, false});
    for (size_t i = 0; i < done.more.size(); ++i) {
      layers.push_back(done.more[i]);
      history.push_back({created_by(i + 2), spec.comment, false});
    }
    if (!kept) continue;
    // The kept source, in a layer of its own above (pipeline/kept_source_layer.hpp).
    try {
      result.layers.push_back(build_kept_source_layer(spec, *kept, key, store, options,
                                                      layer_budget(recipe, options), epoch, status, key));
    } catch (Error& e) {
      e.add_trace("while building layer '" + spec.name + "' (" + spec.where.str() + ")");
      throw;
    }
    // Its report keeps its own key (kept_source_layer.hpp); `key` is now the chain key.
    source_labels[std::string(sbom::kSourceLabelPrefix) + spec.name] =
        source_label(spec, *kept, options.variables, false,
                     recorded_source_commit(store, *result.layers.back().key));
    const LayerReport& src = result.layers.back();
    const size_t m = 1 + src.more.size();
    for (size_t i = 0; i < m; ++i) {
      layers.push_back(i == 0 ? src.layer : src.more[i - 1]);
      names.push_back(spec.name + " (source)");
      history.push_back({"stackbuild: layer '" + spec.name + "' (source at " + kept->image_path +
                             (m == 1 ? std::string() : ", part " + std::to_string(i + 1) + " of " + std::to_string(m)) +
                             ")",
                         spec.comment, false});
    }
  }

  if (!duplicates.empty()) status.message(Level::Warning, duplicate_summary(duplicates));

  // 4. Image documents: one image, under every tag.
  ImageConfig config = base ? inherit_config(base->config, image_config(recipe), recipe) : image_config(recipe);
  result.warnings = merge_labels(config.labels, options.labels);  // pipeline/labels.hpp
  for (auto& w : merge_labels(config.labels, source_labels))
    result.warnings.push_back(std::move(w));
  Image image = make_image(config, layers, history, epoch, annotations(recipe));
  for (const auto& t : tags) result.images.push_back({t, image});
  return result;
}

void write_images(const std::vector<TaggedImage>& images, const std::vector<TaggedIndex>& indexes, const Store& store,
                  const BuildOptions& options) {
  try {
    if (options.format == OutputFormat::OciLayout)
      write_oci_layout(options.output, store, images, indexes);
    else
      write_docker_archive(options.output, store, images);
  } catch (Error& e) {
    e.add_trace("while writing " + options.output.string());
    throw;
  }
}

BuildResult build_recipe(const Recipe& recipe, const Store& store, const BuildOptions& options, Status& status) {
  BuildResult result = build_image(recipe, store, options, status);  // 1-3: tags, layers, image documents
  write_images(result.images, {}, store, options);                    // 4. output
  return result;
}

}  // namespace sb
