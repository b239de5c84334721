// A fixture Python index for the pip tests: wheels made here (zip files
// written with libarchive), served on 127.0.0.1 as PEP 691 JSON or PEP 503
// HTML, with PEP 658 metadata files for some.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fetch/fetcher.hpp"
#include "fetch/pip/index.hpp"
#include "fetch/pip/version.hpp"
#include "http_server.hpp"
#include "layer/tar_writer.hpp"
#include "store/store.hpp"
#include "util/digest.hpp"
#include "util/file.hpp"
#include "util/http.hpp"
#include "util/status.hpp"

namespace sb::test {

inline std::string make_zip(const std::vector<std::pair<std::string, std::string>>& files) {
  std::string out;
  archive* a = archive_write_new();
  archive_write_set_format_zip(a);
  archive_write_open(a, &out, nullptr,
                     [](archive*, void* o, const void* b, size_t n) -> la_ssize_t {
                       static_cast<std::string*>(o)->append(static_cast<const char*>(b), n);
                       return static_cast<la_ssize_t>(n);
                     },
                     nullptr);
  for (const auto& [name, data] : files) {
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, name.c_str());
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, name.find("/bin/") != std::string::npos ? 0755 : 0644);
    archive_entry_set_size(e, static_cast<la_int64_t>(data.size()));
    archive_write_header(a, e);
    archive_write_data(a, data.data(), data.size());
    archive_entry_free(e);
  }
  archive_write_close(a);
  archive_write_free(a);
  return out;
}

struct FixtureWheel {
  std::string project, version, tags;  // tags: "py3-none-any"
  std::vector<std::string> requires_dist, extras;
  std::vector<std::pair<std::string, std::string>> files;  // extra members
  bool pep658 = true;
  std::string requires_python;
  std::vector<std::pair<std::string, std::string>> files_after;  // members after the .dist-info's
};

class FixtureIndex {
 public:
  bool html = false;
  std::map<std::string, std::string> bad_sha;       // filename -> sha256 the index claims
  std::map<std::string, uint64_t> bad_size;         // filename -> size the index claims
  std::set<std::string> truncate;                   // filenames served cut short
  std::mutex hits_mu;
  std::map<std::string, int> hits;                  // path -> requests served (under hits_mu)
  std::map<std::string, uint64_t> served;           // path -> body bytes of files sent (under hits_mu)
  bool ranges = false;                              // answer Range requests (206), as most servers do
  std::map<std::string, std::string> range_lies;    // filename -> other bytes whose ranges are served
  int hits_of(const std::string& path) {
    std::lock_guard<std::mutex> g(hits_mu);
    return hits.count(path) ? hits.at(path) : 0;
  }

  void add(const FixtureWheel& w) {
    std::string dist = pip::normalize_name(w.project);  // the file name as new wheels spell it
    for (auto& c : dist) c = c == '-' ? '_' : c;
    std::string filename = dist + "-" + w.version + "-" + w.tags + ".whl";
    std::string meta = "Metadata-Version: 2.1\nName: " + w.project + "\nVersion: " + w.version + "\n";
    if (!w.requires_python.empty()) meta += "Requires-Python: " + w.requires_python + "\n";
    for (const auto& e : w.extras) meta += "Provides-Extra: " + e + "\n";
    for (const auto& r : w.requires_dist) meta += "Requires-Dist: " + r + "\n";
    meta += "\nThe description.\nRequires-Dist: not-a-dependency\n";
    std::string di = dist + "-" + w.version + ".dist-info/";
    auto files = w.files;
    files.push_back({di + "METADATA", meta});
    files.push_back({di + "WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: " + w.tags + "\n"});
    files.push_back({di + "RECORD", "stale,,\n"});
    files.insert(files.end(), w.files_after.begin(), w.files_after.end());
    std::string zip = make_zip(files);
    blobs_[filename] = zip;
    if (w.pep658) blobs_[filename + ".metadata"] = meta;
    projects_[pip::normalize_name(w.project)].push_back({filename, w.requires_python});
  }

