// The values a build is made of: its options and services, a layer's
// report, a build's result. Every layer kind, the lock and the caches read
// these; the driver's functions are in build.hpp (which includes this), so
// that no file of pipeline/ needs the driver to know its types.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fetch/fetcher.hpp"
#include "image/layout.hpp"
#include "image/provenance.hpp"
#include "layer/layer.hpp"
#include "pipeline/base_image.hpp"
#include "pipeline/point_inputs.hpp"
#include "recipe/recipe.hpp"
#include "sandbox/sandbox.hpp"
#include "store/store.hpp"
#include "util/http.hpp"
#include "util/status.hpp"

namespace sb {

class RegistryCache;
class PendingLayer;

enum class OutputFormat { OciLayout, DockerArchive };

// The side effects a build is handed rather than makes itself: tests pass
// fakes that record what they were asked (STYLE.md, "Side effects behind
// interfaces"). The defaults are the real ones.
struct BuildServices {
  // Makes each layer's fetcher, with the options its kind chose.
  fetch::FetcherFactory make_fetcher = fetch::make_fetcher;
  sandbox::Sandbox* sandbox = nullptr;  // where build steps run; null: a Linux sandbox for each layer
  // Where registry requests go (base images, --cache-from/--cache-to, pushes);
  // null: the network.
  std::shared_ptr<http::Transport> registry;
  // Where pip index pages are read from (what pip layers resolve against); null: the network.
  std::shared_ptr<http::Transport> index;
  // The time, for the seconds that reports show (never for anything hashed).
  std::function<std::chrono::steady_clock::time_point()> now = std::chrono::steady_clock::now;
  // The date, for the provenance's startedOn and finishedOn (a document
  // beside the image; never for anything in it).
  std::function<std::chrono::system_clock::time_point()> date = std::chrono::system_clock::now;
};

struct BuildOptions {
  fs::path output;                         // a layout directory or a tarball
  OutputFormat format = OutputFormat::OciLayout;
  LayerOptions layer;
  std::optional<int64_t> source_date_epoch;  // --source-date-epoch: overrides all
  std::vector<std::string> tags;           // --tag: replaces the recipe's tags
  // The matrix point's ${vars} (resolve::point_variables), for build steps' environment.
  std::map<std::string, std::string> variables;
  BuildServices services;                  // the fetcher factory, the sandbox, the clock
  PointInputs point;                       // what the plan chose here, and its catalog
  // Labels stackbuild computes (pipeline/labels.hpp); they win over the recipe's.
  std::map<std::string, std::string> labels;
  BaseImageOptions base;                   // the recipe's `from:` image (pipeline/base_image.hpp)
  // --layer-budget: a layer with more content bytes is split (layer/split.hpp);
  // overrides the recipe's layer_budget; 0 = never split.
  std::optional<uint64_t> layer_budget;
  // --cache-from: where to look for a layer the store lacks (pipeline/registry_cache.hpp).
  const RegistryCache* cache_from = nullptr;
  // --allow-host-paths: `copy:` may read any host path, not only the
  // recipe's directory (or its git repository).
  bool allow_host_paths = false;
  // --write-ahead: layers of the image written at once beside the build,
  // which goes on to fetch and stage the layers above (pipeline/layer_writes.hpp);
  // 0: each layer is written before the next begins; none: default_write_ahead().
  std::optional<size_t> write_ahead;
};

// 8 GiB: under the 10 GB layer cap common registries set.
constexpr uint64_t kDefaultLayerBudget = 8ull << 30;

// The budget in force: --layer-budget, else the recipe's, else the default.
uint64_t layer_budget(const Recipe& recipe, const BuildOptions& options);

struct LayerReport {
  std::string name;
  Layer layer;
  bool cached = false;
  double seconds = 0;
  std::vector<Layer> more;  // a layer split over the budget: its further parts, in order
  std::optional<Digest> key;  // its cache key (pipeline/layer_cache.hpp), for a registry cache
  // A layer compiled from a source tree, or keeping one: its label's value (source_tree.hpp, source_label).
  std::string source;
  // The image history's words for it after the layer's name ("source at
  // /opt/pytorch"); "": its kind's name.
  std::string history;
  // What it was made from, for the provenance (pipeline/provenance.hpp): the
  // packages, wheels and archives its kind resolved, cached or not. A source
  // tree is in `source`; a copy layer's files and what build steps fetch are
  // not listed.
  std::vector<provenance::Resource> inputs;
  // Being written beside the build (pipeline/layer_writes.hpp): `layer` and
  // `more` are filled in when build_image settles it, in recipe order.
  std::shared_ptr<PendingLayer> pending;
};

struct BuildResult {
  std::vector<TaggedImage> images;
  std::vector<LayerReport> layers;
  int64_t source_date_epoch = 0;
  std::vector<std::string> warnings;  // e.g. a recipe label replaced by a computed one
  std::string base;  // the base image as REF@DIGEST; "" without `from:`
};

}  // namespace sb
