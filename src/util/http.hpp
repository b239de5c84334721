// HTTP over libcurl, for the fetch and registry stages: one request at a time
// per Client (use one Client per thread), streaming bodies both ways, TLS
// verified against the system store (or a given CA file), the proxy variables
// (http_proxy, https_proxy, no_proxy) honoured as curl does. HTTP statuses are
// returned; transport failures throw HttpError. with_retries() adds backoff
// with jitter for what is worth retrying (connection failures, 408/429/5xx,
// honouring Retry-After).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "util/error.hpp"
#include "util/limits.hpp"

namespace sb::http {

struct Request {
  std::string method = "GET";
  std::string url;
  std::vector<std::string> headers;  // "Name: value"
  // The body: `body` bytes, or `body_length` bytes of `body_file` from `body_offset`.
  std::string body;
  std::filesystem::path body_file;
  uint64_t body_offset = 0;
  uint64_t body_length = 0;
  // Streams a 2xx response body; otherwise (unset, or a redirect or error
  // status) the body is collected into Response::body. May throw.
  std::function<void(const char* data, size_t size)> on_data;
  std::function<void(uint64_t done, uint64_t total)> on_progress;  // bytes up (with a body) or down
  // The most body bytes one response may bring (streamed or collected); past
  // it the transfer stops and perform() throws sb::Error naming the cap and
  // its setting. Unset: no cap.
  std::optional<SizeLimit> max_body;
  bool follow_redirects = true;
  bool no_body = false;                  // HEAD
  long connect_timeout_seconds = 30;
  long stall_seconds = 60;               // abort when under 1 KiB/s for this long
};

struct Response {
  long status = 0;
  std::map<std::string, std::string> headers;  // lower-case names; the last value of a repeated header
  std::string body;                            // unless Request::on_data was set
  std::string effective_url;
  std::string header(const std::string& lower_name) const;
};

// A failure below HTTP: DNS, refused or reset connections, TLS, timeouts.
class HttpError : public Error {
 public:
  // TlsHandshake: the peer does not speak TLS (or the handshake broke);
  // TlsUntrusted: it does, but its certificate is not trusted;
  // Refused: nothing listens on the port; Timeout: no answer in time;
  // NoDescriptors: the process had no file descriptor free for the socket,
  // its TLS setup or curl's own (EMFILE/ENFILE), which is transient: other
  // transfers give theirs back as they end.
  // TlsClientCertificate: the server refused the connection for want of a
  // (good) TLS client certificate.
  enum class Kind { Other, TlsHandshake, TlsUntrusted, TlsClientCertificate, Refused, Timeout, NoDescriptors };
  HttpError(const std::string& url, const std::string& what, bool transient, Kind kind = Kind::Other)
      : Error(url + ": " + what), url_(url), transient_(transient), kind_(kind) {}
  const std::string& url() const { return url_; }
  bool transient() const { return transient_; }
  Kind kind() const { return kind_; }

 private:
  std::string url_;
  bool transient_;
  Kind kind_;
};

// Where one request goes and what it trusts, when that depends on its URL
// (apt's per-host proxies and CAs).
struct Route {
  std::optional<std::string> proxy;  // unset: libcurl's proxy variables; "": no proxy at all
  std::vector<std::filesystem::path> ca_files;  // private CAs (PEM), trusted besides the system store
  std::filesystem::path client_cert;  // a TLS client certificate (PEM) and its key, sent when
  std::filesystem::path client_key;   // the server asks for one
  bool verify_peer = true;
  bool verify_host = true;
  std::string username;              // HTTP basic login (never printed)
  std::string password;
};

// Where a Client's requests go instead of the network (libcurl): the seam
// tests put a fake registry or index behind (tests/unit/fakes.hpp). It
// answers as a server would, statuses included; a Request's on_data hears a
// 2xx body, as with libcurl. Shared by the clients of many threads: it must
// be thread-safe.
class Transport {
 public:
  virtual ~Transport() = default;
  virtual Response perform(const Request& request) = 0;
};

struct ClientOptions {
  // Set: every request goes to it, and the settings below are not used.
  std::shared_ptr<Transport> transport;
  std::vector<std::filesystem::path> ca_files;  // private CAs, trusted besides the system store
  std::filesystem::path client_cert, client_key;  // a TLS client certificate and its key
  bool verify_tls = true;
  std::string user_agent = "stackbuild/0.1";
  // When set, gives each request's Route from its URL, and `ca_files`, the
  // client certificate and `verify_tls` are not used. May throw sb::Error (the request then fails
  // with it, not retried).
  std::function<Route(const std::string& url)> route;
};

// The parts of an absolute URL, as libcurl's parser reads them (lower-case
// scheme and host; port "" when the URL gives none).
struct UrlParts {
  std::string scheme, user, host, port, path;
};
// Throws sb::Error for a URL libcurl cannot parse.
UrlParts split_url(const std::string& url);
// "scheme://host:port" of an absolute URL, the scheme's default port made
// explicit ("https://r.example:443"): what credentials are scoped to. ""
// for a URL libcurl cannot parse (the same origin as nothing).
std::string origin_of(const std::string& url);
// A Location header (absolute, or relative to `base`) made absolute. Throws
// sb::Error when it cannot be.
std::string resolve_url(const std::string& base, const std::string& location);
bool is_redirect(long status);  // 301, 302, 303, 307, 308
// %XX escapes decoded (libcurl's curl_easy_unescape).
std::string url_decode(std::string_view text);

class Client {
 public:
  explicit Client(ClientOptions options = {});
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  Response perform(const Request& request);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct RetryPolicy {
  int attempts = 6;            // tries in all
  double base_seconds = 0.5;   // first backoff; doubles each time, with jitter
  double max_seconds = 30;
  std::function<void(double)> sleep;  // for tests; default: really sleep
};

bool transient_status(long status);  // 408, 429, 500, 502, 503, 504
// Seconds a Retry-After header asks for (delta-seconds or an HTTP-date), if any.
std::optional<double> retry_after(const Response& response);

// Runs `attempt` until it returns a response whose status is not transient, or
// the policy's attempts are spent (then returns the last response, or rethrows
// the last transient HttpError). `on_retry` hears why each retry happens.
Response with_retries(const RetryPolicy& policy, const std::function<Response()>& attempt,
                      const std::function<void(const std::string&)>& on_retry = {});

}  // namespace sb::http
