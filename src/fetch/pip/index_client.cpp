// The HTTP side of pip/index.hpp: project pages by content negotiation
// (PEP 691 JSON preferred, PEP 503 HTML accepted), core metadata through the
// fetcher so that it is hash-checked and kept in the store.
#include <algorithm>
#include <cstdio>
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

#include <fcntl.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "fetch/pip/index.hpp"
#include "fetch/pip/version.hpp"
#include "fetch/pip/zip.hpp"
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
    // No PEP 658 file: the METADATA member of the wheel, kept by the wheel's
    // sha256 so that the next resolve reads no zip; read with range requests
    // when the server answers them, else from the whole wheel (hash-checked).
    if (f.sha256)
      if (auto kept = store_.get_record("wheel-metadata", *f.sha256)) return *kept;
    if (f.sha256 && (!f.size || *f.size >= kRangedMinimum))
      if (auto text = ranged_metadata(f)) {
        store_.put_record("wheel-metadata", *f.sha256, *text);
        return *text;
      }
    fetch::FetchItem item{f.url, f.sha256, f.size, f.filename};
    auto got = fetcher_.fetch_one(item);
    std::string text = read_zip_member(store_.blob_path(got.digest), ".dist-info/METADATA");
    if (text.empty()) throw Error("wheel " + f.filename + " has no .dist-info/METADATA");
    store_.put_record("wheel-metadata", got.digest, text);
    return text;
  }

  // Smaller wheels are fetched whole: a few requests cost more than they save.
  static constexpr uint64_t kRangedMinimum = 1 << 20;

  // A wheel's METADATA read the way uv and pip's lazy wheels do: the end of
  // the zip (its directory's end record, and mostly the directory), the rest
  // of the directory, then the member, each by a Range request into a sparse
  // file of the wheel's size that ZipReader then reads; the member's size
  // and CRC-32 are checked as always. nullopt (the wheel is then downloaded
  // whole) when the server ignores ranges or anything is not as expected:
  // a 200 answer is cut off at the first bytes past the range.
  std::optional<std::string> ranged_metadata(const DistFile& f) {
    try {
      http::Client client(client_options(config_));
      // bytes=SPEC of the wheel: the body, and the answer's Content-Range.
      auto get = [&](const std::string& spec, uint64_t most) {
        http::Request req{.url = f.url};
        req.headers.push_back("Range: bytes=" + spec);
        std::string got;
        req.on_data = [&](const char* data, size_t n) {
          if (got.size() + n > most) throw Error("the server sent more than the range asked for");
          got.append(data, n);
        };
        http::Response r = http::with_retries(http::RetryPolicy{}, [&] {
          got.clear();
          return client.perform(req);
        });
        // 200: the whole file, which fitted the range (a server that ignores
        // ranges sends more, and is cut off above).
        if (r.status == 200) return std::make_pair(got, "bytes 0-" + std::to_string(got.size() - 1) + "/" +
                                                            std::to_string(got.size()));
        if (r.status != 206) throw Error("HTTP " + std::to_string(r.status) + " to a range request");
        return std::make_pair(got, r.header("content-range"));
      };
      // The tail, by a suffix range: its Content-Range ("bytes A-B/SIZE") says where it starts and the size.
      auto [tail, range] = get("-" + std::to_string(kRangedTail), kRangedTail);
      unsigned long long a = 0, b = 0, total = 0;
      if (tail.empty() || std::sscanf(range.c_str(), "bytes %llu-%llu/%llu", &a, &b, &total) != 3 ||
          b + 1 != total || b + 1 - a != tail.size() || (f.size && *f.size != total))
        return std::nullopt;
      const uint64_t size = total, tail_at = a;
      if (tail_at == 0) {  // the whole wheel came: into the store, checked, as a download would be
        Digest d = store_.put(tail, f.sha256);
        std::string text = read_zip_member(store_.blob_path(d), ".dist-info/METADATA");
        return text.empty() ? std::nullopt : std::optional<std::string>(text);
      }
      auto dir = store_.temp_dir();
      const fs::path sparse = dir->path() / "wheel";
      UniqueFd fd(::open(sparse.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
      if (fd.get() < 0 || ::ftruncate(fd.get(), static_cast<off_t>(size)) != 0) return std::nullopt;
      write_at(fd.get(), tail, tail_at, sparse);
      // [from, to) into the sparse file.
      auto fill = [&](uint64_t from, uint64_t to) {
        auto [body, said] = get(std::to_string(from) + "-" + std::to_string(to - 1), to - from);
        if (body.size() != to - from) throw Error("a short range");
        write_at(fd.get(), body, from, sparse);
      };
      auto cd = central_directory(tail, tail_at);
      if (!cd || cd->first + cd->second > size) return std::nullopt;
      if (cd->first < tail_at) fill(cd->first, tail_at);
      // Only the directory and this member are in the sparse file: local headers are checked as read.
      ZipReader zip(sparse, "wheel " + f.filename, limits::wheel_inflated(), ZipReader::Check::DirectoryOnly);
      for (const auto& m : zip.members()) {
        if (!m.name.ends_with(".dist-info/METADATA") || m.name.find('/') != m.name.rfind('/')) continue;
        if (m.local_offset >= size) return std::nullopt;
        // The local header: 30 bytes, the name, and an extra field of at most 64 KiB.
        fill(m.local_offset, std::min(size, m.local_offset + 30 + m.name.size() + 0xFFFF + m.compressed));
        std::string text;
        zip.read(m, [&](const char* data, size_t n) { text.append(data, n); });
        if (text.empty()) return std::nullopt;
        return text;
      }
    } catch (const std::exception&) {
      check_interrupted();
    }
    return std::nullopt;
  }

  static constexpr uint64_t kRangedTail = 256 << 10;

  static void write_at(int fd, const std::string& bytes, uint64_t at, const fs::path& file) {
    for (size_t done = 0; done < bytes.size();) {
      ssize_t n = ::pwrite(fd, bytes.data() + done, bytes.size() - done, static_cast<off_t>(at + done));
      if (n <= 0) throw Error("cannot write " + file.string());
      done += static_cast<size_t>(n);
    }
  }

  // Where the central directory of a zip is ({offset, size}), from the last
  // bytes of the file (`tail`, which starts at `tail_at`): its end record,
  // or zip64's when the end record says so. nullopt when not there.
  static std::optional<std::pair<uint64_t, uint64_t>> central_directory(const std::string& tail, uint64_t tail_at) {
    auto u = [&](size_t at, int bytes) {
      uint64_t v = 0;
      for (int i = bytes - 1; i >= 0; --i) v = v << 8 | static_cast<unsigned char>(tail[at + static_cast<size_t>(i)]);
      return v;
    };
    if (tail.size() < 22) return std::nullopt;
    for (size_t i = tail.size() - 22 + 1; i-- > 0;) {
      if (u(i, 4) != 0x06054b50) continue;
      uint64_t cd_size = u(i + 12, 4), cd_at = u(i + 16, 4);
      if (cd_size != 0xFFFFFFFF && cd_at != 0xFFFFFFFF) return std::make_pair(cd_at, cd_size);
      if (i < 20 || u(i - 20, 4) != 0x07064b50) return std::nullopt;  // zip64's locator
      uint64_t z64 = u(i - 20 + 8, 8);
      if (z64 < tail_at || z64 - tail_at + 56 > tail.size()) return std::nullopt;
      size_t r = static_cast<size_t>(z64 - tail_at);
      if (u(r, 4) != 0x06064b50) return std::nullopt;
      return std::make_pair(u(r + 48, 8), u(r + 40, 8));
    }
    return std::nullopt;
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
    req.max_body = limits::index_page();  // held in memory and parsed: capped
    req.headers = {std::string("Accept: ") + kAccept};
    if (kept && !kept->value("etag", "").empty()) req.headers.push_back("If-None-Match: " + kept->value("etag", ""));
    if (kept && !kept->value("last_modified", "").empty())
      req.headers.push_back("If-Modified-Since: " + kept->value("last_modified", ""));
    http::RetryPolicy once;
    once.attempts = 1;
    http::Response res = http::with_retries(retry ? http::RetryPolicy{} : once, [&] {
      try {
        return client.perform(req);
      } catch (const http::HttpError& e) {  // an index behind a private CA: say where the CA goes
        if (e.kind() != http::HttpError::Kind::TlsUntrusted) throw;
        std::string what = e.what();
        if (what.starts_with(e.url() + ": ")) what.erase(0, e.url().size() + 2);
        throw http::HttpError(e.url(), what + " (" + kCertHint + ")", e.transient(), e.kind());
      }
    });
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
