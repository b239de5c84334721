// Fakes of the side effects a build is handed (pipeline/build_options.hpp,
// BuildServices), shared by the unit tests: a fetcher that serves bytes from
// a map and records what it was asked, a registry in memory behind the HTTP
// transport seam, and a Status that records every call.
// As ninja's FakeCommandRunner, they let a test check what the orchestration
// asked for, with no network and no terminal.
#pragma once

#include <algorithm>
#include <cctype>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "fetch/fetcher.hpp"
#include "registry/auth.hpp"
#include "store/store.hpp"
#include "util/digest.hpp"
#include "util/file.hpp"
#include "util/http.hpp"
#include "util/status.hpp"

namespace sb::test {

// Serves `files` (URL -> bytes): each item is checked as the real fetcher
// checks it (size, the item's own check, sha256) before it enters the store;
// an item whose sha256 the store has is answered from the store (cached, not
// served); an unknown URL is a FetchError with HTTP 404. Thread-safe: the
// points of a matrix fetch at once. factory() makes fetchers that share it.
class RecordingFetcher final : public fetch::Fetcher {
 public:
  explicit RecordingFetcher(std::map<std::string, std::string> files = {}) : files_(std::move(files)) {}

  void serve(const std::string& url, std::string bytes) {
    std::lock_guard g(mu_);
    files_[url] = std::move(bytes);
  }
  // Every regular file under `dir`, at `base_url` + "/" + its relative path.
  void serve_dir(const fs::path& dir, const std::string& base_url) {
    for (const auto& e : fs::recursive_directory_iterator(dir))
      if (e.is_regular_file()) serve(base_url + "/" + fs::relative(e.path(), dir).string(), read_file(e.path()));
  }

  // Every URL asked for, in order (cached ones too).
  std::vector<std::string> asked() const {
    std::lock_guard g(mu_);
    return asked_;
  }
  // The URLs whose bytes were served (not found in the store), each once.
  std::set<std::string> served() const {
    std::lock_guard g(mu_);
    return served_;
  }
  // How many fetchers factory() made.
  int made() const {
    std::lock_guard g(mu_);
    return made_;
  }

  // A factory for BuildServices::make_fetcher: each fetcher it makes uses
  // the store it is given and serves from this one. `this` must outlive them.
  fetch::FetcherFactory factory() {
    return [this](const Store& store, fetch::FetchOptions, Status&) -> std::unique_ptr<fetch::Fetcher> {
      std::lock_guard g(mu_);
      ++made_;
      return std::make_unique<Bound>(*this, store);
    };
  }

  // Used directly, it needs a store: bind() one first.
  void bind(const Store& store) { store_ = &store; }
  std::vector<fetch::Fetched> fetch(const std::vector<fetch::FetchItem>& items) override {
    if (!store_) throw Error("RecordingFetcher: no store bound");
    return fetch_into(*store_, items);
  }

 private:
  struct Bound final : fetch::Fetcher {
    RecordingFetcher& owner;
    const Store& store;
    Bound(RecordingFetcher& o, const Store& s) : owner(o), store(s) {}
    std::vector<fetch::Fetched> fetch(const std::vector<fetch::FetchItem>& items) override {
      return owner.fetch_into(store, items);
    }
  };

  std::vector<fetch::Fetched> fetch_into(const Store& store, const std::vector<fetch::FetchItem>& items) {
    std::vector<fetch::Fetched> out;
    for (const auto& item : items) {
      std::string bytes;
      {
        std::lock_guard g(mu_);
        asked_.push_back(item.url);
        if (item.sha256 && store.has(*item.sha256)) {
          out.push_back({item.url, *item.sha256, store.size(*item.sha256), true});
          continue;
        }
        auto it = files_.find(item.url);
        if (it == files_.end()) throw fetch::FetchError(item.url, 404, item.url + ": HTTP 404 (not in the fake)");
        bytes = it->second;
        served_.insert(item.url);
      }
      if (item.size && *item.size != bytes.size())
        throw fetch::FetchError(item.url, 0, item.url + ": " + std::to_string(bytes.size()) + " bytes, not " +
                                                 std::to_string(*item.size));
      if (item.max_size && bytes.size() > item.max_size->bytes)
        throw fetch::FetchError(item.url, 0, item.url + ": larger than its cap");
      if (item.check) {
        auto tmp = store.temp_dir();
        const fs::path file = tmp->path() / "download";
        write_file_atomic(file, bytes);
        item.check(file);
      }
      if (item.sha256 && Digest::of_bytes(bytes) != *item.sha256)
        throw fetch::FetchError(item.url, 0, item.url + ": sha256 mismatch");
      out.push_back({item.url, store.put(bytes), bytes.size(), false});
    }
    return out;
  }

