#include "registry/machine.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <set>

#include <nlohmann/json.hpp>
#include <toml++/toml.h>

#include "util/error.hpp"
#include "util/file.hpp"

namespace sb::registry {

namespace fs = std::filesystem;

std::string MachinePaths::get(const std::string& name) const {
  auto it = env.find(name);
  return it == env.end() ? std::string() : it->second;
}

fs::path MachinePaths::home() const { return get("HOME"); }

fs::path MachinePaths::config_home() const {
  if (!get("XDG_CONFIG_HOME").empty()) return get("XDG_CONFIG_HOME");
  return home().empty() ? fs::path() : home() / ".config";
}

std::string logical_name(const Reference& ref, bool selector) {
  std::string host = ref.registry == "registry-1.docker.io" ? "docker.io" : ref.registry;
  std::string out = host + "/" + ref.repository;
  if (selector) {
    if (!ref.tag.empty()) out += ":" + ref.tag;
    if (ref.digest) out += "@" + ref.digest->str();
  }
  return out;
}

namespace {

// How much of `name` a prefix matches (containers/image's rules): all of a
// HOST[/PATH] prefix, followed by the end, ':', '/' or '@'; for *.DOMAIN, a
// host that ends in .DOMAIN. npos: no match.
size_t prefix_match(const std::string& name, const std::string& prefix) {
  auto boundary = [&](size_t at) { return at == name.size() || name[at] == ':' || name[at] == '/' || name[at] == '@'; };
  if (prefix.starts_with("*.")) {
    std::string_view domain = std::string_view(prefix).substr(1);  // ".example.com"
    size_t at = name.find(domain);
    if (at == std::string::npos || name.substr(0, at).find('/') != std::string::npos) return std::string::npos;
    at += domain.size();
    return boundary(at) ? at : std::string::npos;
  }
  if (!name.starts_with(prefix) || !boundary(prefix.size())) return std::string::npos;
  return prefix.size();
}

// A location or prefix as containers/image takes it: trailing slashes off;
// not empty, no URL scheme; a wildcard only for a prefix, as *.DOMAIN.
std::string location_of(const std::string& text, const std::string& what, const std::string& file,
                        bool prefix = false) {
  std::string s = text;
  while (!s.empty() && s.back() == '/') s.pop_back();
  if (s.empty()) throw Error("registries.conf " + file + ": " + what + " is empty");
  if (s.starts_with("http://") || s.starts_with("https://"))
    throw Error("registries.conf " + file + ": " + what + " '" + text +
                "' has a URL scheme; write HOST[:PORT][/PATH] (use insecure = true for plain HTTP)");
  if (s.find('*') != std::string::npos && !prefix)
    throw Error("registries.conf " + file + ": " + what + " '" + text +
                "': a wildcard is allowed only in a [[registry]] prefix");
  if (s.find('*') != std::string::npos && (!s.starts_with("*.") || s.find_first_of("/:@*", 2) != std::string::npos))
    throw Error("registries.conf " + file + ": " + what + " '" + text +
                "': a wildcard is allowed only at the start of a prefix, as *.example.com");
  return s;
}

std::string where(const toml::node& n, const std::string& file) {
  const auto& at = n.source().begin;
  return at.line ? file + ":" + std::to_string(at.line) : file;
}

bool boolean(const toml::node& n, const std::string& key, const std::string& file) {
  if (auto b = n.value_exact<bool>()) return *b;
  throw Error("registries.conf " + where(n, file) + ": " + key + " must be true or false");
}

std::string string(const toml::node& n, const std::string& key, const std::string& file) {
  if (auto s = n.value_exact<std::string>()) return *s;
  throw Error("registries.conf " + where(n, file) + ": " + key + " must be a string");
}

std::vector<std::string> strings(const toml::node& n, const std::string& key, const std::string& file) {
  const toml::array* a = n.as_array();
  if (!a) throw Error("registries.conf " + where(n, file) + ": " + key + " must be an array of strings");
  std::vector<std::string> out;
  for (const auto& e : *a) out.push_back(string(e, key, file));
  return out;
}

MirrorUse mirror_use(const toml::node& n, const std::string& file) {
  std::string v = string(n, "pull-from-mirror", file);
  if (v.empty() || v == "all") return MirrorUse::All;
  if (v == "digest-only") return MirrorUse::DigestOnly;
  if (v == "tag-only") return MirrorUse::TagOnly;
  throw Error("registries.conf " + where(n, file) + ": pull-from-mirror is '" + v +
              "'; it takes all, digest-only or tag-only");
}

// A host[:port] of unqualified-search-registries: no path, no scheme.
void check_host(const std::string& host, const toml::node& n, const std::string& file) {
  bool ok = !host.empty() && host.find_first_of("/@ ") == std::string::npos;
  if (!ok) throw Error("registries.conf " + where(n, file) + ": '" + host + "' in unqualified-search-registries is not HOST[:PORT]");
}

}  // namespace

void RegistriesConf::add(std::string_view text, const std::string& file, bool drop_in) {
  toml::table doc;
  try {
    doc = toml::parse(text, file);
  } catch (const toml::parse_error& e) {
    const auto& at = e.source().begin;
    throw Error("registries.conf " + file + ":" + std::to_string(at.line) + ":" + std::to_string(at.column) + ": " +
                std::string(e.description()));
  }
  static const std::set<std::string> kGlobal = {"registry", "registries", "unqualified-search-registries",
                                                "credential-helpers", "short-name-mode", "aliases",
                                                "additional-layer-store-auth-helper"};
  static const std::set<std::string> kTable = {"prefix", "location", "insecure", "blocked", "mirror",
                                               "mirror-by-digest-only"};
  static const std::set<std::string> kMirror = {"location", "insecure", "pull-from-mirror"};
  auto unknown = [&](const std::string& key, const toml::node& n) {
    warnings.push_back("registries.conf " + where(n, file) + ": '" + key + "' is not a setting stackbuild knows; ignored");
  };

  std::vector<RegistryTable> tables;
  bool v2 = false, v1 = false;
  for (const auto& [k, node] : doc) {
    std::string key(k.str());
    if (!kGlobal.count(key)) {
      unknown(key, node);
      continue;
    }
    if (key == "unqualified-search-registries") {
      v2 = true;
      unqualified_search = strings(node, key, file);
      for (auto& h : unqualified_search) {
        while (!h.empty() && h.back() == '/') h.pop_back();
        check_host(h, node, file);
      }
    } else if (key == "credential-helpers") {
      credential_helpers = strings(node, key, file);
      for (const auto& h : credential_helpers)
        if (h.empty()) throw Error("registries.conf " + where(node, file) + ": an empty name in credential-helpers");
    } else if (key == "short-name-mode") {
      std::string m = string(node, key, file);
      if (!m.empty() && m != "enforcing" && m != "permissive" && m != "disabled")
        throw Error("registries.conf " + where(node, file) + ": short-name-mode is '" + m +
                    "'; it takes enforcing, permissive or disabled");
    } else if (key == "aliases") {
      if (!node.is_table()) throw Error("registries.conf " + where(node, file) + ": aliases must be a table");
    } else if (key == "registries") {  // version 1: [registries.search], [registries.insecure], [registries.block]
      const toml::table* t = node.as_table();
      if (!t) throw Error("registries.conf " + where(node, file) + ": registries must be a table (the version 1 format)");
      for (const auto& [k1, n1] : *t) {
        std::string list(k1.str());
        const toml::table* lt = n1.as_table();
        if (!lt || (list != "search" && list != "insecure" && list != "block")) {
          unknown("registries." + list, n1);
          continue;
        }
        const toml::node* regs = lt->get("registries");
        if (!regs) continue;
        for (const auto& host : strings(*regs, "registries." + list + ".registries", file)) {
          v1 = true;
          std::string loc = location_of(host, "registries." + list + " entry", file);
          if (list == "search") {
            unqualified_search.push_back(loc);
            continue;
          }
          auto it = std::find_if(tables.begin(), tables.end(), [&](const RegistryTable& r) { return r.prefix == loc; });
          if (it == tables.end()) {
            tables.push_back(RegistryTable{loc, Endpoint{loc}, {}, false, false, file});
            it = tables.end() - 1;
          }
          (list == "block" ? it->blocked : it->primary.insecure) = true;
        }
      }
    } else if (key == "registry") {
      const toml::array* arr = node.as_array();
      if (!arr) throw Error("registries.conf " + where(node, file) + ": registry must be an array of tables ([[registry]])");
      for (const auto& entry : *arr) {
        v2 = true;
        const toml::table* t = entry.as_table();
        if (!t) throw Error("registries.conf " + where(entry, file) + ": each registry must be a table ([[registry]])");
        RegistryTable r;
        r.file = file;
        std::optional<std::string> prefix, location;
        bool per_mirror_use = false;
        for (const auto& [k2, n2] : *t) {
          std::string f(k2.str());
          if (!kTable.count(f)) {
            unknown(f, n2);
          } else if (f == "prefix") {
            prefix = string(n2, f, file);
          } else if (f == "location") {
            location = string(n2, f, file);
          } else if (f == "insecure") {
            r.primary.insecure = boolean(n2, f, file);
          } else if (f == "blocked") {
            r.blocked = boolean(n2, f, file);
          } else if (f == "mirror-by-digest-only") {
            r.mirror_by_digest_only = boolean(n2, f, file);
          } else {  // mirror
            const toml::array* ms = n2.as_array();
            if (!ms) throw Error("registries.conf " + where(n2, file) + ": mirror must be an array of tables ([[registry.mirror]])");
            for (const auto& m : *ms) {
              const toml::table* mt = m.as_table();
              if (!mt) throw Error("registries.conf " + where(m, file) + ": each mirror must be a table ([[registry.mirror]])");
              Endpoint e;
              bool has_location = false;
              for (const auto& [k3, n3] : *mt) {
                std::string g(k3.str());
                if (!kMirror.count(g)) unknown(g, n3);
                else if (g == "location") e.location = string(n3, g, file), has_location = true;
                else if (g == "insecure") e.insecure = boolean(n3, g, file);
                else {  // pull-from-mirror
                  e.use = mirror_use(n3, file);
                  if (!string(n3, g, file).empty()) per_mirror_use = true;
                }
              }
              if (!has_location) throw Error("registries.conf " + where(m, file) + ": a mirror without a location");
              e.location = location_of(e.location, "location of a mirror", file);
              r.mirrors.push_back(e);
            }
          }
        }
        if (r.mirror_by_digest_only && per_mirror_use)
          throw Error("registries.conf " + where(entry, file) +
                      ": mirror-by-digest-only and a mirror's pull-from-mirror cannot be set together");
        if (prefix && !prefix->empty()) r.prefix = location_of(*prefix, "prefix", file, true);
        if (location && !location->empty()) r.primary.location = location_of(*location, "location", file);
        if (r.prefix.empty()) {
          if (r.primary.location.empty())
            throw Error("registries.conf " + where(entry, file) + ": a registry needs a location or a prefix");
          r.prefix = r.primary.location;
        }
        if (r.primary.location.empty() && !r.prefix.starts_with("*."))
          throw Error("registries.conf " + where(entry, file) + ": prefix '" + r.prefix +
                      "' needs a location (only a *.example.com prefix may go without one)");
        tables.push_back(std::move(r));
      }
    }
  }
  if (v1 && v2) throw Error("registries.conf " + file + ": mixes the version 1 format ([registries.*]) with version 2");
  if (v1 && drop_in)
    throw Error("registries.conf " + file + ": a drop-in file must use the version 2 format, not [registries.*]");
  // One location mentioned by several tables must agree on insecure and blocked.
  for (size_t i = 0; i < tables.size(); ++i)
    for (size_t j = 0; j < i; ++j) {
      if (tables[i].primary.location.empty() || tables[i].primary.location != tables[j].primary.location) continue;
      for (auto [what, a, b] : {std::tuple{"insecure", tables[i].primary.insecure, tables[j].primary.insecure},
                                std::tuple{"blocked", tables[i].blocked, tables[j].blocked}})
        if (a != b)
          throw Error("registries.conf " + file + ": location '" + tables[i].primary.location +
                      "' is given twice with different " + what + " settings");
    }
  for (auto& r : tables) {
    auto same = std::find_if(tables_.begin(), tables_.end(), [&](const RegistryTable& t) { return t.prefix == r.prefix; });
    if (drop_in && same != tables_.end()) *same = std::move(r);
    else tables_.push_back(std::move(r));
  }
  files_.push_back(file);
}

RegistriesConf RegistriesConf::load(const MachinePaths& paths) {
  RegistriesConf c;
  auto read = [&](const fs::path& p, bool drop_in) {
    std::string text;
    try {
      text = read_file(p);
    } catch (const Error& e) {
      throw Error("registries.conf " + p.string() + ": " + e.what());
    }
    c.add(text, p.string(), drop_in);
  };
  auto drop_ins = [&](const fs::path& dir) {
    std::error_code ec;
    if (dir.empty() || !fs::is_directory(dir, ec)) return;
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (e.path().extension() == ".conf" && e.is_regular_file(ec)) files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) read(f, true);
  };
  fs::path user_dir = paths.config_home().empty() ? fs::path() : paths.config_home() / "containers";
  fs::path system_dir = paths.root / "etc/containers";
  std::error_code ec;
  if (!paths.get("CONTAINERS_REGISTRIES_CONF").empty()) {
    fs::path f = paths.get("CONTAINERS_REGISTRIES_CONF");
    if (!fs::exists(f, ec))
      throw Error("CONTAINERS_REGISTRIES_CONF names " + f.string() + ", which does not exist");
    read(f, false);
  } else if (!user_dir.empty() && fs::exists(user_dir / "registries.conf", ec)) {
    read(user_dir / "registries.conf", false);
    drop_ins(user_dir / "registries.conf.d");
    return c;
  } else if (fs::exists(system_dir / "registries.conf", ec)) {
    read(system_dir / "registries.conf", false);
  }
  drop_ins(system_dir / "registries.conf.d");
  if (!user_dir.empty()) drop_ins(user_dir / "registries.conf.d");
  return c;
}

