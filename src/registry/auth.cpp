#include "registry/auth.hpp"

#include <unistd.h>

#include <cstring>

#include <nlohmann/json.hpp>

#include "registry/machine.hpp"
#include "util/error.hpp"
#include "util/file.hpp"
#include "util/json.hpp"
#include "util/process.hpp"

namespace sb::registry {

using json = nlohmann::json;

static const char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string base64_encode(std::string_view in) {
  std::string out;
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    unsigned v = (unsigned char)in[i] << 16 | (unsigned char)in[i + 1] << 8 | (unsigned char)in[i + 2];
    for (int s = 18; s >= 0; s -= 6) out += kB64[(v >> s) & 63];
  }
  if (i + 1 == in.size()) {
    unsigned v = (unsigned char)in[i] << 16;
    out += kB64[v >> 18], out += kB64[(v >> 12) & 63], out += "==";
  } else if (i + 2 == in.size()) {
    unsigned v = (unsigned char)in[i] << 16 | (unsigned char)in[i + 1] << 8;
    out += kB64[v >> 18], out += kB64[(v >> 12) & 63], out += kB64[(v >> 6) & 63], out += '=';
  }
  return out;
}

std::string base64_decode(std::string_view in) {
  std::string out;
  unsigned v = 0;
  int bits = 0;
  for (char c : in) {
    if (c == '=' || c == '\n' || c == '\r') continue;
    const char* p = c ? std::strchr(kB64, c) : nullptr;
    if (!p) throw Error("invalid base64");
    v = v << 6 | static_cast<unsigned>(p - kB64);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((v >> bits) & 0xff);
    }
  }
  return out;
}

std::string url_encode(std::string_view s) {
  static const char hex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%', out += hex[c >> 4], out += hex[c & 15];
    }
  }
  return out;
}

std::optional<Challenge> parse_challenge(std::string_view h) {
  size_t i = 0;
  while (i < h.size() && h[i] == ' ') ++i;
  size_t s = i;
  while (i < h.size() && h[i] != ' ') ++i;
  if (i == s) return std::nullopt;
  Challenge c;
  for (size_t k = s; k < i; ++k) c.scheme += static_cast<char>(std::tolower(static_cast<unsigned char>(h[k])));
  while (i < h.size()) {
    while (i < h.size() && (h[i] == ' ' || h[i] == ',')) ++i;
    size_t eq = h.find('=', i);
    if (eq == std::string_view::npos) break;
    std::string name;
    for (size_t k = i; k < eq; ++k) name += static_cast<char>(std::tolower(static_cast<unsigned char>(h[k])));
    i = eq + 1;
    std::string value;
    if (i < h.size() && h[i] == '"') {
      for (++i; i < h.size() && h[i] != '"'; ++i) {
        if (h[i] == '\\' && i + 1 < h.size()) ++i;
        value += h[i];
      }
      ++i;
    } else {
      while (i < h.size() && h[i] != ',') value += h[i++];
    }
    c.params[name] = value;
  }
  return c;
}

std::filesystem::path docker_config_path(const std::map<std::string, std::string>& env) {
  auto get = [&](const char* k) {
    auto it = env.find(k);
    return it == env.end() ? std::string() : it->second;
  };
  if (!get("DOCKER_CONFIG").empty()) return std::filesystem::path(get("DOCKER_CONFIG")) / "config.json";
  if (!get("HOME").empty()) return std::filesystem::path(get("HOME")) / ".docker" / "config.json";
  return {};
}

std::optional<Credentials> parse_helper_output(const std::string& output, const std::string& program,
                                               const std::string& registry) {
  try {
    json j = json::parse(output);
    Credentials c{j.value("Username", ""), j.value("Secret", ""), program};
    if (c.password.empty()) return std::nullopt;
    if (c.username == "<token>") c.identity_token = c.password, c.username.clear(), c.password.clear();
    return c;
  } catch (const json::exception&) {
    throw Error("credential helper " + program + " for " + registry + " did not print JSON credentials");
  }
}

