#include "pipeline/redist_layer.hpp"
#include "pipeline/layer_kind.hpp"
#include "pipeline/duplicate_libraries.hpp"

#include "pipeline/layer_cache.hpp"

#include <chrono>
#include <cstdlib>

#include "catalog/catalog.hpp"
#include "image/sbom.hpp"
#include "layer/write.hpp"
#include "pipeline/lock.hpp"
#include "fetch/redist/install.hpp"
#include "util/error.hpp"
#include "util/limits.hpp"
#include "util/json.hpp"
#include "util/process.hpp"

namespace sb {

namespace {

std::string base_url() {
  std::string b = env_or("STACKBUILD_REDIST_URL", redist::kPublicBaseUrl);
  while (b.size() > 1 && b.back() == '/') b.pop_back();
  return b;
}

// "12.4.1" -> "12.4"
std::string major_minor(const std::string& v) {
  size_t d1 = v.find('.');
  size_t d2 = d1 == std::string::npos ? std::string::npos : v.find('.', d1 + 1);
  return d2 == std::string::npos ? v : v.substr(0, d2);
}

// NCCL's name for an OCI architecture in its archive names.
std::string nccl_arch(const std::string& oci_arch) {
  if (oci_arch == "amd64") return "x86_64";
  if (oci_arch == "arm64") return "aarch64";
  throw Error("NVIDIA publishes no NCCL archive for architecture '" + oci_arch + "'");
}

// One archive a redist layer unpacks, as the lockfile holds it.
struct Archive {
  std::string component, version, variant, url;
  std::optional<Digest> sha256;
  std::optional<uint64_t> size;
};

void to_json(nlohmann::json& j, const Archive& a) {
  j = {{"component", a.component}, {"version", a.version}, {"variant", a.variant}, {"url", a.url},
       {"sha256", a.sha256 ? a.sha256->hex() : ""}};
  if (a.size) j["size"] = *a.size;
}

void from_json(const nlohmann::json& j, Archive& a) {
  a.component = j.at("component").get<std::string>();
  a.version = j.value("version", "");
  a.variant = j.value("variant", "");
  a.url = j.at("url").get<std::string>();
  std::string sha = j.at("sha256").get<std::string>();
  if (sha.empty()) throw Error("the archive " + a.url + " has no sha256 in the lockfile");
  a.sha256 = Digest::parse("sha256:" + sha);
  if (j.contains("size")) a.size = json_size(j, "size");
}

std::string label_of(const Archive& a) { return a.url.substr(a.url.rfind('/') + 1); }

nlohmann::json request_json(const RedistRequest& r) {
  nlohmann::json j = {{"product", r.product}, {"components", r.components}};
  if (!r.archive.empty()) j["archive"] = r.archive;
  else j["manifest_version"] = r.manifest_version;
  return j;
}

// What one redist layer unpacks: the point's CUDA X.Y, the requests it was
// made from, each manifest read (URL, sha256) and every archive.
struct LayerInputs {
  std::string cuda_xy;
  nlohmann::json requests = nlohmann::json::array();
  nlohmann::json manifests = nlohmann::json::array();
  std::vector<Archive> archives;
};

std::string cuda_of(const LayerSpec& spec, const std::map<std::string, std::string>& vars, const PointInputs& point) {
  auto it = point.versions.find("cuda");
  if (it != point.versions.end()) return major_minor(it->second);
  if (vars.count("cuda")) return major_minor(vars.at("cuda"));
  throw Error("layer '" + spec.name + "': a redist layer needs the point's CUDA version (use: cuda, or a cuda "
              "matrix key)");
}

// Resolves a layer now: reads the manifests (and fetches manifest-less
// archives, whose sha256 only the download can tell).
LayerInputs resolve_layer(const Recipe& recipe, const LayerSpec& spec, const std::map<std::string, std::string>& vars,
                          const PointInputs& point, const Store& store, fetch::Fetcher& fetcher) {
  LayerInputs in;
  in.cuda_xy = cuda_of(spec, vars, point);
  std::string base = base_url();
  std::string platform = redist::platform_for(recipe.architecture);
  for (const auto& r : redist_requests(spec, vars, point)) {
    in.requests.push_back(request_json(r));
    if (!r.archive.empty()) {
      std::string rel = r.archive;
      if (auto p = rel.find("{arch}"); p != std::string::npos) rel.replace(p, 6, nccl_arch(recipe.architecture));
      std::string url = base + "/" + rel;
      // NVIDIA never replaces a released tarball: one fetched from this URL before
      // is taken as it was (its sha256 is the one recorded then).
      if (auto last = fetch::last_fetched(store, url); last && store.has(*last)) {
        in.archives.push_back({r.components.front(), r.version, "", url, *last,
                               static_cast<uint64_t>(fs::file_size(store.blob_path(*last)))});
        continue;
      }
      auto got = fetcher.fetch_one({url, std::nullopt, std::nullopt, rel.substr(rel.rfind('/') + 1)});
      in.archives.push_back({r.components.front(), r.version, "", url, got.digest, got.size});
      continue;
    }
    std::string url = redist::manifest_url(base, r.product, r.manifest_version);
    fetch::FetchItem item{url, std::nullopt, std::nullopt, "redistrib_" + r.manifest_version + ".json"};
    item.max_size = limits::redist_manifest();  // nothing pins its size
    auto got = fetcher.fetch_one(item);
    redist::Manifest m = redist::parse_manifest(store.read(got.digest), url);
    in.manifests.push_back({{"product", r.product}, {"manifest_version", r.manifest_version}, {"url", url},
                            {"sha256", got.digest.hex()}, {"size", got.size}});
    for (const auto& s : redist::select(m, r.components, platform, std::stoi(in.cuda_xy)))
      in.archives.push_back({s.component, s.version, s.variant, redist::artifact_url(base, r.product, s.artifact),
                             Digest::parse("sha256:" + s.artifact.sha256), s.artifact.size});
  }
  return in;
}

LayerInputs from_lock(const nlohmann::json& entry) {
  LayerInputs in;
  if (!entry.is_object() || !entry.contains("cuda") || !entry["cuda"].is_string())
    throw Error("the entry has no cuda version");
  in.cuda_xy = entry["cuda"].get<std::string>();
  in.requests = entry.value("requests", nlohmann::json::array());
  in.manifests = entry.value("manifests", nlohmann::json::array());
  in.archives = pinned_list<Archive>(entry, "archives");
  return in;
}

}  // namespace

bool is_redist_layer(const LayerSpec& spec) {
  if (spec.copies() || !spec.build.empty() || !spec.apt.empty() || !spec.pip.empty()) return false;
  if (!spec.from.empty() && spec.from != "redist") return false;
  return !spec.use.empty() && std::none_of(spec.use.begin(), spec.use.end(), is_os_component);
}

std::vector<RedistRequest> redist_requests(const LayerSpec& spec, const std::map<std::string, std::string>& vars,
                                           const PointInputs& point) {
  if (!point.catalog) throw Error("layer '" + spec.name + "': a redist layer needs the catalog");
  std::vector<RedistRequest> out;
  for (const auto& u : spec.use) {
    std::string v = vars.count(u) ? vars.at(u) : spec.version.value;
    const catalog::Record* rec = chosen_record(point, u, v);
    if (!rec || !rec->sources.redist)
      throw Error("layer '" + spec.name + "': the catalog names no NVIDIA redist archive for " +
                  (rec ? rec->label() : u + " " + v) + " (give the layer `from: wheel` or `from: apt` to take it from there)");
    const catalog::Redist& rd = *rec->sources.redist;
    RedistRequest q{rd.product, rd.manifest_version, rd.archive, rd.components, rec->version.str()};
    if (q.components.empty()) q.components = spec.components;
    if (q.components.empty()) q.components = {rd.product == "cuda" ? "cudart" : rd.product};  // cudnn, nccl
    out.push_back(q);
  }
  return out;
}

// Builds one redist layer on `below`; libraries `below` has too as
// pipeline/duplicate_libraries.hpp says. With options.point.lock, the
// archives pinned there for this layer are fetched (no manifest is read).
LayerReport build_redist_layer(const LayerContext& c, Digest& key_out) {
  auto start = std::chrono::steady_clock::now();
  try {
    fetch::FetchOptions fo = fetch::fetch_options_from_env();
    auto fetcher = c.options.services.make_fetcher(c.store, fo, c.status);
    const auto pinned = locked_entry(c.options.point, "redist", c.spec.name);
    LayerInputs in = pinned ? from_lock(*pinned)  // --locked: exactly the pinned archives
                            : resolve_layer(c.recipe, c.spec, c.options.variables, c.options.point, c.store, *fetcher);
    KeyHasher k;
    // Version 4: the cuda product's layers hold version.json. Version 5: an
    // archive with a known sha256 is keyed by it and not by its URL, which
    // only says where it was fetched from (a mirror), so machines with other
    // mirrors share the layer (docs/cache.md).
    k.field("stackbuild-redist-layer", "5").field("parent", c.parent_key.str()).field("name", c.spec.name);
    hash_layer_options(k, c.options.layer)
        .field("epoch", c.epoch).field("cuda", in.cuda_xy)
        .field("budget", static_cast<int64_t>(layer_budget(c.recipe, c.options)))
        .field("duplicates", to_string(duplicate_policy(c.spec)));
    std::vector<fetch::FetchItem> items;
    for (const auto& a : in.archives) {
      k.field("archive", a.sha256 ? "" : a.url).field("component", a.component).field("sha256", a.sha256 ? a.sha256->hex() : "");
      items.push_back({a.url, a.sha256, a.size, label_of(a)});
    }
    Digest key = k.finish();
    key_out = key;
    auto report = [&](LayerReport rep) {  // the manifests read and each archive, for the provenance
      for (const auto& m : in.manifests) {
        std::string url = m.value("url", ""), sha = m.value("sha256", "");
        rep.inputs.push_back(layer_input("redist", c.spec.name, url.substr(url.rfind('/') + 1), url, "",
                                         sha.empty() ? std::nullopt : std::optional<Digest>(Digest::parse("sha256:" + sha))));
      }
      for (const auto& a : in.archives)
        rep.inputs.push_back(layer_input("redist", c.spec.name, label_of(a),
                                         "pkg:generic/nvidia/" + sbom::purl_encode(a.component) +
                                             (a.version.empty() ? "" : "@" + sbom::purl_encode(a.version)),
                                         a.url, a.sha256));
      return rep;
    };
    auto found = find_layers(c.store, key, c.spec.name, c.status, c.options.cache_from);
    if (found.hit) return report(layer_report(c.spec.name, *found.hit, true, 0));
    auto staging = c.store.temp_dir();
    auto got = fetcher->fetch(items);
    std::map<std::string, std::string> component_of;  // a path two archives write is the later one's, as on disk
    for (size_t i = 0; i < items.size(); ++i) {
      std::vector<std::string> written;
      redist::install_archive(c.store.blob_path(got[i].digest), items[i].label, in.archives[i].component, in.cuda_xy,
                              staging->path(), &written);
      for (auto& p : written) component_of[std::move(p)] = in.archives[i].component;
    }
    // The CUDA toolkit's own record of itself (version.json): its release is the
    // cuda manifest's version; its components, the archives that manifest named.
    for (const auto& m : in.manifests) {
      if (m.value("product", "") != "cuda") continue;
      std::string url = m.value("url", "");
      std::string dir = url.substr(0, url.rfind('/') + 1);
      std::vector<std::pair<std::string, std::string>> versions;
      for (const auto& a : in.archives)
        if (!dir.empty() && a.url.starts_with(dir)) versions.emplace_back(a.component, a.version);
      if (!versions.empty())
        redist::write_version_json(in.cuda_xy, m.value("manifest_version", ""), versions, staging->path());
    }
    redist::finish_layout(in.cuda_xy, staging->path());
    ScanOptions so;
    so.source_date_epoch = c.epoch;
    so.normalize_modes = true;
    EntryMap entries;
    scan_tree(staging->path(), "", so, entries);
    add_parent_dirs(so, entries);
    // Over the budget: split by component (cuda_cudart, libcublas, cudnn, nccl); the
    // usr/local/cuda link and the ld.so.conf.d entry, which no archive holds, in the last part.
    // Written now, or beside the build (pipeline/layer_writes.hpp) with the staging tree kept until then.
    auto shared = [](const std::string&) { return std::string("~shared"); };
    LayerTail tail{layer_budget(c.recipe, c.options), group_by_owner(std::move(component_of), shared),
                   "layer " + c.spec.name + " (" + std::to_string(items.size()) + " archives)", "by component"};
    tail.hold = std::shared_ptr<TempDir>(std::move(staging));
    LayerParts parts = finish_layer(c, std::move(entries), key, std::move(found), std::move(tail));
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return report(layer_report(c.spec.name, parts, secs));
  } catch (Error& e) {
    e.add_trace("while building the redist layer '" + c.spec.name + "'");
    throw;
  }
}

namespace {

// The lockfile's "redist" section of one point: per redist layer, the point's
// CUDA X.Y, the requests, each manifest's URL and sha256, and each archive's
// component, version, URL, size and sha256 (a manifest-less archive's as
// fetched now).
nlohmann::json lock_redist_layers(const Recipe& recipe, const std::map<std::string, std::string>& variables,
                                  const PointInputs& point, const Store& store, Status& status,
                                  const fetch::FetcherFactory& make_fetcher) {
  nlohmann::json out = nlohmann::json::object();
  fetch::FetchOptions fo = fetch::fetch_options_from_env();
  auto fetcher = make_fetcher(store, fo, status);
  for (const auto& spec : recipe.layers) {
    if (!is_redist_layer(spec)) continue;
    try {
      LayerInputs in = resolve_layer(recipe, spec, variables, point, store, *fetcher);
      out[spec.name] = {{"cuda", in.cuda_xy}, {"requests", in.requests}, {"manifests", in.manifests},
                        {"archives", in.archives}};
    } catch (Error& e) {
      e.add_trace("while locking the redist archives of layer '" + spec.name + "' (" + spec.where.str() + ")");
      throw;
    }
  }
  return out;
}

// What a --locked build checks before using `entry`: "" when it was written
// for the layer's current requests and CUDA and its archives read, else what
// changed or "a malformed entry: ...".
std::string redist_lock_mismatch(const Recipe& recipe, const LayerSpec& spec,
                                 const std::map<std::string, std::string>& variables, const PointInputs& point,
                                 const nlohmann::json& entry) {
  if (!entry.is_object() || !entry.contains("archives") || !entry["archives"].is_array())
    return "the entry has no archives";
  nlohmann::json now = nlohmann::json::array();
  for (const auto& r : redist_requests(spec, variables, point)) now.push_back(request_json(r));
  nlohmann::json was = entry.value("requests", nlohmann::json());
  if (was != now) return "requests " + was.dump() + " -> " + now.dump();
  LayerInputs pinned;
  if (std::string bad = malformed_entry([&] { pinned = from_lock(entry); }); !bad.empty())
    return bad;
  std::string cuda = cuda_of(spec, variables, point);
  if (pinned.cuda_xy != cuda) return "cuda " + pinned.cuda_xy + " -> " + cuda;
  return "";
}

}  // namespace

namespace {

// The archives --locked pins for `spec` that the store lacks.
AheadFetch redist_fetch_ahead(const Recipe&, const LayerSpec& spec, const BuildOptions& options, const Store& store,
                              Status&) {
  auto pinned = locked_entry(options.point, "redist", spec.name);
  if (!pinned) return {};
  AheadFetch out{fetch::fetch_options_from_env(), {}};
  for (const auto& a : from_lock(*pinned).archives)
    if (a.sha256 && !store.has(*a.sha256)) out.items.push_back({a.url, a.sha256, a.size, label_of(a)});
  return out;
}

}  // namespace

const LayerKind& redist_layer_kind() {
  // It reads the layers below only for the duplicate check (finish_layer()).
  static const BuilderKind kind("redist", is_redist_layer, build_redist_layer,
                                {"redist",
                                 [](const LockContext& c, const Store& store, Status& status) {
                                   return lock_redist_layers(c.recipe, c.variables, c.point, store, status, c.services.make_fetcher);
                                 },
                                 [](const LockContext& c, const LayerSpec& spec, const nlohmann::json& entry) {
                                   return redist_lock_mismatch(c.recipe, spec, c.variables, c.point, entry);
                                 }},
                                {}, [](const LayerSpec&, const BuildOptions&) { return false; }, redist_fetch_ahead);
  return kind;
}

}  // namespace sb
