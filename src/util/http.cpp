#include "util/http.hpp"

#include <curl/curl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <ctime>
#include <exception>
#include <filesystem>
#include <map>
#include <mutex>
#include <random>
#include <string_view>
#include <thread>
#include <vector>

#include "util/file.hpp"
#include "util/interrupt.hpp"
#include "util/number.hpp"

namespace sb::http {

std::string Response::header(const std::string& name) const {
  auto it = headers.find(name);
  return it == headers.end() ? std::string() : it->second;
}

namespace {

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct Transfer {
  CURL* curl = nullptr;
  const Request* req = nullptr;
  Response* resp = nullptr;
  int body_fd = -1;
  uint64_t body_sent = 0;
  uint64_t body_received = 0;  // of the current response
  std::exception_ptr error;  // from a callback; rethrown after curl returns
};

size_t on_header(char* data, size_t size, size_t n, void* ud) {
  auto* t = static_cast<Transfer*>(ud);
  std::string line(data, size * n);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
  if (line.rfind("HTTP/", 0) == 0) {  // a new response (after a redirect or 100-continue)
    t->resp->headers.clear();
    t->body_received = 0;
    return size * n;
  }
  auto colon = line.find(':');
  if (colon != std::string::npos) {
    std::string name = line.substr(0, colon);
    std::transform(name.begin(), name.end(), name.begin(), ::tolower);
    std::string value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(" \t"));
    t->resp->headers[name] = value;
  }
  return size * n;
}

size_t on_write(char* data, size_t size, size_t n, void* ud) {
  auto* t = static_cast<Transfer*>(ud);
  size_t len = size * n;
  try {
    t->body_received += len;
    if (t->req->max_body && t->body_received > t->req->max_body->bytes)
      throw Error(t->req->method + " " + t->req->url + ": the answer is larger than " + t->req->max_body->describe());
    // Only a successful response's body is streamed; redirect and error
    // bodies are kept in Response::body (error bodies explain the error).
    long code = 0;
    curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &code);
    if (t->req->on_data && code >= 200 && code < 300) {
      t->req->on_data(data, len);
    } else {
      t->resp->body.append(data, len);
    }
    return len;
  } catch (...) {
    t->error = std::current_exception();
    return 0;  // makes curl stop with CURLE_WRITE_ERROR
  }
}

size_t on_read(char* buf, size_t size, size_t n, void* ud) {
  auto* t = static_cast<Transfer*>(ud);
  size_t want = std::min<uint64_t>(size * n, t->req->body_length - t->body_sent);
  if (want == 0) return 0;
  ssize_t got = ::pread(t->body_fd, buf, want, static_cast<off_t>(t->req->body_offset + t->body_sent));
  if (got <= 0) return CURL_READFUNC_ABORT;
  t->body_sent += static_cast<uint64_t>(got);
  return static_cast<size_t>(got);
}

// Also how a transfer ends on Ctrl-C: curl calls this often (at least once
// a second) even while nothing arrives.
int on_progress(void* ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow) {
  auto* t = static_cast<Transfer*>(ud);
  try {
    check_interrupted();
    if (!t->req->on_progress) return 0;
    if (ultotal > 0)
      t->req->on_progress(static_cast<uint64_t>(ulnow), static_cast<uint64_t>(ultotal));
    else
      t->req->on_progress(static_cast<uint64_t>(dlnow), static_cast<uint64_t>(dltotal));
  } catch (...) {
    t->error = std::current_exception();
    return 1;
  }
  return 0;
}

bool transient_curl(CURLcode c) {
  switch (c) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_SSL_CONNECT_ERROR:
      return true;
    default:
      return false;
  }
}

// Failures that running out of file descriptors causes inside curl without an
// errno to say so.
bool may_be_descriptors(CURLcode c) {
  return c == CURLE_OUT_OF_MEMORY || c == CURLE_FAILED_INIT || c == CURLE_COULDNT_CONNECT ||
         c == CURLE_SSL_CACERT_BADFILE || c == CURLE_SSL_CERTPROBLEM || c == CURLE_SSL_CONNECT_ERROR;
}

bool no_descriptor_free() {
  int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ::close(fd);
    return false;
  }
  return out_of_descriptors(errno);
}

