#include "registry/session.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "registry/reference.hpp"

namespace sb::registry {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

static std::string without_query(const std::string& url) { return url.substr(0, url.find('?')); }

std::string describe_error(const http::Response& r) {
  std::string out = std::to_string(r.status);
  try {
    json j = json::parse(r.body);
    if (j.contains("errors") && j["errors"].is_array() && !j["errors"].empty()) {
      const json& e = j["errors"][0];
      std::string code = e.value("code", "");
      for (auto& c : code) c = c == '_' ? ' ' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      std::string msg = e.contains("message") && e["message"].is_string() ? e["message"].get<std::string>() : "";
      if (!code.empty()) out += " " + code;
      if (!msg.empty() && msg != code) out += ": " + msg;
      return out;
    }
    if (j.contains("details") && j["details"].is_string()) return out + " " + j["details"].get<std::string>();
  } catch (const json::exception&) {
  }
  static const std::map<long, std::string> reasons = {
      {400, "bad request"}, {401, "unauthorized"},      {403, "forbidden"},   {404, "not found"},
      {405, "method not allowed"}, {413, "payload too large"}, {416, "range not satisfiable"},
      {429, "too many requests"}, {500, "internal server error"}, {502, "bad gateway"},
      {503, "service unavailable"}, {504, "gateway timeout"}};
  auto it = reasons.find(r.status);
  return out + (it != reasons.end() ? " " + it->second : std::string(" (HTTP status)"));
}

int usable_connections(int wanted) {
  struct rlimit rl;
  if (wanted <= 1 || getrlimit(RLIMIT_NOFILE, &rl) != 0) return std::max(1, wanted);
  if (rl.rlim_cur != RLIM_INFINITY && (rl.rlim_max == RLIM_INFINITY || rl.rlim_cur < rl.rlim_max)) {
    struct rlimit up = rl;
    up.rlim_cur = rl.rlim_max == RLIM_INFINITY ? std::max<rlim_t>(rl.rlim_cur, 65536) : rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &up) == 0) rl = up;
  }
  if (rl.rlim_cur == RLIM_INFINITY) return wanted;
  std::error_code ec;
  long open = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec); !ec && it != std::filesystem::directory_iterator();
       it.increment(ec))
    ++open;
  return connections_within(static_cast<long>(rl.rlim_cur), open, wanted);
}

int connections_within(long limit, long open, int wanted) {
  long spare = limit - open - kDescriptorReserve;
  return static_cast<int>(std::clamp<long>(spare / kDescriptorsPerTransfer, 1, std::max(1, wanted)));
}

Session::Session(std::string registry, std::string op, SessionOptions options, Status& status, std::string repository)
    : registry_(std::move(registry)),
      op_(std::move(op)),
      repository_(std::move(repository)),
      options_(std::move(options)),
      status_(status) {}

void Session::add_scope(const std::string& repository, const std::string& actions) {
  std::lock_guard lk(mu_);
  if (scopes_.insert("repository:" + repository + ":" + actions).second) scopes_changed_ = true;
}

std::vector<PullTarget> pull_targets(const Reference& ref, const SessionOptions& o) {
  std::string op = "pull from " + ref.name();
  if (!o.machine) return {PullTarget{ref, op, o, false}};
  std::vector<PullSource> sources;
  try {
    if (o.check_policy)
      if (const auto& policy = o.machine->policy()) policy->check(ref);
    sources = o.machine->conf().pull_sources(ref);
  } catch (const Error& e) {
    throw Error(op + ": " + e.what());
  }
  std::vector<PullTarget> out;
  for (const auto& src : sources) {
    PullTarget t{src.ref, op, o, src.mirror};
    if (src.insecure) t.options.insecure.push_back(src.ref.registry);
    if (src.ref.registry != ref.registry) {  // credentials given for the named registry stay with it
      t.options.credentials.creds.reset();
      t.options.credentials.env.erase("STACKBUILD_REGISTRY_USER");
      t.options.credentials.env.erase("STACKBUILD_REGISTRY_PASSWORD");
    }
    // A mirror that does not answer is passed over for the next place after one
    // more try, not after the primary's backoff of half a minute.
    if (src.mirror && &src != &sources.back()) t.options.retry.attempts = std::min(t.options.retry.attempts, 2);
    if (src.mirror) t.op = "pull from " + src.ref.name() + " (a mirror of " + ref.name() + ")";
    else if (src.ref.name() != ref.name()) t.op = "pull from " + src.ref.name() + " (for " + ref.name() + ")";
    out.push_back(std::move(t));
  }
  return out;
}