  mutable std::mutex mu_;
  std::map<std::string, std::string> files_;
  std::vector<std::string> asked_;
  std::set<std::string> served_;
  int made_ = 0;
  const Store* store_ = nullptr;
};

// An OCI distribution registry in memory, behind http::Transport (hand it to
// SessionOptions::transport or BuildServices::registry): the endpoints a
// push, a pull, a registry cache and artifacts use, whatever the URL's host.
//   GET /v2/; HEAD/GET blobs; POST uploads (with ?mount=&from=), PATCH with
//   Content-Range, GET an upload's state, PUT ?digest= (the digest checked);
//   PUT/GET/HEAD manifests by tag or digest (an image's blobs and an index's
//   manifests must be there first, as distribution checks); GET referrers;
//   GET tags/list.
// A manifest with a `subject` is answered with OCI-Subject (the referrers API
// is served). With require_basic(), every request without those credentials
// is a 401 with a Basic challenge. Records each request as "METHOD PATH".
// Thread-safe: a push's workers share it.
class FakeRegistry final : public http::Transport {
 public:
  void require_basic(const std::string& user, const std::string& password) {
    std::lock_guard g(mu_);
    auth_ = "Basic " + registry::base64_encode(user + ":" + password);
  }

  // tags/list answers `status` (a registry that does not list tags); 0: lists them.
  void refuse_tag_list(long status) {
    std::lock_guard g(mu_);
    refuse_tags_ = status;
  }

  http::Response perform(const http::Request& r) override {
    std::lock_guard g(mu_);
    const std::string rest = r.url.substr(r.url.find("://") == std::string::npos ? 0 : r.url.find("://") + 3);
    std::string path = rest.substr(std::min(rest.find('/'), rest.size()));
    std::string query;
    if (auto q = path.find('?'); q != std::string::npos) query = path.substr(q + 1), path.resize(q);
    requests_.push_back(r.method + " " + path);
    http::Response out = route(r, path, query);
    out.effective_url = r.url;
    if (r.on_data && out.status / 100 == 2 && !out.body.empty()) {
      r.on_data(out.body.data(), out.body.size());
      out.body.clear();
    }
    return out;
  }

  // What a test checks: a manifest's bytes by tag or digest; whether a blob is there.
  std::optional<std::string> manifest(const std::string& repo, const std::string& reference) const {
    std::lock_guard g(mu_);
    auto it = manifests_.find(repo + "@" + resolve(repo, reference));
    return it == manifests_.end() ? std::nullopt : std::optional(it->second.bytes);
  }
  std::optional<std::string> tag_digest(const std::string& repo, const std::string& tag) const {
    std::lock_guard g(mu_);
    auto it = tags_.find(repo + ":" + tag);
    return it == tags_.end() ? std::nullopt : std::optional(it->second);
  }
  bool has_blob(const std::string& repo, const std::string& digest) const {
    std::lock_guard g(mu_);
    return blobs_.count(repo + "@" + digest) > 0;
  }
  std::vector<std::string> requests() const {
    std::lock_guard g(mu_);
    return requests_;
  }
  // The requests whose "METHOD PATH" starts with `prefix`.
  size_t count(std::string_view prefix) const {
    size_t n = 0;
    for (const auto& l : requests()) n += l.starts_with(prefix);
    return n;
  }

 private:
  struct Manifest {
    std::string media_type, bytes;
  };