std::string descriptors_note() {
  struct rlimit rl;
  std::string limit = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY
                          ? ", ulimit -n, is " + std::to_string(rl.rlim_cur)
                          : "";
  return "no file descriptor was free: the limit on open files" + limit;
}

}  // namespace

namespace {

// Handles outlive their Client, so that the next one reuses their open
// connections (and TLS sessions) instead of dialling again. Options are set
// anew for every request (curl_easy_reset), so any Client can take any idle
// handle.
class IdleHandles {
 public:
  CURL* take() {
    {
      std::lock_guard<std::mutex> g(mu_);
      if (pid_ == getpid() && !idle_.empty()) {
        CURL* c = idle_.back();
        idle_.pop_back();
        return c;
      }
    }
    return curl_easy_init();
  }
  void give(CURL* c) {
    {
      std::lock_guard<std::mutex> g(mu_);
      if (pid_ != getpid()) {  // a forked child: the parent's handles are not its own
        idle_.clear();
        pid_ = getpid();
      }
      if (idle_.size() < kKept) {
        idle_.push_back(c);
        return;
      }
    }
    curl_easy_cleanup(c);
  }

 private:
  static constexpr size_t kKept = 8;
  std::mutex mu_;
  pid_t pid_ = getpid();
  std::vector<CURL*> idle_;
};

IdleHandles& idle_handles() {
  static IdleHandles* h = new IdleHandles;  // never destroyed: curl may be torn down first at exit
  return *h;
}

std::string openssl_error() {
  unsigned long e = ERR_get_error();
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  ERR_clear_error();
  return e ? buf : "not a PEM certificate file";
}

// The certificates TLS peers are checked against, parsed once per process
// for each list of `ca_files`: those files (private CAs) and the system's
// store beside them (curl's own default bundle and directory), where
// SSL_CERT_FILE, when set, takes the bundle's place and SSL_CERT_DIR the
// directory's, as in OpenSSL. Kept for the life of the process.
X509_STORE* trust_store(CURL* c, const std::vector<std::filesystem::path>& ca_files) {
  static std::mutex mu;
  static std::map<std::string, X509_STORE*> stores;
  std::string key;
  for (const auto& f : ca_files) key += f.string() + '\n';
  std::lock_guard<std::mutex> g(mu);
  auto it = stores.find(key);
  if (it != stores.end()) return it->second;
  char* builtin_file = nullptr;
  char* builtin_dir = nullptr;
  curl_easy_getinfo(c, CURLINFO_CAINFO, &builtin_file);
  curl_easy_getinfo(c, CURLINFO_CAPATH, &builtin_dir);
  X509_STORE* st = X509_STORE_new();
  if (!st) throw Error("OpenSSL: cannot make a certificate store");
  auto load_file = [&](const std::string& f) {
    if (!X509_STORE_load_file(st, f.c_str())) {
      std::string why = openssl_error();
      X509_STORE_free(st);
      throw Error("cannot read the CA certificates in " + f + ": " + why);
    }
  };
  // The system's store, or what OpenSSL's own variables put in its place
  // (SSL_CERT_FILE: a bundle; SSL_CERT_DIR: hashed directories, ':' between).
  const char* env_file = ::getenv(X509_get_default_cert_file_env());
  const char* env_dir = ::getenv(X509_get_default_cert_dir_env());
  auto load_dirs = [&](const std::string& dirs) {
    for (size_t i = 0; i <= dirs.size();) {
      size_t e = dirs.find(':', i);
      if (e == std::string::npos) e = dirs.size();
      if (e > i) X509_STORE_load_path(st, dirs.substr(i, e - i).c_str());
      i = e + 1;
    }
  };
  for (const auto& f : ca_files) load_file(f.string());
  if (env_file && *env_file) {
    try {
      load_file(env_file);
    } catch (const Error& e) {
      throw Error(std::string(e.what()) + " (" + X509_get_default_cert_file_env() + ")");
    }
  } else if (ca_files.empty() && builtin_file && ::access(builtin_file, R_OK) == 0) {
    load_file(builtin_file);
  }
  if (env_dir && *env_dir) load_dirs(env_dir);
  else if (!ca_files.empty()) X509_STORE_load_path(st, "/etc/ssl/certs");  // looked up by hash when needed
  else if (builtin_dir) X509_STORE_load_path(st, builtin_dir);
  ERR_clear_error();
  stores.emplace(key, st);
  return st;
}

// The shared store is handed to OpenSSL contexts: only a libcurl built on
// OpenSSL (Debian's libcurl4-openssl-dev) gives us one. Another TLS backend
// (the GnuTLS build also provides libcurl.pc) gets the CA files as before.
bool curl_uses_openssl() {
  static const bool yes = [] {
    const curl_version_info_data* v = curl_version_info(CURLVERSION_NOW);
    return v && v->ssl_version && std::string_view(v->ssl_version).starts_with("OpenSSL");
  }();
  return yes;
}

CURLcode on_ssl_ctx(CURL*, void* ssl_ctx, void* store) {
  X509_STORE* st = static_cast<X509_STORE*>(store);
  X509_STORE_up_ref(st);  // the context takes a reference of its own
  SSL_CTX_set_cert_store(static_cast<SSL_CTX*>(ssl_ctx), st);
  return CURLE_OK;
}

}  // namespace

