#include "pipeline/registry_cache.hpp"

#include <algorithm>
#include <atomic>
#include <exception>

#include <nlohmann/json.hpp>

#include "archive/extract.hpp"
#include "image/image.hpp"
#include "pipeline/build_options.hpp"
#include "pipeline/layer_kind.hpp"
#include "registry/pull.hpp"
#include "registry/tags.hpp"
#include "util/error.hpp"
#include "util/threads.hpp"

namespace sb {

using json = nlohmann::json;

namespace {

constexpr int kCacheFormat = 1;
constexpr const char* kStackAnnotation = "dev.stackbuild.stack";
constexpr const char* kPointAnnotation = "dev.stackbuild.point";

// A record's value is checked as its reader will read it before a cache's
// copy enters the store.
// (The layer kinds name their records: pipeline/layer_kind.hpp.)
void check_record(const std::string& kind, const std::string& value) {
  for (const RecordKind& r : all_record_kinds())
    if (kind == r.kind) return r.check(value);
  throw Error("a record of unknown kind '" + kind + "'");
}

json entry_json(const CacheEntry& e) {
  json records = json::array();
  for (const auto& r : e.records) records.push_back({{"kind", r.kind}, {"key", r.key.str()}, {"value", r.value}});
  return {{"key", e.key.str()}, {"layers", e.parts}, {"records", records}};
}

CacheEntry entry_from_json(const json& j) {
  CacheEntry e{Digest::parse(j.at("key").get<std::string>()), {}, {}};
  for (const auto& l : j.at("layers")) e.parts.push_back(layer_from_json(l));
  if (e.parts.empty()) throw Error("the entry for key " + e.key.str() + " lists no layer");
  for (const auto& r : j.value("records", json::array()))
    e.records.push_back({r.at("kind").get<std::string>(), Digest::parse(r.at("key").get<std::string>()),
                         r.at("value").get<std::string>()});
  return e;
}

std::string annotation(const json& descriptor, const char* name) {
  const json a = descriptor.value("annotations", json::object());
  return a.is_object() ? a.value(name, std::string()) : std::string();
}

// The cache index under `tag`, or nullopt when there is none. Throws when the
// tag holds anything else: a cache never overwrites an image.
std::optional<json> cache_index(registry::Session& s, http::Client& c, const registry::Reference& ref) {
  auto top = registry::fetch_manifest(s, c, ref.repository, ref.tag, std::nullopt, true);
  if (!top) return std::nullopt;
  json idx = json::parse(top->bytes);
  if (top->media_type != kMediaTypeIndex || idx.value("artifactType", std::string()) != kCacheArtifactType)
    throw Error(s.op() + ": the tag " + ref.tag + " holds " + top->media_type + " " + top->digest.str() +
                ", not a stackbuild cache (" + kCacheArtifactType + "); give the cache a tag of its own");
  if (!idx.contains("manifests") || !idx["manifests"].is_array())
    throw Error(s.op() + ": the cache index " + top->digest.str() + " lists no manifests");
  return idx;
}

// One point's part of a cache, as read.
struct ReadPoint {
  std::string stack, point;
  std::vector<CacheEntry> entries;
};

// The cache manifest `selector` (a point's tag, or a digest the index lists)
// and its records (its config, fetched into the store); nullopt when it is
// gone. With `tagged`, a manifest that is not a stackbuild cache manifest is
// an error (a point's tag may hold anything); an index names only those.
std::optional<ReadPoint> read_point(registry::Session& s, http::Client& client,
                                    const registry::Reference& ref, const std::string& selector,
                                    const std::optional<Digest>& pinned, const Store& store,
                                    Status& status, bool tagged) {
  auto m = registry::fetch_manifest(s, client, ref.repository, selector, pinned, true);
  if (!m) return std::nullopt;
  const std::string what =
      tagged ? "the tag " + selector + " (" + m->digest.str() + ")" : "manifest " + m->digest.str();
  json man = json::parse(m->bytes);
  if (tagged && (m->media_type != kMediaTypeManifest || !man.is_object() ||
                 man.value("artifactType", std::string()) != kCacheArtifactType))
    throw Error(s.op() + ": " + what + " holds " + m->media_type +
                ", not a stackbuild cache manifest (" + kCacheArtifactType + ")");
  const json& cd = man.at("config");
  if (cd.value("mediaType", std::string()) != kCacheConfigType)
    throw Error(s.op() + ": " + what + " has a config of type " +
                cd.value("mediaType", std::string("?")) + ", not " + kCacheConfigType);
  const Digest config = Digest::parse(cd.at("digest").get<std::string>());
  if (!store.has(config)) {
    int task = status.task_begin("cache records " + config.str().substr(0, 19), 0);
    try {
      registry::fetch_blob(s, client, ref.repository, config, cd.value("size", uint64_t{0}), store,
                           task);
    } catch (...) {
      status.task_end(task, "failed");
      throw;
    }
    status.task_end(task, "fetched");
  }
  json doc = json::parse(store.read(config));
  if (doc.value("stackbuild_cache", 0) != kCacheFormat)
    throw Error(s.op() + ": " + what + " is in cache format " +
                doc.value("stackbuild_cache", json(nullptr)).dump() +
                ", and this stackbuild reads " + std::to_string(kCacheFormat));
  ReadPoint out{doc.value("stack", std::string()), doc.value("point", std::string()), {}};
  for (const auto& e : doc.at("entries")) out.entries.push_back(entry_from_json(e));
  return out;
}

}  // namespace

std::string point_tag(const std::string& tag, const std::string& stack, const std::string& point) {
  constexpr size_t kSuffix = 2 + 16;  // "--" and the hash
  const std::string hash =
      Digest::of_bytes(stack + std::string(1, '\0') + point).hex().substr(0, 16);
  return tag.substr(0, 128 - kSuffix) + "--" + hash;
}

bool is_point_tag(const std::string& tag, const std::string& name) {
  const std::string prefix = tag.substr(0, 128 - 18) + "--";
  return name.size() == prefix.size() + 16 && name.starts_with(prefix) &&
         name.find_first_not_of("0123456789abcdef", prefix.size()) == std::string::npos;
}

registry::Reference cache_reference(const std::string& text, const std::string& option) {
  registry::Reference r;
  try {
    r = registry::Reference::parse(text);
  } catch (const Error& e) {
    throw Error(option + " " + text + ": " + e.what(), ErrorKind::Usage);
  }
  if (r.digest) throw Error(option + " " + text + ": a cache is named by a tag, not by a digest", ErrorKind::Usage);
  if (r.tag.empty()) r.tag = kCacheDefaultTag;
  return r;
}

std::vector<std::pair<std::string, Digest>> companion_records(const Digest& key, const std::vector<Layer>& parts) {
  std::vector<std::pair<std::string, Digest>> out;
  for (const RecordKind& r : all_record_kinds())
    if (auto k = r.key(key, parts)) out.emplace_back(r.kind, *k);
  return out;
}

std::vector<CacheEntry> cache_entries(const std::vector<LayerReport>& layers, const Store& store) {
  std::vector<CacheEntry> out;
  for (const auto& l : layers) {
    if (!l.key) continue;
    CacheEntry e{*l.key, {l.layer}, {}};
    e.parts.insert(e.parts.end(), l.more.begin(), l.more.end());
    for (const auto& [kind, key] : companion_records(e.key, e.parts))
      if (auto value = store.get_record(kind, key)) e.records.push_back({kind, key, *value});
    out.push_back(std::move(e));
  }
  return out;
}

// ---------------------------------------------------------------------------
// --cache-from

struct RegistryCache::Source {
  registry::Reference ref;
  std::unique_ptr<registry::Session> session;
};

RegistryCache::RegistryCache(std::vector<registry::Reference> refs, registry::SessionOptions options, Status& status,
                             int jobs)
    : refs_(std::move(refs)), options_(std::move(options)), status_(status), jobs_(std::max(1, jobs)) {}

RegistryCache::~RegistryCache() = default;

void RegistryCache::load(const Store& store) const {
  for (const auto& ref : refs_) {
    const std::string op = "cache from " + ref.str();
    try {
      auto src = std::make_unique<Source>();
      src->ref = ref;
      src->session = std::make_unique<registry::Session>(
          ref.registry, op, registry::push_session_options(ref, options_, op), status_, ref.repository);
      registry::Session& s = *src->session;
      s.add_scope(ref.repository, "pull");
      std::map<Digest, CacheEntry> found;  // the first point read with a key gives its entry
      size_t points = 0, tagged_points = 0;
      auto take = [&](ReadPoint&& p) {
        for (auto& e : p.entries) found.emplace(e.key, std::move(e));
        ++points;
      };
      try {
        auto client = s.make_client();
        // 1. The points' own tags, where the registry lists tags: no other
        //    writer of the cache writes them, so none is lost.
        std::set<std::pair<std::string, std::string>> tagged;  // (stack, point)
        std::optional<registry::TagListing> listing;
        try {
          listing = registry::list_tags(s, *client, ref.repository, kCacheMaxTags);
        } catch (const http::HttpError&) {
          throw;  // the registry is not reachable: the index is not either
        } catch (const std::exception& e) {  // an answer that is not a tag list
          status_.message(Level::Warning,
                          std::string(e.what()) + "; reading only the index under " + ref.tag);
        }
        if (listing && listing->not_tags)
          status_.message(Level::Warning, op + ": the registry's tag list holds " +
                                              counted(listing->not_tags, "name", "names") +
                                              " that are not tags (the first: " +
                                              listing->first_not_tag + "); left out");
        if (listing && listing->truncated)
          status_.message(Level::Warning, op + ": " + ref.repository + " has more than " +
                                              std::to_string(kCacheMaxTags) +
                                              " tags; reading the points of the first " +
                                              std::to_string(kCacheMaxTags) + " only");
        for (const auto& t : listing ? listing->tags : std::vector<std::string>{}) {
          if (!is_point_tag(ref.tag, t)) continue;
          try {
            auto p = read_point(s, *client, ref, t, std::nullopt, store, status_, true);
            if (!p) continue;  // deleted since it was listed
            tagged.emplace(p->stack, p->point);
            take(std::move(*p));
            ++tagged_points;
          } catch (const json::exception& e) {
            status_.message(Level::Warning, op + ": the tag " + t +
                                                " holds a malformed cache document: " + e.what() +
                                                "; left out");
          } catch (const Error& e) {
            status_.message(Level::Warning, std::string(e.what()) + "; left out");
          }
        }
        // 2. The index: the points not read from their own tags (all, for a
        //    registry that lists no tags or a cache written before them).
        auto idx = cache_index(s, *client, ref);
        if (!idx && !points) {
          status_.message(Level::Info, op + ": there is no cache there yet");
          continue;
        }
        for (const auto& d : idx ? (*idx)["manifests"] : json::array()) {
          if (tagged.count({annotation(d, kStackAnnotation), annotation(d, kPointAnnotation)}))
            continue;
          const Digest md = Digest::parse(d.at("digest").get<std::string>());
          // A manifest deleted since is skipped; the next --cache-to drops it.
          if (auto p = read_point(s, *client, ref, md.str(), md, store, status_, false))
            take(std::move(*p));
        }
      } catch (const json::exception& e) {
        throw Error(op + ": a malformed cache document: " + e.what());
      }
      status_.message(Level::Info, op + ": " + counted(found.size(), "layer", "layers") + " of " +
                                       counted(points, "point", "points") + " (" +
                                       std::to_string(tagged_points) + " from their own tags)");
      for (auto& [key, entry] : found) entries_.emplace(key, std::make_pair(src.get(), std::move(entry)));
      sources_.push_back(std::move(src));
    } catch (const std::exception& e) {
      status_.message(Level::Warning, std::string(e.what()) + "; building without this cache");
    }
  }
}

std::optional<std::string> RegistryCache::import(const Store& store, const Digest& key, const std::string& layer,
                                                 Status& status) const {
  std::call_once(loaded_, [&] { load(store); });
  auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  const Source& src = *it->second.first;
  const CacheEntry& e = it->second.second;
  const std::string name = src.ref.str();
  try {
    // The records first: a wrong one costs no download.
    auto wanted = companion_records(e.key, e.parts);
    for (const auto& r : e.records) {
      if (std::find(wanted.begin(), wanted.end(), std::make_pair(r.kind, r.key)) == wanted.end())
        throw Error("it holds a record (" + r.kind + " " + r.key.str() + ") that is not the layer's");
      try {
        check_record(r.kind, r.value);
      } catch (const std::exception& x) {
        throw Error("its " + r.kind + " record is unreadable: " + x.what());
      }
    }
    // Each part: fetched unless the store has it, then read through for its diff_id.
    registry::Session& s = *src.session;
    std::atomic<size_t> next{0};
    std::atomic<bool> stop{false};  // what the workers read, without mu
    std::mutex mu;
    std::exception_ptr error;  // under mu
    auto worker = [&] {
      try {
        std::unique_ptr<http::Client> client;
        for (size_t i; !stop && (i = next++) < e.parts.size();) {
          const Layer& p = e.parts[i];
          if (!store.has(p.digest)) {
            if (!client) client = s.make_client();
            int task = status.task_begin(
                "fetch layer " + layer + " " + p.digest.str().substr(0, 19) + " " + human_bytes(static_cast<double>(p.size)),
                p.size);
            try {
              registry::fetch_blob(s, *client, src.ref.repository, p.digest, p.size, store, task);
            } catch (...) {
              status.task_end(task, "failed");
              throw;
            }
            status.task_end(task, "fetched");
            registry::remember_repository(store, src.ref.registry, p.digest, src.ref.repository);
          }
          UncompressedDigest u = uncompressed_digest(store.blob_path(p.digest));
          if (u.diff_id != p.diff_id || u.size != p.uncompressed_size)
            throw Error("blob " + p.digest.str() + " holds a tar of " + std::to_string(u.size) + " bytes with diff_id " +
                        u.diff_id.str() + ", and the cache says " + std::to_string(p.uncompressed_size) + " bytes, " +
                        p.diff_id.str());
        }
      } catch (...) {
        std::lock_guard lk(mu);
        if (!error) error = std::current_exception();
        stop = true;
      }
    };
    run_on_threads(static_cast<size_t>(std::min<int>(jobs_, static_cast<int>(e.parts.size()))), worker);
    if (error) std::rethrow_exception(error);
    for (const auto& r : e.records) store.put_record(r.kind, r.key, r.value);
    if (e.parts.size() == 1)
      store.put_record("layer", e.key, json(e.parts.front()).dump());
    else
      store.put_record("layer-parts", e.key, json(e.parts).dump());
    return name;
  } catch (const std::exception& x) {
    status.message(Level::Warning, "layer " + layer + ": the cache " + name + " has it, but " + x.what() +
                                       "; building it here");
    return std::nullopt;
  }
}

// ---------------------------------------------------------------------------
// --cache-to

CacheExport export_cache(const registry::Reference& ref, const std::vector<PointCache>& points,
                         const std::set<std::string>& matrix, const Store& store,
                         const registry::PushOptions& options, Status& status) {
  const std::string op = "cache to " + ref.str();
  CacheExport result{Digest::of_bytes(""), 0, {}};
  try {
    std::set<std::pair<std::string, std::string>> built;  // (stack, point)
    for (const auto& p : points) built.emplace(p.stack, p.point);
    std::set<std::string> stacks;
    for (const auto& p : points) stacks.insert(p.stack);

    // 1. What the cache holds now, and what of it stays: other stacks', and
    //    this stack's points not built now that its matrix still has.
    std::vector<std::pair<json, registry::ManifestRef>> manifests;  // descriptor, manifest
    {
      registry::Session s(ref.registry, op, registry::push_session_options(ref, options.session, op), status,
                          ref.repository);
      s.add_scope(ref.repository, "pull");
      auto client = s.make_client();
      try {
        if (auto idx = cache_index(s, *client, ref))
          for (const auto& d : (*idx)["manifests"]) {
            const std::string stack = annotation(d, kStackAnnotation), point = annotation(d, kPointAnnotation);
            if (built.count({stack, point})) continue;
            if (stacks.count(stack) && !matrix.count(point)) continue;  // gone from the matrix
            const Digest md = Digest::parse(d.at("digest").get<std::string>());
            auto m = registry::fetch_manifest(s, *client, ref.repository, md.str(), md, true);
            if (!m) continue;
            manifests.emplace_back(d, registry::ManifestRef{m->media_type, m->bytes, m->digest, {}, {}, "", "", ""});
            ++result.points_kept;
          }
      } catch (const json::exception& e) {
        throw Error(op + ": a malformed cache index: " + e.what());
      }
    }

    // 2. A manifest for each point built: its records as the config, its
    //    layers' blobs as the layers; each also under its own tag.
    std::vector<registry::TaggedManifest> own;
    for (const auto& p : points) {
      if (p.entries.empty()) continue;
      json entries = json::array();
      for (const auto& e : p.entries) entries.push_back(entry_json(e));
      std::string config = json{{"stackbuild_cache", kCacheFormat}, {"stack", p.stack}, {"point", p.point},
                                {"entries", entries}}
                               .dump();
      registry::BlobRef cb{Digest::of_bytes(config), config.size(), kCacheConfigType, {}, config};
      registry::ManifestRef m{kMediaTypeManifest, "", cb.digest, {}, {}, "", "", ""};
      json layers = json::array();
      std::set<Digest> seen;
      m.blobs.push_back(cb);
      for (const auto& e : p.entries)
        for (const auto& l : e.parts) {
          if (!seen.insert(l.digest).second) continue;
          if (!store.has(l.digest)) throw Error(op + ": layer blob " + l.digest.str() + " is not in the store");
          m.blobs.push_back({l.digest, l.size, l.media_type, store.blob_path(l.digest), {}});
          json d{{"mediaType", l.media_type}, {"digest", l.digest.str()}, {"size", l.size}};
          if (!l.annotations.empty()) d["annotations"] = l.annotations;  // estargz, zstd:chunked
          layers.push_back(std::move(d));
        }
      json annotations{{kStackAnnotation, p.stack}, {kPointAnnotation, p.point}};
      json man{{"schemaVersion", 2},
               {"mediaType", kMediaTypeManifest},
               {"artifactType", kCacheArtifactType},
               {"config", {{"mediaType", kCacheConfigType}, {"digest", cb.digest.str()}, {"size", cb.size}}},
               {"layers", layers},
               {"annotations", annotations}};
      m.bytes = man.dump();
      m.digest = Digest::of_bytes(m.bytes);
      json d{{"mediaType", kMediaTypeManifest},
             {"digest", m.digest.str()},
             {"size", m.bytes.size()},
             {"artifactType", kCacheArtifactType},
             {"annotations", annotations}};
      own.push_back(registry::TaggedManifest{point_tag(ref.tag, p.stack, p.point), m});
      manifests.emplace_back(d, std::move(m));
    }

    // 3. The index, its manifests in (stack, point) order, under the tag. It
    //    goes last: the points' own tags are what a concurrent writer of
    //    another point cannot undo; the index (read, merged, put back) is for
    //    readers that do not list tags, and the last of such writers wins it.
    std::sort(manifests.begin(), manifests.end(), [](const auto& a, const auto& b) {
      return std::make_pair(annotation(a.first, kStackAnnotation), annotation(a.first, kPointAnnotation)) <
             std::make_pair(annotation(b.first, kStackAnnotation), annotation(b.first, kPointAnnotation));
    });
    registry::ManifestRef index{kMediaTypeIndex, "", result.index, {}, {}, "", "", ""};
    json list = json::array();
    for (auto& [d, m] : manifests) {
      list.push_back(d);
      index.children.push_back(std::move(m));
    }
    index.bytes = json{{"schemaVersion", 2},
                       {"mediaType", kMediaTypeIndex},
                       {"artifactType", kCacheArtifactType},
                       {"manifests", list}}
                      .dump();
    index.digest = Digest::of_bytes(index.bytes);
    result.index = index.digest;
    own.push_back(registry::TaggedManifest{ref.tag, std::move(index)});
    result.push = registry::push_images(ref, own, options, status);
    return result;
  } catch (Error& e) {
    e.add_trace("while writing the build cache " + ref.str());
    throw;
  }
}

}  // namespace sb
