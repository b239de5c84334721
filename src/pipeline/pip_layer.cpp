#include "pipeline/pip_layer.hpp"
#include "pipeline/layer_kind.hpp"
#include "pipeline/pip_index.hpp"

#include "pipeline/layer_cache.hpp"

#include <chrono>
#include <cstdlib>
#include <cstring>

#include "catalog/catalog.hpp"
#include "image/sbom.hpp"
#include "layer/write.hpp"
#include "fetch/pip/duplicates.hpp"
#include "pipeline/duplicate_libraries.hpp"
#include "fetch/pip/install.hpp"
#include "pipeline/lock.hpp"
#include "util/error.hpp"
#include "util/process.hpp"

namespace sb {

namespace {

fetch::FetchOptions pip_fetch_options(const pip::IndexConfig& c) {
  fetch::FetchOptions o = fetch::fetch_options_from_env();
  o.client = pip::client_options(c);
  o.untrusted_hint = pip::kCertHint;
  return o;
}

// STACKBUILD_OFFLINE and STACKBUILD_INDEX_MAX_AGE (seconds; "0": always ask
// the index) for the project pages kept in the store.
pip::PageCache page_cache() {
  pip::PageCache c;
  static const auto run = std::make_shared<pip::PageCache::Asked>();  // one build is one run
  c.run = run;
  c.offline = env_or("STACKBUILD_OFFLINE", "") == "1";
  std::string age = env_or("STACKBUILD_INDEX_MAX_AGE", "");
  if (!age.empty()) {
    if (age.size() > 12 || age.find_first_not_of("0123456789") != std::string::npos)
      throw Error("STACKBUILD_INDEX_MAX_AGE='" + age + "' is not a number of seconds");
    c.max_age = std::stoll(age);
  }
  return c;
}

// The listing of a layer built earlier, kept in the store by its blob's
// digest (a blob never changes): listing the os and tools layers meant
// decompressing them again on every resolution.
pip::LayerListing cached_listing(const Store& store, const std::string& name, const Digest& blob) {
  const Digest key = KeyHasher().field("stackbuild-layer-listing", "1").field("blob", blob.str()).finish();
  if (auto rec = store.get_record("layer-listing", key)) {
    try {
      auto j = nlohmann::json::parse(*rec);
      return {name, j.at("paths").get<std::vector<std::string>>(), j.at("musl_version").get<std::string>()};
    } catch (const std::exception&) {
      // A damaged record: list the blob again.
    }
  }
  pip::LayerListing out = pip::list_layer(name, store.blob_path(blob));
  store.put_record("layer-listing", key, nlohmann::json{{"paths", out.paths}, {"musl_version", out.musl_version}}.dump());
  return out;
}

// The Python projects a layer installed for `target`'s interpreter: its
// *.dist-info and *.egg-info directories under site-/dist-packages of that
// Python (or Debian's shared python3/dist-packages), as name -> version.
void installed_projects(const pip::LayerListing& listing, const pip::Target& target,
                        std::map<std::string, pip::ResolveOptions::Installed>& out) {
  const std::string own = "/python" + target.python + "/", shared = "/python3/dist-packages/";
  for (const auto& path : listing.paths) {
    if (path.find(own) == std::string::npos && path.find(shared) == std::string::npos) continue;
    size_t slash = path.find('/', path.find("-packages/") == std::string::npos ? 0 : path.find("-packages/") + 10);
    std::string dir = path.substr(0, slash);
    size_t base = dir.rfind('/');
    std::string name = dir.substr(base + 1);
    for (const char* ext : {".dist-info", ".egg-info"}) {
      size_t n = strlen(ext);
      if (name.size() <= n || name.compare(name.size() - n, n, ext) != 0) continue;
      std::string stem = name.substr(0, name.size() - n);  // NAME-VERSION[-pyX.Y]
      size_t dash = stem.find('-');
      if (dash == std::string::npos) continue;
      std::string version = stem.substr(dash + 1);
      if (size_t py = version.find("-py"); py != std::string::npos) version.resize(py);
      if (!pip::Version::try_parse(version)) continue;
      out[pip::normalize_name(stem.substr(0, dash))] = {version, listing.layer};
    }
  }
}

}  // namespace

fetch::FetchOptions wheel_fetch_options() {
  // Only pip's `cert` matters here, not which index: a stand-in default
  // spares asking the machine's pip for its own.
  return pip_fetch_options(pip::index_config("", "/", current_environment(), [] { return std::string("-"); }));
}

bool is_pip_layer(const LayerSpec& spec) {
  if (spec.copies() || !spec.build.empty() || !spec.apt.empty()) return false;
  return !spec.pip.empty() || (spec.from == "wheel" && !spec.use.empty());
}

pip::Target pip_target(const Recipe& recipe, const std::map<std::string, std::string>& vars, const PointInputs& point) {
  std::string python = vars.count("python") ? vars.at("python") : "";
  if (python.empty()) python = recipe.platform.python;
  std::string glibc = recipe.platform.glibc, distro;
  if (vars.count("os")) {
    if (const catalog::Record* os = chosen_record(point, "os", vars.at("os"))) {
      if (python.empty() && os->info.count("python")) python = os->info.at("python");
      if (glibc.empty() && os->info.count("glibc")) glibc = os->info.at("glibc");
      if (os->info.count("distro")) distro = os->info.at("distro");
    }
  }
  python = env_or("STACKBUILD_PIP_PYTHON", python);
  glibc = env_or("STACKBUILD_PIP_GLIBC", glibc);
  SourceLocation where = recipe.platform.where.known() ? recipe.platform.where : SourceLocation{recipe.file.string(), 1, 1};
  if (python.empty())
    throw InputError(where, "which Python does the image have? no python component, os layer or platform.python says",
                     "add `platform: {python: \"3.12\", glibc: \"2.39\"}` to the recipe, or `use: python` / an os layer");
  if (glibc.empty())
    throw InputError(where, "which glibc does the image have? no os layer or platform.glibc says (wheels are chosen by it)",
                     "add `platform: {glibc: \"2.39\"}` to the recipe (the image's `ldd --version`), or an os layer");
  // "3.12.3" -> "3.12"
  if (std::count(python.begin(), python.end(), '.') > 1) python = python.substr(0, python.rfind('.'));
  pip::Target t = pip::Target::for_distro(distro, python, glibc, recipe.architecture);
  t.site_packages = env_or("STACKBUILD_PIP_SITE", t.site_packages);
  return t;
}

namespace {

// The version of `component` a `from: wheel` layer installs: the point's, else the layer's.
std::string wheel_version(const LayerSpec& spec, const std::map<std::string, std::string>& vars,
                          const std::string& component) {
  auto it = vars.find(component);
  return it != vars.end() ? it->second : spec.version.value;
}

}  // namespace

std::vector<std::string> pip_requirements(const LayerSpec& spec, const std::map<std::string, std::string>& vars,
                                          const PointInputs& point) {
  std::vector<std::string> reqs;
  if (spec.from == "wheel") {
    if (!point.catalog) throw Error("layer '" + spec.name + "': from: wheel needs the catalog");
    for (const auto& u : spec.use) {
      const std::string v = wheel_version(spec, vars, u);
      const catalog::Record* r = chosen_record(point, u, v);
      if (!r || r->sources.pip.empty())
        throw Error("layer '" + spec.name + "': the catalog names no wheel for " + (r ? r->label() : u + " " + v) +
                    " on the Python index (its record has no `pip:` source; the index carries one CUDA build "
                    "of each release: choose the CUDA that build needs, or install from another index with a "
                    "pip: layer)");
      reqs.insert(reqs.end(), r->sources.pip.begin(), r->sources.pip.end());
    }
  }
  reqs.insert(reqs.end(), spec.pip.begin(), spec.pip.end());
  return reqs;
}

void check_cuda_wheels(const LayerSpec& spec, const std::map<std::string, std::string>& vars, const PointInputs& point,
                       const pip::Target& target, const std::vector<pip::PinnedWheel>& wheels) {
  if (spec.from != "wheel" || !point.catalog) return;
  const bool has_runtime = std::any_of(wheels.begin(), wheels.end(), [](const pip::PinnedWheel& w) {
    return pip::normalize_name(w.name).rfind("nvidia-cuda-runtime", 0) == 0;
  });
  if (has_runtime) return;
  for (const auto& u : spec.use) {
    const catalog::Record* r = chosen_record(point, u, wheel_version(spec, vars, u));
    if (!r || std::none_of(r->requirements.begin(), r->requirements.end(),
                           [](const catalog::Requirement& q) { return q.component == "cuda"; }))
      continue;
    // NVIDIA's own library wheels (nvidia-cudnn-cu12, nvidia-nccl-cu12) are
    // CUDA code whatever they depend on: cuDNN's needs cuBLAS's wheel alone,
    // and a layer of it may sit on a CUDA installed otherwise.
    if (std::all_of(r->sources.pip.begin(), r->sources.pip.end(), [](const std::string& req) {
          return pip::Requirement::parse(req).key.rfind("nvidia-", 0) == 0;
        }))
      continue;
    std::string files;
    for (const auto& w : wheels)
      for (const auto& req : r->sources.pip)
        if (pip::normalize_name(w.name) == pip::Requirement::parse(req).key)
          files += (files.empty() ? "" : ", ") + w.filename;
    throw Error("layer '" + spec.name + "': the Python index's " + r->label() + " for " + target.describe() +
                " is a build without CUDA" + (files.empty() ? "" : " (" + files + ")") +
                ": no NVIDIA CUDA runtime wheel (nvidia-cuda-runtime*) is among the wheels it needs for " +
                target.machine + ", where the catalog's record is built with CUDA. Choose a release whose wheels "
                "carry CUDA for this platform, or leave the platform out of this point");
  }
}

std::vector<std::pair<std::string, std::string>> pip_constraints(const PointInputs& point) {
  std::vector<std::pair<std::string, std::string>> out;
  if (point.versions.empty() || !point.catalog) return out;
  for (const auto& [component, version] : point.versions) {
    const catalog::Record* r = chosen_record(point, component, version);
    if (!r) continue;
    for (const auto& text : r->sources.pip) {
      pip::Requirement req = pip::Requirement::parse(text);
      if (req.specifier.empty()) continue;  // names the wheel, pins nothing
      out.push_back({text, "the point's " + component + " " + version});
    }
  }
  return out;
}

std::vector<pip::PinnedWheel> pip_resolve(const std::vector<std::string>& requirements, const pip::Target& target,
                                          const std::string& index_url, bool pre, const Store& store, Status& status,
                                          const std::vector<std::pair<std::string, std::string>>& constraints,
                                          const std::map<std::string, pip::ResolveOptions::Installed>& installed,
                                          const BuildServices& services) {
  pip::IndexConfig cfg = index_config(store, index_url);
  cfg.transport = services.index;
  auto fetcher = services.make_fetcher(store, pip_fetch_options(cfg), status);
  auto index = pip::make_http_index(cfg, store, *fetcher, page_cache());
  std::vector<pip::Requirement> reqs;
  for (const auto& r : requirements) reqs.push_back(pip::Requirement::parse(r));
  pip::ResolveOptions o;
  o.pre = pre;
  o.installed = installed;
  for (const auto& [text, who] : constraints) o.constraints.push_back({pip::Requirement::parse(text), who});
  // The projects the last resolve of this request read, asked for at once
  // before the resolver asks them one by one.
  KeyHasher k;
  k.field("stackbuild-pip-consulted", "1").field("target", target.describe()).field("pre", pre ? "yes" : "no");
  for (const auto& u : cfg.urls) k.field("index", u);
  for (const auto& r : requirements) k.field("requirement", r);
  for (const auto& [text, who] : constraints) k.field("constraint", text);
  for (const auto& [name, inst] : installed) k.field("installed", name + " " + inst.version);
  const Digest consulted_key = k.finish();
  if (auto rec = store.get_record("pip-consulted", consulted_key)) {
    try {
      index->prefetch(nlohmann::json::parse(*rec).get<std::vector<std::string>>());
    } catch (const std::exception&) {
      // A damaged record: the resolver asks page by page.
    }
  }
  try {
    auto wheels = pip::resolve(reqs, target, *index, o);
    store.put_record("pip-consulted", consulted_key, nlohmann::json(index->consulted()).dump());
    return wheels;
  } catch (Error& e) {
    e.add_trace("while resolving wheels for " + target.describe() + " on the index " + cfg.urls.front() + " (from " +
                cfg.origin + ")");
    throw;
  }
}

// A lockfile's wheels name their files, not URLs: those the store lacks are
// found on the index this machine is configured for, by file name (and
// sha256, when the index gives one), one project page each. Those in the
// store need no URL: the fetcher takes them from there.
static void locate_wheels(std::vector<pip::PinnedWheel>& wheels, const Store& store, const BuildOptions& options,
                          Status& status) {
  std::map<std::string, std::vector<pip::PinnedWheel*>> missing;  // project -> its wheels without a URL
  for (auto& w : wheels)
    if (w.url.empty() && !(w.sha256 && store.has(*w.sha256)))
      missing[w.key.empty() ? pip::normalize_name(w.name) : w.key].push_back(&w);
  if (missing.empty()) return;
  pip::IndexConfig cfg = index_config(store, "");
  cfg.transport = options.services.index;
  auto fetcher = options.services.make_fetcher(store, pip_fetch_options(cfg), status);
  auto index = pip::make_http_index(cfg, store, *fetcher, page_cache());
  std::vector<std::string> projects;
  for (const auto& [project, ws] : missing) projects.push_back(project);
  index->prefetch(projects);
  for (auto& [project, ws] : missing) {
    const auto files = index->files(project);
    for (pip::PinnedWheel* w : ws) {
      for (const auto& f : files)
        if (f.filename == w->filename && (!f.sha256 || !w->sha256 || *f.sha256 == *w->sha256)) {
          w->url = f.url;
          break;
        }
      if (w->url.empty()) {
        std::string where;
        for (const auto& u : cfg.urls) where += (where.empty() ? "" : ", ") + u;
        throw Error("--locked: the lockfile pins " + w->filename +
                        (w->sha256 ? " (" + w->sha256->str() + ")" : std::string()) + ", and the index (" + where +
                        ") has no such file for " + project,
                    ErrorKind::Input);
      }
    }
  }
}

// Builds one pip layer on top of `below`. With options.point.lock, the
// wheels pinned there for this layer are fetched (and no index is read);
// otherwise the requirements are resolved against the index now. Libraries
// that `below` (named `below_names`) already has are handled as the layer's
// `duplicates:` policy says (pipeline/duplicate_libraries.hpp).
LayerReport build_pip_layer(const LayerContext& c, Digest& key_out) {
  auto start = std::chrono::steady_clock::now();
  try {
    pip::Target target = pip_target(c.recipe, c.options.variables, c.options.point);
    // What the layers below installed stays, as pip keeps satisfied requirements.
    // `below` ends with the recipe's layers before this one (a base image's may come first).
    size_t own = 0;
    while (own < c.recipe.layers.size() && c.recipe.layers[own].name != c.spec.name) ++own;
    const size_t base = c.below.size() > own ? c.below.size() - own : 0;
    // Listed only when needed (resolving, or writing the layer): a cached
    // rebuild with a lockfile reads no lower layer.
    std::vector<pip::LayerListing> lower;
    auto list_lower = [&] {
      if (lower.size() == c.below.size()) return;
      for (size_t i = 0; i < c.below.size(); ++i)
        lower.push_back(cached_listing(c.store, i >= base ? c.recipe.layers[i - base].name : "base #" + std::to_string(i + 1),
                                       c.below[i].digest));
    };
    std::vector<pip::PinnedWheel> wheels;
    if (auto pinned = locked_entry(c.options.point, "pip", c.spec.name)) {  // --locked: exactly the pinned wheels
      wheels = pinned_list<pip::PinnedWheel>(*pinned, "wheels");
      locate_wheels(wheels, c.store, c.options, c.status);
    } else {
      list_lower();
      // A musl base (Alpine): musllinux wheels, for the musl the layers below have.
      if (pip::detect_musl(lower, target))
        c.status.message(Level::Info, "layer " + c.spec.name + ": the layers below have musl (" + target.describe() +
                                        "): musllinux wheels");
      std::map<std::string, pip::ResolveOptions::Installed> installed;
      for (const auto& l : lower) installed_projects(l, target, installed);
      wheels = pip_resolve(pip_requirements(c.spec, c.options.variables, c.options.point), target, "", false, c.store, c.status,
                           pip_constraints(c.options.point), installed, c.options.services);
      check_cuda_wheels(c.spec, c.options.variables, c.options.point, target, wheels);
    }
    KeyHasher k;
    k.field("stackbuild-pip-layer", "2").field("parent", c.parent_key.str()).field("name", c.spec.name);
    hash_layer_options(k, c.options.layer)
        .field("epoch", c.epoch).field("site", target.site()).field("interpreter", target.interpreter)
        .field("prefix", target.prefix).field("duplicates", to_string(duplicate_policy(c.spec)))
        .field("budget", static_cast<int64_t>(layer_budget(c.recipe, c.options)));
    for (const auto& w : wheels)
      k.field("wheel", w.filename).field("sha256", w.sha256 ? w.sha256->hex() : "").field("requested", w.requested);
    Digest key = k.finish();
    key_out = key;
    auto report = [&](LayerReport rep) {  // each wheel, for the provenance
      for (const auto& w : wheels)
        rep.inputs.push_back(layer_input("pip", c.spec.name, w.filename,
                                         "pkg:pypi/" + sbom::purl_encode(w.key.empty() ? pip::normalize_name(w.name) : w.key) +
                                             "@" + sbom::purl_encode(w.version),
                                         w.url, w.sha256));
      return rep;
    };
    auto found = find_layers(c.store, key, c.spec.name, c.status, c.options.cache_from);
    if (found.hit) return report(layer_report(c.spec.name, *found.hit, true, 0));
    auto staging = c.store.temp_dir();
    auto fetcher = c.options.services.make_fetcher(c.store, wheel_fetch_options(), c.status);
    const std::string what = "layer " + c.spec.name + " (" + std::to_string(wheels.size()) + " wheels)";
    int task = c.status.task_begin("install " + what, 0);
    pip::Installed inst;
    try {
      inst = pip::install_wheels(wheels, target, staging->path(), c.store, *fetcher);
    } catch (...) {
      c.status.task_end(task, "failed");
      throw;
    }
    c.status.task_end(task, std::to_string(inst.wheels.size()) + " wheels, " +
                              human_bytes(static_cast<double>(inst.bytes)));
    ScanOptions so;
    so.source_date_epoch = c.epoch;
    so.normalize_modes = true;
    EntryMap entries;
    scan_tree(staging->path(), "", so, entries);
    add_parent_dirs(so, entries);
    // Over the layer budget: split by distribution (a path two wheels write is the later one's).
    std::map<std::string, std::string> dist_of;
    for (const auto& w : inst.wheels) {
      for (const auto& f : w.files) dist_of[f] = w.name;
      std::string info = w.dist_info.substr(w.dist_info.find_first_not_of('/') == std::string::npos
                                                ? w.dist_info.size()
                                                : w.dist_info.find_first_not_of('/'));
      if (!info.empty()) dist_of[info] = w.name;
    }
    auto by_distribution = [dist_of = std::move(dist_of)](const std::string& path) {
      auto it = dist_of.find(path);
      return it != dist_of.end() ? it->second : "~" + top_level_group(path);  // not a wheel's: after them
    };
    // The same library twice in the image (a CUDA layer's and a wheel's,
    // pipeline/duplicate_libraries.hpp) is checked as the layer is written:
    // now, or beside the build (pipeline/layer_writes.hpp), the staging tree kept until then.
    LayerTail tail{layer_budget(c.recipe, c.options), by_distribution, what, "by distribution"};
    tail.hold = std::shared_ptr<TempDir>(std::move(staging));
    LayerParts parts = finish_layer(c, std::move(entries), key, std::move(found), std::move(tail));
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return report(layer_report(c.spec.name, parts, secs));
  } catch (Error& e) {
    e.add_trace("while building the pip layer '" + c.spec.name + "'");
    throw;
  }
}

namespace {

nlohmann::json constraint_json(const std::vector<std::pair<std::string, std::string>>& cs) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [text, who] : cs) out.push_back(text);
  return out;
}

