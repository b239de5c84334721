// Registry credentials from the machine (registry/auth.hpp): an auth file
// (containers' auth.json, docker's config.json, the old ~/.dockercfg) and
// what a credential helper prints. Besides not crashing and only sb::Error
// for a bad file: no secret of the input ever shows in an error message, and
// credentials are only ever given for the registry (and repository) asked.
#include <algorithm>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "fuzz.hpp"
#include "registry/auth.hpp"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The strings the input gives as "auth", "password", "identitytoken" or
// "Secret" (up to the next quote, backslash or control character), of at
// least 6 bytes and not found elsewhere in the input: what an error message
// must not show (check_no_secret).
std::vector<std::string> secrets_of(std::string_view in) {
  std::vector<std::string> out;
  for (const char* field : {"\"auth\"", "\"password\"", "\"identitytoken\"", "\"Secret\""}) {
    for (size_t at = in.find(field); at != std::string_view::npos; at = in.find(field, at + 1)) {
      size_t i = at + std::string_view(field).size();
      while (i < in.size() && (in[i] == ' ' || in[i] == '\n' || in[i] == '\t' || in[i] == '\r')) ++i;
      if (i >= in.size() || in[i] != ':') continue;
      ++i;
      while (i < in.size() && (in[i] == ' ' || in[i] == '\n' || in[i] == '\t' || in[i] == '\r')) ++i;
      if (i >= in.size() || in[i] != '"') continue;
      size_t end = i + 1;  // the next quote, escape or control character (shown otherwise in a message)
      while (end < in.size() && in[end] != '"' && in[end] != '\\' && static_cast<unsigned char>(in[end]) >= 0x20) ++end;
      std::string_view s = in.substr(i + 1, end - i - 1);
      if (s.size() < 6) continue;
      size_t first = in.find(s);
      if (in.find(s, first + 1) == std::string_view::npos) out.emplace_back(s);
    }
  }
  return out;
}

// `s` with its letters and digits each turned to the next one: the same
// length and the same kinds of bytes, so the input parses the same way.
std::string rotated(std::string s) {
  for (char& c : s) {
    if (c >= 'a' && c <= 'z') c = c == 'z' ? 'a' : static_cast<char>(c + 1);
    else if (c >= 'A' && c <= 'Z') c = c == 'Z' ? 'A' : static_cast<char>(c + 1);
    else if (c >= '0' && c <= '9') c = c == '9' ? '0' : static_cast<char>(c + 1);
  }
  return s;
}

// The sb::Error message `run(input)` ends with, "" for none.
template <class F>
std::string message_of(F& run, const std::string& input) {
  try {
    run(input);
  } catch (const sb::Error& e) {
    return e.what();
  }
  return "";
}

// Runs `run` on the input; an sb::Error it throws must not show a secret.
// A secret's text in the message can also come from elsewhere (the
// registry's name, the message's own words, which a fuzzer soon copies
// into a secret): it is a leak when, with every secret rotated, the
// message shows the rotated text instead.
template <class F>
void check_no_secret(const std::string& input, const std::vector<std::string>& secrets, F&& run) {
  const std::string message = message_of(run, input);
  if (message.empty()) return;
  std::string disguised = input, again;
  bool ran = false;
  for (const auto& s : secrets)
    if (auto at = disguised.find(s); at != std::string::npos) disguised.replace(at, s.size(), rotated(s));
  for (const auto& s : secrets) {
    if (message.find(s) == std::string::npos || rotated(s) == s) continue;
    if (!ran) again = message_of(run, disguised), ran = true;
    sb::fuzz::check(again.find(rotated(s)) == std::string::npos,
                    "an error message shows a secret of the input: " + message);
  }
}

struct Asked {
  const char* registry;
  const char* repository;
};
constexpr Asked kAsked[] = {{"registry-1.docker.io", "library/debian"}, {"docker.io", "library/debian"},
                            {"example.com", "team/app"},              {"example.com:5000", "team/app/sub"},
                            {"ghcr.io", "o/r"},                         {"other.example.com", "a"}};

// What an auths key names, as containers-auth.json(5) and docker read it: a
// URL stands for its host; else HOST[/PATH] (trailing slashes dropped).
// Docker Hub has three host names.
struct KeyName {
  std::string host, path;
};
KeyName key_name(std::string k) {
  if (auto p = k.find("://"); p != std::string::npos) k = k.substr(p + 3), k = k.substr(0, k.find('/'));
  while (!k.empty() && k.back() == '/') k.pop_back();
  auto slash = k.find('/');
  return {k.substr(0, slash), slash == std::string::npos ? "" : k.substr(slash + 1)};
}
std::string hub(const std::string& host) {
  return host == "index.docker.io" || host == "registry-1.docker.io" ? "docker.io" : host;
}
// How well `key` fits `asked`: -1 not at all, else the length of its path.
long fit(const std::string& key, const Asked& asked) {
  KeyName n = key_name(key);
  if (hub(n.host) != hub(asked.registry)) return -1;
  std::string repo = asked.repository;
  if (n.path.empty()) return 0;
  if (repo == n.path || repo.starts_with(n.path + "/")) return static_cast<long>(n.path.size());
  return -1;
}

}  // namespace

