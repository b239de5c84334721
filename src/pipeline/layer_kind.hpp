// Internal to pipeline/: the kinds of layer a recipe can declare, behind one
// interface. build_image (build.cpp) asks layer_kind_of(spec) and calls its
// build() with one LayerContext; `stackbuild lock` and `build --locked`
// (lock.cpp) ask each kind for its section of <recipe>.lock with one
// LockContext. Neither includes a kind's header.
//
// A layer's store records (apt's dpkg state, a source tree's commit) are its
// kind's too: each kind names them (record_kinds()), and the registry cache
// moves them with the layer without knowing the kinds.
//
// Each kind lives in its own file (copy_layer.cpp, apt_layer.cpp,
// pip_layer.cpp, redist_layer.cpp, step_layer.cpp) and is registered by one
// line in layer_kinds.cpp. A new kind is one new file plus that line
// (docs/layers.md, "Adding a layer kind").
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipeline/build_options.hpp"
#include "pipeline/layer_cache.hpp"

namespace sb {

// Everything a layer builder reads, as one value.
struct LayerContext {
  const Recipe& recipe;                      // with the point's ${vars} expanded
  const LayerSpec& spec;                     // the layer to build
  const Digest& parent_key;                  // the cache key of the chain below
  const std::vector<Layer>& below;           // the image's layers so far (a base image's first)
  const std::vector<std::string>& below_names;  // theirs, for reports
  const Store& store;
  const BuildOptions& options;               // with the point's inputs (options.point)
  int64_t epoch;                             // SOURCE_DATE_EPOCH
  Status& status;
  // Where the layer may be written beside the build (pipeline/layer_writes.hpp);
  // nullptr: written before build() returns. `below` may lack the layers
  // still being written unless the kind reads_below(spec, options).
  LayerWrites* writes = nullptr;
};

// A point's layers as the lockfile sees them: what `stackbuild lock` pins
// and `build --locked` checks the pins against.
struct LockContext {
  const Recipe& recipe;                                 // with the point's ${vars} expanded
  const std::map<std::string, std::string>& variables;  // the point's ${vars}
  const PointInputs& point;                             // what the plan chose, and its catalog
  const BuildServices& services;                        // the fetcher factory and the index transport
};

// A store record a layer carries besides its blobs, which a registry cache
// (registry_cache.cpp) moves with the layer and checks before it enters a
// store.
struct RecordKind {
  const char* kind;  // the store's record kind ("apt-state")
  // Its key for the layer with cache key `layer_key` and blobs `parts`;
  // none: such a layer has none.
  std::optional<Digest> (*key)(const Digest& layer_key, const std::vector<Layer>& parts);
  // Throws sb::Error when `value` does not read as its reader reads it.
  void (*check)(const std::string& value);
};

// The entry --locked pins for `layer` in the lock section `section` ("pip")
// of the point (PointInputs::lock), or none.
std::optional<nlohmann::json> locked_entry(const PointInputs& point, const char* section, const std::string& layer);

// What a layer will download, known ahead (LayerKind::fetch_ahead).
struct AheadFetch {
  fetch::FetchOptions options;  // as the kind's own fetches of them are made
  std::vector<fetch::FetchItem> items;
};

class LayerKind {
 public:
  virtual ~LayerKind() = default;
  // A word for the image history ("stackbuild: layer 'x' (apt)") and reports.
  virtual const char* name() const = 0;
  // Whether `spec` is a layer of this kind (asked in registration order).
  virtual bool handles(const LayerSpec& spec) const = 0;
  // Builds the layer, or takes it from the cache; `key_out` is its cache key,
  // which keys the layer above.
  virtual LayerReport build(const LayerContext& context, Digest& key_out) const = 0;
  // The records its layers may leave in the store besides their blobs.
  virtual std::vector<RecordKind> record_kinds() const { return {}; }
  // Whether build() of `spec` reads the layers below before it writes (apt's
  // dpkg state, pip's installed projects when it resolves, build steps'
  // root): build_image then settles every layer still being written first.
  // A kind that answers false reads `below` only through finish_layer().
  virtual bool reads_below(const LayerSpec& spec, const BuildOptions& options) const { return true; }
  // What building `spec` will download, known before it is built: the files
  // options.point.lock pins for it that `store` lacks, with their URLs and
  // sha256, and the options its own fetches use. build_points fetches them
  // ahead (pipeline/fetch_ahead.hpp) while earlier layers and points are
  // built. No items: the kind pins nothing, or nothing for this layer. May
  // read index pages (a pinned wheel names a file, not a URL) and local
  // files (apt: the machine's repositories, for a lockfile names those by
  // suite); `recipe` is the point's.
  virtual AheadFetch fetch_ahead(const Recipe& recipe, const LayerSpec& spec, const BuildOptions& options,
                                 const Store& store, Status& status) const {
    return {};
  }

