#include "pipeline/redist_layer.hpp"

#include "pipeline/layer_cache.hpp"

#include <chrono>
#include <cstdlib>

#include "catalog/catalog.hpp"
#include "layer/write.hpp"
#include "pipeline/plan.hpp"
#include "redist/install.hpp"
#include "util/error.hpp"

namespace sb {

namespace {

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = getenv(name);
  return v && *v ? std::string(v) : fallback;
}

bool is_os_name(const std::string& u) { return u == "os" || u == "debian" || u == "ubuntu"; }

std::string base_url() {
  std::string b = env_or("STACKBUILD_REDIST_URL", "");
  if (b.empty())
    throw Error("no NVIDIA redist mirror configured: set STACKBUILD_REDIST_URL to the directory that holds "
                "<product>/redist/redistrib_<version>.json (NVIDIA's compute/ directory, or a mirror of it)");
  return b;
}

// "12.4.1" -> "12.4"
std::string major_minor(const std::string& v) {
  size_t d1 = v.find('.');
  size_t d2 = d1 == std::string::npos ? std::string::npos : v.find('.', d1 + 1);
  return d2 == std::string::npos ? v : v.substr(0, d2);
}

struct Planned {
  RedistRequest request;
  std::string manifest_url;
  Digest manifest_digest;
  std::vector<redist::Selected> selected;
};

std::vector<Planned> plan_layer(const Recipe& recipe, const LayerSpec& spec,
                                const std::map<std::string, std::string>& vars, const Store& store,
                                fetch::Fetcher& fetcher, std::string& cuda_xy) {
  if (!vars.count("cuda")) throw Error("layer '" + spec.name + "': a redist layer needs the point's CUDA version");
  cuda_xy = major_minor(vars.at("cuda"));
  std::string base = base_url();
  std::string platform = redist::platform_for(recipe.architecture);
  std::vector<Planned> out;
  for (const auto& r : redist_requests(recipe, spec, vars)) {
    std::string url = redist::manifest_url(base, r.product, r.manifest_version);
    auto got = fetcher.fetch_one({url, std::nullopt, std::nullopt, "redistrib_" + r.manifest_version + ".json"});
    redist::Manifest m = redist::parse_manifest(store.read(got.digest), url);
    out.push_back({r, url, got.digest, redist::select(m, r.components, platform, std::stoi(cuda_xy))});
  }
  return out;
}

}  // namespace

bool is_redist_layer(const LayerSpec& spec) {
  if (spec.copies() || !spec.build.empty() || !spec.apt.empty() || !spec.pip.empty() || !spec.from.empty())
    return false;
  return !spec.use.empty() && std::none_of(spec.use.begin(), spec.use.end(), is_os_name);
}

std::vector<RedistRequest> redist_requests(const Recipe& recipe, const LayerSpec& spec,
                                           const std::map<std::string, std::string>& vars) {
  auto dir = find_catalog(recipe.file);
  if (!dir) throw Error("layer '" + spec.name + "': a redist layer needs the catalog");
  catalog::Catalog cat = catalog::load_catalog(*dir);
  std::vector<RedistRequest> out;
  for (const auto& u : spec.use) {
    const catalog::Component* c = cat.find(u);
    std::string v = vars.count(u) ? vars.at(u) : spec.version.value;
    const catalog::Record* rec = nullptr;
    if (c)
      for (const auto& r : c->records)
        if (r.version.str() == v && r.sources.redist) {
          rec = &r;
          break;
        }
    if (!rec)
      throw Error("layer '" + spec.name + "': the catalog names no NVIDIA redist archive for " + u + " " + v +
                  " (use `from: wheel` for its wheels, or an apt layer)");
    RedistRequest q{rec->sources.redist->product, rec->sources.redist->manifest_version,
                    rec->sources.redist->components};
    if (q.components.empty()) q.components = spec.components.empty() ? std::vector<std::string>{"cudart"} : spec.components;
    out.push_back(q);
  }
  return out;
}

