// The HTTP side of pip/index.hpp: project pages by content negotiation
// (PEP 691 JSON preferred, PEP 503 HTML accepted), core metadata through the
// fetcher so that it is hash-checked and kept in the store.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <ctime>
#include <deque>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "pip/index.hpp"
#include "pip/version.hpp"
#include "util/error.hpp"
#include "util/file.hpp"
#include "util/http.hpp"
#include "util/interrupt.hpp"
#include "util/number.hpp"
#include "util/threads.hpp"

namespace sb::pip {

namespace {

class HttpIndex : public Index {
 public:
  HttpIndex(IndexConfig config, const Store& store, fetch::Fetcher& fetcher, PageCache cache)
      : config_(std::move(config)), store_(store), fetcher_(fetcher), cache_(std::move(cache)),
        client_(client_options(config_)) {}

  std::vector<DistFile> files(const std::string& key) override {
    std::lock_guard<std::mutex> g(mu_);
    if (std::find(consulted_.begin(), consulted_.end(), key) == consulted_.end()) consulted_.push_back(key);
    if (auto it = pages_.find(key); it != pages_.end()) return it->second;
    std::vector<DistFile> all = load(key, client_);
    pages_[key] = all;
    return all;
  }

  void prefetch(const std::vector<std::string>& keys) override {
    std::vector<std::string> todo;
    {
      std::lock_guard<std::mutex> g(mu_);
      for (const auto& k : keys)
        if (!pages_.count(k)) todo.push_back(k);
    }
    if (todo.empty() || cache_.offline) return;
    // One try per page and none after a failure: files() asks again, with
    // retries, and says what went wrong; an unreachable index is not waited
    // for twice.
    std::atomic<size_t> next{0};
    std::atomic<bool> failed{false};
    run_on_threads(std::min<size_t>(todo.size(), 8), [&] {
      http::Client client(client_options(config_));
      for (size_t i; !failed && (i = next.fetch_add(1)) < todo.size();) {
        try {
          std::vector<DistFile> all = load(todo[i], client, false);
          std::lock_guard<std::mutex> g(mu_);
          pages_.emplace(todo[i], std::move(all));
        } catch (const std::exception&) {
          failed = true;
        }
      }
    });
  }

  std::vector<std::string> consulted() const override {
    std::lock_guard<std::mutex> g(mu_);
    return consulted_;
  }

  ~HttpIndex() override {
    {
      std::lock_guard<std::mutex> g(ahead_mu_);
      stopping_ = true;
      waiting_.clear();  // their futures see a broken promise; nobody waits on them now
    }
    ahead_cv_.notify_all();
    for (auto& t : workers_) t.join();
  }

  void prefetch_metadata(const std::vector<DistFile>& files) override {
    if (cache_.offline) return;
    std::lock_guard<std::mutex> g(ahead_mu_);
    for (const auto& f : files) {
      if (ahead_.count(f.url)) continue;
      if (!f.has_metadata && f.sha256 && store_.get_record("wheel-metadata", *f.sha256)) continue;
      std::promise<std::string> p;
      ahead_[f.url] = p.get_future().share();
      waiting_.emplace_back(f, std::move(p));
    }
    // Workers for up to kMetadataAhead fetches at once; with none (the system
    // refused threads) metadata() takes its file from the queue itself.
    size_t want = std::min(kMetadataAhead, waiting_.size());
    if (workers_.size() < want)
      for (auto& t : start_threads(want - workers_.size(), [this] { fetch_ahead(); })) workers_.push_back(std::move(t));
    ahead_cv_.notify_all();
  }

  std::string metadata(const DistFile& f) override {
    std::shared_future<std::string> ahead;
    {
      std::lock_guard<std::mutex> g(ahead_mu_);
      auto w = std::find_if(waiting_.begin(), waiting_.end(), [&](const auto& e) { return e.first.url == f.url; });
      if (w != waiting_.end()) {  // not started yet: fetched here, now
        waiting_.erase(w);
        ahead_.erase(f.url);
      } else if (auto it = ahead_.find(f.url); it != ahead_.end()) {
        ahead = it->second;
      }
    }
    if (ahead.valid()) {
      try {
        return ahead.get();
      } catch (const std::exception&) {  // asked again below, with retries and its error
        check_interrupted();
      }
    }
    return fetch_metadata(f);
  }

