// Uploading one blob: HEAD, mount, monolithic PUT or chunked PATCHes that
// resume where the registry says the upload stands.
#include <chrono>
#include <random>
#include <thread>

#include "registry/push.hpp"

namespace sb::registry {

namespace {

std::string with_query(const std::string& url, const std::string& query) {
  return url + (url.find('?') == std::string::npos ? "?" : "&") + query;
}

// The next byte the registry wants, from a Range header "0-N" (or "bytes=0-N").
uint64_t range_next(const std::string& range, uint64_t fallback) {
  auto dash = range.rfind('-');
  if (range.empty() || dash == std::string::npos) return fallback;
  try {
    uint64_t end = std::stoull(range.substr(dash + 1));
    return end == 0 ? 0 : end + 1;  // distribution writes "0-0" for an empty upload
  } catch (const std::exception&) {
    return fallback;
  }
}

class Uploader {
 public:
  Uploader(Session& s, http::Client& c, const std::string& repo, const BlobRef& b, const PushOptions& o, int task,
           UploadStats& stats)
      : s_(s), c_(c), repo_(repo), b_(b), o_(o), task_(task), stats_(stats) {}

  BlobOutcome run(const std::vector<std::string>& mount_from) {
    auto head = s_.send(c_, {.method = "HEAD", .url = s_.url("/v2/" + repo_ + "/blobs/" + b_.digest.str())});
    if (head.status == 200) return BlobOutcome::Present;
    if (head.status != 404) s_.fail(head, doing());
    for (const auto& from : mount_from) {
      if (from == repo_) continue;
      if (start(from)) return BlobOutcome::Mounted;
    }
    if (location_.empty()) start({});
    return b_.size <= o_.monolithic_limit ? monolithic() : chunked();
  }

 private:
  std::string doing() const { return "uploading blob " + b_.digest.str() + " to " + repo_; }

  // POST .../uploads/ (with a mount); true when the registry mounted the blob.
  bool start(const std::string& mount_from) {
    std::string u = s_.url("/v2/" + repo_ + "/blobs/uploads/");
    if (!mount_from.empty()) u += "?mount=" + b_.digest.str() + "&from=" + mount_from;
    auto r = s_.send(c_, {.method = "POST", .url = u});
    if (r.status == 201 && !mount_from.empty()) return true;
    if (r.status != 202) s_.fail(r, doing());
    location_ = s_.resolve(r.header("location"));
    if (r.header("location").empty()) s_.fail(r, doing() + " (the registry gave no upload location)");
    return false;
  }

  http::Request body_request(const std::string& method, const std::string& url, uint64_t offset, uint64_t length) {
    http::Request req{.method = method, .url = url};
    req.headers.push_back("Content-Type: application/octet-stream");
    if (b_.path.empty()) {
      req.body = b_.bytes.substr(offset, length);
    } else {
      req.body_file = b_.path, req.body_offset = offset, req.body_length = length;
    }
    req.on_progress = [this, offset](uint64_t done, uint64_t) { s_.status().task_progress(task_, offset + done); };
    return req;
  }

  void pause(const http::Response* r, int failures) {
    static thread_local std::mt19937 rng{std::random_device{}()};
    const auto& p = s_.retry_policy();
    double backoff = std::min(p.max_seconds, p.base_seconds * (1 << std::min(failures - 1, 16)));
    std::optional<double> wait = r ? http::retry_after(*r) : std::nullopt;
    double d = wait ? std::min(*wait, p.max_seconds) : std::uniform_real_distribution<double>(backoff / 2, backoff)(rng);
    if (p.sleep) p.sleep(d);
    else std::this_thread::sleep_for(std::chrono::duration<double>(d));
  }

  // One failed attempt: what went wrong, or rethrows what is not worth retrying.
  void check_retry(int failures, const http::Response* r, const std::string& why) {
    if (failures >= s_.retry_policy().attempts) {
      if (r) s_.fail(*r, doing());
      throw Error(s_.op() + ": " + why);
    }
    s_.note_retry(why + "; retrying blob " + b_.digest.str().substr(0, 19));
    pause(r, failures);
  }

  void commit_check(const http::Response& r) {
    std::string got = r.header("docker-content-digest");
    if (!got.empty() && got != b_.digest.str())
      throw Error(s_.op() + ": the registry stored blob " + b_.digest.str() + " as " + got);
  }

