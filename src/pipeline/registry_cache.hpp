// The layer cache in a registry (`build --cache-to`, `--cache-from`), so that
// several machines share what one of them built, as BuildKit's registry cache
// does: a CI runner that starts with an empty store fetches the layers another
// runner built instead of building them again.
//
// What is pushed under the cache's tag is an OCI image index (artifactType
// application/vnd.stackbuild.cache.v1) with one manifest per matrix point
// built; each point's manifest is also tagged on its own (point_tag()), so
// that builds of different points writing one cache at the same moment lose
// nothing: a registry has no compare-and-swap on a tag, and the index is
// theirs to overwrite, but no two of them write one point's tag. A point's manifest lists the layer blobs of its image (so the
// registry keeps them, and pushes of the images mount them) and, as its
// config, the point's records: for each layer's cache key, the layers it
// produced (one, or a split layer's parts) and the records a cache hit reads
// besides (companion_records(): an apt layer's dpkg state, a layer's
// duplicate-library findings). Everything in it follows from what was built,
// so a rebuild with nothing changed pushes the same bytes.
//
// A cache is trusted as the images are: it says which blob a key gave. Every
// blob fetched is checked against its digest, its diff_id and size, and a
// record is taken only under the keys companion_records() names, so a
// damaged cache costs a rebuild, never a wrong image. See docs/cache.md.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "layer/layer.hpp"
#include "registry/push.hpp"
#include "registry/reference.hpp"
#include "registry/session.hpp"
#include "store/store.hpp"
#include "util/status.hpp"

namespace sb {

struct LayerReport;

constexpr const char* kCacheArtifactType = "application/vnd.stackbuild.cache.v1";
constexpr const char* kCacheConfigType = "application/vnd.stackbuild.cache.config.v1+json";
constexpr const char* kCacheDefaultTag = "buildcache";

// The reference a --cache-from or --cache-to names: REGISTRY/REPO[:TAG], the
// tag `buildcache` when none is given. Throws Error(ErrorKind::Usage) for a digest
// or a malformed reference, naming `option`.
registry::Reference cache_reference(const std::string& text, const std::string& option);

// The tag of one point's own cache manifest beside the index under `tag`:
// "TAG--" and the first 16 hex digits of sha256(stack "\0" point), TAG cut
// so that the whole has 128 characters at most.
std::string point_tag(const std::string& tag, const std::string& stack, const std::string& point);
// Whether `name` is a point's tag (of any point) of the cache under `tag`.
bool is_point_tag(const std::string& tag, const std::string& name);
// The most tags of a cache's repository --cache-from lists.
constexpr size_t kCacheMaxTags = 10000;

// A record a cache hit reads besides the layer's own.
struct CacheRecord {
  std::string kind;
  Digest key;
  std::string value;
};

// What one cache key gave: its layers and their records.
struct CacheEntry {
  Digest key;
  std::vector<Layer> parts;
  std::vector<CacheRecord> records;
};

// The entries of a point's layers, read from the store (`layers` as
// build_image() reported them, each with its key). Layers without a record
// under their key (a layer of a base image) are left out.
std::vector<CacheEntry> cache_entries(const std::vector<LayerReport>& layers, const Store& store);

// The records a cache hit under `key` that gave `parts` reads: (kind, key).
std::vector<std::pair<std::string, Digest>> companion_records(const Digest& key, const std::vector<Layer>& parts);

// --cache-from: the caches to look in when a layer is not in the store. They
// are read once, on the first miss, so a build that finds everything in the
// store never reaches the registry. A cache is its points' own tags (listed
// with tags/list, where the registry lists tags) and the index under its tag;
// a point found both ways is read from its own tag, which is as new or newer. A cache that is missing or cannot be read
// is a warning: the build goes on without it.
class RegistryCache {
 public:
  // `status` lives as long as this object: its sessions report through it.
  RegistryCache(std::vector<registry::Reference> refs, registry::SessionOptions options, Status& status, int jobs = 3);
  ~RegistryCache();
  RegistryCache(const RegistryCache&) = delete;
  RegistryCache& operator=(const RegistryCache&) = delete;

  // Brings the layers one of the caches holds under `key` into `store`, with
  // their records, and records them under `key` there, as if built here.
  // Returns the cache's name (REGISTRY/REPO:TAG), or nullopt when no cache
  // has the key or (with a warning through `status` naming `layer`) when what
  // it has is wrong or cannot be fetched. Thread-safe.
  std::optional<std::string> import(const Store& store, const Digest& key, const std::string& layer,
                                    Status& status) const;

 private:
  struct Source;
  void load(const Store& store) const;
  std::vector<registry::Reference> refs_;
  registry::SessionOptions options_;
  Status& status_;
  int jobs_;
  mutable std::once_flag loaded_;
  mutable std::vector<std::unique_ptr<Source>> sources_;
  mutable std::map<Digest, std::pair<const Source*, CacheEntry>> entries_;  // the first cache's entry wins
};

// One matrix point's part of a cache.
struct PointCache {
  std::string stack;
  std::string point;  // resolve::Point::id(); "" for a recipe without a matrix
  std::vector<CacheEntry> entries;
};

struct CacheExport {
  Digest index;
  size_t points_kept = 0;  // of other points (and stacks) already in the cache
  registry::PushReport push;
};

// --cache-to: pushes each point of `points` under its own tag (point_tag()),
// then `ref`'s cache index, keeping what the index there holds for other
// stacks, and for the points of `points`' stack that `matrix` (every point id
// of the recipe's matrix) still has; a point built now replaces its old
// manifest. Throws Error ("cache to REF: ...").
CacheExport export_cache(const registry::Reference& ref, const std::vector<PointCache>& points,
                         const std::set<std::string>& matrix, const Store& store,
                         const registry::PushOptions& options, Status& status);

}  // namespace sb