const RegistryTable* RegistriesConf::find(const Reference& ref) const {
  std::string name = logical_name(ref);
  const RegistryTable* best = nullptr;
  for (const auto& t : tables_)
    if (prefix_match(name, t.prefix) != std::string::npos && (!best || t.prefix.size() > best->prefix.size())) best = &t;
  return best;
}

namespace {

std::string blocked_error(const Reference& ref, const RegistryTable& t) {
  return logical_name(ref) + " is blocked by the registry table with prefix '" + t.prefix + "' in " + t.file;
}

}  // namespace

std::vector<PullSource> RegistriesConf::pull_sources(const Reference& ref) const {
  const RegistryTable* t = find(ref);
  if (!t) return {PullSource{ref, false, false}};
  if (t->blocked) throw Error(blocked_error(ref, *t));
  bool by_digest = ref.digest.has_value();
  std::vector<std::pair<const Endpoint*, bool>> endpoints;
  for (const auto& m : t->mirrors) {
    bool take = t->mirror_by_digest_only ? by_digest
                : m.use == MirrorUse::DigestOnly ? by_digest
                : m.use == MirrorUse::TagOnly    ? !by_digest
                                                 : true;
    if (take) endpoints.emplace_back(&m, true);
  }
  endpoints.emplace_back(&t->primary, false);
  std::string full = logical_name(ref, true);
  size_t matched = prefix_match(full, t->prefix);
  std::vector<PullSource> out;
  for (auto [e, mirror] : endpoints) {
    if (e->location.empty()) {  // a *.DOMAIN table without a location: the name as it is
      out.push_back(PullSource{ref, e->insecure, mirror});
      continue;
    }
    std::string rewritten = e->location + full.substr(matched);
    try {
      out.push_back(PullSource{Reference::parse(rewritten), e->insecure, mirror});
    } catch (const Error& err) {
      throw Error(t->file + ": the table with prefix '" + t->prefix + "' makes " + full + " into '" + rewritten +
                  "', which is not an image reference: " + err.what());
    }
  }
  return out;
}