  std::string respond(const HttpRequest& r) {
    {
      std::lock_guard<std::mutex> g(hits_mu);
      ++hits[r.path];
    }
    const std::string pre = "/simple/";
    if (r.path.starts_with(pre)) {
      std::string key = r.path.substr(pre.size());
      if (key.ends_with("/")) key.pop_back();
      auto it = projects_.find(key);
      if (it == projects_.end()) return http_response(404, "not found");
      return html ? page_html(it->second) : page_json(it->second);
    }
    if (r.path.starts_with("/files/")) {
      std::string name = r.path.substr(7);
      auto it = blobs_.find(name);
      if (it == blobs_.end()) return http_response(404, "no");
      auto lie = range_lies.find(name);
      const std::string& all = lie != range_lies.end() ? lie->second : it->second;
      if (auto h = r.headers.find("range"); ranges && h != r.headers.end() && h->second.starts_with("bytes=")) {
        std::string spec = h->second.substr(6);
        size_t dash = spec.find('-');
        uint64_t from, to;  // [from, to]
        if (dash == 0) {
          uint64_t n = std::min<uint64_t>(std::stoull(spec.substr(1)), all.size());
          from = all.size() - n, to = all.size() - 1;
        } else {
          from = std::stoull(spec.substr(0, dash));
          to = dash + 1 < spec.size() ? std::min<uint64_t>(std::stoull(spec.substr(dash + 1)), all.size() - 1)
                                      : all.size() - 1;
        }
        std::string body = all.substr(from, to + 1 - from);
        {
          std::lock_guard<std::mutex> g(hits_mu);
          served[r.path] += body.size();
        }
        return "HTTP/1.1 206 Partial Content\r\nContent-Length: " + std::to_string(body.size()) +
               "\r\nContent-Range: bytes " + std::to_string(from) + "-" + std::to_string(to) + "/" +
               std::to_string(all.size()) + "\r\nConnection: close\r\n\r\n" + body;
      }
      {
        std::lock_guard<std::mutex> g(hits_mu);
        served[r.path] += it->second.size();
      }
      if (truncate.count(name))  // says the whole length, sends a tenth, hangs up
        return "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(it->second.size()) +
               "\r\nConnection: close\r\n\r\n" + it->second.substr(0, it->second.size() / 10);
      return http_response(200, it->second);
    }
    return http_response(404, "no");
  }

  Digest sha(const std::string& filename) const { return Digest::of_bytes(blobs_.at(filename)); }
  const std::string& bytes(const std::string& filename) const { return blobs_.at(filename); }

 private:
  struct File {
    std::string filename, requires_python;
  };
  std::string claimed_sha(const std::string& f) const {
    return bad_sha.count(f) ? bad_sha.at(f) : sha(f).hex();
  }
  std::string page_json(const std::vector<File>& files) const {
    nlohmann::json j = {{"meta", {{"api-version", "1.1"}}}, {"name", "x"}, {"files", nlohmann::json::array()}};
    for (const auto& f : files) {
      nlohmann::json e = {{"filename", f.filename}, {"url", "../../files/" + f.filename},
                          {"hashes", {{"sha256", claimed_sha(f.filename)}}},
                          {"size", bad_size.count(f.filename) ? bad_size.at(f.filename) : blobs_.at(f.filename).size()}};
      if (!f.requires_python.empty()) e["requires-python"] = f.requires_python;
      if (blobs_.count(f.filename + ".metadata"))
        e["core-metadata"] = {{"sha256", Digest::of_bytes(blobs_.at(f.filename + ".metadata")).hex()}};
      j["files"].push_back(e);
    }
    return http_response(200, j.dump(), "Content-Type: application/vnd.pypi.simple.v1+json\r\n");
  }
  std::string page_html(const std::vector<File>& files) const {
    std::string b = "<!DOCTYPE html><html><body>\n";
    for (const auto& f : files) {
      b += "<a href=\"../../files/" + f.filename + "#sha256=" + claimed_sha(f.filename) + "\"";
      if (!f.requires_python.empty()) {
        std::string rp = f.requires_python;
        for (size_t p; (p = rp.find('>')) != std::string::npos;) rp.replace(p, 1, "&gt;");
        b += " data-requires-python=\"" + rp + "\"";
      }
      if (blobs_.count(f.filename + ".metadata"))
        b += " data-core-metadata=\"sha256=" + Digest::of_bytes(blobs_.at(f.filename + ".metadata")).hex() + "\"";
      b += ">" + f.filename + "</a><br/>\n";
    }
    return http_response(200, b + "</body></html>", "Content-Type: text/html\r\n");
  }
  std::map<std::string, std::string> blobs_;
  std::map<std::string, std::vector<File>> projects_;
};