  // The lockfile. A kind that resolves what it fetches (packages, wheels,
  // archives) pins it in one section of each point's entry, named here
  // ("apt"); nullptr: the kind pins nothing, and is asked nothing below.
  virtual const char* lock_section() const { return nullptr; }
  // For `stackbuild lock`: the section, {"<layer>": ENTRY} for each layer of
  // the recipe this kind handles, resolved now; what must be measured is
  // fetched into `store`.
  virtual nlohmann::json lock(const LockContext& context, const Store& store, Status& status) const {
    return nlohmann::json::object();
  }
  // For `build --locked`: "" when `entry` (the section's ENTRY of `spec`)
  // was written for what the layer asks now; else what changed, or "a
  // malformed entry: ...". Reads only the context: nothing is fetched.
  virtual std::string lock_mismatch(const LockContext& context, const LayerSpec& spec,
                                    const nlohmann::json& entry) const {
    return "";
  }
};

// For LayerReport::inputs (the provenance, pipeline/provenance.hpp): a
// package, wheel or archive a layer of kind `kind` ("apt", "pip", "redist")
// was made from: its file name, its Package URL, where it was fetched from
// (`url`, its login left out; "" when the store had it by digest) and its
// sha256 when known. Defined in provenance.cpp.
provenance::Resource layer_input(const char* kind, const std::string& layer, const std::string& file,
                                 const std::string& purl, const std::string& url, const std::optional<Digest>& sha256);

// A kind's lock section, as BuilderKind takes it: its name and functions
// (none: the kind pins nothing).
struct KindLock {
  const char* section = nullptr;
  nlohmann::json (*lock)(const LockContext&, const Store&, Status&) = nullptr;
  std::string (*mismatch)(const LockContext&, const LayerSpec&, const nlohmann::json&) = nullptr;
};

// A kind made of functions: a test, a builder, and, for a kind that pins its
// inputs, its lock section's name and functions, and the records its layers
// leave (the apt, pip, redist and steps kinds are written so).
class BuilderKind final : public LayerKind {
 public:
  using Handles = bool (*)(const LayerSpec&);
  using Build = LayerReport (*)(const LayerContext&, Digest&);
  // Whether it reads the layers below (LayerKind::reads_below); none: always.
  using ReadsBelow = bool (*)(const LayerSpec&, const BuildOptions&);
  // What it will download (LayerKind::fetch_ahead); none: nothing known ahead.
  using FetchAhead = AheadFetch (*)(const Recipe&, const LayerSpec&, const BuildOptions&, const Store&, Status&);
  BuilderKind(const char* name, Handles handles, Build build, KindLock lock = {},
              std::vector<RecordKind> records = {}, ReadsBelow reads_below = nullptr,
              FetchAhead fetch_ahead = nullptr)
      : name_(name), handles_(handles), build_(build), lock_(lock), records_(std::move(records)),
        reads_below_(reads_below), fetch_ahead_(fetch_ahead) {}
  bool reads_below(const LayerSpec& spec, const BuildOptions& options) const override {
    return !reads_below_ || reads_below_(spec, options);
  }
  AheadFetch fetch_ahead(const Recipe& recipe, const LayerSpec& spec, const BuildOptions& options, const Store& store,
                         Status& status) const override {
    return fetch_ahead_ ? fetch_ahead_(recipe, spec, options, store, status) : AheadFetch{};
  }
  const char* name() const override { return name_; }
  bool handles(const LayerSpec& spec) const override { return handles_(spec); }
  LayerReport build(const LayerContext& c, Digest& key_out) const override { return build_(c, key_out); }
  std::vector<RecordKind> record_kinds() const override { return records_; }
  const char* lock_section() const override { return lock_.section; }
  nlohmann::json lock(const LockContext& c, const Store& store, Status& status) const override {
    return lock_.lock ? lock_.lock(c, store, status) : nlohmann::json::object();
  }
  std::string lock_mismatch(const LockContext& c, const LayerSpec& spec, const nlohmann::json& entry) const override {
    return lock_.mismatch ? lock_.mismatch(c, spec, entry) : "";
  }