// The first byte picks the file: containers' auth.json ($REGISTRY_AUTH_FILE),
// docker's config.json ($DOCKER_CONFIG, where credsStore counts too) or
// ~/.dockercfg (hosts at the top level). PATH has no credential helper, so a
// helper the file names fails (sb::Error). Then, when the file is a JSON
// object, every auths entry's login is replaced by one that says which key
// it is under and the helpers are dropped: what each registry asked gets is
// the login of a key for that registry, the most specific there is.
SB_FUZZ_TARGET(auth_file) {
  if (size == 0) return;
  const fs::path& scratch = sb::fuzz::fresh_scratch();
  const int kind = data[0] % 3;
  const std::string input(sb::fuzz::text(data + 1, size - 1));
  const std::vector<std::string> secrets = secrets_of(input);
  fs::create_directories(scratch / "bin");
  fs::create_directories(scratch / "home/.docker");
  sb::registry::CredentialOptions o;
  o.root = scratch;
  o.env = {{"HOME", (scratch / "home").string()}, {"XDG_RUNTIME_DIR", (scratch / "run").string()},
           {"XDG_CONFIG_HOME", (scratch / "config").string()}, {"PATH", (scratch / "bin").string()}};
  fs::path file = kind == 0 ? scratch / "auth.json" : kind == 1 ? scratch / "home/.docker/config.json" : scratch / "home/.dockercfg";
  if (kind == 0) o.env["REGISTRY_AUTH_FILE"] = file.string();
  for (const auto& a : kAsked)
    check_no_secret(input, secrets, [&](const std::string& in) {
      sb::fuzz::write_file(file, in);
      (void)sb::registry::find_credentials(a.registry, a.repository, o);
    });

  // The second pass: logins that say where they came from.
  json cfg;
  try {
    cfg = json::parse(input);
  } catch (const json::exception&) {
    return;
  }
  if (!cfg.is_object()) return;
  json* auths = kind == 2 ? &cfg : cfg.contains("auths") && cfg["auths"].is_object() ? &cfg["auths"] : nullptr;
  if (!auths) return;
  cfg.erase("credHelpers");
  cfg.erase("credsStore");
  std::vector<std::string> keys;
  for (auto& [key, entry] : auths->items()) {
    entry = {{"username", "user" + std::to_string(keys.size())}, {"password", "secret"}};
    keys.push_back(key);
  }
  sb::fuzz::write_file(file, cfg.dump());
  for (const auto& a : kAsked) {
    std::optional<sb::registry::Credentials> c;
    bool read = sb::fuzz::expect_errors([&] { c = sb::registry::find_credentials(a.registry, a.repository, o); });
    sb::fuzz::check(read, "the file with plain logins was refused");
    long best = -1;
    for (const auto& k : keys) best = std::max(best, fit(k, a));
    std::string asked = std::string(a.registry) + "/" + a.repository;
    if (!c) {
      sb::fuzz::check(best < 0, "no login for " + asked + ", though the file has one for it");
      continue;
    }
    size_t i = keys.size();
    if (c->username.starts_with("user")) i = std::strtoul(c->username.c_str() + 4, nullptr, 10);
    sb::fuzz::check(i < keys.size(), "a login for " + asked + " that no key of the file holds");
    sb::fuzz::check(fit(keys[i], a) >= 0, "the login under '" + keys[i] + "' was given for " + asked);
    sb::fuzz::check(fit(keys[i], a) == best, "the login under '" + keys[i] + "' was given for " + asked +
                                                 ", though a more specific key is there");
  }
}

// What `docker-credential-NAME get` prints: only sb::Error, which shows no
// secret, for what is not credentials; credentials always carry a secret.
SB_FUZZ_TARGET(credential_helper) {
  const std::string output(sb::fuzz::text(data, size));
  const std::vector<std::string> secrets = secrets_of(output);
  check_no_secret(output, secrets, [](const std::string& in) {
    auto c = sb::registry::parse_helper_output(in, "docker-credential-fuzz", "example.com");
    if (!c) return;
    sb::fuzz::check(!c->password.empty() || !c->identity_token.empty(), "helper credentials without a secret");
    sb::fuzz::check(c->identity_token.empty() || (c->username.empty() && c->password.empty()),
                    "an identity token beside a username or password");
  });
}