  static std::string header(const http::Request& r, std::string_view lower_name) {
    for (const auto& h : r.headers) {
      auto colon = h.find(':');
      if (colon == std::string::npos || colon != lower_name.size()) continue;
      std::string name = h.substr(0, colon);
      for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (name != lower_name) continue;
      size_t v = h.find_first_not_of(' ', colon + 1);
      return v == std::string::npos ? "" : h.substr(v);
    }
    return "";
  }
  static std::string query_value(const std::string& query, const std::string& key) {
    for (size_t at = 0; at <= query.size();) {
      size_t end = std::min(query.find('&', at), query.size());
      std::string kv = query.substr(at, end - at);
      if (kv.starts_with(key + "=")) return http::url_decode(kv.substr(key.size() + 1));
      at = end + 1;
    }
    return "";
  }
  static std::string body_of(const http::Request& r) {
    if (r.body_file.empty()) return r.body;
    std::string all = read_file(r.body_file);
    return all.substr(std::min<uint64_t>(r.body_offset, all.size()), r.body_length);
  }
  static http::Response answer(long status, std::string body = "", std::map<std::string, std::string> headers = {}) {
    http::Response out;
    out.status = status;
    out.body = std::move(body);
    out.headers = std::move(headers);
    out.headers["docker-distribution-api-version"] = "registry/2.0";
    return out;
  }
  static http::Response error(long status, const std::string& code, const std::string& message) {
    return answer(status, nlohmann::json{{"errors", {{{"code", code}, {"message", message}}}}}.dump(),
                  {{"content-type", "application/json"}});
  }
  // A tag's digest, or the reference itself (a digest).
  std::string resolve(const std::string& repo, const std::string& reference) const {
    auto it = tags_.find(repo + ":" + reference);
    return it == tags_.end() ? reference : it->second;
  }

