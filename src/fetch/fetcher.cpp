#include "fetch/fetcher.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <mutex>

#include <nlohmann/json.hpp>

#include "util/file.hpp"
#include "util/interrupt.hpp"
#include "util/process.hpp"
#include "util/threads.hpp"

namespace sb::fetch {

FetchOptions fetch_options_from_env() {
  FetchOptions o;
  o.offline = env_or("STACKBUILD_OFFLINE", "") == "1";
  // Stages with a CA setting of their own (apt, pip) replace this.
  o.untrusted_hint =
      "trust a private CA by adding it to the system store (update-ca-certificates), or name a bundle "
      "with SSL_CERT_FILE";
  return o;
}

namespace {

std::string label_of(const FetchItem& item) {
  if (!item.label.empty()) return item.label;
  auto slash = item.url.rfind('/');
  return slash == std::string::npos ? item.url : item.url.substr(slash + 1);
}

std::string expectation(const FetchItem& item) {
  std::string s;
  if (item.sha256) s += item.sha256->str();
  if (item.size) s += (s.empty() ? "" : ", ") + std::to_string(*item.size) + " bytes";
  return s.empty() ? "" : " (expected " + s + ")";
}

Digest url_key(const std::string& url) { return KeyHasher().field("fetched-url", url).finish(); }

// A download by digest is named by a "download" record, which each later use
// touches: gc keeps the blob while the record is kept, and evicts the least
// recently used first. (A blob from before these records gets one when next used.)
void note_download(const Store& store, const FetchItem& item, const Digest& d) {
  Digest key = KeyHasher().field("download", d.str()).finish();
  if (!store.touch_record("download", key))
    store.put_record("download", key, nlohmann::json{{"blob", d.str()}, {"url", item.url}}.dump());
}

uint64_t bytes_on_disk(const fs::path& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

// Moves bytes [offset, end) of `p` to its start (a server answered a Range
// request with the whole file, appended after the partial bytes).
void drop_prefix(const fs::path& p, uint64_t offset) {
  std::string all = read_file(p);
  write_file_atomic(p, std::string_view(all).substr(offset));
}

class HttpFetcher final : public Fetcher {
 public:
  HttpFetcher(const Store& store, FetchOptions o, Status& status) : store_(store), o_(std::move(o)), status_(status) {}

  std::vector<Fetched> fetch(const std::vector<FetchItem>& items) override {
    if (items.empty()) return {};
    std::vector<std::optional<Fetched>> done(items.size());
    std::vector<std::exception_ptr> errors(items.size());
    // What the task counts is what is downloaded: a file the store has adds
    // nothing (so that a rate is a download rate).
    uint64_t total = 0;
    for (const auto& it : items)
      if (!(it.sha256 && store_.has(*it.sha256))) total += it.size.value_or(0);
    int task = items.size() > 1 ? status_.task_begin("fetch " + std::to_string(items.size()) + " files", total)
                                : status_.task_begin("fetch " + label_of(items.front()), total);
    std::atomic<size_t> next{0};
    std::atomic<uint64_t> bytes{0};
    auto worker = [&] {
      std::unique_ptr<http::Client> client;
      for (size_t i; (i = next++) < items.size();) {
        try {
          check_interrupted();
          if (!client) client = std::make_unique<http::Client>(o_.client);
          done[i] = fetch_item(*client, items[i], [&](uint64_t n) { status_.task_progress(task, bytes += n); });
        } catch (...) {
          errors[i] = std::current_exception();
        }
      }
    };
    size_t nthreads = std::min<size_t>(std::max(1, o_.jobs), items.size());
    run_on_threads(nthreads, worker);
    size_t failed = 0, downloaded = 0;
    for (size_t i = 0; i < items.size(); ++i) {
      failed += errors[i] ? 1 : 0;
      downloaded += done[i] && !done[i]->cached ? 1 : 0;
    }
    status_.task_end(task, failed ? std::to_string(failed) + " failed"
                                  : std::to_string(downloaded) + " downloaded, " +
                                        std::to_string(items.size() - downloaded) + " from the store");
    for (size_t i = 0; i < items.size(); ++i)
      if (errors[i]) {
        try {
          std::rethrow_exception(errors[i]);
        } catch (Error& e) {
          if (failed > 1) e.add_trace("(" + std::to_string(failed - 1) + " other fetches failed too)");
          throw;
        }
      }
    std::vector<Fetched> out;
    for (auto& d : done) out.push_back(std::move(*d));
    return out;
  }

 private:
  Fetched fetch_item(http::Client& client, const FetchItem& item, const std::function<void(uint64_t)>& progress) {
    if (item.sha256 && store_.has(*item.sha256)) {
      note_download(store_, item, *item.sha256);
      uint64_t size = store_.size(*item.sha256);
      return {item.url, *item.sha256, size, true};
    }
    if (o_.offline) {
      if (!item.sha256)
        if (auto d = last_fetched(store_, item.url)) return {item.url, *d, store_.size(*d), true};
      throw FetchError(item.url, 0, "offline: " + item.url + " is not in the store" + expectation(item));
    }
    Digest key = KeyHasher().field("partial", item.url).field("sha256", item.sha256 ? item.sha256->str() : "").finish();
    auto lock = store_.lock("fetch-" + key.hex());
    if (item.sha256 && store_.has(*item.sha256)) {
      note_download(store_, item, *item.sha256);
      return {item.url, *item.sha256, store_.size(*item.sha256), true};
    }
    fs::path partial = store_.root() / "tmp" / ("partial-" + key.hex());
    for (int round = 0;; ++round) {
      bool resumed = bytes_on_disk(partial) > 0;
      if (item.url.rfind("file://", 0) == 0) copy_local(item, partial);
      else download(client, item, partial, progress);
      uint64_t got = bytes_on_disk(partial);
      if (item.size && got != *item.size) {
        ::unlink(partial.c_str());
        throw FetchError(item.url, 0, "truncated download of " + item.url + ": got " + std::to_string(got) +
                                          " of " + std::to_string(*item.size) + " bytes" + expectation(item));
      }
      if (item.check) {
        try {
          item.check(partial);
        } catch (...) {
          ::unlink(partial.c_str());
          throw;
        }
      }
      try {
        Digest d = store_.put_file(partial, item.sha256);
        ::unlink(partial.c_str());
        if (!item.sha256) store_.put_record("url", url_key(item.url), d.str());
        else note_download(store_, item, d);
        return {item.url, d, got, false};
      } catch (const Error& e) {
        ::unlink(partial.c_str());
        if (resumed && round == 0) continue;  // a stale partial file: once more from the start
        throw FetchError(item.url, 0, "sha256 mismatch for " + item.url + ": " + e.what() +
                                          "; nothing entered the store");
      }
    }
  }

  void copy_local(const FetchItem& item, const fs::path& partial) {
    fs::path src = item.url.substr(7);
    std::error_code ec;
    if (!fs::exists(src, ec)) throw FetchError(item.url, 404, item.url + ": no such file" + expectation(item));
    ::unlink(partial.c_str());
    if (item.max_size && fs::file_size(src, ec) > item.max_size->bytes && !ec)
      throw FetchError(item.url, 0, item.url + ": larger than " + item.max_size->describe());
    fs::copy_file(src, partial, ec);
    if (ec) throw FetchError(item.url, 0, item.url + ": " + ec.message());
  }

  // One transfer with retries; each retry resumes from the bytes on disk.
  void download(http::Client& client, const FetchItem& item, const fs::path& partial,
                const std::function<void(uint64_t)>& progress) {
    http::Response last;
    auto attempt = [&]() -> http::Response {
      uint64_t offset = bytes_on_disk(partial);
      if (item.size && offset > *item.size) ::unlink(partial.c_str()), offset = 0;
      UniqueFd fd(open_waiting(partial.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
      if (fd.get() < 0) throw_errno("open " + partial.string());
      http::Request req;
      req.url = item.url;
      if (offset > 0) req.headers.push_back("Range: bytes=" + std::to_string(offset) + "-");
      uint64_t written = 0;
      req.on_data = [&](const char* data, size_t n) {
        written += n;
        if (item.size && offset + written > *item.size)
          throw FetchError(item.url, 0, item.url + ": more data than expected" + expectation(item));
        if (item.max_size && offset + written > item.max_size->bytes)
          throw FetchError(item.url, 0, item.url + ": larger than " + item.max_size->describe());
        write_all(fd.get(), data, n, partial.string());
        progress(n);
      };
      http::Response r = client.perform(req);
      if (r.status == 200 && offset > 0) drop_prefix(partial, offset);  // the server ignored the Range
      if (r.status == 416 && offset > 0) {  // nothing past what we have: maybe all of it
        r.status = (item.size && offset == *item.size) ? 206 : 503;  // else start again
        if (r.status == 503) ::unlink(partial.c_str());
      }
      return r;
    };
    try {
      last = http::with_retries(o_.retry, attempt, [&](const std::string& why) {
        status_.message(Level::Info, "fetch " + label_of(item) + ": " + why);
      });
    } catch (const http::HttpError& e) {
      std::string hint;
      if (e.kind() == http::HttpError::Kind::TlsUntrusted && !o_.untrusted_hint.empty())
        hint = " (" + o_.untrusted_hint + ")";
      throw FetchError(item.url, 0, std::string(e.what()) + expectation(item) + hint +
                                        (e.transient() ? " (gave up after " + std::to_string(o_.retry.attempts) +
                                                             " attempts)" : ""));
    }
    if (last.status < 200 || last.status >= 300) {
      ::unlink(partial.c_str());
      std::string body = last.body.substr(0, 200);
      std::string hint = last.status == 401 && !o_.unauthorized_hint.empty() ? " (" + o_.unauthorized_hint + ")" : "";
      throw FetchError(item.url, last.status,
                       "GET " + item.url + ": HTTP " + std::to_string(last.status) + expectation(item) + hint +
                           (body.empty() ? "" : ": " + body));
    }
  }

  const Store& store_;
  FetchOptions o_;
  Status& status_;
};

}  // namespace

std::unique_ptr<Fetcher> make_fetcher(const Store& store, FetchOptions options, Status& status) {
  return std::make_unique<HttpFetcher>(store, std::move(options), status);
}

std::optional<Digest> last_fetched(const Store& store, const std::string& url) {
  auto rec = store.get_record("url", url_key(url));
  if (!rec) return std::nullopt;
  Digest d = Digest::parse(*rec);
  return store.has(d) ? std::optional<Digest>(d) : std::nullopt;
}

}  // namespace sb::fetch