SessionOptions push_session_options(const Reference& ref, const SessionOptions& o, const std::string& op) {
  SessionOptions out = o;
  if (!o.machine) return out;
  try {
    if (o.machine->conf().push_insecure(ref)) out.insecure.push_back(ref.registry);
  } catch (const Error& e) {
    throw Error(op + ": " + e.what());
  }
  return out;
}

std::unique_ptr<http::Client> Session::make_client() const {
  http::ClientOptions o;
  o.transport = options_.transport;
  if (!options_.ca_file.empty()) o.ca_files.push_back(options_.ca_file);
  if (options_.machine) {  // certs.d: the registry's CAs and client certificate
    TlsFiles t;
    try {
      t = options_.machine->tls(registry_);
    } catch (const Error& e) {
      throw Error(op_ + ": " + e.what());
    }
    o.ca_files.insert(o.ca_files.end(), t.ca_files.begin(), t.ca_files.end());
    o.client_cert = t.client_cert;
    o.client_key = t.client_key;
  }
  o.verify_tls = !listed(registry_, options_.insecure);
  return std::make_unique<http::Client>(o);
}

// Query strings (upload state tokens) make retry notes long and say nothing to a user.
void Session::note_retry(const std::string& why) {
  std::string out;
  for (size_t i = 0; i < why.size(); ++i) {
    if (why[i] != '?') {
      out += why[i];
      continue;
    }
    while (i + 1 < why.size() && why[i + 1] != ' ' && !(why[i + 1] == ':' && i + 2 < why.size() && why[i + 2] == ' ')) ++i;
  }
  status_.message(Level::Info, op_ + ": " + redact(out));
}

// What to say when the registry refused the connection for want of a TLS
// client certificate (certs.d).
std::string Session::client_certificate_error(const http::HttpError& e) const {
  TlsFiles t = options_.machine ? options_.machine->tls(registry_) : TlsFiles{};
  return op_ + ": " + registry_ + " refused the TLS connection for want of a client certificate it accepts (" +
         e.what() + "); " +
         (t.client_cert.empty()
              ? "put one and its key in /etc/containers/certs.d/" + registry_ + "/ as client.cert and client.key"
              : "it did not accept " + t.client_cert.string());
}