  http::Response route(const http::Request& r, const std::string& path, const std::string& query) {
    if (!auth_.empty() && header(r, "authorization") != auth_)
      return answer(401, R"({"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]})",
                    {{"www-authenticate", "Basic realm=\"fake\""}});
    if (path == "/v2/" || path == "/v2") return answer(200, "{}");
    if (!path.starts_with("/v2/")) return error(404, "NOT_FOUND", path);
    const std::string p = path.substr(4);
    for (const char* marker : {"/blobs/uploads/", "/blobs/", "/manifests/", "/referrers/", "/tags/list"}) {
      auto at = p.rfind(marker);
      if (at == std::string::npos || at == 0) continue;
      const std::string repo = p.substr(0, at), arg = p.substr(at + std::strlen(marker));
      const std::string m = marker;
      if (m == "/blobs/uploads/") return upload(r, repo, arg, query);
      if (m == "/blobs/") return blob(r, repo, arg);
      if (m == "/manifests/") return manifest_request(r, repo, arg);
      if (m == "/referrers/") return referrers(repo, arg, query);
      return tags(repo);
    }
    return error(404, "NAME_UNKNOWN", p);
  }

  http::Response blob(const http::Request& r, const std::string& repo, const std::string& digest) {
    auto it = blobs_.find(repo + "@" + digest);
    if (it == blobs_.end()) return error(404, "BLOB_UNKNOWN", digest);
    std::map<std::string, std::string> h{{"content-length", std::to_string(it->second.size())},
                                         {"docker-content-digest", digest},
                                         {"content-type", "application/octet-stream"}};
    if (r.method == "HEAD" || r.no_body) return answer(200, "", h);
    if (r.method != "GET") return error(405, "UNSUPPORTED", r.method + " on a blob");
    std::string range = header(r, "range");  // "bytes=N-": a resumed download
    if (range.starts_with("bytes=")) {
      uint64_t from = std::stoull(range.substr(6));
      if (from > it->second.size()) return error(416, "RANGE_INVALID", range);
      h["content-range"] = "bytes " + std::to_string(from) + "-" + std::to_string(it->second.size() - 1) + "/" +
                           std::to_string(it->second.size());
      return answer(206, it->second.substr(from), h);
    }
    return answer(200, it->second, h);
  }

  http::Response upload(const http::Request& r, const std::string& repo, const std::string& id,
                        const std::string& query) {
    if (id.empty()) {
      if (r.method != "POST") return error(405, "UNSUPPORTED", r.method + " on uploads");
      std::string mount = query_value(query, "mount"), from = query_value(query, "from");
      if (!mount.empty() && blobs_.count(from + "@" + mount)) {
        blobs_[repo + "@" + mount] = blobs_[from + "@" + mount];
        return answer(201, "", {{"location", "/v2/" + repo + "/blobs/" + mount}, {"docker-content-digest", mount}});
      }
      std::string fresh = "u" + std::to_string(++uploads_made_);
      uploads_[fresh] = {repo, ""};
      return answer(202, "", {{"location", "/v2/" + repo + "/blobs/uploads/" + fresh}, {"range", "0-0"}});
    }
    auto it = uploads_.find(id);
    if (it == uploads_.end() || it->second.first != repo) return error(404, "BLOB_UPLOAD_UNKNOWN", id);
    std::string& got = it->second.second;
    auto state = [&](long status) {
      return answer(status, "", {{"location", "/v2/" + repo + "/blobs/uploads/" + id},
                                 {"range", "0-" + std::to_string(got.empty() ? 0 : got.size() - 1)}});
    };
    if (r.method == "GET") return state(204);
    std::string body = body_of(r);
    if (r.method == "PATCH") {
      std::string range = header(r, "content-range");
      if (!range.empty() && std::stoull(range) != got.size()) return state(416);
      got += body;
      return state(202);
    }
    if (r.method != "PUT") return error(405, "UNSUPPORTED", r.method + " on an upload");
    got += body;
    const std::string digest = query_value(query, "digest");
    if (Digest::of_bytes(got).str() != digest) return error(400, "DIGEST_INVALID", "not " + digest);
    blobs_[repo + "@" + digest] = got;
    uploads_.erase(it);
    return answer(201, "", {{"location", "/v2/" + repo + "/blobs/" + digest}, {"docker-content-digest", digest}});
  }

  http::Response manifest_request(const http::Request& r, const std::string& repo, const std::string& reference) {
    if (r.method == "PUT") {
      std::string bytes = body_of(r);
      nlohmann::json doc = nlohmann::json::parse(bytes, nullptr, false);
      if (doc.is_discarded()) return error(400, "MANIFEST_INVALID", "not JSON");
      const std::string digest = Digest::of_bytes(bytes).str();
      if (reference.starts_with("sha256:") && reference != digest)
        return error(400, "DIGEST_INVALID", "the body's digest is " + digest);
      std::vector<nlohmann::json> blobs = doc.value("layers", std::vector<nlohmann::json>{});
      if (doc.contains("config")) blobs.push_back(doc["config"]);
      for (const auto& d : blobs)
        if (!blobs_.count(repo + "@" + d.value("digest", std::string())))
          return error(400, "MANIFEST_BLOB_UNKNOWN", d.value("digest", std::string()));
      for (const auto& d : doc.value("manifests", std::vector<nlohmann::json>{}))
        if (!manifests_.count(repo + "@" + d.value("digest", std::string())))
          return error(400, "MANIFEST_UNKNOWN", d.value("digest", std::string()));
      manifests_[repo + "@" + digest] = {header(r, "content-type"), bytes};
      if (!reference.starts_with("sha256:")) tags_[repo + ":" + reference] = digest;
      std::map<std::string, std::string> h{{"location", "/v2/" + repo + "/manifests/" + digest},
                                           {"docker-content-digest", digest}};
      if (doc.contains("subject")) h["oci-subject"] = doc["subject"].value("digest", std::string());
      return answer(201, "", h);
    }
    auto it = manifests_.find(repo + "@" + resolve(repo, reference));
    if (it == manifests_.end()) return error(404, "MANIFEST_UNKNOWN", reference);
    std::map<std::string, std::string> h{{"content-type", it->second.media_type},
                                         {"docker-content-digest", resolve(repo, reference)},
                                         {"content-length", std::to_string(it->second.bytes.size())}};
    if (r.method == "HEAD" || r.no_body) return answer(200, "", h);
    return answer(200, it->second.bytes, h);
  }

  http::Response referrers(const std::string& repo, const std::string& digest, const std::string& query) {
    const std::string type = query_value(query, "artifactType");
    nlohmann::json list = nlohmann::json::array();
    for (const auto& [key, m] : manifests_) {
      if (!key.starts_with(repo + "@")) continue;
      nlohmann::json doc = nlohmann::json::parse(m.bytes);
      if (!doc.contains("subject") || doc["subject"].value("digest", std::string()) != digest) continue;
      std::string artifact = doc.value("artifactType", doc.contains("config") ? doc["config"].value("mediaType", "") : "");
      if (!type.empty() && artifact != type) continue;
      nlohmann::json d{{"mediaType", m.media_type}, {"digest", key.substr(repo.size() + 1)},
                       {"size", m.bytes.size()}, {"artifactType", artifact}};
      if (doc.contains("annotations")) d["annotations"] = doc["annotations"];
      list.push_back(d);
    }
    return answer(200, nlohmann::json{{"schemaVersion", 2}, {"mediaType", "application/vnd.oci.image.index.v1+json"},
                                      {"manifests", list}}.dump(),
                  {{"content-type", "application/vnd.oci.image.index.v1+json"}});
  }

  http::Response tags(const std::string& repo) {
    if (refuse_tags_) return error(refuse_tags_, "UNSUPPORTED", "tags/list");
    nlohmann::json list = nlohmann::json::array();
    for (const auto& [key, digest] : tags_)
      if (key.starts_with(repo + ":")) list.push_back(key.substr(repo.size() + 1));
    return answer(200, nlohmann::json{{"name", repo}, {"tags", list}}.dump(), {{"content-type", "application/json"}});
  }

  mutable std::mutex mu_;
  std::string auth_;
  long refuse_tags_ = 0;
  std::map<std::string, std::string> blobs_;      // "REPO@DIGEST" -> bytes
  std::map<std::string, Manifest> manifests_;     // "REPO@DIGEST"
  std::map<std::string, std::string> tags_;       // "REPO:TAG" -> digest
  std::map<std::string, std::pair<std::string, std::string>> uploads_;  // id -> repository, bytes so far
  int uploads_made_ = 0;
  std::vector<std::string> requests_;
};

