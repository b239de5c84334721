// The fetcher: URLs in, verified blobs in the content-addressed store out.
// Every source (apt, pip, redist, archives) downloads through it.
//
// Many transfers run at once (one http::Client per worker thread); transient
// failures (reset connections, 408/429/5xx, truncated bodies) are retried with
// backoff, resuming from the bytes already on disk with a Range request; the
// sha256 (and size) is checked before a file enters the store, so a wrong or
// partial file is never there for a later run to trust. Offline, only the
// store is used. Each failure names the URL, the HTTP status or transport
// error, and what was expected. libcurl honours http_proxy/https_proxy/
// no_proxy and verifies TLS against the system CA store.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "store/store.hpp"
#include "util/digest.hpp"
#include "util/error.hpp"
#include "util/http.hpp"
#include "util/status.hpp"

namespace sb::fetch {

struct FetchItem {
  std::string url;                 // http(s):// or file://
  std::optional<Digest> sha256;    // what must arrive; unset: whatever the server has (e.g. a
                                   // signed index checked afterwards)
  std::optional<uint64_t> size;    // expected bytes, when known
  std::string label;               // for progress and errors; default: the URL's last part
  // Runs on the downloaded file before it enters the store (after the size
  // and before the sha256 check); throwing keeps it out of the store and
  // fails the fetch with that error (e.g. an InRelease whose signature is
  // bad). Not run for a file already in the store or taken offline from it.
  std::function<void(const fs::path&)> check;
  // The most bytes it may have (an index whose size nothing pins): more is
  // refused as it arrives, naming the cap and its setting.
  std::optional<SizeLimit> max_size;
};

struct Fetched {
  std::string url;
  Digest digest;
  uint64_t size = 0;
  bool cached = false;  // already in the store; nothing was downloaded
};

// A fetch that failed: the URL, the HTTP status (0 for a transport error or a
// check that failed after the transfer; 404 for a file:// path that does not
// exist) and the expectation it broke.
class FetchError : public Error {
 public:
  FetchError(std::string url, long status, const std::string& what)
      : Error(what), url_(std::move(url)), status_(status) {}
  const std::string& url() const { return url_; }
  long status() const { return status_; }

 private:
  std::string url_;
  long status_;
};

struct FetchOptions {
  int jobs = 8;                    // transfers at once
  bool offline = false;            // use only the store; a missing file is an error
  http::RetryPolicy retry;
  http::ClientOptions client;
  // Said after a certificate that is not trusted: where the stage's own CA
  // setting goes ("a private CA goes in apt.conf's Acquire::https::CaInfo").
  std::string untrusted_hint;
  std::string unauthorized_hint;  // the same after an HTTP 401: where its logins go
};

// The defaults, with STACKBUILD_OFFLINE=1 turning on `offline`: what every
// stage that fetches for a build starts from.
FetchOptions fetch_options_from_env();

// The interface the stages use, so orchestration is tested with fakes.
class Fetcher {
 public:
  virtual ~Fetcher() = default;
  // Fetches every item (in parallel), then returns them in the same order, or
  // throws the first failure (in item order) once all transfers have ended.
  virtual std::vector<Fetched> fetch(const std::vector<FetchItem>& items) = 0;
  Fetched fetch_one(const FetchItem& item) { return fetch({item}).front(); }
};

std::unique_ptr<Fetcher> make_fetcher(const Store& store, FetchOptions options, Status& status);

// What makes a stage's fetcher: make_fetcher, or a test's fake (the stages
// choose the options; the factory chooses where the bytes come from).
using FetcherFactory = std::function<std::unique_ptr<Fetcher>(const Store&, FetchOptions, Status&)>;

// The digest last fetched from `url` without an expected sha256 (recorded in
// the store), for offline use of unpinned files such as InRelease.
std::optional<Digest> last_fetched(const Store& store, const std::string& url);

}  // namespace sb::fetch