struct Client::Impl {
  ClientOptions options;
  CURL* curl = nullptr;
};

Client::Client(ClientOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  if (impl_->options.transport) return;  // no handle: nothing goes to libcurl
  global_init();
  impl_->curl = idle_handles().take();
  if (!impl_->curl) throw Error("libcurl: cannot create a handle");
}

Client::~Client() {
  if (impl_->curl) idle_handles().give(impl_->curl);
}

Response Client::perform(const Request& req) {
  if (impl_->options.transport) return impl_->options.transport->perform(req);
  CURL* c = impl_->curl;
  curl_easy_reset(c);  // keeps the connection cache: later requests reuse connections
  Response resp;
  Transfer t;
  t.curl = c;
  t.req = &req;
  t.resp = &resp;
  UniqueFd body_fd;

  curl_easy_setopt(c, CURLOPT_URL, req.url.c_str());
  curl_easy_setopt(c, CURLOPT_USERAGENT, impl_->options.user_agent.c_str());
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, req.follow_redirects ? 1L : 0L);
  curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, req.connect_timeout_seconds);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1024L);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, req.stall_seconds);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_write);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
  curl_easy_setopt(c, CURLOPT_XFERINFODATA, &t);
  curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
  Route route;
  if (impl_->options.route) {
    try {
      route = impl_->options.route(req.url);
    } catch (const Error& e) {
      throw HttpError(req.method + " " + req.url, e.what(), false, HttpError::Kind::Other);
    }
  } else {
    route.ca_files = impl_->options.ca_files;
    route.client_cert = impl_->options.client_cert;
    route.client_key = impl_->options.client_key;
    route.verify_peer = route.verify_host = impl_->options.verify_tls;
  }
  if (route.proxy) curl_easy_setopt(c, CURLOPT_PROXY, route.proxy->c_str());  // "": none, whatever the environment says
  if (!route.username.empty() || !route.password.empty()) {
    curl_easy_setopt(c, CURLOPT_USERNAME, route.username.c_str());
    curl_easy_setopt(c, CURLOPT_PASSWORD, route.password.c_str());
  }
  curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, route.verify_peer ? 1L : 0L);
  curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, route.verify_host ? 2L : 0L);
  if (!route.client_cert.empty()) {
    curl_easy_setopt(c, CURLOPT_SSLCERT, route.client_cert.c_str());
    curl_easy_setopt(c, CURLOPT_SSLCERTTYPE, "PEM");
    if (!route.client_key.empty()) curl_easy_setopt(c, CURLOPT_SSLKEY, route.client_key.c_str());
  }
  if (route.verify_peer && !curl_uses_openssl()) {
    if (route.ca_files.size() > 1)
      throw HttpError(req.method + " " + req.url,
                      "this libcurl is not built on OpenSSL and takes one private CA file, not " +
                          std::to_string(route.ca_files.size()),
                      false, HttpError::Kind::Other);
    if (!route.ca_files.empty()) {  // the private CA, and the system store beside it
      curl_easy_setopt(c, CURLOPT_CAINFO, route.ca_files.front().c_str());
      curl_easy_setopt(c, CURLOPT_CAPATH, "/etc/ssl/certs");
    }
  } else if (route.verify_peer) {
    // The trusted certificates come from one store per process, not from
    // curl, which parses the whole bundle again for every new handle (that
    // was a third of a cached rebuild's CPU).
    X509_STORE* store = nullptr;
    try {
      store = trust_store(c, route.ca_files);
    } catch (const Error& e) {
      throw HttpError(req.method + " " + req.url, e.what(), false, HttpError::Kind::Other);
    }
    curl_easy_setopt(c, CURLOPT_CAINFO, nullptr);
    curl_easy_setopt(c, CURLOPT_CAPATH, nullptr);
    curl_easy_setopt(c, CURLOPT_SSL_CTX_FUNCTION, on_ssl_ctx);
    curl_easy_setopt(c, CURLOPT_SSL_CTX_DATA, store);
  }
  if (req.max_body)  // refused at once when the Content-Length says so; on_write counts the rest
    curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, static_cast<curl_off_t>(req.max_body->bytes));
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");

  if (req.no_body || req.method == "HEAD") {
    curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  } else if (!req.body_file.empty()) {
    body_fd.reset(open_waiting(req.body_file.c_str(), O_RDONLY | O_CLOEXEC));
    if (body_fd.get() < 0) throw_errno("open " + req.body_file.string());
    t.body_fd = body_fd.get();
    curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
    curl_easy_setopt(c, CURLOPT_READDATA, &t);
    curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(req.body_length));
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, req.method.c_str());
  } else if (req.method == "POST" || req.method == "PUT" || req.method == "PATCH" || !req.body.empty()) {
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, req.body.data());
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(req.body.size()));
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, req.method.c_str());
  } else if (req.method != "GET") {
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, req.method.c_str());
  }

  struct curl_slist* headers = nullptr;
  for (const auto& h : req.headers) headers = curl_slist_append(headers, h.c_str());
  if (!req.body_file.empty() || !req.body.empty()) headers = curl_slist_append(headers, "Expect:");
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);

  char errbuf[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  CURLcode rc = curl_easy_perform(c);
  curl_slist_free_all(headers);
  if (t.error) std::rethrow_exception(t.error);
  if (rc == CURLE_FILESIZE_EXCEEDED && req.max_body)
    throw Error(req.method + " " + req.url + ": the answer is larger than " + req.max_body->describe());
  if (rc != CURLE_OK) {
    std::string msg = errbuf[0] ? errbuf : curl_easy_strerror(rc);
    long os_errno = 0;
    curl_easy_getinfo(c, CURLINFO_OS_ERRNO, &os_errno);
    if (out_of_descriptors(static_cast<int>(os_errno)) || (may_be_descriptors(rc) && no_descriptor_free())) {
      // A failed socket() reads "Couldn't connect", a CA file that cannot be
      // opened "certificate problem", curl's own socketpair "out of memory".
      throw HttpError(req.method + " " + req.url, msg + " (" + descriptors_note() + ")", true,
                      HttpError::Kind::NoDescriptors);
    }
    // The server's TLS alert when it wants a client certificate it did not
    // get (TLS 1.3 sends it after the handshake: curl reads it as a receive error).
    if (msg.find("alert bad certificate") != std::string::npos ||
        msg.find("alert certificate required") != std::string::npos ||
        msg.find("alert unknown ca") != std::string::npos)
      throw HttpError(req.method + " " + req.url, msg, false, HttpError::Kind::TlsClientCertificate);
    auto kind = rc == CURLE_SSL_CONNECT_ERROR ? HttpError::Kind::TlsHandshake
                : rc == CURLE_PEER_FAILED_VERIFICATION || rc == CURLE_SSL_CACERT_BADFILE ? HttpError::Kind::TlsUntrusted
                : rc == CURLE_COULDNT_CONNECT && os_errno == ECONNREFUSED              ? HttpError::Kind::Refused
                : rc == CURLE_OPERATION_TIMEDOUT                                       ? HttpError::Kind::Timeout
                                                                                        : HttpError::Kind::Other;
    throw HttpError(req.method + " " + req.url, msg, transient_curl(rc), kind);
  }
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &resp.status);
  char* eff = nullptr;
  curl_easy_getinfo(c, CURLINFO_EFFECTIVE_URL, &eff);
  if (eff) resp.effective_url = eff;
  return resp;
}