 private:
  const char* name_;
  Handles handles_;
  Build build_;
  KindLock lock_;
  std::vector<RecordKind> records_;
  ReadsBelow reads_below_;
  FetchAhead fetch_ahead_;
};

// What every kind does last with a layer its key did not find in the cache
// (`found` holds the key's lock): `entries` checked for libraries the layers
// below have too (pipeline/duplicate_libraries.hpp, unless check_duplicates
// is false), written as one layer or as parts over `budget` grouped by
// `group_of`, recorded under `key`, then `after(parts)` (the kind's own
// records). With c.writes, and unless the layer's `duplicates:` policy
// rewrites the entries (lower, upper), the write runs
// there and the rest when build_image settles the layer, against the layers
// below as they are by then; `hold` (the staging directory the entries'
// files are in) and the lock are kept until then.
struct LayerTail {
  uint64_t budget = 0;
  GroupFn group_of;
  std::string label, split_by;  // "layer app (3 wheels)", "by distribution"
  bool check_duplicates = true;
  std::function<void(const std::vector<Layer>& parts)> after;
  std::shared_ptr<void> hold;
};
LayerParts finish_layer(const LayerContext& c, EntryMap entries, const Digest& key, LayerLookup found,
                        LayerTail tail);
// Whether the layer's `duplicates:` policy changes its entries (lower,
// upper): its duplicate check, and so its write, needs the layers below.
bool duplicates_rewrite(const LayerSpec& spec);

// The registered kinds, in the order they are asked (layer_kinds.cpp); the
// copy kind last, taking any layer the others do not.
const std::vector<const LayerKind*>& layer_kinds();
const LayerKind& layer_kind_of(const LayerSpec& spec);
// Every record a layer may carry: the layer writer's (duplicate libraries),
// then each kind's, each kind of record once.
const std::vector<RecordKind>& all_record_kinds();

// The kinds, one a file.
const LayerKind& apt_layer_kind();     // apt: Debian/Ubuntu packages (apt_layer.cpp)
const LayerKind& pip_layer_kind();     // pip: Python wheels (pip_layer.cpp)
const LayerKind& redist_layer_kind();  // redist: NVIDIA's redist archives (redist_layer.cpp)
const LayerKind& step_layer_kind();    // build: steps run in the sandbox (step_layer.cpp)
const LayerKind& copy_layer_kind();    // copy: local files (copy_layer.cpp)
// Not asked by layer_kind_of(): build_image asks it for a layer of another
// kind with `keep_source:`, and it builds the source's layer above that one.
const LayerKind& kept_source_layer_kind();  // source: the tree a package layer keeps (kept_source_layer.cpp)
// Not asked by layer_kind_of() either: build_image asks it once, after the
// last layer of an image with pip layers (unless `pip_constraint: false`).
const LayerKind& pip_constraint_layer_kind();  // /etc/pip/constraint.txt (pip_layer.cpp)
constexpr const char* kPipConstraintFile = "/etc/pip/constraint.txt";

}  // namespace sb