// Records every call, in order, as a line: "begin LABEL TOTAL" (returning
// ids 1, 2, ...), "end ID RESULT", "message TEXT", "result KEY=VALUE",
// "event NAME {JSON}". Progress is not a line (progress() has each task's
// last), but progress for a task that is not running, or going backwards,
// adds "bad progress ID"; an end of one not running, "bad end ID". Thread-safe.
class RecordingStatus final : public Status {
 public:
  int task_begin(std::string_view label, uint64_t total) override {
    std::lock_guard g(mu_);
    const int id = ++last_id_;
    running_.insert(id);
    done_[id] = 0;
    lines_.push_back("begin " + std::string(label) + " " + std::to_string(total));
    return id;
  }
  void task_progress(int id, uint64_t done) override {
    std::lock_guard g(mu_);
    if (!running_.count(id) || done < done_[id]) {
      lines_.push_back("bad progress " + std::to_string(id));
      return;
    }
    done_[id] = done;
  }
  void task_end(int id, std::string_view result) override {
    std::lock_guard g(mu_);
    if (!running_.erase(id)) lines_.push_back("bad end " + std::to_string(id));
    lines_.push_back("end " + std::to_string(id) + " " + std::string(result));
  }
  void message(Level, std::string_view text) override { add("message ", text); }
  void result(std::string_view key, std::string_view value) override {
    add("result ", std::string(key) + "=" + std::string(value));
  }
  void event(std::string_view name, const nlohmann::json& fields) override {
    std::lock_guard g(mu_);
    lines_.push_back("event " + std::string(name) + " " + fields.dump());
    events_.emplace_back(std::string(name), fields);
  }

  std::vector<std::string> lines() const {
    std::lock_guard g(mu_);
    return lines_;
  }
  // The lines that start with `prefix` ("message "), without it.
  std::vector<std::string> lines(std::string_view prefix) const {
    std::vector<std::string> out;
    for (const auto& l : lines())
      if (l.starts_with(prefix)) out.push_back(l.substr(prefix.size()));
    return out;
  }
  std::vector<std::string> messages() const { return lines("message "); }
  std::vector<std::string> results() const { return lines("result "); }
  // The last progress of task `id` (0 when none came).
  uint64_t progress(int id) const {
    std::lock_guard g(mu_);
    auto it = done_.find(id);
    return it == done_.end() ? 0 : it->second;
  }
  // Forgets the lines and events so far (task ids go on counting).
  void clear() {
    std::lock_guard g(mu_);
    lines_.clear();
    events_.clear();
  }
  // The fields of each event `name`, in order.
  std::vector<nlohmann::json> events(std::string_view name) const {
    std::lock_guard g(mu_);
    std::vector<nlohmann::json> out;
    for (const auto& [n, f] : events_)
      if (n == name) out.push_back(f);
    return out;
  }

 private:
  void add(const char* what, std::string_view text) {
    std::lock_guard g(mu_);
    lines_.push_back(what + std::string(text));
  }
  mutable std::mutex mu_;
  std::vector<std::string> lines_;
  std::vector<std::pair<std::string, nlohmann::json>> events_;
  std::set<int> running_;
  std::map<int, uint64_t> done_;
  int last_id_ = 0;
};

}  // namespace sb::test