// The lockfile's "pip" section of one point: per pip layer, the target, the
// requirements and constraints it was resolved from, and every wheel's name,
// version, file name, URL, size and sha256.
nlohmann::json lock_pip_layers(const Recipe& recipe, const std::map<std::string, std::string>& variables,
                               const PointInputs& point, const Store& store, Status& status,
                               const BuildServices& services) {
  nlohmann::json out = nlohmann::json::object();
  std::map<std::string, pip::ResolveOptions::Installed> installed;  // by the pip layers below
  for (const auto& spec : recipe.layers) {
    if (!is_pip_layer(spec)) continue;
    try {
      pip::Target t = pip_target(recipe, variables, point);
      auto reqs = pip_requirements(spec, variables, point);
      auto cons = pip_constraints(point);
      auto wheels = pip_resolve(reqs, t, "", false, store, status, cons, installed, services);
      check_cuda_wheels(spec, variables, point, t, wheels);
      // An index that gives no sizes (PEP 503 HTML pages): the wheels are
      // fetched now (the build needs them anyway, their sha256 checked) so
      // that the lockfile records every file's size.
      std::vector<fetch::FetchItem> unsized;
      for (const auto& w : wheels)
        if (!w.size) unsized.push_back({w.url, w.sha256, std::nullopt, w.filename});
      if (!unsized.empty()) {
        auto fetcher = services.make_fetcher(store, wheel_fetch_options(), status);
        auto got = fetcher->fetch(unsized);
        size_t i = 0;
        for (auto& w : wheels)
          if (!w.size) w.size = got[i++].size;
      }
      for (auto& w : wheels) {
        installed[w.key.empty() ? pip::normalize_name(w.name) : w.key] = {w.version, spec.name};
        // The lockfile names each file by name, sha256 and size, not by URL:
        // a --locked build finds it on the index this machine is configured
        // for (as pip does with --require-hashes), and the lockfile holds no
        // host.
        w.url.clear();
      }
      out[spec.name] = {{"target", t.describe()}, {"site", t.site()},   {"requirements", reqs},
                        {"constraints", constraint_json(cons)}, {"wheels", wheels}};
    } catch (Error& e) {
      e.add_trace("while locking the wheels of layer '" + spec.name + "' (" + spec.where.str() + ")");
      throw;
    }
  }
  return out;
}