 private:
  static constexpr size_t kMetadataAhead = 8;  // metadata fetches running ahead of the resolver

  void fetch_ahead() {
    for (;;) {
      std::pair<DistFile, std::promise<std::string>> job;
      {
        std::unique_lock<std::mutex> lk(ahead_mu_);
        ahead_cv_.wait(lk, [&] { return stopping_ || !waiting_.empty(); });
        if (stopping_) return;
        job = std::move(waiting_.front());
        waiting_.pop_front();
      }
      try {
        job.second.set_value(fetch_metadata(job.first));
      } catch (...) {
        job.second.set_exception(std::current_exception());
      }
    }
  }

  std::string fetch_metadata(const DistFile& f) {
    if (f.has_metadata) {
      fetch::FetchItem item{f.url + ".metadata", f.metadata_sha256, std::nullopt, f.filename + ".metadata"};
      return store_.read(fetcher_.fetch_one(item).digest);
    }
    // No PEP 658 file: the wheel itself (hash-checked), then its METADATA,
    // kept by the wheel's sha256 so that the next resolve reads no zip.
    if (f.sha256)
      if (auto kept = store_.get_record("wheel-metadata", *f.sha256)) return *kept;
    fetch::FetchItem item{f.url, f.sha256, f.size, f.filename};
    auto got = fetcher_.fetch_one(item);
    std::string text = read_zip_member(store_.blob_path(got.digest), ".dist-info/METADATA");
    if (text.empty()) throw Error("wheel " + f.filename + " has no .dist-info/METADATA");
    store_.put_record("wheel-metadata", got.digest, text);
    return text;
  }

  // Every file of project `key` on every configured index.
  std::vector<DistFile> load(const std::string& key, http::Client& client, bool retry = true) {
    std::vector<DistFile> all;
    for (const auto& index : config_.urls) {
      std::optional<Page> page = fetch_page(index + key + "/", client, retry);
      if (!page) continue;
      std::shared_ptr<const ProjectPage> parsed = parse_page(*page, store_);
      all.insert(all.end(), parsed->files.begin(), parsed->files.end());
    }
    return all;
  }

  // Whether `url` was asked of the index earlier in this run (PageCache::run);
  // `mark`: it is being asked now.
  bool asked_this_run(const std::string& url, bool mark = false) {
    if (!cache_.run || (cache_.max_age && *cache_.max_age == 0)) return false;
    std::lock_guard<std::mutex> g(cache_.run->mu);
    if (mark) cache_.run->urls.insert(url);
    return cache_.run->urls.count(url) > 0;
  }

  // A project page: its body, the body's digest, content type and final
  // URL (after redirects).
  struct Page {
    std::string body;
    Digest digest;
    std::string type, url;
  };

  // Parsing is a function of the page's bytes, and a matrix resolves the
  // same pages once per point and layer (torch's JSON page alone is
  // megabytes, and parsing it was a fifth of a cached rebuild): parsed pages
  // are kept for the process, and in the store as plain lines by the page's
  // digest.
  static std::shared_ptr<const ProjectPage> parse_page(const Page& page, const Store& store) {
    static std::mutex mu;
    static std::map<Digest, std::shared_ptr<const ProjectPage>> parsed;
    const bool json = page.type.find("json") != std::string::npos;
    const Digest key = KeyHasher()
                           .field("stackbuild-pip-page-files", "1")
                           .field("format", json ? "json" : "html")
                           .field("url", page.url)
                           .field("body", page.digest.str())
                           .finish();
    {
      std::lock_guard<std::mutex> g(mu);
      if (auto it = parsed.find(key); it != parsed.end()) return it->second;
    }
    std::shared_ptr<const ProjectPage> p;
    if (auto rec = store.get_record("pip-page-files", key))
      if (auto files = files_from_lines(*rec)) p = std::make_shared<const ProjectPage>(ProjectPage{page.url, *files});
    if (!p) {
      p = std::make_shared<const ProjectPage>(json ? parse_json_page(page.body, page.url)
                                                   : parse_html_page(page.body, page.url));
      if (auto lines = files_as_lines(p->files)) store.put_record("pip-page-files", key, *lines);
    }
    std::lock_guard<std::mutex> g(mu);
    return parsed.emplace(key, std::move(p)).first->second;
  }