bool RegistriesConf::push_insecure(const Reference& ref) const {
  const RegistryTable* t = find(ref);
  if (!t) return false;
  if (t->blocked) throw Error(blocked_error(ref, *t));
  return t->primary.insecure;
}

TlsFiles certs_dir(const std::string& host_port, const MachinePaths& paths) {
  TlsFiles out;
  std::vector<fs::path> dirs;
  if (!paths.config_home().empty()) dirs.push_back(paths.config_home() / "containers/certs.d");
  dirs.push_back(paths.root / "etc/containers/certs.d");
  dirs.push_back(paths.root / "etc/docker/certs.d");
  for (const auto& d : dirs) {
    std::error_code ec;
    if (fs::is_directory(d / host_port, ec)) {
      out.dir = d / host_port;
      break;
    }
  }
  if (out.dir.empty()) return out;
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(out.dir, ec)) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    std::string ext = f.extension().string();
    if (ext == ".crt") {
      out.ca_files.push_back(f);
    } else if (ext == ".cert") {
      fs::path key = fs::path(f).replace_extension(".key");
      if (!fs::exists(key, ec))
        throw Error("certs.d: " + f.string() + " is a client certificate without its key " + key.filename().string() +
                    " (a CA certificate takes the extension .crt)");
      if (out.client_cert.empty()) out.client_cert = f, out.client_key = key;
    } else if (ext == ".key") {
      fs::path cert = fs::path(f).replace_extension(".cert");
      if (!fs::exists(cert, ec))
        throw Error("certs.d: " + f.string() + " is a client key without its certificate " + cert.filename().string());
    }
  }
  return out;
}

