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
#include <vector>

namespace sb::registry {

struct Credentials {
  std::string username;
  std::string password;
  std::string source;  // where they came from, for messages: "--creds", "~/.docker/config.json", ...
  // An OAuth2 refresh token (docker config's `identitytoken`, or a helper's
  // Secret when its Username is "<token>"), traded for bearer tokens with a
  // POST to the token server instead of sending a password.
  std::string identity_token;
};

struct CredentialOptions {
  std::optional<std::string> creds;           // --creds USER:PASS
  std::map<std::string, std::string> env;     // the environment to read (STACKBUILD_REGISTRY_*, HOME, XDG_*,
                                              // REGISTRY_AUTH_FILE, DOCKER_CONFIG, PATH)
  // registries.conf's credential-helpers: helpers asked in order, where
  // "containers-auth.json" is the auth files. Empty: the auth files only.
  std::vector<std::string> helpers;
  std::filesystem::path root = "/";           // prefixes /run/containers/UID (tests)
};

// The auth files of containers-auth.json(5), in the order they are read:
// $REGISTRY_AUTH_FILE, else $XDG_RUNTIME_DIR/containers/auth.json (for root
// without XDG_RUNTIME_DIR, /run/containers/0/auth.json), where `skopeo login`
// and `podman login` write; $XDG_CONFIG_HOME/containers/auth.json (default
// ~/.config); $DOCKER_CONFIG/config.json, else ~/.docker/config.json, where
// `docker login` writes; ~/.dockercfg (the old docker format).
struct AuthFile {
  std::filesystem::path path;
  std::string shown;    // for messages: "~/.docker/config.json"
  bool docker = false;  // docker's config.json: its credsStore is asked too
  bool legacy = false;  // ~/.dockercfg: the hosts at the top level
};
std::vector<AuthFile> auth_files(const CredentialOptions& options);

// The credentials for `repository` on `registry` (HOST[:PORT]), first found:
// --creds, then STACKBUILD_REGISTRY_USER/_PASSWORD, then the credential
// helpers and auth files. In an auth file, a helper named for the registry in
// credHelpers, else (docker's file) its credsStore, else the most specific
// auths key: HOST/NAMESPACE/REPO, then HOST/NAMESPACE, then HOST. None: anonymous.
std::optional<Credentials> find_credentials(const std::string& registry, const std::string& repository,
                                            const CredentialOptions& options);

// What `docker-credential-NAME get` printed for `registry` (`program`):
// {"Username": ..., "Secret": ...}; none without a Secret; a Username of
// "<token>" makes the Secret an identity token. Throws sb::Error, without
// the output in it, for anything else.
std::optional<Credentials> parse_helper_output(const std::string& output, const std::string& program,
                                               const std::string& registry);

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
