#include "registry/auth.hpp"

#include <unistd.h>

#include <cstring>

#include <nlohmann/json.hpp>

#include "util/error.hpp"
#include "util/file.hpp"
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

// "https://index.docker.io/v1/" and "docker.io" name the same registry as
// "registry-1.docker.io"; other keys may carry a scheme or a path.
static std::string normalize_key(std::string k) {
  if (auto p = k.find("://"); p != std::string::npos) k = k.substr(p + 3);
  k = k.substr(0, k.find('/'));
  if (k == "index.docker.io" || k == "docker.io") k = "registry-1.docker.io";
  return k;
}

static std::string helper_server(const std::string& registry) {
  return registry == "registry-1.docker.io" ? "https://index.docker.io/v1/" : registry;
}

// Runs docker-credential-NAME get; none when it knows nothing for `registry`.
static std::optional<Credentials> from_helper(const std::string& name, const std::string& registry,
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
  try {
    json j = json::parse(r.output);
    Credentials c{j.value("Username", ""), j.value("Secret", ""), program};
    if (c.password.empty()) return std::nullopt;
    return c;
  } catch (const json::exception&) {
    throw Error("credential helper " + program + " for " + registry + " did not print JSON credentials");
  }
}

std::optional<Credentials> find_credentials(const std::string& registry, const CredentialOptions& o) {
  auto get = [&](const char* k) {
    auto it = o.env.find(k);
    return it == o.env.end() ? std::string() : it->second;
  };
  if (o.creds) {
    auto colon = o.creds->find(':');
    if (colon == std::string::npos || colon == 0)
      throw Error("--creds wants USER:PASSWORD", kExitUsage);
    return Credentials{o.creds->substr(0, colon), o.creds->substr(colon + 1), "--creds"};
  }
  if (!get("STACKBUILD_REGISTRY_USER").empty())
    return Credentials{get("STACKBUILD_REGISTRY_USER"), get("STACKBUILD_REGISTRY_PASSWORD"),
                       "STACKBUILD_REGISTRY_USER/STACKBUILD_REGISTRY_PASSWORD"};

  std::filesystem::path path = docker_config_path(o.env);
  if (path.empty() || ::access(path.c_str(), R_OK) != 0) return std::nullopt;
  std::string shown = get("DOCKER_CONFIG").empty() ? "~/.docker/config.json" : path.string();
  json cfg;
  try {
    cfg = json::parse(read_file(path));
  } catch (const json::exception& e) {
    throw Error(path.string() + " is not valid JSON: " + e.what());
  }
  std::string want = normalize_key(registry);
  json helpers = cfg.value("credHelpers", json::object()), auths = cfg.value("auths", json::object());
  for (const auto& [key, helper] : helpers.items())
    if (normalize_key(key) == want && helper.is_string()) return from_helper(helper.get<std::string>(), registry, o);
  if (cfg.contains("credsStore") && cfg["credsStore"].is_string()) {
    if (auto c = from_helper(cfg["credsStore"].get<std::string>(), registry, o)) return c;
  }
  for (const auto& [key, entry] : auths.items()) {
    if (normalize_key(key) != want || !entry.is_object()) continue;
    if (entry.contains("auth") && entry["auth"].is_string() && !entry["auth"].get<std::string>().empty()) {
      std::string plain;
      try {
        plain = base64_decode(entry["auth"].get<std::string>());
      } catch (const Error&) {
        throw Error(shown + ": the auth entry for " + key + " is not base64");
      }
      auto colon = plain.find(':');
      if (colon == std::string::npos) throw Error(shown + ": the auth entry for " + key + " is not USER:PASSWORD");
      return Credentials{plain.substr(0, colon), plain.substr(colon + 1), shown};
    }
    if (entry.contains("username") && entry.contains("password"))
      return Credentials{entry.value("username", ""), entry.value("password", ""), shown};
  }
  return std::nullopt;
}

}  // namespace sb::registry
