// One registry, as a push or pull sees it: the endpoint (https, or plain
// http where allowed), credentials, the token flow, retries, and errors in
// the words a user needs ("push to HOST/REPO: 403 denied: ...").
//
// A Session is shared by the worker threads of a push or pull; each thread
// brings its own http::Client (make_client()). Authorization headers are
// added here and never reach a message: --verbose shows method, URL and status.
//
// Credentials are scoped to the registry's origin (scheme, host, port):
// send() follows redirects itself and sends Authorization only to that
// origin, so an upload Location or a blob redirect to storage elsewhere gets
// none, and takes a 401's challenge only from that origin. A token realm may
// be elsewhere (registries put their token servers on other hosts), but
// credentials go to a plain-http realm only for a registry marked insecure
// (--insecure-registry, registries.conf's `insecure`). Whatever a registry
// answers is redacted of the credentials and tokens before it reaches a
// message. Manifests, indexes and token answers are capped in size
// (limits::registry_document()).
#pragma once

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "registry/auth.hpp"
#include "registry/machine.hpp"
#include "util/error.hpp"
#include "util/http.hpp"
#include "util/status.hpp"

namespace sb::registry {

struct SessionOptions {
  CredentialOptions credentials;
  std::filesystem::path ca_file;      // --ca-cert: a private CA, besides the system store
  std::vector<std::string> insecure;  // --insecure-registry HOST[:PORT]: plain HTTP or unverified TLS
  http::RetryPolicy retry;
  bool plain_http = false;            // skip the https probe (tests, and registries known to be plain)
  long probe_timeout_seconds = 10;    // for the first https attempt (its connection and handshake)
  // The machine's registries.conf, certs.d and credential helpers; none: not read.
  std::shared_ptr<const MachineRegistries> machine;
  bool check_policy = true;  // false: --insecure-policy, pulls ignore policy.json (as skopeo's)
  // Where the requests go; null: the network. Tests pass a fake registry
  // (tests/unit/fakes.hpp, FakeRegistry).
  std::shared_ptr<http::Transport> transport;
};

// A registry answered with an error status.
class RegistryError : public Error {
 public:
  RegistryError(const std::string& what, long status) : Error(what), status_(status) {}
  long status() const { return status_; }

 private:
  long status_;
};

// "403 denied: requested access to the resource is denied" from a status and
// the registry's JSON error body ({"errors":[{"code","message"}]}).
std::string describe_error(const http::Response& response);

// The file descriptors one transfer of a push or pull holds at its peak: its
// connection's socket, the socketpair curl keeps with each handle, the blob
// file it reads (push) or the store file it writes (pull), and the record of
// the blob's repository written into the store (a temporary file and its
// directory, for the fsync).
constexpr int kDescriptorsPerTransfer = 1 + 2 + 1 + 2;
// Kept for everything else: stdio, the main thread's connection (3), the token
// server's (3), the store's locks and records, the resolver's, slack.
constexpr int kDescriptorReserve = 16;

// How many transfers of `wanted` (-j) fit in `limit` open files when `open`
// are open already: (limit - open - reserve) / per transfer, at least 1.
int connections_within(long limit, long open, int wanted);
// How many connections a push or pull may hold at once when `wanted` (-j) are
// asked for: connections_within() the limit on open files, after raising its
// soft value to the hard one, and the descriptors open now.
int usable_connections(int wanted);

// One place a pull may go: registries.conf's mirrors that take the
// reference, then its primary location (remapped when a table says so). The
// options are those for that place: insecure as its table says, and --creds
// or STACKBUILD_REGISTRY_* only for the registry they were given for.
struct PullTarget {
  Reference ref;  // where it goes
  std::string op;  // "pull from HOST/REPO", "pull from MIRROR/REPO (a mirror of HOST/REPO)"
  SessionOptions options;
  bool mirror = false;
};
// Throws sb::Error when the reference is blocked or registries.conf is broken.
std::vector<PullTarget> pull_targets(const Reference& ref, const SessionOptions& options);
// The options for a push (or attach) to `ref`: registries.conf's insecure
// setting for it; throws sb::Error (starting with `op`) when it is blocked.
SessionOptions push_session_options(const Reference& ref, const SessionOptions& options, const std::string& op);

class Session {
 public:
  // `op` starts every message: "push to 127.0.0.1:5000/app". `repository`
  // picks the credentials of auth files that keep them per repository.
  Session(std::string registry, std::string op, SessionOptions options, Status& status, std::string repository = {});

  const std::string& registry() const { return registry_; }
  const std::string& op() const { return op_; }
  Status& status() { return status_; }
  const http::RetryPolicy& retry_policy() const { return options_.retry; }

  // Asks for `actions` ("pull" or "pull,push") on `repository` in the next token.
  void add_scope(const std::string& repository, const std::string& actions);
  // base URL + path ("/v2/..."); the first call finds the endpoint and authenticates.
  std::string url(const std::string& path);
  // A Location header made absolute.
  std::string resolve(const std::string& location);
  std::unique_ptr<http::Client> make_client() const;

  // Sends `request` with authorization. A 401 gets one fresh authentication
  // (a new token, with the scope the challenge names) and one more try.
  // With `retry`, transient statuses and failures are retried with backoff.
  http::Response send(http::Client& client, const http::Request& request, bool retry = true);

  // `text` with every secret this session holds (password, its base64
  // forms, identity and bearer tokens) replaced by "<redacted>".
  std::string redact(std::string text) const;

  // Throws a RegistryError for an unexpected response, with the credential
  // source on 401/403 and `doing` as a trace ("while uploading blob ...").
  [[noreturn]] void fail(const http::Response& response, const std::string& doing = {}) const;
  // A note on a retry (shown as progress, without secrets).
  void note_retry(const std::string& why);

 private:
  void probe();  // under mu_
  std::string client_certificate_error(const http::HttpError& e) const;
  std::pair<std::string, int> current_auth();
  bool authenticate(int seen_generation, const std::optional<Challenge>& challenge);
  void fetch_token();  // under mu_
  // Performs `request` and the redirects it meets (when it follows them),
  // with `auth` as the Authorization of every hop to `origin` and of no
  // other; the Response's effective_url is the last hop's URL.
  http::Response perform_scoped(http::Client& client, http::Request request, const std::string& auth,
                                const std::string& origin, bool retry);

  std::string registry_, op_, repository_;
  SessionOptions options_;
  Status& status_;

  std::mutex mu_;
  bool probed_ = false;
  std::string base_;
  std::optional<Challenge> challenge_;
  std::optional<Credentials> creds_;
  std::set<std::string> scopes_;
  bool scopes_changed_ = false;
  std::string auth_header_;
  std::vector<std::string> secrets_;  // for redact(): every credential and token seen (under secrets_mu_)
  mutable std::mutex secrets_mu_;
  void add_secret(const std::string& secret);
  int generation_ = 0;
  std::chrono::steady_clock::time_point expires_{};
};

}  // namespace sb::registry
