// Registry credentials and the parts of HTTP authentication the registry
// session needs: where credentials come from (--creds, the environment,
// ~/.docker/config.json and its credential helpers) and WWW-Authenticate.
// Nothing here ever puts a secret into an error message.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace sb::registry {

struct Credentials {
  std::string username;
  std::string password;
  std::string source;  // where they came from, for messages: "--creds", "~/.docker/config.json", ...
};

struct CredentialOptions {
  std::optional<std::string> creds;           // --creds USER:PASS
  std::map<std::string, std::string> env;     // the environment to read (STACKBUILD_REGISTRY_*, HOME, DOCKER_CONFIG, PATH)
};

// The credentials for `registry` (HOST[:PORT]), first found: --creds, then
// STACKBUILD_REGISTRY_USER/_PASSWORD, then the docker config's credHelpers,
// credsStore and auths. None: anonymous.
std::optional<Credentials> find_credentials(const std::string& registry, const CredentialOptions& options);

// $DOCKER_CONFIG/config.json, else $HOME/.docker/config.json.
std::filesystem::path docker_config_path(const std::map<std::string, std::string>& env);

// One challenge of a WWW-Authenticate header: `Bearer realm="...",service="...",scope="..."`.
struct Challenge {
  std::string scheme;                         // lower case: "bearer", "basic"
  std::map<std::string, std::string> params;  // lower-case names
};
std::optional<Challenge> parse_challenge(std::string_view header);

std::string base64_encode(std::string_view data);
std::string base64_decode(std::string_view text);  // throws sb::Error on bad input
std::string url_encode(std::string_view s);

}  // namespace sb::registry