LayerReport build_redist_layer(const Recipe& recipe, const LayerSpec& spec, const Digest& key_parent,
                               const Store& store, const BuildOptions& options, int64_t epoch, Status& status,
                               Digest& key_out) {
  auto start = std::chrono::steady_clock::now();
  try {
    fetch::FetchOptions fo;
    fo.offline = env_or("STACKBUILD_OFFLINE", "") == "1";
    auto fetcher = fetch::make_fetcher(store, fo, status);
    std::string cuda_xy;
    auto planned = plan_layer(recipe, spec, options.variables, store, *fetcher, cuda_xy);
    KeyHasher k;
    k.field("stackbuild-redist-layer", "1").field("parent", key_parent.str()).field("name", spec.name)
        .field("compression", to_string(options.layer.compression)).field("level", options.layer.level)
        .field("epoch", epoch).field("cuda", cuda_xy);
    std::vector<fetch::FetchItem> items;
    std::vector<std::string> components;
    for (const auto& p : planned)
      for (const auto& s : p.selected) {
        k.field("archive", s.artifact.relative_path).field("sha256", s.artifact.sha256);
        items.push_back({redist::artifact_url(base_url(), p.request.product, s.artifact),
                         Digest::parse("sha256:" + s.artifact.sha256), s.artifact.size,
                         fs::path(s.artifact.relative_path).filename().string()});
        components.push_back(s.component);
      }
    Digest key = k.finish();
    key_out = key;
    auto hit = cached_layer(store, key);
    std::unique_ptr<FileLock> lock_file;
    if (!hit) {
      lock_file = store.lock("layer-" + key.hex());  // another stackbuild may be writing it
      hit = cached_layer(store, key);
    }
    if (hit) {
      status.message(Level::Info, "layer " + spec.name + ": cached " + hit->digest.str());
      return LayerReport{spec.name, *hit, true, 0};
    }
    auto staging = store.temp_dir();
    auto got = fetcher->fetch(items);
    for (size_t i = 0; i < items.size(); ++i)
      redist::install_archive(store.blob_path(got[i].digest), items[i].label, components[i], cuda_xy, staging->path());
    redist::finish_layout(cuda_xy, staging->path());
    ScanOptions so;
    so.source_date_epoch = epoch;
    so.normalize_modes = true;
    EntryMap entries;
    scan_tree(staging->path(), "", so, entries);
    add_parent_dirs(so, entries);
    Layer l = store_layer(entries, store, options.layer, key, status,
                          "layer " + spec.name + " (" + std::to_string(items.size()) + " archives)");
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return LayerReport{spec.name, l, false, secs};
  } catch (Error& e) {
    e.add_trace("while building the redist layer '" + spec.name + "'");
    throw;
  }
}

nlohmann::json lock_redist_layers(const Recipe& recipe, const std::map<std::string, std::string>& variables,
                                  const Store& store, Status& status) {
  nlohmann::json out = nlohmann::json::object();
  fetch::FetchOptions fo;
  auto fetcher = fetch::make_fetcher(store, fo, status);
  for (const auto& spec : recipe.layers) {
    if (!is_redist_layer(spec)) continue;
    std::string cuda_xy;
    nlohmann::json manifests = nlohmann::json::array();
    for (const auto& p : plan_layer(recipe, spec, variables, store, *fetcher, cuda_xy)) {
      nlohmann::json archives = nlohmann::json::array();
      for (const auto& s : p.selected)
        archives.push_back({{"component", s.component}, {"version", s.version}, {"variant", s.variant},
                            {"url", redist::artifact_url(base_url(), p.request.product, s.artifact)},
                            {"size", s.artifact.size}, {"sha256", s.artifact.sha256}});
      manifests.push_back({{"product", p.request.product}, {"manifest_version", p.request.manifest_version},
                           {"url", p.manifest_url}, {"sha256", p.manifest_digest.hex()}, {"archives", archives}});
    }
    out[spec.name] = {{"cuda", cuda_xy}, {"manifests", manifests}};
  }
  return out;
}

}  // namespace sb
