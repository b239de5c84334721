// apt's own configuration, read as apt reads it: the apt.conf(5) tree
// (APT_CONFIG, /etc/apt/apt.conf.d/*, /etc/apt/apt.conf) and the login
// entries of apt_auth.conf(5) (/etc/apt/auth.conf.d/*.conf, /etc/apt/auth.conf).
// The apt stage takes from them what apt's http and https methods would use
// for a URL (network_from): the proxy (Acquire::http[s]::Proxy[::HOST],
// DIRECT, Proxy-Auto-Detect), the CA file (Acquire::https[::HOST]::CaInfo),
// Verify-Peer and Verify-Host, and a login. Like everything that reads the host, it takes
// a root directory, so tests use a fake tree.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/http.hpp"

namespace sb::apt {

namespace fs = std::filesystem;

// The configuration tree. Names are case-insensitive ("Acquire::http::Proxy"
// and "acquire::HTTP::proxy" are one); a node keeps the spelling it was
// first given. A list item is a child without a name ("DPkg::Pre-Invoke {
// "cmd"; };", or "Name:: "value";").
class AptConfig {
 public:
  AptConfig();
  ~AptConfig();
  AptConfig(AptConfig&&) noexcept;
  AptConfig& operator=(AptConfig&&) noexcept;

  // Reads one file's text (`where` names it in errors and in where()):
  // statements `Name "value";`, scopes `Name { ... };`, lists, /* */, // and #
  // comments, `#clear Name;` and `#include "file";` (a directory when it
  // ends in '/'). A syntax error throws sb::Error naming the file and line,
  // as apt would refuse the same file.
  void parse(std::string_view text, const std::string& where);
  void read_file(const fs::path& file);

  // The value of a name, "" when it is not set (as apt's Find); where() is
  // the "file:line" that set it.
  std::string find(std::string_view name) const;
  std::string where(std::string_view name) const;

  // Every node as apt-config dump prints it (`Name "value";` a line, in tree
  // order), for tests that compare the two readings; `set_only`: only the
  // nodes a file gave a value, not the parents made on the way.
  std::string dump(bool set_only = false) const;

  struct Node;  // the tree (config.cpp)

 private:
  std::unique_ptr<Node> root_;
};

// apt's configuration of the machine under `root`: the file APT_CONFIG names
// (when `read_env`), then <root>/etc/apt/apt.conf.d/ (the names apt reads:
// letters, digits, '-', '_' and '.', no extension or ".conf", in order),
// then <root>/etc/apt/apt.conf. Missing files are no error. Dir (whose
// default is `root`), Dir::Etc, Dir::Etc::parts and Dir::Etc::main move
// them, as in apt: a relative one is below the one before it.
AptConfig machine_apt_config(const fs::path& root = "/", bool read_env = true);

// One apt_auth.conf(5) entry: `machine [scheme://]host[:port][/path] login
// NAME password SECRET`.
struct AuthEntry {
  std::string scheme;  // "" : https only (as apt)
  std::string host;
  std::string port;  // "": any port
  std::string path;  // "": any path; else a prefix of the URL's path
  std::string login;
  std::string password;
  std::string where;  // "file:line" of the machine token
};

std::vector<AuthEntry> parse_auth_conf(std::string_view text, const std::string& where);
// <root>/etc/apt/auth.conf.d/*.conf in name order, then <root>/etc/apt/auth.conf
// (or where `config`'s Dir::Etc::netrcparts and Dir::Etc::netrc say); a file
// this user may not read is left out.
std::vector<AuthEntry> machine_auth_entries(const AptConfig& config, const fs::path& root = "/");

// A login written into a repository URL (https://user:secret@host/path):
// taken out of `uri`, which then names none (for the lockfile, the image's
// sources list and every message), as an entry for URLs below that one.
// Nothing when the URL holds no login.
std::optional<AuthEntry> take_url_login(std::string& uri);

// What apt's http and https methods would use for a URL.
class AptNetwork {
 public:
  AptNetwork(AptConfig config, std::vector<AuthEntry> logins);
  // A login taken from a repository URL (take_url_login): it wins over
  // auth.conf's, as the login in a URL does in apt. Safe while routes are
  // asked for on other threads.
  void add_login(AuthEntry login);
  // The proxy (unset: libcurl's http_proxy/https_proxy/no_proxy; "": none,
  // as "DIRECT"), CA file, checks and login for `url`. Throws sb::Error when
  // a CaInfo file named for it does not exist, naming the setting, or when
  // the Proxy-Auto-Detect command fails.
  http::Route route(const std::string& url) const;

 private:
  // The first of `names` that is set, and the name it was.
  std::pair<std::string, std::string> first(const std::vector<std::string>& names) const;
  // What Proxy-Auto-Detect's `command` prints for `site` ("http://host"):
  // a proxy, "DIRECT" or nothing; asked once per command and site.
  std::string auto_detected(const std::string& command, const std::string& setting, const std::string& site) const;
  AptConfig config_;
  std::vector<AuthEntry> logins_;
  mutable std::mutex mu_;
  std::vector<AuthEntry> url_logins_;  // guarded by mu_
  mutable std::mutex detect_mu_;
  mutable std::map<std::string, std::string> detected_;  // command + site -> output; guarded by detect_mu_
};

// The machine's apt network settings under `root`, for the fetcher of the apt
// stage (http::ClientOptions::route).
std::shared_ptr<AptNetwork> machine_network(const fs::path& root = "/");

}  // namespace sb::apt