UrlParts split_url(const std::string& url) {
  global_init();
  std::unique_ptr<CURLU, void (*)(CURLU*)> u(curl_url(), curl_url_cleanup);
  if (!u || curl_url_set(u.get(), CURLUPART_URL, url.c_str(), 0) != CURLUE_OK)
    throw Error("'" + url + "' is not a URL");
  auto part = [&](CURLUPart what) {
    char* v = nullptr;
    std::string out;
    if (curl_url_get(u.get(), what, &v, 0) == CURLUE_OK && v) out = v;
    curl_free(v);
    return out;
  };
  UrlParts p{part(CURLUPART_SCHEME), part(CURLUPART_USER), part(CURLUPART_HOST), part(CURLUPART_PORT),
             part(CURLUPART_PATH)};
  std::transform(p.scheme.begin(), p.scheme.end(), p.scheme.begin(), ::tolower);
  std::transform(p.host.begin(), p.host.end(), p.host.begin(), ::tolower);
  return p;
}

std::string origin_of(const std::string& url) {
  UrlParts p;
  try {
    p = split_url(url);
  } catch (const Error&) {
    return "";
  }
  if (p.host.empty()) return "";
  std::string port = !p.port.empty() ? p.port : p.scheme == "https" ? "443" : p.scheme == "http" ? "80" : "";
  return p.scheme + "://" + p.host + ":" + port;
}

