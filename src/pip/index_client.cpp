// The HTTP side of pip/index.hpp: project pages by content negotiation
// (PEP 691 JSON preferred, PEP 503 HTML accepted), core metadata through the
// fetcher so that it is hash-checked and kept in the store.
#include <map>
#include <mutex>

#include "pip/index.hpp"
#include "pip/version.hpp"
#include "util/error.hpp"
#include "util/file.hpp"
#include "util/http.hpp"

namespace sb::pip {

namespace {

class HttpIndex : public Index {
 public:
  HttpIndex(IndexConfig config, const Store& store, fetch::Fetcher& fetcher)
      : config_(std::move(config)), store_(store), fetcher_(fetcher), client_(client_options(config_)) {}

  std::vector<DistFile> files(const std::string& key) override {
    std::lock_guard<std::mutex> g(mu_);
    if (auto it = pages_.find(key); it != pages_.end()) return it->second;
    std::vector<DistFile> all;
    for (const auto& index : config_.urls) {
      std::string url = index + key + "/";
      http::Request req;
      req.url = url;
      req.headers = {"Accept: application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, "
                     "text/html;q=0.01"};
      http::Response res = http::with_retries(http::RetryPolicy{}, [&] { return client_.perform(req); });
      if (res.status == 404 || res.status == 410) continue;
      if (res.status != 200)
        throw fetch::FetchError(url, res.status, "index page " + url + ": HTTP " + std::to_string(res.status) +
                                                     " (index from " + config_.origin + ")");
      std::string type = res.header("content-type");
      ProjectPage page = type.find("json") != std::string::npos ? parse_json_page(res.body, res.effective_url.empty() ? url : res.effective_url)
                                                               : parse_html_page(res.body, res.effective_url.empty() ? url : res.effective_url);
      all.insert(all.end(), page.files.begin(), page.files.end());
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
  static http::ClientOptions client_options(const IndexConfig& c) {
    http::ClientOptions o;
    o.ca_file = c.ca_file;
    return o;
  }

  IndexConfig config_;
  const Store& store_;
  fetch::Fetcher& fetcher_;
  http::Client client_;
  std::mutex mu_;
  std::map<std::string, std::vector<DistFile>> pages_;
};

}  // namespace

std::unique_ptr<Index> make_http_index(const IndexConfig& config, const Store& store, fetch::Fetcher& fetcher) {
  return std::make_unique<HttpIndex>(config, store, fetcher);
}

}  // namespace sb::pip
