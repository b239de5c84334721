// The registry settings a machine keeps for skopeo, podman and buildah, read
// the way containers/image reads them:
//  - registries.conf(5) and its drop-in directories: mirrors, remapped
//    locations, insecure and blocked registries, credential helpers;
//  - certs.d(5): a registry's private CAs and TLS client certificate.
// The auth files of containers-auth.json(5) are read by auth.cpp.
//
// A machine set up so that `skopeo copy` pulls from an in-house mirror or
// pushes to a registry with a company CA works the same for stackbuild.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "registry/reference.hpp"

namespace sb::registry {

// Where the settings are looked for. `root` prefixes the system paths
// (/etc/containers, /etc/docker), as containers/image's
// RootForImplicitAbsolutePaths does (tests point it at a made-up tree);
// `env` gives HOME, XDG_CONFIG_HOME and CONTAINERS_REGISTRIES_CONF.
struct MachinePaths {
  std::filesystem::path root = "/";
  std::map<std::string, std::string> env;
  std::string get(const std::string& name) const;
  std::filesystem::path home() const;         // $HOME
  std::filesystem::path config_home() const;  // $XDG_CONFIG_HOME, else ~/.config
};

enum class MirrorUse { All, DigestOnly, TagOnly };  // a mirror's pull-from-mirror

struct Endpoint {
  std::string location;  // HOST[:PORT][/PATH]; empty: the name as it is (a *.DOMAIN prefix)
  bool insecure = false;  // plain HTTP and unverified TLS allowed
  MirrorUse use = MirrorUse::All;
};

struct RegistryTable {
  std::string prefix;  // HOST[:PORT][/NAMESPACE...][/REPO][:TAG|@DIGEST], or *.DOMAIN
  Endpoint primary;    // `location`, `insecure`
  std::vector<Endpoint> mirrors;
  bool blocked = false;
  bool mirror_by_digest_only = false;
  std::string file;  // the file it came from, for messages
};

// One place to pull an image from: a mirror or the primary location, with
// the reference rewritten for it.
struct PullSource {
  Reference ref;
  bool insecure = false;
  bool mirror = false;
};

class RegistriesConf {
 public:
  // The files of containers-registries.conf(5) and containers-registries.conf.d(5)
  // in their order: $CONTAINERS_REGISTRIES_CONF (as podman and buildah read it),
  // else ~/.config/containers/registries.conf when it exists (and then only the
  // drop-ins beside it), else /etc/containers/registries.conf; then the *.conf
  // files of /etc/containers/registries.conf.d and ~/.config/containers/registries.conf.d
  // by name. Throws sb::Error naming the file and, for TOML errors, the line.
  static RegistriesConf load(const MachinePaths& paths);

  // Adds one file's text: the main file (version 1 or 2 format) or a drop-in
  // (version 2), whose tables replace earlier ones with the same prefix and
  // whose global settings replace earlier ones. Throws sb::Error naming `name`.
  void add(std::string_view toml, const std::string& name, bool drop_in);

  // The table with the longest prefix matching `ref`'s name, if any.
  const RegistryTable* find(const Reference& ref) const;
  // Where to pull `ref` from, in order: the mirrors that take it (by tag or by
  // digest), then the primary location. Throws sb::Error when `ref` is blocked.
  std::vector<PullSource> pull_sources(const Reference& ref) const;
  // For a push to `ref` (never mirrored or remapped, as in containers/image):
  // throws sb::Error when it is blocked; true when it is insecure.
  bool push_insecure(const Reference& ref) const;

  const std::vector<RegistryTable>& tables() const { return tables_; }
  const std::vector<std::string>& files() const { return files_; }
  // `credential-helpers`: helpers to ask, in order; "containers-auth.json" is
  // the auth files. Empty when not set (the auth files only).
  std::vector<std::string> credential_helpers;
  // `unqualified-search-registries`, read and checked, not used: a short name
  // in stackbuild is Docker Hub's, as in a Dockerfile.
  std::vector<std::string> unqualified_search;
  std::vector<std::string> warnings;  // keys no version of the format has, per file

 private:
  std::vector<RegistryTable> tables_;
  std::vector<std::string> files_;
};

// A reference as registries.conf prefixes and auth.json keys name it: Docker
// Hub as "docker.io" ("docker.io/library/debian"); with `selector`, :TAG and
// @DIGEST too.
std::string logical_name(const Reference& ref, bool selector = false);

// certs.d(5) for a registry: the first of ~/.config/containers/certs.d/HOST[:PORT],
// /etc/containers/certs.d/HOST[:PORT] and /etc/docker/certs.d/HOST[:PORT] that
// exists. *.crt are CAs; NAME.cert with NAME.key a client certificate.
struct TlsFiles {
  std::filesystem::path dir;  // empty: none of them exists
  std::vector<std::filesystem::path> ca_files;
  std::filesystem::path client_cert, client_key;
};
// Throws sb::Error for a .cert without its .key or a .key without its .cert.
TlsFiles certs_dir(const std::string& host_port, const MachinePaths& paths);

// containers-policy.json(5), for images pulled from registries (the docker
// transport): the requirements of the most specific scope that matches, else
// the transport's default "", else the global default. stackbuild does not
// verify signatures: an image whose requirements ask for one (signedBy,
// sigstoreSigned) is refused, saying how to pull it with skopeo instead.
class Policy {
 public:
  // $HOME/.config/containers/policy.json when it exists, else
  // /etc/containers/policy.json; none when neither exists (nothing is refused).
  static std::optional<Policy> load(const MachinePaths& paths);
  // Parses strictly, as containers/image does: an unknown field or
  // requirement type, or an empty requirement list, is an error naming `file`.
  static Policy parse(std::string_view json, const std::string& file);
  // Throws sb::Error saying why when `ref` may not be pulled.
  void check(const Reference& ref) const;
  // The scope whose requirements apply to `ref`: "" for the docker
  // transport's default, none for the global default.
  std::optional<std::string> scope_for(const Reference& ref) const;

 private:
  std::string file_;
  std::vector<std::string> default_;                          // requirement types
  std::map<std::string, std::vector<std::string>> docker_;   // scope -> requirement types
};

// All of it for one process, read when first asked for: a command that never
// reaches a registry does not read, or fail on, a broken registries.conf.
class MachineRegistries {
 public:
  template <class T>
  struct Loaded {  // a value read once, or the error reading it gave
    std::optional<T> value;
    std::string error;
  };

  explicit MachineRegistries(MachinePaths paths) : paths_(std::move(paths)) {}
  const MachinePaths& paths() const { return paths_; }
  // Loads on the first call; a load that failed throws the same error on every call.
  const RegistriesConf& conf() const;
  TlsFiles tls(const std::string& host_port) const;  // certs_dir(), once per host
  // Policy::load() once; throws its error on every call.
  const std::optional<Policy>& policy() const;
  // conf()'s warnings the first time they are asked for, then none.
  std::vector<std::string> take_warnings() const;

 private:
  MachinePaths paths_;
  mutable std::mutex mu_;  // guards all of the below
  mutable Loaded<RegistriesConf> conf_;
  mutable Loaded<std::optional<Policy>> policy_;
  mutable std::map<std::string, TlsFiles> tls_;
  mutable bool warned_ = false;
};

// The machine's settings as the environment `env` finds them, with
// $STACKBUILD_CONTAINERS_ROOT (default /) as the root of the system paths.
std::shared_ptr<const MachineRegistries> machine_registries(const std::map<std::string, std::string>& env);

}  // namespace sb::registry