std::string resolve_url(const std::string& base, const std::string& location) {
  global_init();
  std::unique_ptr<CURLU, void (*)(CURLU*)> u(curl_url(), curl_url_cleanup);
  if (!u || curl_url_set(u.get(), CURLUPART_URL, base.c_str(), 0) != CURLUE_OK ||
      curl_url_set(u.get(), CURLUPART_URL, location.c_str(), 0) != CURLUE_OK)
    throw Error("cannot follow the redirect from " + base + " to '" + location + "'");
  char* v = nullptr;
  if (curl_url_get(u.get(), CURLUPART_URL, &v, 0) != CURLUE_OK || !v)
    throw Error("cannot follow the redirect from " + base + " to '" + location + "'");
  std::string out = v;
  curl_free(v);
  return out;
}

bool is_redirect(long s) { return s == 301 || s == 302 || s == 303 || s == 307 || s == 308; }

std::string url_decode(std::string_view text) {
  global_init();
  int n = 0;
  char* d = curl_easy_unescape(nullptr, text.data(), static_cast<int>(text.size()), &n);
  if (!d) throw Error("cannot decode '" + std::string(text) + "'");
  std::string out(d, static_cast<size_t>(n));
  curl_free(d);
  return out;
}

bool transient_status(long s) { return s == 408 || s == 429 || s == 500 || s == 502 || s == 503 || s == 504; }

std::optional<double> retry_after(const Response& r) {
  std::string v = r.header("retry-after");
  if (v.empty()) return std::nullopt;
  if (std::all_of(v.begin(), v.end(), ::isdigit)) {
    auto secs = parse_integer<int64_t>(v);
    return secs ? static_cast<double>(*secs) : 1e18;  // past int64: "a very long time"
  }
  struct tm tm {};
  if (strptime(v.c_str(), "%a, %d %b %Y %H:%M:%S GMT", &tm)) {
    double secs = std::difftime(timegm(&tm), std::time(nullptr));
    return std::max(0.0, secs);
  }
  return std::nullopt;
}

Response with_retries(const RetryPolicy& p, const std::function<Response()>& attempt,
                      const std::function<void(const std::string&)>& on_retry) {
  static thread_local std::mt19937 rng{std::random_device{}()};
  auto sleep = p.sleep ? p.sleep : [](double s) {
    std::this_thread::sleep_for(std::chrono::duration<double>(s));
  };
  double backoff = p.base_seconds;
  for (int i = 1;; ++i) {
    std::string why;
    std::optional<double> wait;
    try {
      Response r = attempt();
      if (!transient_status(r.status) || i >= p.attempts) return r;
      why = "HTTP " + std::to_string(r.status);
      wait = retry_after(r);
    } catch (const HttpError& e) {
      if (!e.transient() || i >= p.attempts) throw;
      why = e.what();
    }
    // Full jitter on the exponential backoff, unless the server said how long.
    double delay = wait ? std::min(*wait, p.max_seconds)
                        : std::uniform_real_distribution<double>(backoff / 2, backoff)(rng);
    backoff = std::min(backoff * 2, p.max_seconds);
    if (on_retry) on_retry(why + "; retrying in " + std::to_string(static_cast<int>(delay * 1000)) + " ms");
    sleep(delay);
  }
}

}  // namespace sb::http
