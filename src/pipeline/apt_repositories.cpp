// Which repositories an apt layer reads and how it fetches from them
// (pipeline/apt_repositories.hpp).
#include "pipeline/apt_repositories.hpp"

#include <cstdlib>
#include <mutex>

#include "catalog/catalog.hpp"
#include "fetch/apt/sources.hpp"
#include "util/error.hpp"
#include "util/file.hpp"
#include "util/process.hpp"

namespace sb {

namespace {

bool alphabetic(const std::string& s) { return !s.empty() && isalpha(static_cast<unsigned char>(s[0])); }

}  // namespace

// The distribution of the point: the layer's own version, else the point's
// `os`; a number ("13") is looked up in the os records of the plan's catalog.
// The codename is "" when neither says (fine for repositories that name their
// suites; need_codename() says what is missing otherwise).
Distro distro_of(const LayerSpec& spec, const std::map<std::string, std::string>& vars, const PointInputs& point) {
  std::string v = spec.from == "apt" ? "" : spec.version.value;  // from: apt: the version is the component's
  if (v.empty())
    if (auto it = vars.find("os"); it != vars.end()) v = it->second;
  Distro d;
  for (const auto& u : spec.use)
    if (u == "debian" || u == "ubuntu") d.name = u;
  if (const catalog::Component* os = point.catalog ? point.catalog->find("os") : nullptr)
    for (const auto& r : os->records) {
      bool named = r.version.str() == v || std::find(r.aliases.begin(), r.aliases.end(), v) != r.aliases.end();
      if (!named || (!d.name.empty() && r.info.count("distro") && r.info.at("distro") != d.name)) continue;
      if (r.info.count("codename")) d.codename = r.info.at("codename");
      if (r.info.count("distro")) d.name = r.info.at("distro");
      break;
    }
  if (d.codename.empty() && alphabetic(v) && v != "debian" && v != "ubuntu") d.codename = v;
  if (d.name.empty()) d.name = "debian";
  return d;
}

namespace {

const std::string& need_codename(const Distro& d, const std::string& layer, const std::string& why) {
  if (d.codename.empty())
    throw Error("layer '" + layer + "': which release? " + why +
                "; give the layer `version:` (e.g. trixie), an os layer below, or the repositories' `suites:`");
  return d.codename;
}

// The public archives of a distribution (settings STACKBUILD_APT_MIRROR and
// STACKBUILD_APT_SECURITY_MIRROR replace their URLs): the release, its
// -updates and -security suites.
std::vector<apt::Repository> public_repositories(const Distro& d) {
  bool ubuntu = d.name == "ubuntu";
  std::string main = env_or("STACKBUILD_APT_MIRROR", ubuntu ? "http://archive.ubuntu.com/ubuntu" : "http://deb.debian.org/debian");
  std::string security = env_or("STACKBUILD_APT_SECURITY_MIRROR",
                                ubuntu ? "http://security.ubuntu.com/ubuntu" : "http://deb.debian.org/debian-security");
  std::vector<std::string> comps = ubuntu ? std::vector<std::string>{"main", "universe"} : std::vector<std::string>{"main"};
  std::vector<apt::Repository> out;
  auto add = [&](const std::string& uri, const std::string& suite) {
    apt::Repository r;
    r.uri = uri;
    r.suite = suite;
    r.components = comps;
    r.where = "the public " + d.name + " archive";
    out.push_back(r);
  };
  add(main, d.codename);
  if (d.codename != "sid" && d.codename != "unstable") {
    add(main, d.codename + "-updates");
    add(security, d.codename + "-security");
  }
  return out;
}

}  // namespace

std::shared_ptr<apt::AptNetwork> run_network() {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<apt::AptNetwork>> networks;
  const std::string root = env_or("STACKBUILD_APT_ROOT", "/");
  const std::string key = root + '\n' + env_or("APT_CONFIG", "");
  std::lock_guard<std::mutex> g(mu);
  auto& net = networks[key];
  if (!net) net = apt::machine_network(root);
  return net;
}

fetch::FetchOptions apt_fetch_options(const std::shared_ptr<apt::AptNetwork>& net) {
  fetch::FetchOptions o = fetch::fetch_options_from_env();
  o.client.route = [net](const std::string& url) { return net->route(url); };
  o.untrusted_hint = "a private CA is named in apt.conf's Acquire::https::CaInfo, as for apt; see docs/apt.md";
  o.unauthorized_hint = "a login goes in /etc/apt/auth.conf.d/*.conf, as for apt (apt_auth.conf(5)); see docs/apt.md";
  return o;
}

AptFetcher apt_fetcher(const Store& store, Status& status, const fetch::FetcherFactory& make_fetcher) {
  AptFetcher f;
  f.net = run_network();
  f.fetcher = make_fetcher(store, apt_fetch_options(f.net), status);
  return f;
}

namespace {

// The default repositories of a release: STACKBUILD_APT_SOURCES, else the
// machine's apt configuration, else the public archives.
std::vector<apt::Repository> default_repositories(const Distro& d, const std::string& layer, Status& status) {
  fs::path root = env_or("STACKBUILD_APT_ROOT", "/");
  std::string file = env_or("STACKBUILD_APT_SOURCES", "");
  if (!file.empty()) {
    std::string text = read_file(file);
    auto repos = file.ends_with(".sources") ? apt::parse_sources_deb822(text, file) : apt::parse_sources_list(text, file);
    apt::resolve_keyrings(repos, file);  // signed-by=key.gpg: beside the sources file
    return repos;
  }
  std::string mine = apt::machine_codename(root);
  std::string machine_distro;
  if (fs::exists(root / "etc/os-release")) {
    std::string os = read_file(root / "etc/os-release");
    auto p = os.find("\nID=");
    if (p != std::string::npos) machine_distro = os.substr(p + 4, os.find('\n', p + 4) - p - 4);
  }
  need_codename(d, layer, "the default repositories are those of a release");
  std::vector<apt::Repository> out;
  if (machine_distro == d.name) out = apt::repositories_for(apt::machine_repositories(root), mine, d.codename);
  if (out.empty()) {
    out = public_repositories(d);
    status.message(Level::Info, "layer " + layer + ": the machine's apt configuration (" + (root / "etc/apt").string() +
                                    ") has no " + d.name + " source; using " + out.front().uri +
                                    " (set STACKBUILD_APT_MIRROR, or give the recipe `repositories:`)");
  }
  return out;
}

// The repositories of one apt layer: its own `repositories:`, else the
// recipe's, else the defaults; `default` among them stands for the defaults.
// Their URLs still hold any login written into them (layer_repositories).
std::vector<apt::Repository> layer_repositories_with_logins(const Recipe& recipe, const LayerSpec& spec,
                                                            const Distro& d, Status& status) {
  const auto& specs = spec.repositories.empty() ? recipe.repositories : spec.repositories;
  if (specs.empty()) return default_repositories(d, spec.name, status);
  std::vector<apt::Repository> out;
  for (const auto& s : specs) {
    if (s.is_default) {
      auto def = default_repositories(d, spec.name, status);
      if (!s.components.empty())
        for (auto& r : def) r.components = s.components;
      out.insert(out.end(), def.begin(), def.end());
      continue;
    }
    std::vector<std::string> suites = s.suites;
    if (suites.empty()) suites = {need_codename(d, spec.name, "the repository at " + s.where.str() + " names no suites")};
    for (const auto& suite : suites) {
      apt::Repository r;
      r.uri = s.url;
      r.suite = suite;
      r.components = s.components;
      r.signed_by = s.keyring_file;
      r.trusted = s.trusted;
      r.check_valid_until = s.check_valid_until;
      r.priority = s.priority.value_or(500);
      r.where = s.where.str();
      out.push_back(r);
    }
  }
  return out;
}

}  // namespace

// The same, each login written into a URL taken out of it (so that no
// lockfile, image or message holds it) and handed to `net` for the fetches.
std::vector<apt::Repository> layer_repositories(const Recipe& recipe, const LayerSpec& spec, const Distro& d,
                                                Status& status, apt::AptNetwork& net) {
  auto repos = layer_repositories_with_logins(recipe, spec, d, status);
  for (auto& r : repos)
    if (auto login = apt::take_url_login(r.uri)) net.add_login(std::move(*login));
  return repos;
}

// Pins by origin: STACKBUILD_APT_PINS, then the recipe's `pins:`, then the layer's.
std::map<std::string, int> layer_pins(const Recipe& recipe, const LayerSpec& spec) {
  std::map<std::string, int> out;
  std::string s = env_or("STACKBUILD_APT_PINS", "");
  for (size_t pos = 0; pos < s.size();) {
    size_t end = s.find(',', pos);
    if (end == std::string::npos) end = s.size();
    std::string item = s.substr(pos, end - pos);
    pos = end + 1;
    auto eq = item.find('=');
    if (eq == std::string::npos) throw Error("STACKBUILD_APT_PINS: '" + item + "' is not ORIGIN=PRIORITY");
    try {
      out[item.substr(0, eq)] = std::stoi(item.substr(eq + 1));
    } catch (const std::exception&) {
      throw Error("STACKBUILD_APT_PINS: '" + item + "' is not ORIGIN=PRIORITY");
    }
  }
  for (const auto* list : {&recipe.pins, &spec.pins})
    for (const auto& p : *list) out[p.origin] = p.priority;
  return out;
}

}  // namespace sb