// Finds the endpoint: https first. A local or --insecure-registry registry
// that does not speak TLS (the handshake fails), refuses the https connection
// (nothing on port 443 of a registry named without a port) or does not answer
// it in time is tried over plain http, as skopeo and containerd do; any other
// registry stays on https. Then authenticates as /v2/ asks.
void Session::probe() {
  using Kind = http::HttpError::Kind;
  auto client = make_client();
  bool http_ok = is_local(registry_) || listed(registry_, options_.insecure);
  auto ping = [&](const std::string& base) {
    return http::with_retries(
        options_.retry, [&] { return client->perform({.url = base + "/v2/"}); },
        [&](const std::string& why) { note_retry(why); });
  };
  http::Response r;
  try {
    if (options_.plain_http && http_ok) {
      base_ = "http://" + registry_;
      r = ping(base_);
    } else {
      base_ = "https://" + registry_;
      try {
        r = client->perform({.url = base_ + "/v2/", .connect_timeout_seconds = options_.probe_timeout_seconds});
      } catch (const http::HttpError& e) {
        bool no_tls = e.kind() == Kind::TlsHandshake || e.kind() == Kind::Refused || e.kind() == Kind::Timeout;
        if (http_ok && no_tls) {
          status_.message(Level::Debug, std::string(e.what()) + "; trying plain http");
          base_ = "http://" + registry_;
          try {
            r = ping(base_);
          } catch (const http::HttpError& e2) {
            throw Error(op_ + ": " + registry_ + " answers neither https (" + e.what() + ") nor plain http (" +
                        e2.what() + ")");
          }
        } else if (e.kind() == Kind::TlsClientCertificate) {
          throw Error(client_certificate_error(e));
        } else if (e.kind() == Kind::TlsUntrusted) {
          throw Error(op_ + ": the TLS certificate of " + registry_ + " is not trusted (" + e.what() +
                      "); give the CA that signed it with --ca-cert FILE, or put it in /etc/containers/certs.d/" +
                      registry_ + "/ca.crt");
        } else if (e.transient()) {
          r = ping(base_);
        } else {
          throw;
        }
      }
    }
  } catch (const http::HttpError& e) {
    // TLS 1.3 may show the refusal only on a later try, after a reset.
    if (e.kind() == Kind::TlsClientCertificate) throw Error(client_certificate_error(e));
    std::string hint = !http_ok && e.kind() == Kind::TlsHandshake
                           ? " (plain http is tried only for localhost and --insecure-registry registries)"
                           : "";
    throw Error(op_ + ": " + e.what() + hint);
  }
  status_.message(Level::Debug, "GET " + base_ + "/v2/ -> " + std::to_string(r.status));
  if (r.status == 401 && http::origin_of(r.effective_url.empty() ? base_ : r.effective_url) != http::origin_of(base_))
    throw Error(op_ + ": GET " + base_ + "/v2/ was redirected to " + http::origin_of(r.effective_url) +
                ", which asks for credentials; stackbuild sends them only to the registry's own origin");
  if (r.status == 401) {
    challenge_ = parse_challenge(r.header("www-authenticate"));
    if (!challenge_) throw Error(op_ + ": 401 from " + base_ + "/v2/ without a WWW-Authenticate challenge");
  } else if (r.status < 200 || r.status >= 300) {
    throw RegistryError(op_ + ": " + registry_ + " does not answer as an OCI registry (GET /v2/: " +
                            describe_error(r) + ")",
                        r.status);
  }
  // The credentials: a broken auth file or registries.conf, or a helper that
  // fails, is named after the operation it stopped.
  try {
    CredentialOptions co = options_.credentials;
    if (options_.machine) {
      co.helpers = options_.machine->conf().credential_helpers;
      for (const auto& w : options_.machine->take_warnings()) status_.message(Level::Warning, w);
    }
    creds_ = find_credentials(registry_, repository_, co);
    if (creds_) {
      add_secret(creds_->password);
      add_secret(creds_->identity_token);
      add_secret(base64_encode(creds_->password));
      add_secret(base64_encode(creds_->username + ":" + creds_->password));
    }
  } catch (const Error& e) {
    throw Error(op_ + ": " + e.what(), e.kind());
  }
  probed_ = true;
}

std::string Session::url(const std::string& path) {
  std::lock_guard lk(mu_);
  if (!probed_) probe();
  return base_ + path;
}

std::string Session::resolve(const std::string& location) {
  if (location.rfind("http://", 0) == 0 || location.rfind("https://", 0) == 0) return location;
  return url(location.empty() || location[0] != '/' ? "/" + location : location);
}