// What a --locked build checks before using `entry` (lock_pip_layers()[name]):
// "" when it was written for the layer's current requirements, constraints
// and target and its wheels read, else what changed or "a malformed entry: ...".
std::string pip_lock_mismatch(const Recipe& recipe, const LayerSpec& spec,
                              const std::map<std::string, std::string>& variables, const PointInputs& point,
                              const nlohmann::json& entry) {
  auto differs = [&](const char* key, const nlohmann::json& now) -> std::string {
    nlohmann::json was = entry.contains(key) ? entry[key] : nlohmann::json();
    return was == now ? "" : std::string(key) + " " + was.dump() + " -> " + now.dump();
  };
  if (!entry.is_object() || !entry.contains("wheels") || !entry["wheels"].is_array()) return "the entry has no wheels";
  std::string d = differs("requirements", pip_requirements(spec, variables, point));
  if (d.empty()) d = differs("constraints", constraint_json(pip_constraints(point)));
  if (d.empty()) d = differs("target", pip_target(recipe, variables, point).describe());
  if (!d.empty()) return d;
  return malformed_entry([&] { pinned_list<pip::PinnedWheel>(entry, "wheels"); });
}

// The constraint file of an image with pip layers, as NGC's images have one:
// every Python project the layers below hold for the image's interpreter
// (wheels and Debian's python3-* alike), `name==version`, so that a `pip
// install` of something else cannot replace them; in a layer of its own on
// top, keyed by its text. build_image asks for it after the last layer.
class PipConstraintKind final : public LayerKind {
 public:
  const char* name() const override { return "pip constraints"; }
  bool handles(const LayerSpec&) const override { return false; }  // never a recipe's layer
  LayerReport build(const LayerContext& c, Digest& key_out) const override {
    auto start = std::chrono::steady_clock::now();
    const pip::Target target = pip_target(c.recipe, c.options.variables, c.options.point);
    std::map<std::string, pip::ResolveOptions::Installed> installed;
    for (size_t i = 0; i < c.below.size(); ++i)
      installed_projects(cached_listing(c.store, c.below_names[i], c.below[i].digest), target, installed);
    std::string text = "# The Python packages of this image (Python " + target.python +
                       "), pinned: pip installs nothing that would replace them.\n"
                       "# Written by stackbuild; PIP_CONSTRAINT names this file.\n";
    for (const auto& [name, what] : installed) text += name + "==" + what.version + "\n";
    KeyHasher k;
    k.field("stackbuild-pip-constraint", "1").field("parent", c.parent_key.str()).field("text", text);
    const Digest key = hash_layer_options(k, c.options.layer)
                           .field("epoch", c.epoch)
                           .finish();
    key_out = key;
    const std::string name = "pip constraints";
    auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
    auto report = [&](LayerReport r) {
      r.history = "pip constraints: " + std::string(kPipConstraintFile);
      return r;
    };
    auto found = find_layers(c.store, key, name, c.status, c.options.cache_from);
    if (found.hit) return report(layer_report(name, *found.hit, true, seconds()));
    auto scratch = c.store.temp_dir();
    const fs::path file = scratch->path() / "constraint.txt";
    write_file_atomic(file, text);
    EntryMap entries;
    TarEntry e;
    e.mode = 0644;
    e.mtime = c.epoch;
    e.source = file;
    e.size = text.size();
    entries[canonical_archive_path(kPipConstraintFile)] = e;
    ScanOptions so;
    so.source_date_epoch = c.epoch;
    add_parent_dirs(so, entries);
    Layer l = store_layer(entries, c.store, c.options.layer, key, c.status, "layer " + name);
    return report(layer_report(name, {l}, false, seconds()));
  }
};

}  // namespace