Policy Policy::parse(std::string_view text, const std::string& file) {
  using json = nlohmann::json;
  Policy p;
  p.file_ = file;
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw Error("policy.json " + file + " is not valid JSON: " + e.what());
  }
  auto fail = [&](const std::string& what) { throw Error("policy.json " + file + ": " + what); };
  if (!j.is_object()) fail("not a JSON object");
  auto requirements = [&](const json& list, const std::string& where) {
    if (!list.is_array() || list.empty()) fail(where + " must be a non-empty list of requirements");
    std::vector<std::string> types;
    for (const auto& r : list) {
      if (!r.is_object() || !r.contains("type") || !r["type"].is_string()) fail(where + ": a requirement without a type");
      std::string t = r["type"].get<std::string>();
      if (t != "insecureAcceptAnything" && t != "reject" && t != "signedBy" && t != "sigstoreSigned")
        fail(where + ": unknown requirement type '" + t + "'");
      if ((t == "insecureAcceptAnything" || t == "reject") && r.size() != 1)
        fail(where + ": a " + t + " requirement takes no other field");
      types.push_back(t);
    }
    return types;
  };
  for (const auto& [key, value] : j.items()) {
    if (key == "default") {
      p.default_ = requirements(value, "default");
    } else if (key == "transports") {
      if (!value.is_object()) fail("transports must be an object");
      for (const auto& [transport, scopes] : value.items()) {
        if (!scopes.is_object()) fail("transports." + transport + " must be an object of scopes");
        for (const auto& [scope, list] : scopes.items()) {
          auto types = requirements(list, "transports." + transport + " \"" + scope + "\"");
          if (transport == "docker") p.docker_[scope] = types;
        }
      }
    } else {
      fail("unknown field '" + key + "'");
    }
  }
  if (p.default_.empty()) fail("the default requirements are missing");
  return p;
}