// Under mu_: a bearer token for the scopes asked so far.
void Session::fetch_token() {
  const auto& p = challenge_->params;
  auto realm = p.find("realm");
  if (realm == p.end()) throw Error(op_ + ": the registry's Bearer challenge names no realm");
  std::string url = realm->second;
  char sep = url.find('?') == std::string::npos ? '?' : '&';
  if (p.count("service")) url += sep + std::string("service=") + url_encode(p.at("service")), sep = '&';
  for (const auto& s : scopes_) url += sep + std::string("scope=") + url_encode(s), sep = '&';
  http::Request req{.url = url, .max_body = limits::registry_document()};
  bool oauth = creds_ && !creds_->identity_token.empty();
  // The realm may be on another host; credentials go to it over plain http
  // only when the user marked the registry insecure.
  if (creds_ && http::split_url(realm->second).scheme != "https" && !listed(registry_, options_.insecure))
    throw Error(op_ + ": the registry's token realm " + without_query(realm->second) +
                " is plain http; stackbuild sends credentials there only for a registry marked insecure "
                "(--insecure-registry " + registry_ + ", or insecure = true for it in registries.conf)");
  std::string auth;
  if (oauth) {
    // A refresh token is traded with a POST (distribution's OAuth2 token
    // endpoint), the scopes space-separated in one field.
    std::string scope;
    for (const auto& sc : scopes_) scope += (scope.empty() ? "" : " ") + sc;
    req.url = realm->second;
    req.method = "POST";
    req.headers.push_back("Content-Type: application/x-www-form-urlencoded");
    req.body = "grant_type=refresh_token&client_id=stackbuild&refresh_token=" + url_encode(creds_->identity_token);
    if (p.count("service")) req.body += "&service=" + url_encode(p.at("service"));
    if (!scope.empty()) req.body += "&scope=" + url_encode(scope);
    req.follow_redirects = false;  // the refresh token is in the body: it goes nowhere else
  } else if (creds_) {
    auth = "Basic " + base64_encode(creds_->username + ":" + creds_->password);
  }
  auto client = make_client();
  http::Response r;
  try {
    r = perform_scoped(*client, req, auth, http::origin_of(realm->second), true);
  } catch (const http::HttpError& e) {
    throw Error(op_ + ": token server: " + redact(e.what()));
  }
  status_.message(Level::Debug, req.method + " " + without_query(req.url) + " (token" + (oauth ? ", OAuth2 refresh token" : "") +
                                    ") -> " + std::to_string(r.status));
  if (r.status != 200) {
    std::string where = creds_ ? " (credentials from " + creds_->source + ")"
                               : " (no credentials: give --creds USER:PASSWORD, or log in with skopeo login or docker login)";
    throw RegistryError(op_ + ": " + redact(describe_error(r)) + where, r.status);
  }
  std::string token;
  double expires_in = 60;
  try {
    json j = json::parse(r.body);
    token = j.value("token", j.value("access_token", ""));
    // A token server may hand a new refresh token with each answer.
    if (oauth && j.contains("refresh_token") && j["refresh_token"].is_string() &&
        !j["refresh_token"].get<std::string>().empty()) {
      creds_->identity_token = j["refresh_token"].get<std::string>();
      add_secret(creds_->identity_token);
    }
    if (j.contains("expires_in") && j["expires_in"].is_number()) expires_in = j["expires_in"].get<double>();
  } catch (const json::exception&) {
  }
  if (token.empty()) throw Error(op_ + ": the token server's answer holds no token");
  add_secret(token);
  auth_header_ = "Bearer " + token;
  expires_ = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(std::max(expires_in - 5, 1.0) * 1000));
}

bool Session::authenticate(int seen, const std::optional<Challenge>& challenge) {
  std::lock_guard lk(mu_);
  if (!probed_) probe();
  if (seen != generation_) return true;  // another thread refreshed already
  if (challenge) {
    if (challenge->scheme == "bearer" && challenge->params.count("scope")) {
      std::string s = challenge->params.at("scope");
      for (size_t i = 0; i < s.size();) {  // several scopes are separated by spaces
        size_t e = s.find(' ', i);
        if (e == std::string::npos) e = s.size();
        if (e > i) scopes_.insert(s.substr(i, e - i));
        i = e + 1;
      }
    }
    challenge_ = challenge;
  }
  if (!challenge_) return false;
  if (challenge_->scheme == "basic") {
    if (!creds_ || !creds_->identity_token.empty()) return false;  // a refresh token is for bearer tokens only
    auth_header_ = "Basic " + base64_encode(creds_->username + ":" + creds_->password);
  } else if (challenge_->scheme == "bearer") {
    fetch_token();
  } else {
    return false;
  }
  scopes_changed_ = false;
  ++generation_;
  return true;
}

std::pair<std::string, int> Session::current_auth() {
  int gen;
  bool refresh;
  {
    std::lock_guard lk(mu_);
    if (!probed_) probe();
    gen = generation_;
    bool bearer = challenge_ && challenge_->scheme == "bearer";
    refresh = challenge_ && (gen == 0 || (bearer && (scopes_changed_ || Clock::now() >= expires_)));
  }
  if (refresh) authenticate(gen, std::nullopt);
  std::lock_guard lk(mu_);
  return {auth_header_, generation_};
}