namespace {

// An auth file's key as a name to match: "https://index.docker.io/v1/" (a
// URL, as docker login writes them) is its host; "docker.io",
// "index.docker.io" and "registry-1.docker.io" are all Docker Hub, "docker.io".
std::string normalize_key(std::string k) {
  if (auto p = k.find("://"); p != std::string::npos) {
    k = k.substr(p + 3);
    k = k.substr(0, k.find('/'));
  }
  while (!k.empty() && k.back() == '/') k.pop_back();
  std::string host = k.substr(0, k.find('/')), rest = k.substr(host.size());
  if (host == "index.docker.io" || host == "registry-1.docker.io") host = "docker.io";
  return host + rest;
}

std::string helper_server(const std::string& registry) {
  return registry == "registry-1.docker.io" ? "https://index.docker.io/v1/" : registry;
}

// Runs docker-credential-NAME get; none when it knows nothing for `registry`.
std::optional<Credentials> from_helper(const std::string& name, const std::string& registry,
                                              const CredentialOptions& o) {
  std::string program = "docker-credential-" + name;
  TempDir dir;
  write_file_atomic(dir.path() / "server", helper_server(registry));
  ProcessSpec spec{.argv = {program, "get"}, .env = o.env, .capture_stdout = true};
  spec.stdin_path = dir.path() / "server";
  ProcessResult r;
  try {
    r = run_process(spec);
  } catch (const Error& e) {
    throw Error("credential helper " + program + " for " + registry + ": " + e.what());
  }
  // A helper says "credentials not found" on stdout and exits 1: anonymous.
  if (r.exit_status != 0) {
    if (r.output.find("not found") != std::string::npos) return std::nullopt;
    throw Error("credential helper " + program + " for " + registry + " exited with status " +
                std::to_string(r.exit_status));
  }
  return parse_helper_output(r.output, program, registry);
}

// Refuses a field of an auth file that has the wrong type, as skopeo and
// docker do (Go's decoding fails on it), rather than going on without a
// login and meeting a 401 that does not say why. It names the value's kind
// alone: the file holds secrets, which are never printed.
[[noreturn]] void wrong_type(const std::string& shown, const std::string& field, const json& v,
                             const char* want) {
  throw Error(shown + ": " + field + " is " + json_kind(v) + ", not " + want);
}

// Every auths entry, whichever registry it is for, as Go decodes the file.
void check_entry(const json& entry, const std::string& key, const std::string& shown) {
  const std::string field = "auths[\"" + key + "\"]";
  if (!entry.is_object()) wrong_type(shown, field, entry, "an object");
  for (const char* k : {"auth", "username", "password", "identitytoken", "email"})
    if (entry.contains(k) && !entry[k].is_string() && !entry[k].is_null())
      wrong_type(shown, field + "." + k, entry[k], "a string");
}

// An auths entry's login: "auth" (base64 USER:PASSWORD) or username and
// password; with an "identitytoken", that token in place of the password.
// The entry passed check_entry().
std::optional<Credentials> entry_login(const json& entry, const std::string& key,
                                       const std::string& shown) {
  auto text = [&](const char* k) { return entry.contains(k) && entry[k].is_string() ? entry[k].get<std::string>() : ""; };
  Credentials c{"", "", shown, text("identitytoken")};
  if (!text("auth").empty()) {
    std::string plain;
    try {
      plain = base64_decode(text("auth"));
    } catch (const Error&) {
      throw Error(shown + ": the auth entry for " + key + " is not base64");
    }
    auto colon = plain.find(':');
    if (colon == std::string::npos) throw Error(shown + ": the auth entry for " + key + " is not USER:PASSWORD");
    c.username = plain.substr(0, colon), c.password = plain.substr(colon + 1);
  } else if (entry.contains("username") && entry.contains("password")) {
    c.username = text("username"), c.password = text("password");
  } else if (c.identity_token.empty()) {
    return std::nullopt;
  }
  if (!c.identity_token.empty()) c.password.clear();  // docker writes "USER:" beside the token
  return c;
}

// What one auth file says for `registry`, `names` being its keys to try,
// most specific first ("docker.io/library/debian", "docker.io/library", "docker.io").
std::optional<Credentials> from_file(const AuthFile& f, const std::string& registry, const std::vector<std::string>& names,
                                     const CredentialOptions& o) {
  if (::access(f.path.c_str(), R_OK) != 0) return std::nullopt;  // missing, or another user's
  json cfg;
  try {
    cfg = json::parse(read_file(f.path));
  } catch (const json::parse_error& e) {
    // Not e.what(): it quotes the token read last, which can be a secret of
    // the file (a login cut short, a password holding a control character).
    throw Error(f.shown + " is not valid JSON (at byte " + std::to_string(e.byte) + ")");
  } catch (const json::exception&) {
    throw Error(f.shown + " is not valid JSON");
  }
  if (!cfg.is_object()) throw Error(f.shown + " is not a JSON object");
  const std::string& host = names.back();
  if (!f.legacy) {
    if (cfg.contains("credHelpers") && !cfg["credHelpers"].is_null()) {
      const json& helpers = cfg["credHelpers"];
      if (!helpers.is_object()) wrong_type(f.shown, "credHelpers", helpers, "an object");
      for (const auto& [key, helper] : helpers.items()) {
        if (!helper.is_string())
          wrong_type(f.shown, "credHelpers[\"" + key + "\"]", helper, "a string");
        if (normalize_key(key) == host) return from_helper(helper.get<std::string>(), registry, o);
      }
    }
    if (f.docker && cfg.contains("credsStore") && !cfg["credsStore"].is_null()) {
      if (!cfg["credsStore"].is_string())
        wrong_type(f.shown, "credsStore", cfg["credsStore"], "a string");
      if (auto c = from_helper(cfg["credsStore"].get<std::string>(), registry, o)) return c;
    }
  }
  const json none = json::object();
  const json& auths = f.legacy                                           ? cfg
                      : cfg.contains("auths") && !cfg["auths"].is_null() ? cfg["auths"]
                                                                         : none;
  if (!auths.is_object()) wrong_type(f.shown, "auths", auths, "an object");
  for (const auto& [key, entry] : auths.items()) check_entry(entry, key, f.shown);
  for (const auto& want : names)
    for (const auto& [key, entry] : auths.items())
      if (normalize_key(key) == want)
        if (auto c = entry_login(entry, key, f.shown)) return c;
  return std::nullopt;
}

}  // namespace