  // One file a line, its fields between tabs; nullopt when a field holds a
  // tab or a newline (then the page is not kept this way).
  static std::optional<std::string> files_as_lines(const std::vector<DistFile>& files) {
    std::string out = "stackbuild-pip-page-files 1\n";
    for (const auto& f : files) {
      const std::string fields[] = {f.filename,
                                    f.url,
                                    f.sha256 ? f.sha256->hex() : "",
                                    f.size ? std::to_string(*f.size) : "",
                                    f.requires_python,
                                    f.yanked ? "1" : "0",
                                    f.has_metadata ? "1" : "0",
                                    f.metadata_sha256 ? f.metadata_sha256->hex() : ""};
      for (size_t i = 0; i < std::size(fields); ++i) {
        if (fields[i].find_first_of("\t\n") != std::string::npos) return std::nullopt;
        out += fields[i];
        out += i + 1 < std::size(fields) ? '\t' : '\n';
      }
    }
    return out;
  }

  // The files back from files_as_lines(); nullopt for a damaged record.
  static std::optional<std::vector<DistFile>> files_from_lines(std::string_view text) {
    constexpr std::string_view kHeader = "stackbuild-pip-page-files 1\n";
    if (!text.starts_with(kHeader)) return std::nullopt;
    text.remove_prefix(kHeader.size());
    std::vector<DistFile> files;
    try {
      while (!text.empty()) {
        size_t end = text.find('\n');
        if (end == std::string_view::npos) return std::nullopt;
        std::string_view line = text.substr(0, end);
        text.remove_prefix(end + 1);
        std::string_view f[8];
        for (size_t i = 0; i < 8; ++i) {
          size_t tab = i < 7 ? line.find('\t') : line.size();
          if (tab == std::string_view::npos) return std::nullopt;
          f[i] = line.substr(0, tab);
          line.remove_prefix(i < 7 ? tab + 1 : tab);
        }
        DistFile d;
        d.filename = f[0];
        d.url = f[1];
        if (!f[2].empty()) d.sha256 = Digest::parse("sha256:" + std::string(f[2]));
        if (!f[3].empty()) d.size = parse_integer<uint64_t>(f[3]);
        d.requires_python = f[4];
        d.yanked = f[5] == "1";
        d.has_metadata = f[6] == "1";
        if (!f[7].empty()) d.metadata_sha256 = Digest::parse("sha256:" + std::string(f[7]));
        files.push_back(std::move(d));
      }
    } catch (const std::exception&) {
      return std::nullopt;
    }
    return files;
  }

