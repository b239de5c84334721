#include "pipeline/apt_layer.hpp"

#include <chrono>
#include <cstdlib>

#include "apt/install.hpp"
#include "apt/repository.hpp"
#include "apt/solver.hpp"
#include "apt/sources.hpp"
#include "catalog/catalog.hpp"
#include "layer/write.hpp"
#include "pipeline/step_layer.hpp"
#include "resolve/lockfile.hpp"
#include "util/error.hpp"
#include "util/file.hpp"

namespace sb {

namespace {

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = getenv(name);
  return v && *v ? std::string(v) : fallback;
}

bool is_os_name(const std::string& u) { return u == "os" || u == "debian" || u == "ubuntu"; }

bool alphabetic(const std::string& s) { return !s.empty() && isalpha(static_cast<unsigned char>(s[0])); }

struct Distro {
  std::string name;      // debian, ubuntu
  std::string codename;  // trixie, noble
};

// The distribution of the point: the layer's own version, else the point's
// `os`; a number ("13") is looked up in the catalog's os records.
Distro distro_of(const Recipe& recipe, const LayerSpec& spec, const std::map<std::string, std::string>& vars) {
  std::string v = spec.version.value;
  if (v.empty())
    if (auto it = vars.find("os"); it != vars.end()) v = it->second;
  Distro d;
  for (const auto& u : spec.use)
    if (u == "debian" || u == "ubuntu") d.name = u;
  std::optional<fs::path> dir = find_catalog(recipe.file);
  if (dir) {
    catalog::Catalog cat = catalog::load_catalog(*dir);
    if (const catalog::Component* os = cat.find("os"))
      for (const auto& r : os->records) {
        bool named = r.version.str() == v || std::find(r.aliases.begin(), r.aliases.end(), v) != r.aliases.end();
        if (!named || (!d.name.empty() && r.info.count("distro") && r.info.at("distro") != d.name)) continue;
        if (r.info.count("codename")) d.codename = r.info.at("codename");
        if (r.info.count("distro")) d.name = r.info.at("distro");
        break;
      }
  }
  if (d.codename.empty() && alphabetic(v) && v != "debian" && v != "ubuntu") d.codename = v;
  if (d.codename.empty())
    throw Error("layer '" + spec.name + "': which release? give `version:` (e.g. trixie) or an os layer below");
  if (d.name.empty()) d.name = "debian";
  return d;
}

std::vector<apt::Repository> repositories(const Distro& d, fs::path& keyring) {
  fs::path root = env_or("STACKBUILD_APT_ROOT", "/");
  keyring = apt::default_keyring(d.name, root);
  std::string file = env_or("STACKBUILD_APT_SOURCES", "");
  if (!file.empty()) {
    std::string text = read_file(file);
    return file.ends_with(".sources") ? apt::parse_sources_deb822(text, file) : apt::parse_sources_list(text, file);
  }
  std::string mine = apt::machine_codename(root);
  std::string machine_distro;
  if (fs::exists(root / "etc/os-release")) {
    std::string os = read_file(root / "etc/os-release");
    auto p = os.find("\nID=");
    if (p != std::string::npos) machine_distro = os.substr(p + 4, os.find('\n', p + 4) - p - 4);
  }
  std::vector<apt::Repository> out;
  if (machine_distro == d.name) out = apt::repositories_for(apt::machine_repositories(root), mine, d.codename);
  if (out.empty())
    throw Error("no repository for " + d.name + " " + d.codename + ": the machine's apt configuration (" +
                (root / "etc/apt").string() + ", " + (machine_distro.empty() ? "unknown" : machine_distro) + " " +
                mine + ") has no " + d.name + " source to derive one from; set STACKBUILD_APT_SOURCES to a "
                ".list or .sources file naming the configured mirror");
  return out;
}

std::map<std::string, int> pins() {
  std::map<std::string, int> out;
  std::string s = env_or("STACKBUILD_APT_PINS", "");
  for (size_t pos = 0; pos < s.size();) {
    size_t end = s.find(',', pos);
    if (end == std::string::npos) end = s.size();
    std::string item = s.substr(pos, end - pos);
    pos = end + 1;
    auto eq = item.find('=');
    if (eq == std::string::npos) throw Error("STACKBUILD_APT_PINS: '" + item + "' is not ORIGIN=PRIORITY");
    out[item.substr(0, eq)] = std::stoi(item.substr(eq + 1));
  }
  return out;
}

std::vector<std::string> wanted(const LayerSpec& spec) {
  std::vector<std::string> w;
  bool os = std::any_of(spec.use.begin(), spec.use.end(), is_os_name);
  if (os) w.push_back("apt");  // apt-get keeps working in the image
  w.insert(w.end(), spec.packages.begin(), spec.packages.end());
  w.insert(w.end(), spec.apt.begin(), spec.apt.end());
  return w;
}

fetch::FetchOptions fetch_options() {
  fetch::FetchOptions o;
  o.offline = env_or("STACKBUILD_OFFLINE", "") == "1";
  return o;
}

// The repositories read and the packages of one layer resolved against them.
struct Resolved {
  std::vector<apt::LoadedRepository> repos;
  std::vector<apt::LockedPackage> packages;
  std::vector<apt::Paragraph> records;  // the packages' index records
};

Resolved resolve_layer(const Distro& d, const LayerSpec& spec, const std::vector<apt::Paragraph>& installed,
                       const Store& store, fetch::Fetcher& fetcher) {
  fs::path keyring;
  auto repos = repositories(d, keyring);
  apt::LoadOptions lo;
  lo.default_keyring = keyring;
  lo.origin_pins = pins();
  apt::PackageIndex index("amd64");
  Resolved r;
  r.repos = apt::load_repositories(repos, lo, store, fetcher, index);
  apt::SolveRequest req;
  req.packages = wanted(spec);
  req.essential = installed.empty() && std::any_of(spec.use.begin(), spec.use.end(), is_os_name);
  req.installed = installed;
  apt::Solution sol = apt::solve(index, req);
  r.packages = apt::lock_solution(index, sol);
  for (const apt::Package* p : sol.packages) r.records.push_back(apt::parse_paragraphs(p->paragraph).front());
  return r;
}

std::optional<apt::AptState> state_of(const Store& store, const Layer& l) {
  auto rec = store.get_record("apt-state", KeyHasher().field("diff_id", l.diff_id.str()).finish());
  if (!rec) return std::nullopt;
  return apt::AptState::parse(*rec);
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
  if (!spec.apt.empty()) return true;
  return !spec.use.empty() && std::all_of(spec.use.begin(), spec.use.end(), is_os_name);
}

LayerReport build_apt_layer(const Recipe& recipe, const LayerSpec& spec, const Digest& key_parent,
                            const std::vector<Layer>& below, const Store& store, const BuildOptions& options,
                            int64_t epoch, Status& status, Digest& key_out) {
  auto start = std::chrono::steady_clock::now();
  apt::AptState state;
  for (auto it = below.rbegin(); it != below.rend(); ++it)
    if (auto s = state_of(store, *it)) {
      state = *s;
      break;
    }
  auto fetcher = fetch::make_fetcher(store, fetch_options(), status);
  Resolved r;
  nlohmann::json lock = options.apt_lock.empty() ? nlohmann::json() : nlohmann::json::parse(options.apt_lock);
  if (lock.contains(spec.name)) {  // --locked: exactly what the lockfile pins
    r.packages = lock[spec.name].at("packages").get<std::vector<apt::LockedPackage>>();
    for (const auto& j : lock[spec.name].value("repositories", nlohmann::json::array()))
      r.repos.push_back({j.get<apt::Repository>(), {}, j.value("keyring", std::string())});
  } else {
    Distro d = distro_of(recipe, spec, options.variables);
    r = resolve_layer(d, spec, state.status, store, *fetcher);
  }
  KeyHasher k;
  k.field("stackbuild-apt-layer", "2").field("parent", key_parent.str()).field("name", spec.name)
      .field("compression", to_string(options.layer.compression)).field("level", options.layer.level)
      .field("epoch", epoch);
  if (spec.configure) k.field("configure", "dpkg --configure -a");
  for (const auto& p : r.packages) k.field("package", p.name).field("version", p.version).field("sha256", p.sha256);
  for (const auto& lr : r.repos) k.field("repo", nlohmann::json(lr.repo).dump()).field("keyring", lr.keyring.string());
  Digest key = k.finish();
  key_out = key;
  if (auto rec = store.get_record("layer", key)) {
    Layer l = layer_from_json(nlohmann::json::parse(*rec));
    if (store.has(l.digest) && state_of(store, l)) {
      status.message(Level::Info, "layer " + spec.name + ": cached " + l.digest.str());
      return LayerReport{spec.name, l, true, 0};
    }
  }
  auto lock_file = store.lock("layer-" + key.hex());
  auto staging = store.temp_dir();
  apt::InstallOptions io;
  io.epoch = epoch;
  io.sources = r.repos;
  io.staging = staging->path();
  apt::Installed inst = apt::install_packages(r.packages, state, io, store, *fetcher);
  std::unique_ptr<TempDir> configured;  // holds what dpkg --configure -a changed until it is written
  if (spec.configure) configured = configure_packages(recipe, spec, below, inst, store, options, epoch, status, key);
  int task = status.task_begin("layer " + spec.name + " (" + std::to_string(r.packages.size()) + " packages)",
                               content_bytes(inst.entries));
  Layer l = write_layer(inst.entries, store, options.layer, [&](uint64_t done) { status.task_progress(task, done); });
  store.put_record("apt-state", KeyHasher().field("diff_id", l.diff_id.str()).finish(), inst.state.str());
  store.put_record("layer", key, nlohmann::json(l).dump());
  status.task_end(task, l.digest.str() + ", " + human_bytes(static_cast<double>(l.size)));
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return LayerReport{spec.name, l, false, secs};
}

nlohmann::json lock_apt_layers(const Recipe& recipe, const std::map<std::string, std::string>& variables,
                               const Store& store, Status& status) {
  nlohmann::json out = nlohmann::json::object();
  std::vector<apt::Paragraph> installed;
  auto fetcher = fetch::make_fetcher(store, fetch_options(), status);
  for (const auto& spec : recipe.layers) {
    if (!is_apt_layer(spec)) continue;
    Resolved r = resolve_layer(distro_of(recipe, spec, variables), spec, installed, store, *fetcher);
    nlohmann::json repos = nlohmann::json::array();
    for (const auto& lr : r.repos) {
      nlohmann::json j = lr.repo;
      j["keyring"] = lr.keyring.string();
      repos.push_back(j);
    }
    out[spec.name] = {{"repositories", repos}, {"packages", r.packages}};
    installed.insert(installed.end(), r.records.begin(), r.records.end());  // below the next apt layer
  }
  return out;
}

std::vector<std::string> apt_resolve(const std::string& distro, const std::string& codename,
                                     const std::vector<std::string>& packages, bool base, const Store& store,
                                     Status& status) {
  LayerSpec spec;
  spec.name = "apt-resolve";
  if (base) spec.use = {distro};
  spec.apt = packages;
  auto fetcher = fetch::make_fetcher(store, fetch_options(), status);
  Resolved r = resolve_layer({distro, codename}, spec, {}, store, *fetcher);
  std::vector<std::string> out;
  for (const auto& p : r.packages) out.push_back(p.name + " " + p.version + " " + p.url + " " + p.sha256);
  return out;
}

std::vector<nlohmann::json> lock_extras(const Planned& planned, const Store& store, Status& status) {
  std::vector<nlohmann::json> out;
  bool any = std::any_of(planned.recipe.layers.begin(), planned.recipe.layers.end(), is_apt_layer);
  for (const auto& p : planned.plan.points) {
    if (!any || !p.stack) {
      out.push_back(nullptr);
      continue;
    }
    try {
      Recipe r = resolve::instantiate(planned.recipe, p);
      out.push_back({{"apt", lock_apt_layers(r, resolve::point_variables(planned.recipe, p), store, status)}});
    } catch (Error& e) {
      e.add_trace("while locking the apt packages of point " + p.point.id());
      throw;
    }
  }
  return out;
}

std::string locked_apt(const Planned& planned, const resolve::PlanPoint& point) {
  fs::path path = resolve::lock_path(planned.recipe.file);
  std::error_code ec;
  if (!fs::exists(path, ec)) return "";
  nlohmann::json j = resolve::locked_field(read_file(path), point.point, "apt");
  return j.is_null() ? "" : j.dump();
}

}  // namespace sb