  BlobOutcome monolithic() {
    for (int failures = 0;;) {
      std::string why;
      http::Response r;
      bool have_response = false;
      try {
        if (location_.empty()) start({});
        r = s_.send(c_, body_request("PUT", with_query(location_, "digest=" + b_.digest.str()), 0, b_.size), false);
        have_response = true;
        stats_.bytes_sent += b_.size;
        if (r.status == 201) return commit_check(r), BlobOutcome::Sent;
        if (!http::transient_status(r.status)) s_.fail(r, doing());
        why = "PUT blob: HTTP " + std::to_string(r.status);
      } catch (const http::HttpError& e) {
        if (!e.transient()) throw;
        why = e.what();
      }
      location_.clear();  // a broken PUT may leave the upload half written: start a new one
      ++stats_.restarts;
      check_retry(++failures, have_response ? &r : nullptr, why);
    }
  }

  BlobOutcome chunked() {
    uint64_t offset = 0;
    for (int failures = 0; offset < b_.size;) {
      uint64_t len = std::min<uint64_t>(o_.chunk_size, b_.size - offset);
      http::Request req = body_request("PATCH", location_, offset, len);
      req.headers.push_back("Content-Range: " + std::to_string(offset) + "-" + std::to_string(offset + len - 1));
      std::string why;
      http::Response r;
      bool have_response = false;
      try {
        r = s_.send(c_, req, false);
        have_response = true;
        stats_.bytes_sent += len;
        if (r.status == 202) {
          location_ = s_.resolve(r.header("location").empty() ? location_ : r.header("location"));
          offset = range_next(r.header("range"), offset + len);
          failures = 0;
          continue;
        }
        if (!http::transient_status(r.status) && r.status != 416) s_.fail(r, doing());
        why = "PATCH blob at " + human_bytes(static_cast<double>(offset)) + ": HTTP " + std::to_string(r.status);
      } catch (const http::HttpError& e) {
        if (!e.transient()) throw;
        why = e.what();
      }
      check_retry(++failures, have_response ? &r : nullptr, why);
      // Ask the registry where the upload stands, and go on from there.
      auto st = s_.send(c_, {.method = "GET", .url = location_});
      if (st.status == 204) {
        if (!st.header("location").empty()) location_ = s_.resolve(st.header("location"));
        uint64_t next = range_next(st.header("range"), 0);
        if (next > b_.size) next = 0;
        s_.note_retry("resuming blob " + b_.digest.str().substr(0, 19) + " at " + human_bytes(static_cast<double>(next)) +
                      " of " + human_bytes(static_cast<double>(b_.size)));
        ++stats_.resumes;
        offset = next;
      } else if (st.status == 404 || st.status == 400) {
        // The registry dropped the upload (distribution cancels one whose data
        // ran past its last acknowledged offset): start the blob again.
        s_.note_retry("the registry dropped the upload of " + b_.digest.str().substr(0, 19) + "; starting it again");
        ++stats_.restarts;
        location_.clear();
        start({});
        offset = 0;
      } else {
        s_.fail(st, doing());
      }
    }
    http::Request put{.method = "PUT", .url = with_query(location_, "digest=" + b_.digest.str())};
    put.headers.push_back("Content-Type: application/octet-stream");
    auto r = s_.send(c_, put);
    if (r.status == 201) return commit_check(r), BlobOutcome::Sent;
    // A PUT that went through but whose answer was lost leaves no upload behind.
    auto head = s_.send(c_, {.method = "HEAD", .url = s_.url("/v2/" + repo_ + "/blobs/" + b_.digest.str())});
    if (head.status == 200) return BlobOutcome::Sent;
    s_.fail(r, doing());
  }

  Session& s_;
  http::Client& c_;
  const std::string& repo_;
  const BlobRef& b_;
  const PushOptions& o_;
  int task_;
  UploadStats& stats_;
  std::string location_;
};

}  // namespace

BlobOutcome upload_blob(Session& session, http::Client& client, const std::string& repository, const BlobRef& blob,
                        const std::vector<std::string>& mount_from, const PushOptions& options, int task,
                        UploadStats& stats) {
  return Uploader(session, client, repository, blob, options, task, stats).run(mount_from);
}

}  // namespace sb::registry
