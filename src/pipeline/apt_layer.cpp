#include "pipeline/apt_layer.hpp"
#include "pipeline/apt_repositories.hpp"
#include "pipeline/layer_kind.hpp"
#include "pipeline/duplicate_libraries.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>

#include "fetch/apt/config.hpp"
#include "fetch/apt/install.hpp"
#include "fetch/apt/keyring.hpp"
#include "fetch/apt/repository.hpp"
#include "fetch/apt/solver.hpp"
#include "fetch/apt/sources.hpp"
#include "catalog/catalog.hpp"
#include "image/sbom.hpp"
#include "layer/write.hpp"
#include "pipeline/layer_cache.hpp"
#include "pipeline/lock.hpp"
#include "pipeline/step_runner.hpp"
#include "resolve/lockfile.hpp"
#include "util/error.hpp"
#include "util/file.hpp"
#include "util/process.hpp"

namespace sb {

namespace {

// The key of the "apt-state" record (the dpkg state an image has after a
// layer, as the next apt layer starts from it) of the layer with `diff_id`.
Digest apt_state_key(const Digest& diff_id) { return KeyHasher().field("diff_id", diff_id.str()).finish(); }

}  // namespace

namespace {

// `from: apt`: the apt packages of the catalog records the point chose for
// the layer's components (libnccl2=2.21.5-1+cuda12.4).
std::vector<std::string> component_packages(const LayerSpec& spec, const std::map<std::string, std::string>& vars,
                                            const PointInputs& point) {
  std::vector<std::string> out;
  if (spec.from != "apt") return out;
  if (!point.catalog) throw Error("layer '" + spec.name + "': from: apt needs the catalog");
  for (const auto& u : spec.use) {
    std::string v = vars.count(u) ? vars.at(u) : spec.version.value;
    const catalog::Record* r = chosen_record(point, u, v);
    if (!r || r->sources.apt.empty())
      throw Error("layer '" + spec.name + "': the catalog names no apt package for " +
                  (r ? r->label() : u + " " + v) + " (its record has no `apt:` source)");
    out.insert(out.end(), r->sources.apt.begin(), r->sources.apt.end());
  }
  return out;
}

std::vector<std::string> wanted(const LayerSpec& spec, const std::vector<std::string>& from_catalog = {}) {
  std::vector<std::string> w = from_catalog;
  bool os = std::any_of(spec.use.begin(), spec.use.end(), is_os_component);
  if (os || spec.base) w.push_back("apt");  // apt-get keeps working in the image
  w.insert(w.end(), spec.packages.begin(), spec.packages.end());
  w.insert(w.end(), spec.apt.begin(), spec.apt.end());
  return w;
}

// The repositories read and the packages of one layer resolved against them.
struct Resolved {
  std::vector<apt::LoadedRepository> repos;
  std::vector<apt::LockedPackage> packages;
  std::vector<apt::Paragraph> records;  // the packages' index records
  std::map<std::string, std::string> upgraded;  // name -> the version below it replaces
  std::string keyring_from;  // where the keyring of repositories without signed-by came from, when a package's
};

// The archive keyring of `distro` for repositories that name none
// (fetch/apt/keyring.hpp: the machine's, else Debian's package kept in the
// store), looked up once a run; `needed_by` (their InRelease URLs) is for
// the error when there is none.
apt::ArchiveKeyring distro_keyring(const std::string& distro, const std::vector<std::string>& needed_by,
                                   const Store& store, AptFetcher& f, Status& status, const std::string& layer) {
  static std::mutex mu;
  static std::map<std::string, apt::ArchiveKeyring> found;
  apt::KeyringLookup lookup;
  lookup.root = env_or("STACKBUILD_APT_ROOT", "/");
  lookup.needed_by = needed_by;
  const std::string key = store.root().string() + '\n' + lookup.root.string() + '\n' + distro;
  std::lock_guard<std::mutex> g(mu);
  if (auto it = found.find(key); it != found.end()) return it->second;
  apt::ArchiveKeyring k = apt::archive_keyring(distro, lookup, store, *f.fetcher);
  if (!k.from.empty())
    status.message(Level::Info, "layer " + layer + ": " + apt::capitalized(distro) + "'s archive keyring is " +
                                    k.stands_for.string() + " of " + k.from + ", kept in the store");
  found.emplace(key, k);
  return k;
}

Resolved resolve_layer(const Recipe& recipe, const Distro& d, const LayerSpec& spec,
                       const std::vector<apt::Paragraph>& installed, const Store& store, AptFetcher& f,
                       Status& status, const std::vector<std::string>& from_catalog = {}) {
  fetch::Fetcher& fetcher = *f.fetcher;
  auto repos = layer_repositories(recipe, spec, d, status, *f.net);
  apt::LoadOptions lo;
  lo.architecture = recipe.architecture;  // Debian's name is OCI's: amd64, arm64
  // Repositories that name no keyring (signed-by) are checked with the
  // distribution's; looked up only when one needs it.
  std::vector<std::string> unkeyed;
  for (const auto& r : repos)
    if (!r.trusted && r.signed_by.empty()) unkeyed.push_back(r.uri + "/dists/" + r.suite + "/InRelease");
  std::string keyring_id, keyring_from;
  if (!unkeyed.empty()) {
    apt::ArchiveKeyring keyring = distro_keyring(d.name, unkeyed, store, f, status, spec.name);
    lo.default_keyring = keyring.file;
    if (keyring.stands_for != keyring.file) lo.default_keyring_as = keyring.stands_for;
    keyring_id = keyring.stands_for.string() + " sha256:" + keyring.sha256;  // never a store's path
    keyring_from = keyring.from;
  }
  lo.origin_pins = layer_pins(recipe, spec);
  apt::SolveRequest req;
  req.packages = wanted(spec, from_catalog);
  req.essential = (installed.empty() && std::any_of(spec.use.begin(), spec.use.end(), is_os_component)) || spec.base;
  req.priority = spec.priority;
  req.recommends = spec.recommends;
  req.installed = installed;

  // One run reads each repository once: matrix points that ask the same of
  // the same repositories share the answer (and are consistent with each
  // other even if the archive changes while the run goes on).
  KeyHasher k;
  k.field("apt-resolve", "2").field("keyring", keyring_id).field("architecture", recipe.architecture);
  for (const auto& rp : repos)
    k.field("repo", nlohmann::json(rp).dump()).field("signed-by", rp.signed_by.string());
  for (const auto& [origin, prio] : lo.origin_pins) k.field("pin", origin + "=" + std::to_string(prio));
  for (const auto& name : req.packages) k.field("package", name);
  k.field("essential", req.essential ? "yes" : "no").field("priority", req.priority)
      .field("recommends", req.recommends ? "yes" : "no");
  for (const auto& para : req.installed)
    for (const auto& [field, value] : para.fields) k.field("installed:" + field, value);
  const Digest key = k.finish();
  static std::mutex memo_mu;
  static std::map<Digest, Resolved> memo;
  {
    std::lock_guard<std::mutex> g(memo_mu);
    if (auto it = memo.find(key); it != memo.end()) return it->second;
  }

  apt::PackageIndex index(recipe.architecture);
  Resolved r;
  r.keyring_from = keyring_from;
  try {
    r.repos = apt::load_repositories(repos, lo, store, fetcher, index);
  } catch (Error& e) {
    if (!keyring_from.empty() && std::string(e.what()).find(lo.default_keyring.string()) != std::string::npos)
      e.add_trace(lo.default_keyring.string() + " is " + lo.default_keyring_as.string() + " of " + keyring_from +
                  ", kept in the store");
    throw;
  }
  apt::Solution sol = apt::solve(index, req);
  r.packages = apt::lock_solution(index, sol);
  r.upgraded = sol.upgraded;
  for (const apt::Package* p : sol.packages) r.records.push_back(apt::parse_paragraphs(p->paragraph).front());
  std::lock_guard<std::mutex> g(memo_mu);
  memo.emplace(key, r);
  return r;
}

// A request's repositories without the logins written into their URLs: the
// lockfile is no place for a password, and a new password is no change.
nlohmann::json without_logins(nlohmann::json request) {
  for (auto& r : request["repositories"])
    if (r.is_object() && r.contains("url") && r["url"].is_string()) {
      std::string url = r["url"].get<std::string>();
      apt::take_url_login(url);
      r["url"] = url;
    }
  return request;
}

// What the recipe asks of an apt layer, as the lockfile records it: a
// --locked build refuses when this changed since `stackbuild lock`.
nlohmann::json request_of(const Recipe& recipe, const LayerSpec& spec) {
  const auto& repos = spec.repositories.empty() ? recipe.repositories : spec.repositories;
  nlohmann::json pins = nlohmann::json::object();
  for (const auto* list : {&recipe.pins, &spec.pins})
    for (const auto& p : *list) pins[p.origin] = p.priority;
  return without_logins({{"packages", wanted(spec)},    {"repositories", repos}, {"pins", pins},
                         {"recommends", spec.recommends}, {"base", spec.base},   {"priority", spec.priority},
                         {"release", spec.version.value}});
}

// The differences between two requests, in words ("" when the same).
std::string request_changes(const nlohmann::json& locked, const nlohmann::json& now) {
  std::vector<std::string> out;
  auto names = [](const nlohmann::json& j) {
    std::set<std::string> s;
    for (const auto& v : j.value("packages", nlohmann::json::array())) s.insert(v.get<std::string>());
    return s;
  };
  std::set<std::string> was = names(locked), is = names(now);
  std::string added, removed;
  for (const auto& n : is)
    if (!was.count(n)) added += (added.empty() ? "" : ", ") + n;
  for (const auto& n : was)
    if (!is.count(n)) removed += (removed.empty() ? "" : ", ") + n;
  if (!added.empty()) out.push_back("packages added: " + added);
  if (!removed.empty()) out.push_back("packages removed: " + removed);
  // Repositories: those removed and added, each in one line.
  auto repo_str = [](const nlohmann::json& r) {
    if (r.is_string()) return r.get<std::string>();
    std::string s = r.contains("default") ? "default" : r.value("url", "");
    for (const char* k : {"suites", "components"})
      if (r.contains(k))
        for (const auto& w : r[k]) s += " " + w.get<std::string>();
    std::string opts;
    for (const auto& [k, v] : r.items())
      if (k != "url" && k != "suites" && k != "components")
        opts += (opts.empty() ? "" : ", ") + k + "=" + (v.is_string() ? v.get<std::string>() : v.dump());
    return opts.empty() ? s : s + " (" + opts + ")";
  };
  auto repo_list = [](const nlohmann::json& j) {
    return j.contains("repositories") && j["repositories"].is_array() ? j["repositories"] : nlohmann::json::array();
  };
  nlohmann::json old_repos = repo_list(locked), new_repos = repo_list(now);
  if (old_repos != new_repos) {
    std::string gone, come;
    for (const auto& r : old_repos)
      if (std::find(new_repos.begin(), new_repos.end(), r) == new_repos.end()) gone += (gone.empty() ? "" : "; ") + repo_str(r);
    for (const auto& r : new_repos)
      if (std::find(old_repos.begin(), old_repos.end(), r) == old_repos.end()) come += (come.empty() ? "" : "; ") + repo_str(r);
    if (gone.empty() && come.empty()) out.push_back("repositories reordered");
    if (!gone.empty()) out.push_back("repositories removed: " + (old_repos.empty() ? std::string("the defaults") : gone));
    if (!come.empty()) out.push_back("repositories added: " + (new_repos.empty() ? std::string("the defaults") : come));
  }
  for (const char* key : {"pins", "recommends", "base", "priority", "release"}) {
    nlohmann::json a = locked.contains(key) ? locked[key] : nlohmann::json(), b = now[key];
    if (a != b) out.push_back(std::string(key) + ": " + a.dump() + " -> " + b.dump());
  }
  std::string s;
  for (const auto& o : out) s += (s.empty() ? "" : "; ") + o;
  return s;
}

std::optional<apt::AptState> state_of(const Store& store, const Layer& l) {
  auto rec = store.get_record("apt-state", apt_state_key(l.diff_id));
  if (!rec) return std::nullopt;
  return apt::AptState::parse(*rec);
}

// `path` relative to `recipe_dir` when it is inside it.
std::optional<fs::path> in_recipe_tree(const fs::path& path, const fs::path& recipe_dir) {
  std::error_code ec;
  fs::path dir = fs::weakly_canonical(recipe_dir.empty() ? fs::path(".") : recipe_dir, ec);
  if (ec) return std::nullopt;
  fs::path rel = fs::weakly_canonical(path, ec).lexically_relative(dir);
  if (ec || rel.empty() || *rel.begin() == "..") return std::nullopt;
  return rel;
}

// A keyring as a layer's cache key holds it: its contents (a new key in the
// same file builds again), and its path relative to the recipe when the
// recipe's tree holds it, else as it is, so that two clones of one
// repository share the layer (a registry cache, docs/cache.md) and a keyring
// of the machine (/usr/share/keyrings/...) is still named by its path, which
// the image's sources may name. A package's keyring kept in the store is
// named by the path it stands for (`named`), read where it is (`file`), so
// no store's path is in a key. "" for none.
std::string keyring_identity(const fs::path& named, const fs::path& file, const fs::path& recipe_dir) {
  if (named.empty()) return "";
  auto rel = in_recipe_tree(named, recipe_dir);
  std::error_code ec;
  std::string digest = fs::is_regular_file(file, ec) ? Digest::of_file(file).str() : "missing";
  return (rel ? "recipe:" + rel->generic_string() : named.generic_string()) + " " + digest;
}

// A keyring's path as the lockfile holds it: relative to the recipe when the
// recipe's tree holds it, for the lockfile is committed beside the recipe and
// read in other clones; else as it is. And back: a relative one is the
// recipe's.
std::string lock_path(const fs::path& path, const fs::path& recipe_dir) {
  if (path.empty()) return "";
  auto rel = in_recipe_tree(path, recipe_dir);
  return rel ? rel->generic_string() : path.string();
}
fs::path unlock_path(const std::string& path, const fs::path& recipe_dir) {
  if (path.empty() || fs::path(path).is_absolute()) return path;
  return fs::absolute(recipe_dir.empty() ? fs::path(".") : recipe_dir) / path;
}

// What a lockfile entry pins: the packages, and the repositories with their
// keyrings. apt_lock_mismatch() reads an entry with it too, so a malformed
// one is refused before the build starts.
Resolved pinned_resolution(const nlohmann::json& entry, const fs::path& recipe_dir) {
  Resolved r;
  r.packages = pinned_list<apt::LockedPackage>(entry, "packages");
  if (!entry.contains("repositories")) return r;
  std::vector<apt::Repository> repos = pinned_list<apt::Repository>(entry, "repositories");
  for (size_t i = 0; i < repos.size(); ++i) {
    const nlohmann::json& j = entry["repositories"][i];  // an object: pinned_list read it
    std::string keyring;
    if (auto k = j.find("keyring"); k != j.end()) {
      if (!k->is_string())
        throw Error("repositories[" + std::to_string(i) + "]: keyring is " + k->dump() +
                    ", not a path");
      keyring = k->get<std::string>();
    }
    repos[i].signed_by = unlock_path(repos[i].signed_by.string(), recipe_dir);
    r.repos.push_back({repos[i], {}, unlock_path(keyring, recipe_dir)});
  }
  for (size_t i = 0; i < r.packages.size(); ++i)
    if (r.packages[i].url.empty() && static_cast<size_t>(r.packages[i].repository) >= r.repos.size())
      throw Error("packages[" + std::to_string(i) + "]: repository " + std::to_string(r.packages[i].repository) +
                  " is not one of the entry's " + std::to_string(r.repos.size()) + " repositories");
  return r;
}

// A lockfile's repositories without a URL are the machine's: each takes the
// URL of this machine's repository of the same suite and components (`now`,
// the layer's repositories here); then every package's URL is its
// repository's and its path.
void locate_packages(Resolved& r, const std::vector<apt::Repository>& now, const std::string& layer) {
  for (auto& lr : r.repos) {
    if (!lr.repo.uri.empty()) continue;
    std::set<std::string> want(lr.repo.components.begin(), lr.repo.components.end());
    for (const auto& n : now)
      if (n.suite == lr.repo.suite && std::set<std::string>(n.components.begin(), n.components.end()) == want) {
        lr.repo.uri = n.uri;
        break;
      }
    if (lr.repo.uri.empty()) {
      std::string comps;
      for (const auto& c : lr.repo.components) comps += " " + c;
      throw Error("--locked: layer '" + layer + "' pins packages of this machine's repository " + lr.repo.suite +
                      comps + ", and this machine's apt configuration has no such repository",
                  ErrorKind::Input);
    }
  }
  for (auto& p : r.packages)
    if (p.url.empty()) p.url = r.repos.at(static_cast<size_t>(p.repository)).repo.uri + "/" + p.path;
}

// What the lockfile's `entry` pins for `spec`, each package with its URL: the
// repositories as this machine has them, the URLs of the machine's
// repositories the lockfile names by suite, and the logins of every URL
// (handed to `net`), which the lockfile does not hold. Working them out
// reads only local files; when it cannot be done now, a lockfile that gives
// every URL still says what to fetch, and a login that is missing shows as
// HTTP 401 naming the URL.
Resolved located_resolution(const Recipe& recipe, const LayerSpec& spec, const BuildOptions& options,
                            const nlohmann::json& entry, apt::AptNetwork& net) {
  Resolved r = pinned_resolution(entry, recipe.dir());
  std::vector<apt::Repository> now;
  try {
    now = layer_repositories(recipe, spec, distro_of(spec, options.variables, options.point), null_status(), net);
  } catch (const Error&) {
    if (std::any_of(r.repos.begin(), r.repos.end(),
                    [](const apt::LoadedRepository& lr) { return lr.repo.uri.empty(); }))
      throw;
  }
  locate_packages(r, now, spec.name);
  return r;
}

// `configure: true`: the maintainer scripts the installer did not run, run
// now by `dpkg --configure -a` in the sandbox on the layers below plus this
// one; what they change joins the layer, and dpkg's status after it is the
// state the next apt layer starts from. Nothing runs when every package is
// already "installed" (none has a preinst or postinst).
std::unique_ptr<TempDir> configure_packages(const Recipe& recipe, const LayerSpec& spec, const std::vector<Layer>& below,
                                            apt::Installed& inst, const Store& store, const BuildOptions& options,
                                            int64_t epoch, Status& status, const Digest& key) {
  bool pending = std::any_of(inst.state.status.begin(), inst.state.status.end(),
                             [](const apt::Paragraph& p) { return p.get("Status") != "install ok installed"; });
  if (!pending) return nullptr;
  BuildSpec steps;
  steps.run = {Text{"dpkg", spec.at("configure")}, Text{"--configure", {}}, Text{"-a", {}}};
  steps.shape = {{true, 3}};
  steps.env = {{"DEBIAN_FRONTEND", Text{"noninteractive", {}}},
               {"DEBCONF_NONINTERACTIVE_SEEN", Text{"true", {}}},
               {"LC_ALL", Text{"C", {}}}};
  auto data = run_on_entries(recipe, spec, steps, below, inst.entries, store, options, epoch, status, key);
  auto it = inst.entries.find("var/lib/dpkg/status");
  if (it == inst.entries.end() || it->second.source.empty())
    throw Error("layer '" + spec.name + "': after dpkg --configure -a the image has no /var/lib/dpkg/status");
  inst.state.status = apt::parse_paragraphs(read_file(it->second.source));
  for (const auto& p : inst.state.status)
    if (p.get("Status") != "install ok installed" && p.get("Status").find("not-installed") == std::string::npos)
      throw Error("layer '" + spec.name + "': dpkg --configure -a left " + p.get("Package") + " '" +
                  p.get("Status") + "'");
  return data;
}

}  // namespace

bool is_apt_layer(const LayerSpec& spec) {
  if (spec.copies() || !spec.build.empty() || !spec.pip.empty()) return false;
  if (!spec.apt.empty() || (spec.from == "apt" && !spec.use.empty())) return true;
  return !spec.use.empty() && std::all_of(spec.use.begin(), spec.use.end(), is_os_component);
}

// Builds one apt layer on top of `below` (the image's layers so far, whose
// dpkg state was recorded when they were built). With options.point.lock (the
// lockfile's entries of the point, pipeline/lock.hpp) the exact packages
// pinned there are fetched; otherwise the repositories are read and the
// packages resolved now.
LayerReport build_apt_layer(const LayerContext& c, Digest& key_out) {
  auto start = std::chrono::steady_clock::now();
  apt::AptState state;
  for (auto it = c.below.rbegin(); it != c.below.rend(); ++it)
    if (auto s = state_of(c.store, *it)) {
      state = *s;
      break;
    }
  AptFetcher f = apt_fetcher(c.store, c.status, c.options.services.make_fetcher);
  Resolved r;
  if (auto entry = locked_entry(c.options.point, "apt", c.spec.name)) {  // --locked: exactly what the lockfile pins
    r = located_resolution(c.recipe, c.spec, c.options, *entry, *f.net);
    // A lockfile names the distribution's keyring by its usual path
    // (/usr/share/keyrings/ubuntu-archive-keyring.gpg), whichever way it was
    // found: here it is looked up as an unlocked build would, so the image
    // gets the same keyring. Without one the path stays as it is: needed
    // only when the image does not ship that file.
    const Distro d = distro_of(c.spec, c.options.variables, c.options.point);
    const fs::path usual = "/" + apt::keyring_package(d.name).file;
    for (auto& lr : r.repos) {
      if (lr.keyring != usual) continue;
      try {
        apt::ArchiveKeyring k = distro_keyring(d.name, {lr.repo.uri + "/dists/" + lr.repo.suite + "/InRelease"},
                                               c.store, f, c.status, c.spec.name);
        lr.keyring = k.file;
        lr.keyring_as = usual;
      } catch (const Error& e) {
        if (e.kind() == ErrorKind::Interrupted) throw;
      }
    }
  } else {
    Distro d = distro_of(c.spec, c.options.variables, c.options.point);
    r = resolve_layer(c.recipe, d, c.spec, state.status, c.store, f, c.status,
                      component_packages(c.spec, c.options.variables, c.options.point));
  }
  if (!r.upgraded.empty()) {
    std::string ups;
    for (const auto& p : r.packages)
      if (r.upgraded.count(p.name)) ups += (ups.empty() ? "" : ", ") + p.name + " " + r.upgraded[p.name] + " -> " + p.version;
    c.status.message(Level::Info, "layer " + c.spec.name + ": upgrades " + ups + " from the layers below");
  }
  KeyHasher k;
  const uint64_t budget = layer_budget(c.recipe, c.options);
  k.field("stackbuild-apt-layer", "5").field("parent", c.parent_key.str()).field("name", c.spec.name);
  hash_layer_options(k, c.options.layer)
      .field("epoch", c.epoch).field("budget", static_cast<int64_t>(budget))
      .field("duplicates", to_string(duplicate_policy(c.spec)));
  if (c.spec.configure) k.field("configure", "dpkg --configure -a");
  for (const auto& p : r.packages) k.field("package", p.name).field("version", p.version).field("sha256", p.sha256);
  for (const auto& lr : r.repos) {
    nlohmann::json repo = lr.repo;
    repo["signed_by"] = keyring_identity(lr.repo.signed_by, lr.repo.signed_by, c.recipe.dir());
    k.field("repo", repo.dump()).field("keyring", keyring_identity(lr.keyring_path(), lr.keyring, c.recipe.dir()));
  }
  Digest key = k.finish();
  key_out = key;
  // What it is made of, for the provenance: each package by its Package URL,
  // where it is fetched from and its sha256.
  auto report = [&](LayerReport rep) {
    std::string distro = "debian";
    try {
      distro = distro_of(c.spec, c.options.variables, c.options.point).name;
    } catch (const Error&) {  // a layer of the recipe's own repositories: they say no distribution
    }
    for (const auto& p : r.packages)
      rep.inputs.push_back(layer_input(
          "apt", c.spec.name, p.url.empty() ? p.path.substr(p.path.rfind('/') + 1) : p.url.substr(p.url.rfind('/') + 1),
          "pkg:deb/" + distro + "/" + sbom::purl_encode(p.name) + "@" + sbom::purl_encode(p.version) +
              "?arch=" + sbom::purl_encode(p.architecture),
          p.url, p.sha256.empty() ? std::nullopt : std::optional<Digest>(Digest::parse("sha256:" + p.sha256))));
    return rep;
  };
  // One layer, or a split one's parts; the next apt layer reads the state
  // recorded for the last of them.
  auto found = find_layers(c.store, key, c.spec.name, c.status, c.options.cache_from,
                           [&](const std::vector<Layer>& parts) { return state_of(c.store, parts.back()).has_value(); });
  if (found.hit) return report(layer_report(c.spec.name, *found.hit, true, 0));
  auto staging = c.store.temp_dir();
  apt::InstallOptions io;
  io.epoch = c.epoch;
  io.sources = r.repos;
  io.staging = staging->path();
  const std::string what = "layer " + c.spec.name + " (" + std::to_string(r.packages.size()) + " packages)";
  int task = c.status.task_begin("install " + what, 0);
  apt::Installed inst;
  try {
    inst = apt::install_packages(r.packages, state, io, c.store, *f.fetcher);
  } catch (...) {
    c.status.task_end(task, "failed");
    throw;
  }
  c.status.task_end(task, std::to_string(inst.entries.size()) + " entries, " +
                            human_bytes(static_cast<double>(content_bytes(inst.entries))));
  std::unique_ptr<TempDir> configured;  // holds what dpkg --configure -a changed until it is written
  if (c.spec.configure) configured = configure_packages(c.recipe, c.spec, c.below, inst, c.store, c.options, c.epoch, c.status, key);
  // Over the budget: split by package, dpkg's status in the last part (fetch/apt/install.hpp: package_groups).
  // The duplicate check (pipeline/duplicate_libraries.hpp), the write and
  // the records: now, or beside the build (pipeline/layer_writes.hpp) with
  // the staging trees kept until then. The next apt layer reads the state
  // recorded for the last part: the kind reads_below(), so it is built after
  // this layer is settled.
  LayerTail tail{budget, apt::package_groups(inst), what, "by package"};
  tail.after = [&store = c.store, state = inst.state.str()](const std::vector<Layer>& parts) {
    store.put_record("apt-state", apt_state_key(parts.back().diff_id), state);
  };
  tail.hold = std::make_shared<std::pair<std::unique_ptr<TempDir>, std::unique_ptr<TempDir>>>(std::move(staging),
                                                                                             std::move(configured));
  LayerParts parts = finish_layer(c, std::move(inst.entries), key, std::move(found), std::move(tail));
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report(layer_report(c.spec.name, parts, secs));
}

namespace {

// The lockfile's "apt" section of one point: for each apt layer
// {"request": what the recipe asked (packages, repositories, pins, options),
// "repositories": [...], "packages": [{name, version, architecture, url,
// sha256, size}, ...]}, resolved now against the repositories.
nlohmann::json lock_apt_layers(const Recipe& recipe, const std::map<std::string, std::string>& variables,
                               const PointInputs& point, const Store& store, Status& status,
                               const fetch::FetcherFactory& make_fetcher) {
  nlohmann::json out = nlohmann::json::object();
  std::map<std::string, apt::Paragraph> below;  // by name: an upgrade replaces the record below
  AptFetcher f = apt_fetcher(store, status, make_fetcher);
  for (const auto& spec : recipe.layers) {
    if (!is_apt_layer(spec)) continue;
    std::vector<apt::Paragraph> installed;
    for (const auto& [name, p] : below) installed.push_back(p);
    Resolved r;
    try {
      r = resolve_layer(recipe, distro_of(spec, variables, point), spec, installed, store, f, status,
                        component_packages(spec, variables, point));
    } catch (Error& e) {
      e.add_trace("while locking apt layer '" + spec.name + "'");
      throw;
    }
    // The recipe's repositories keep their URLs (the recipe holds them); the
    // machine's (its apt configuration, STACKBUILD_APT_SOURCES, the public
    // default) are named by suite and components only, and a --locked build
    // takes their URLs from the machine it runs on. Each package is a path in
    // its repository: the lockfile holds no mirror's host.
    std::set<std::string> recipe_uris;
    for (const auto& s : spec.repositories.empty() ? recipe.repositories : spec.repositories)
      if (!s.is_default) {
        std::string uri = s.url;
        (void)apt::take_url_login(uri);
        while (uri.ends_with("/")) uri.pop_back();
        recipe_uris.insert(uri);
      }
    nlohmann::json repos = nlohmann::json::array();
    for (const auto& lr : r.repos) {
      nlohmann::json j = lr.repo;
      j["signed_by"] = lock_path(lr.repo.signed_by, recipe.dir());
      j["keyring"] = lock_path(lr.keyring_path(), recipe.dir());
      if (!lr.keyring_as.empty() && !r.keyring_from.empty()) j["keyring_from"] = r.keyring_from;
      if (!recipe_uris.count(lr.repo.uri)) {
        j.erase("uri");
        j["from"] = "machine";
      }
      repos.push_back(j);
    }
    for (auto& p : r.packages) {
      size_t best = r.repos.size();
      for (size_t i = 0; i < r.repos.size(); ++i) {
        const std::string& uri = r.repos[i].repo.uri;
        if (p.url.starts_with(uri + "/") && (best == r.repos.size() || uri.size() > r.repos[best].repo.uri.size()))
          best = i;
      }
      if (best == r.repos.size()) continue;  // not under a repository's URL (cannot happen): kept as a URL
      p.path = p.url.substr(r.repos[best].repo.uri.size() + 1);
      p.repository = static_cast<int>(best);
      p.url.clear();
    }
    out[spec.name] = {{"request", request_of(recipe, spec)}, {"repositories", repos}, {"packages", r.packages}};
    for (const auto& p : r.records) below[p.get("Package")] = p;  // below the next apt layer
  }
  return out;
}

}  // namespace

std::vector<std::string> apt_resolve(const std::string& distro, const std::string& codename,
                                     const std::vector<std::string>& packages, const AptResolveOptions& o,
                                     const Store& store, Status& status) {
  LayerSpec spec;
  spec.name = "apt-resolve";
  if (o.base) spec.use = {distro};
  spec.apt = packages;
  spec.recommends = o.recommends;
  spec.priority = o.priority;
  Recipe recipe;
  AptFetcher f = apt_fetcher(store, status);
  Resolved r = resolve_layer(recipe, {distro, codename}, spec, {}, store, f, status);
  std::vector<std::string> out;
  for (const auto& p : r.packages) out.push_back(p.name + " " + p.version + " " + p.url + " " + p.sha256);
  return out;
}

namespace {

// For `build --locked`: "" when the lockfile's entry for apt layer `spec`
// was written for what it asks now; else what changed (packages added and
// removed, repositories, pins or options), or "a malformed entry: ..." when
// its packages or repositories do not read.
std::string apt_lock_mismatch(const Recipe& recipe, const LayerSpec& spec, const nlohmann::json& entry) {
  if (!entry.is_object() || !entry.contains("packages")) return "the entry has no packages";
  if (!entry.contains("request"))
    return "the lockfile does not record what it asked for (written by an older stackbuild)";
  std::string changes = request_changes(without_logins(entry["request"]), request_of(recipe, spec));
  if (!changes.empty()) return changes;
  return malformed_entry([&] { pinned_resolution(entry, recipe.dir()); });
}

// The packages --locked pins for `spec` that the store lacks, where the
// build will fetch them from, with the options its fetches use.
AheadFetch apt_fetch_ahead(const Recipe& recipe, const LayerSpec& spec, const BuildOptions& options,
                           const Store& store, Status&) {
  auto entry = locked_entry(options.point, "apt", spec.name);
  if (!entry) return {};
  auto net = run_network();
  Resolved r = located_resolution(recipe, spec, options, *entry, *net);
  AheadFetch out{apt_fetch_options(net), {}};
  for (auto& item : apt::package_fetch_items(r.packages))
    if (!store.has(*item.sha256)) out.items.push_back(std::move(item));
  return out;
}

}  // namespace

const LayerKind& apt_layer_kind() {
  static const BuilderKind kind("apt", is_apt_layer, build_apt_layer,
                                {"apt",
                                 [](const LockContext& c, const Store& store, Status& status) {
                                   return lock_apt_layers(c.recipe, c.variables, c.point, store, status, c.services.make_fetcher);
                                 },
                                 [](const LockContext& c, const LayerSpec& spec, const nlohmann::json& entry) {
                                   return apt_lock_mismatch(c.recipe, spec, entry);
                                 }},
                                {{"apt-state",  // the dpkg state after the layer, where the next apt layer starts
                                  [](const Digest&, const std::vector<Layer>& parts) -> std::optional<Digest> {
                                    if (parts.empty()) return std::nullopt;
                                    return apt_state_key(parts.back().diff_id);
                                  },
                                  [](const std::string& value) { (void)apt::AptState::parse(value); }}},
                                nullptr, apt_fetch_ahead);
  return kind;
}

}  // namespace sb