const LayerKind& pip_constraint_layer_kind() {
  static const PipConstraintKind kind;
  return kind;
}

namespace {

// Whether building `spec` reads the layers below: to resolve its
// requirements (what they installed is kept, their musl picks the wheels),
// unless --locked pins its wheels; then only its duplicate check does.
bool pip_reads_below(const LayerSpec& spec, const BuildOptions& options) {
  return !locked_entry(options.point, "pip", spec.name);
}

// The wheels --locked pins for `spec` that the store lacks, located on the
// index (by file name) as the build will locate them.
AheadFetch pip_fetch_ahead(const Recipe&, const LayerSpec& spec, const BuildOptions& options, const Store& store,
                           Status& status) {
  auto pinned = locked_entry(options.point, "pip", spec.name);
  if (!pinned) return {};
  auto wheels = pinned_list<pip::PinnedWheel>(*pinned, "wheels");
  locate_wheels(wheels, store, options, status);
  AheadFetch out{wheel_fetch_options(), {}};
  for (const auto& w : wheels)
    if (w.sha256 && !w.url.empty() && !store.has(*w.sha256)) out.items.push_back({w.url, w.sha256, w.size, w.filename});
  return out;
}

}  // namespace

const LayerKind& pip_layer_kind() {
  static const BuilderKind kind("pip", is_pip_layer, build_pip_layer,
                                {"pip",
                                 [](const LockContext& c, const Store& store, Status& status) {
                                   return lock_pip_layers(c.recipe, c.variables, c.point, store, status, c.services);
                                 },
                                 [](const LockContext& c, const LayerSpec& spec, const nlohmann::json& entry) {
                                   return pip_lock_mismatch(c.recipe, spec, c.variables, c.point, entry);
                                 }},
                                {}, pip_reads_below, pip_fetch_ahead);
  return kind;
}

}  // namespace sb