std::optional<Policy> Policy::load(const MachinePaths& paths) {
  std::vector<fs::path> candidates;
  if (!paths.config_home().empty()) candidates.push_back(paths.config_home() / "containers/policy.json");
  candidates.push_back(paths.root / "etc/containers/policy.json");
  for (const auto& f : candidates) {
    std::error_code ec;
    if (!fs::exists(f, ec)) continue;
    std::string text;
    try {
      text = read_file(f);
    } catch (const Error& e) {
      throw Error("policy.json " + f.string() + ": " + e.what());
    }
    return parse(text, f.string());
  }
  return std::nullopt;
}

std::optional<std::string> Policy::scope_for(const Reference& ref) const {
  // The image itself, its repository, each namespace above it, its host,
  // then *.DOMAIN for each domain above the host (containers/image's order).
  std::vector<std::string> scopes;
  std::string name = logical_name(ref);
  if (ref.digest) scopes.push_back(name + "@" + ref.digest->str());
  else scopes.push_back(name + ":" + (ref.tag.empty() ? std::string("latest") : ref.tag));
  for (std::string s = name; !s.empty();) {
    scopes.push_back(s);
    auto slash = s.rfind('/');
    s = slash == std::string::npos ? "" : s.substr(0, slash);
  }
  std::string host = name.substr(0, name.find('/'));
  host = host.substr(0, host.find(':'));
  for (size_t dot = host.find('.'); dot != std::string::npos; dot = host.find('.', dot + 1))
    scopes.push_back("*" + host.substr(dot));
  for (const auto& s : scopes)
    if (docker_.count(s)) return s;
  if (docker_.count("")) return std::string();
  return std::nullopt;
}

