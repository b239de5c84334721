// Fakes of the side effects a build is handed (pipeline/build.hpp,
// BuildServices), shared by the unit tests: a fetcher that serves bytes from
// a map and records what it was asked, and a Status that records every call.
// As ninja's FakeCommandRunner, they let a test check what the orchestration
// asked for, with no network and no terminal.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "fetch/fetcher.hpp"
#include "store/store.hpp"
#include "util/file.hpp"
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