std::vector<AuthFile> auth_files(const CredentialOptions& o) {
  auto get = [&](const char* k) {
    auto it = o.env.find(k);
    return it == o.env.end() ? std::string() : it->second;
  };
  MachinePaths paths{o.root, o.env};
  std::string home = paths.home().string();
  auto shown = [&](const std::filesystem::path& p) {
    std::string s = p.string();
    return !home.empty() && s.starts_with(home + "/") ? "~" + s.substr(home.size()) : s;
  };
  std::vector<AuthFile> out;
  if (!get("REGISTRY_AUTH_FILE").empty()) {
    out.push_back({get("REGISTRY_AUTH_FILE"), get("REGISTRY_AUTH_FILE")});
  } else {
    std::filesystem::path p = !get("XDG_RUNTIME_DIR").empty()
                                  ? std::filesystem::path(get("XDG_RUNTIME_DIR")) / "containers/auth.json"
                                  : o.root / ("run/containers/" + std::to_string(::getuid())) / "auth.json";
    out.push_back({p, shown(p)});
  }
  std::filesystem::path config = paths.config_home();
  if (!config.empty()) out.push_back({config / "containers/auth.json", shown(config / "containers/auth.json")});
  if (auto d = docker_config_path(o.env); !d.empty())
    out.push_back({d, get("DOCKER_CONFIG").empty() ? "~/.docker/config.json" : d.string(), true});
  if (!home.empty()) out.push_back({std::filesystem::path(home) / ".dockercfg", "~/.dockercfg", false, true});
  return out;
}

std::optional<Credentials> find_credentials(const std::string& registry, const std::string& repository,
                                            const CredentialOptions& o) {
  auto get = [&](const char* k) {
    auto it = o.env.find(k);
    return it == o.env.end() ? std::string() : it->second;
  };
  if (o.creds) {
    auto colon = o.creds->find(':');
    if (colon == std::string::npos || colon == 0)
      throw Error("--creds wants USER:PASSWORD", ErrorKind::Usage);
    return Credentials{o.creds->substr(0, colon), o.creds->substr(colon + 1), "--creds"};
  }
  if (!get("STACKBUILD_REGISTRY_USER").empty())
    return Credentials{get("STACKBUILD_REGISTRY_USER"), get("STACKBUILD_REGISTRY_PASSWORD"),
                       "STACKBUILD_REGISTRY_USER/STACKBUILD_REGISTRY_PASSWORD"};

  // The keys to try, most specific first.
  std::string host = normalize_key(registry);
  std::vector<std::string> names;
  std::string path = repository;
  while (!path.empty()) {
    names.push_back(host + "/" + path);
    auto slash = path.rfind('/');
    path = slash == std::string::npos ? "" : path.substr(0, slash);
  }
  names.push_back(host);
  std::vector<std::string> helpers = o.helpers.empty() ? std::vector<std::string>{"containers-auth.json"} : o.helpers;
  for (const auto& h : helpers) {
    if (h != "containers-auth.json") {
      if (auto c = from_helper(h, registry, o)) return c;
      continue;
    }
    for (const auto& f : auth_files(o))
      if (auto c = from_file(f, registry, names, o)) return c;
  }
  return std::nullopt;
}

}  // namespace sb::registry
