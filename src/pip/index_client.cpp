// The HTTP side of pip/index.hpp: project pages by content negotiation
// (PEP 691 JSON preferred, PEP 503 HTML accepted), core metadata through the
// fetcher so that it is hash-checked and kept in the store.
#include <ctime>
#include <map>
#include <mutex>

#include <nlohmann/json.hpp>

#include "pip/index.hpp"
#include "pip/version.hpp"
#include "util/error.hpp"
#include "util/file.hpp"
#include "util/http.hpp"

namespace sb::pip {

namespace {

class HttpIndex : public Index {
 public:
  HttpIndex(IndexConfig config, const Store& store, fetch::Fetcher& fetcher, PageCache cache)
      : config_(std::move(config)), store_(store), fetcher_(fetcher), cache_(std::move(cache)),
        client_(client_options(config_)) {}

  std::vector<DistFile> files(const std::string& key) override {
    std::lock_guard<std::mutex> g(mu_);
    if (auto it = pages_.find(key); it != pages_.end()) return it->second;
    std::vector<DistFile> all;
    for (const auto& index : config_.urls) {
      std::optional<Page> page = fetch_page(index + key + "/");
      if (!page) continue;
      ProjectPage parsed = page->type.find("json") != std::string::npos ? parse_json_page(page->body, page->url)
                                                                      : parse_html_page(page->body, page->url);
      all.insert(all.end(), parsed.files.begin(), parsed.files.end());
    }
    pages_[key] = all;
    return all;
  }

  std::string metadata(const DistFile& f) override {
    if (f.has_metadata) {
      fetch::FetchItem item{f.url + ".metadata", f.metadata_sha256, std::nullopt, f.filename + ".metadata"};
      return store_.read(fetcher_.fetch_one(item).digest);
    }
    // No PEP 658 file: the wheel itself (hash-checked), then its METADATA.
    fetch::FetchItem item{f.url, f.sha256, f.size, f.filename};
    auto got = fetcher_.fetch_one(item);
    std::string text = read_zip_member(store_.blob_path(got.digest), ".dist-info/METADATA");
    if (text.empty()) throw Error("wheel " + f.filename + " has no .dist-info/METADATA");
    return text;
  }

 private:
  // A project page: its body, content type and final URL (after redirects).
  struct Page {
    std::string body, type, url;
  };

  // The page at `url` from the store when it is fresh enough, else from the
  // index (revalidated when the store has an older copy); nullopt on 404/410.
  std::optional<Page> fetch_page(const std::string& url) {
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
      return Page{store_.read(Digest::parse(j.at("body").get<std::string>())), j.value("type", ""),
                  j.value("effective_url", url)};
    };
    if (kept) {
      int64_t age = now - kept->value("fetched", int64_t{0});
      int64_t lifetime = cache_.max_age                      ? *cache_.max_age
                         : (*kept)["max_age"].is_number_integer() ? (*kept)["max_age"].get<int64_t>()
                                                                  : 0;
      if (cache_.offline || (age >= 0 && age < lifetime)) return page_of(*kept);
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
    http::Response res = http::with_retries(http::RetryPolicy{}, [&] { return client_.perform(req); });
    if (res.status == 404 || res.status == 410) return std::nullopt;
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
    Page page{res.body, res.header("content-type"), res.effective_url.empty() ? url : res.effective_url};
    if (cc.store) {
      nlohmann::json j = {{"url", url},
                          {"body", store_.put(page.body).str()},
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

  static http::ClientOptions client_options(const IndexConfig& c) {
    http::ClientOptions o;
    o.ca_file = c.ca_file;
    return o;
  }

  IndexConfig config_;
  const Store& store_;
  fetch::Fetcher& fetcher_;
  PageCache cache_;
  http::Client client_;
  std::mutex mu_;
  std::map<std::string, std::vector<DistFile>> pages_;
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
      out.max_age = number ? std::stoll(v) : 0;
    }
  }
  return out;
}

}  // namespace sb::pip