void Policy::check(const Reference& ref) const {
  std::optional<std::string> scope = scope_for(ref);
  const auto& types = scope ? docker_.at(*scope) : default_;
  std::string where = !scope ? "its default" : scope->empty() ? "its docker default \"\"" : "scope \"" + *scope + "\"";
  std::string name = logical_name(ref, true);
  for (const auto& t : types) {
    if (t == "reject") throw Error("policy.json " + file_ + " rejects " + name + " (" + where + ": reject)");
    if (t == "signedBy" || t == "sigstoreSigned")
      throw Error("policy.json " + file_ + " wants " + name + " signed (" + where + ": " + t +
                  "), and stackbuild does not verify image signatures; copy it with skopeo copy docker://" + name +
                  " oci:DIR:TAG, which checks them, and build from: oci:DIR:TAG");
  }
}

namespace {

// `slot`'s value, loaded by `load` the first time; a load that failed
// throws the same error every time. Called under the owner's mutex.
template <class T, class Load>
const T& load_once(MachineRegistries::Loaded<T>& slot, Load load) {
  if (!slot.error.empty()) throw Error(slot.error);
  if (!slot.value) {
    try {
      slot.value = load();
    } catch (const Error& e) {
      slot.error = e.what();
      throw;
    }
  }
  return *slot.value;
}

}  // namespace

const std::optional<Policy>& MachineRegistries::policy() const {
  std::lock_guard<std::mutex> g(mu_);
  return load_once(policy_, [&] { return Policy::load(paths_); });
}

const RegistriesConf& MachineRegistries::conf() const {
  std::lock_guard<std::mutex> g(mu_);
  return load_once(conf_, [&] { return RegistriesConf::load(paths_); });
}

std::vector<std::string> MachineRegistries::take_warnings() const {
  const RegistriesConf& c = conf();
  std::lock_guard<std::mutex> g(mu_);
  if (warned_) return {};
  warned_ = true;
  return c.warnings;
}

TlsFiles MachineRegistries::tls(const std::string& host_port) const {
  std::lock_guard<std::mutex> g(mu_);
  auto it = tls_.find(host_port);
  if (it == tls_.end()) it = tls_.emplace(host_port, certs_dir(host_port, paths_)).first;
  return it->second;
}

std::shared_ptr<const MachineRegistries> machine_registries(const std::map<std::string, std::string>& env) {
  MachinePaths p;
  p.env = env;
  if (auto it = env.find("STACKBUILD_CONTAINERS_ROOT"); it != env.end() && !it->second.empty()) p.root = it->second;
  return std::make_shared<const MachineRegistries>(std::move(p));
}

}  // namespace sb::registry
