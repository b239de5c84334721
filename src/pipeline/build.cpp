#include "pipeline/build.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <optional>

#include <nlohmann/json.hpp>

#include "image/sbom.hpp"
#include "layer/split.hpp"
#include "layer/write.hpp"
#include "pipeline/duplicate_libraries.hpp"
#include "pipeline/labels.hpp"
#include "pipeline/layer_cache.hpp"
#include "pipeline/layer_kind.hpp"
#include "pipeline/layer_writes.hpp"
#include "pipeline/recipe_paths.hpp"
#include "pipeline/source_tree.hpp"
#include "util/error.hpp"
#include "util/status.hpp"

namespace sb {

namespace {

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

// The build's options with the layer's `compression:` in place of the build's.
BuildOptions with_compression(const BuildOptions& options, const LayerSpec& spec) {
  BuildOptions o = options;
  try {
    o.layer.compression = parse_compression(spec.compression);
  } catch (const Error& e) {
    throw InputError(spec.at("compression"), e.what());
  }
  // A level is the build's for its compression; another one takes its default.
  if (is_gzip_family(o.layer.compression) != is_gzip_family(options.layer.compression)) o.layer.level = -1;
  return o;
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
  BaseImageOptions base_options = options.base;
  if (options.services.registry) base_options.session.transport = options.services.registry;
  std::optional<BaseImage> base = load_base_image(recipe, store, base_options, status);
  if (base) key = base->cache_key(), layers = base->layers, history = base->history, result.base = base->pinned;
  std::vector<std::string> names;  // of `layers`, for the duplicate-library report
  for (size_t i = 0; i < layers.size(); ++i) names.push_back("base #" + std::to_string(i + 1));
  std::vector<DuplicateLibrary> duplicates;
  // The source trees layers were compiled from or keep, as labels for the SBOM.
  std::map<std::string, std::string> source_labels;

  // 3. Layers, bottom to top, each keyed by its parent, spec and inputs. A
  //    layer may still be being written when the next is built (`writes`,
  //    pipeline/layer_writes.hpp); it is placed in the image, in order, once
  //    settled: before a kind that reads the layers below, and at the end.
  const size_t ahead = options.write_ahead.value_or(default_write_ahead());
  std::optional<LayerWrites> writes;
  if (ahead > 0) writes.emplace(ahead);
  struct Unplaced {
    size_t report;  // in result.layers
    const LayerKind* kind;
    const LayerSpec* spec;
    Digest key;  // the chain key after it
  };
  std::vector<Unplaced> unplaced;
  auto place = [&](const Unplaced& u) {
    LayerReport& done = result.layers[u.report];
    const LayerSpec& spec = *u.spec;
    if (done.pending) {
      try {
        std::vector<Layer> parts = done.pending->settle(layers, names);
        done.seconds += done.pending->waited();
        done.layer = parts.front();
        done.more.assign(parts.begin() + 1, parts.end());
      } catch (Error& e) {
        e.add_trace("while building layer '" + spec.name + "' (" + spec.where.str() + ")");
        throw;
      }
      done.pending.reset();
    }
    if (!done.key) done.key = u.key;  // its records' key: the chain key, unless the kind keys them itself
    // Every kind splits over the budget (pipeline/layer_cache.hpp: store_layers).
    if (!done.source.empty()) source_labels[std::string(sbom::kSourceLabelPrefix) + spec.name] = done.source;
    const size_t n = 1 + done.more.size();
    // Libraries a lower layer has too, as found when the layer was written (again when it is cached).
    for (auto& d : duplicates_of(store, u.key)) {
      status.message(Level::Warning, "layer " + spec.name + ": " + describe(d) + "; " + duplicate_outcome(d));
      duplicates.push_back(std::move(d));
    }
    const std::string what = done.history.empty() ? u.kind->name() : done.history;
    for (size_t i = 1; i <= n; ++i) {
      const std::string part = n == 1 ? "" : "part " + std::to_string(i) + " of " + std::to_string(n);
      layers.push_back(i == 1 ? done.layer : done.more[i - 2]);
      names.push_back(part.empty() ? done.name : done.name + " (" + part + ")");
      history.push_back({"stackbuild: layer '" + spec.name + "' (" + what + (part.empty() ? "" : ", " + part) + ")",
                         spec.comment, false});
    }
  };
  auto settle = [&] {  // every layer built so far, placed in order
    while (!unplaced.empty()) {
      Unplaced u = unplaced.front();
      unplaced.erase(unplaced.begin());
      try {
        place(u);
      } catch (...) {
        unplaced.clear();  // the layers above it are not placed on an image without it
        throw;
      }
    }
  };
  try {
    for (const auto& spec : recipe.layers) {
      if (spec.from_source() && spec.build.run.empty())
        throw InputError(spec.at("from"), "layer '" + spec.name + "' is built from source and has no 'build:' steps",
                         "give it 'build: {run: [...]}': the commands that compile the tree");
      if (spec.configure && &layer_kind_of(spec) != &apt_layer_kind())
        throw InputError(spec.at("configure"), "layer '" + spec.name + "': 'configure' runs dpkg --configure -a "
                                               "after the packages of an apt layer, and this layer installs none");
      // The host files the layer names: the recipe's own unless --allow-host-paths
      // (copy: sources are checked as the copy kind reads them).
      if (!options.allow_host_paths) {
        if (!spec.source.path.empty())
          check_recipe_path(spec.source.base,
                            fs::path(spec.source.path).is_absolute() ? fs::path(spec.source.path)
                                                                     : spec.source.base / spec.source.path,
                            spec.source.path, spec.source.where, "source.path", "builds from");
        for (const auto& p : spec.patches)  // relative to the recipe that names it (p.where's file)
          check_recipe_path(fs::path(p.where.file).parent_path(), p.file, p.path, p.where, "patch", "applies");
      }
      // The layer's kind builds it (pipeline/layer_kind.hpp); with `keep_source:`
      // the kept-source kind builds the source's layer above it, its check made
      // before the packages are fetched.
      std::vector<const LayerKind*> kinds{&layer_kind_of(spec)};
      if (kept_source_layer_kind().handles(spec)) {
        try {
          (void)kept_source(spec, options.variables, options.point);
        } catch (Error& e) {
          e.add_trace("while building layer '" + spec.name + "' (" + spec.where.str() + ")");
          throw;
        }
        kinds.push_back(&kept_source_layer_kind());
      }
      // A layer's own `compression:` overrides the build's (docs/recipes.md).
      std::optional<BuildOptions> own;
      if (!spec.compression.empty()) own = with_compression(options, spec);
      const BuildOptions& layer_options = own ? *own : options;
      for (const LayerKind* kind : kinds) {
        // What reads the layers below sees them all: every layer the kind
        // reads, and, unless the layer's write may go ahead (finish_layer()),
        // the duplicate check's.
        if (!writes || kind->reads_below(spec, layer_options) || duplicates_rewrite(spec)) settle();
        try {
          result.layers.push_back(kind->build(
              {recipe, spec, key, layers, names, store, layer_options, epoch, status, writes ? &*writes : nullptr}, key));
        } catch (Error& e) {
          e.add_trace("while building layer '" + spec.name + "' (" + spec.where.str() + ")");
          throw;
        }
        unplaced.push_back({result.layers.size() - 1, kind, &spec, key});
      }
    }
  } catch (...) {
    // The layers written below the one that failed are still recorded, as
    // they are when each is written before the next begins.
    try {
      settle();
    } catch (...) {
    }
    throw;
  }
  settle();

  if (!duplicates.empty()) status.message(Level::Warning, duplicate_summary(duplicates));

  // 4. With pip layers: /etc/pip/constraint.txt pinning the image's Python
  //    packages, in a layer on top, and PIP_CONSTRAINT naming it (NGC's
  //    images do this; `pip_constraint: false` turns it off).
  const LayerSpec* last_pip = nullptr;
  for (const auto& spec : recipe.layers)
    if (&layer_kind_of(spec) == &pip_layer_kind()) last_pip = &spec;
  const bool constrained = recipe.pip_constraint && last_pip;
  if (constrained) {
    const LayerKind& kind = pip_constraint_layer_kind();
    result.layers.push_back(kind.build({recipe, *last_pip, key, layers, names, store, options, epoch, status}, key));
    LayerReport& done = result.layers.back();
    done.key = key;
    layers.push_back(done.layer);
    names.push_back(done.name);
    history.push_back({"stackbuild: " + done.history, "", false});
  }

  // 5. Image documents: one image, under every tag.
  ImageConfig config = base ? inherit_config(base->config, image_config(recipe), recipe) : image_config(recipe);
  if (constrained && std::none_of(config.env.begin(), config.env.end(),
                                  [](const std::string& e) { return e.starts_with("PIP_CONSTRAINT="); }))
    config.env.push_back(std::string("PIP_CONSTRAINT=") + kPipConstraintFile);
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