  // The page at `url` from the store when it is fresh enough, else from the
  // index (revalidated when the store has an older copy); nullopt on 404/410.
  std::optional<Page> fetch_page(const std::string& url, http::Client& client, bool retry = true) {
    const Digest key = Digest::of_bytes(std::string(kAccept) + "\n" + url);
    int64_t now = cache_.now ? cache_.now() : static_cast<int64_t>(time(nullptr));
    std::optional<nlohmann::json> kept;
    if (auto rec = store_.get_record("pip-page", key)) {
      try {
        auto j = nlohmann::json::parse(*rec);
        if (j.at("url") == url && store_.has(Digest::parse(j.at("body").get<std::string>()))) kept = j;
      } catch (const std::exception&) {
        // A damaged record is a page not kept.
      }
    }
    auto page_of = [&](const nlohmann::json& j) {
      Digest body = Digest::parse(j.at("body").get<std::string>());
      return Page{store_.read(body), body, j.value("type", ""), j.value("effective_url", url)};
    };
    if (kept) {
      int64_t age = now - kept->value("fetched", int64_t{0});
      int64_t lifetime = cache_.max_age                      ? *cache_.max_age
                         : (*kept)["max_age"].is_number_integer() ? (*kept)["max_age"].get<int64_t>()
                                                                  : 0;
      if (cache_.offline || (age >= 0 && age < lifetime) || asked_this_run(url)) return page_of(*kept);
    }
    if (cache_.offline)
      throw fetch::FetchError(url, 0, "offline: index page " + url + " is not in the store (index from " +
                                          config_.origin + ")");
    http::Request req;
    req.url = url;
    req.headers = {std::string("Accept: ") + kAccept};
    if (kept && !kept->value("etag", "").empty()) req.headers.push_back("If-None-Match: " + kept->value("etag", ""));
    if (kept && !kept->value("last_modified", "").empty())
      req.headers.push_back("If-Modified-Since: " + kept->value("last_modified", ""));
    http::RetryPolicy once;
    once.attempts = 1;
    http::Response res = http::with_retries(retry ? http::RetryPolicy{} : once, [&] { return client.perform(req); });
    if (res.status == 404 || res.status == 410) return std::nullopt;
    if (res.status == 200 || res.status == 304) asked_this_run(url, true);
    CacheDirective cc = cache_directive(res.header("cache-control"));
    auto lifetime_json = [&]() -> nlohmann::json { return cc.max_age ? nlohmann::json(*cc.max_age) : nullptr; };
    if (res.status == 304 && kept) {
      (*kept)["fetched"] = now;
      if (!res.header("cache-control").empty()) (*kept)["max_age"] = lifetime_json();
      store_.put_record("pip-page", key, kept->dump());
      return page_of(*kept);
    }
    if (res.status != 200)
      throw fetch::FetchError(url, res.status, "index page " + url + ": HTTP " + std::to_string(res.status) +
                                                   " (index from " + config_.origin + ")");
    Page page{res.body, cc.store ? store_.put(res.body) : Digest::of_bytes(res.body), res.header("content-type"),
              res.effective_url.empty() ? url : res.effective_url};
    if (cc.store) {
      nlohmann::json j = {{"url", url},
                          {"body", page.digest.str()},
                          {"type", page.type},
                          {"effective_url", page.url},
                          {"etag", res.header("etag")},
                          {"last_modified", res.header("last-modified")},
                          {"fetched", now},
                          {"max_age", lifetime_json()}};
      store_.put_record("pip-page", key, j.dump());
    }
    return page;
  }

  static constexpr const char* kAccept =
      "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.01";

  IndexConfig config_;
  const Store& store_;
  fetch::Fetcher& fetcher_;
  PageCache cache_;
  http::Client client_;
  mutable std::mutex mu_;
  std::map<std::string, std::vector<DistFile>> pages_;
  std::vector<std::string> consulted_;
  // Metadata fetched ahead (prefetch_metadata), by URL; its queue and workers.
  std::mutex ahead_mu_;
  std::condition_variable ahead_cv_;
  std::map<std::string, std::shared_future<std::string>> ahead_;
  std::deque<std::pair<DistFile, std::promise<std::string>>> waiting_;
  std::vector<std::thread> workers_;
  bool stopping_ = false;
};

}  // namespace

std::unique_ptr<Index> make_http_index(const IndexConfig& config, const Store& store, fetch::Fetcher& fetcher,
                                       const PageCache& cache) {
  return std::make_unique<HttpIndex>(config, store, fetcher, cache);
}

CacheDirective cache_directive(const std::string& cache_control) {
  CacheDirective out;
  std::string cc;
  for (char c : cache_control) cc += static_cast<char>(tolower(static_cast<unsigned char>(c)));
  size_t pos = 0;
  while (pos <= cc.size()) {
    size_t comma = cc.find(',', pos);
    std::string d = cc.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    pos = comma == std::string::npos ? cc.size() + 1 : comma + 1;
    size_t b = d.find_first_not_of(" \t"), e = d.find_last_not_of(" \t");
    d = b == std::string::npos ? "" : d.substr(b, e - b + 1);
    if (d == "no-store") {
      out.store = false;
    } else if (d == "no-cache") {
      out.max_age = 0;
    } else if (d.rfind("max-age=", 0) == 0 && !(out.max_age && *out.max_age == 0)) {
      std::string v = d.substr(8);
      if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
      // An unreadable max-age makes the response stale (RFC 9111 4.2.1).
      bool number = !v.empty() && v.size() <= 12 && v.find_first_not_of("0123456789") == std::string::npos;
      out.max_age = number ? parse_integer<int64_t>(v).value_or(0) : 0;
    }
  }
  return out;
}

}  // namespace sb::pip