http::Response Session::perform_scoped(http::Client& client, http::Request request, const std::string& auth,
                                       const std::string& origin, bool retry) {
  const bool follow = request.follow_redirects;
  request.follow_redirects = false;  // followed here, so that no hop elsewhere gets `auth`
  for (int hops = 0;; ++hops) {
    http::Request hop = request;
    if (!auth.empty() && !origin.empty() && http::origin_of(hop.url) == origin)
      hop.headers.push_back("Authorization: " + auth);
    auto once = [&] {
      http::Response resp = client.perform(hop);
      status_.message(Level::Debug, hop.method + " " + without_query(hop.url) + " -> " + std::to_string(resp.status));
      return resp;
    };
    http::Response resp =
        retry ? http::with_retries(options_.retry, once, [&](const std::string& why) { note_retry(why); }) : once();
    resp.effective_url = hop.url;
    if (!follow || !http::is_redirect(resp.status) || resp.header("location").empty()) return resp;
    if (hops >= 10) throw Error(op_ + ": more than 10 redirects from " + without_query(request.url));
    std::string next = http::resolve_url(hop.url, resp.header("location"));
    std::string scheme = http::split_url(next).scheme;
    if (scheme != "https" && scheme != "http")
      throw Error(op_ + ": a redirect to " + without_query(next) + " (not http)");
    request.url = next;
    // As browsers and curl: 303 (and 301/302 after a POST) is fetched with a GET.
    if (resp.status == 303 || ((resp.status == 301 || resp.status == 302) && request.method == "POST")) {
      if (request.method != "HEAD") request.method = "GET";
      request.body.clear();
      request.body_file.clear();
      request.body_length = 0;
    }
  }
}

http::Response Session::send(http::Client& client, const http::Request& request, bool retry) {
  for (int attempt = 0;; ++attempt) {
    auto [header, gen] = current_auth();
    std::string origin;
    {
      std::lock_guard lk(mu_);
      origin = http::origin_of(base_);
    }
    http::Response resp = perform_scoped(client, request, header, origin, retry);
    // A 401 from elsewhere (a redirect to storage) is no challenge of the
    // registry's: answering it would send credentials where they do not belong.
    if (resp.status == 401 && http::origin_of(resp.effective_url) != origin) return resp;
    // Once per request, and again only when retries took so long that the new
    // token expired too (tokens can live for seconds).
    bool bearer = false;
    if (resp.status == 401 && attempt > 0) {
      std::lock_guard lk(mu_);
      bearer = challenge_ && challenge_->scheme == "bearer";
    }
    if (resp.status == 401 && attempt < 3 && (attempt == 0 || bearer)) {
      if (authenticate(gen, parse_challenge(resp.header("www-authenticate")))) continue;
    }
    return resp;
  }
}

void Session::add_secret(const std::string& secret) {
  if (secret.size() < 4) return;  // too short to find in text without redacting words
  std::lock_guard lk(secrets_mu_);
  if (std::find(secrets_.begin(), secrets_.end(), secret) == secrets_.end()) secrets_.push_back(secret);
}

std::string Session::redact(std::string text) const {
  std::vector<std::string> secrets;
  {
    std::lock_guard lk(secrets_mu_);
    secrets = secrets_;
  }
  // Longest first: "user:password" in base64 before the password's own.
  std::sort(secrets.begin(), secrets.end(), [](const auto& a, const auto& b) { return a.size() > b.size(); });
  for (const auto& s : secrets)
    for (size_t at = text.find(s); at != std::string::npos; at = text.find(s, at + 10))
      text.replace(at, s.size(), "<redacted>");
  return text;
}

void Session::fail(const http::Response& r, const std::string& doing) const {
  std::string msg = op_ + ": " + redact(describe_error(r));
  std::string from = r.effective_url.empty() ? "" : http::origin_of(r.effective_url);
  if ((r.status == 401 || r.status == 403) && !from.empty() && from != http::origin_of(base_)) {
    msg += " (from " + from + ", where a redirect led: the registry's credentials are not sent there)";
  } else if (r.status == 401 || r.status == 403) {
    msg += creds_ ? " (credentials from " + creds_->source + ")"
                  : " (no credentials: give --creds USER:PASSWORD, or log in with skopeo login or docker login)";
  }
  RegistryError e(msg, r.status);
  if (!doing.empty()) e.add_trace("while " + doing);
  throw e;
}

}  // namespace sb::registry