// A FixtureIndex behind http::Transport (BuildServices::index), with no
// server: the same pages and files, for any host (the URL's path is what it
// answers). Thread-safe as the index is.
class IndexTransport final : public http::Transport {
 public:
  explicit IndexTransport(FixtureIndex& index) : index_(index) {}
  http::Response perform(const http::Request& r) override {
    HttpRequest req;
    req.method = r.method;
    const size_t scheme = r.url.find("://");
    const std::string rest = r.url.substr(scheme == std::string::npos ? 0 : scheme + 3);
    req.path = rest.substr(std::min(rest.find('/'), rest.size()));
    req.path = req.path.substr(0, req.path.find('?'));
    for (const auto& h : r.headers) {
      const size_t colon = h.find(':');
      std::string name = h.substr(0, colon);
      for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      const size_t v = h.find_first_not_of(' ', colon + 1);
      req.headers[name] = v == std::string::npos ? "" : h.substr(v);
    }
    const std::string raw = index_.respond(req);  // "HTTP/1.1 200 X\r\nName: value\r\n...\r\n\r\nbody"
    const size_t end = raw.find("\r\n\r\n");
    http::Response out;
    out.status = std::stol(raw.substr(raw.find(' ') + 1));
    out.effective_url = r.url;
    for (size_t at = raw.find("\r\n") + 2; at < end;) {
      const size_t eol = raw.find("\r\n", at), colon = raw.find(':', at);
      std::string name = raw.substr(at, colon - at);
      for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      out.headers[name] = raw.substr(colon + 2, eol - colon - 2);
      at = eol + 2;
    }
    out.body = raw.substr(end + 4);
    if (r.on_data && out.status / 100 == 2) {
      r.on_data(out.body.data(), out.body.size());
      out.body.clear();
    }
    return out;
  }

 private:
  FixtureIndex& index_;
};

// A FixtureIndex served on 127.0.0.1 with a fresh store and a fetcher that
// writes nothing to the terminal: what every pip test starts from.
struct IndexBed {
  FixtureIndex index;
  HttpServer server{[this](const HttpRequest& r) { return index.respond(r); }};
  TempDir dir{std::filesystem::temp_directory_path()};
  Store store{dir.path() / "store"};
  FILE* devnull = fopen("/dev/null", "w");
  std::unique_ptr<Status> status = make_status(StatusMode::Plain, devnull);
  std::unique_ptr<fetch::Fetcher> fetcher;

  explicit IndexBed(const fetch::FetchOptions& o = {}) { fetcher = fetch::make_fetcher(store, o, *status); }
  ~IndexBed() { fclose(devnull); }
  pip::IndexConfig config() const { return pip::index_config(server.url("/simple"), "/nonexistent", {}, {}); }
};

// `entries` as an uncompressed tar at `path`, as a layer blob is read back.
inline void write_tar_file(const EntryMap& entries, const std::filesystem::path& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error("cannot create " + path.string());
  FdSink sink(fd, path.string());
  write_canonical_tar(entries, sink);
  ::close(fd);
}

}  // namespace sb::test
