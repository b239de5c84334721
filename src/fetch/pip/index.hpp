// Python package indexes: where they are (stackbuild's setting, else pip's
// own configuration on the machine, else pip's built-in default), and what a
// project's page lists, read from PEP 691 JSON or PEP 503 HTML.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "fetch/fetcher.hpp"
#include "util/digest.hpp"
#include "util/http.hpp"

namespace sb::pip {

namespace fs = std::filesystem;

struct IndexConfig {
  std::vector<std::string> urls;  // the index first, then extra indexes
  fs::path ca_file;               // pip's `cert`, trusted besides the system store
  std::string origin;             // where the index came from, for messages
  std::string proxy;              // pip's `proxy`: every request goes through it
  std::vector<std::string> trusted_hosts;  // pip's `trusted-host`: HOST or HOST:PORT, TLS not checked
  std::shared_ptr<http::Transport> transport;  // where requests go; null: the network (tests: a fake index)
};

// The HTTP settings pip's configuration asks for, for the index pages and
// the wheels alike: `cert`, `proxy` (else libcurl's proxy variables, as
// pip's), and no certificate check for a `trusted-host`.
http::ClientOptions client_options(const IndexConfig& c);
// Said when an index's (or its files') TLS certificate is not trusted.
constexpr const char* kCertHint = "a private CA is pip's `cert` (pip.conf or PIP_CERT), as for pip; see docs/pip.md";

// The index to use. `setting` (STACKBUILD_PIP_INDEX_URL, --index-url) wins;
// else pip's configuration as pip reads it, files under `root` ("/" on a real
// machine): /etc/xdg/pip/pip.conf, /etc/pip.conf, ~/.pip/pip.conf,
// ~/.config/pip/pip.conf ($XDG_CONFIG_HOME), $VIRTUAL_ENV/pip.conf,
// $PIP_CONFIG_FILE, then PIP_INDEX_URL / PIP_EXTRA_INDEX_URL / PIP_CERT /
// PIP_PROXY / PIP_TRUSTED_HOST from `env`; keys `index-url`,
// `extra-index-url`, `cert`, `proxy`, `trusted-host` of [global], then
// [install]/[download]. Without any, `default_index()` (e.g. pip_default_index).
IndexConfig index_config(const std::string& setting, const fs::path& root,
                         const std::map<std::string, std::string>& env,
                         const std::function<std::string()>& default_index);

// pip's own default index, asked of the machine's pip (so that stackbuild
// names no index itself); "" when there is no pip to ask.
std::string pip_default_index();
// The same, kept in `store` for a day per python3 on PATH (by its path,
// size and modification time): starting Python through pyenv's shims took
// longer than the rest of a cached rebuild.
std::string pip_default_index(const Store& store);

struct DistFile {
  std::string filename, url;
  std::optional<Digest> sha256;
  std::optional<uint64_t> size;
  std::string requires_python;
  bool yanked = false;
  bool has_metadata = false;               // PEP 658/714: <url>.metadata exists
  std::optional<Digest> metadata_sha256;
};

struct ProjectPage {
  std::string url;
  std::vector<DistFile> files;
};

// Parses a project page; relative file URLs are resolved against `page_url`.
// Throws sb::Error naming the page on malformed input.
ProjectPage parse_json_page(const std::string& body, const std::string& page_url);
ProjectPage parse_html_page(const std::string& body, const std::string& page_url);

// RFC 3986 reference resolution (enough for index pages).
std::string join_url(const std::string& base, const std::string& ref);

// The indexes seen by the resolver: pages and core metadata.
class Index {
 public:
  virtual ~Index() = default;
  // Every file of the project on every configured index; empty when unknown.
  virtual std::vector<DistFile> files(const std::string& key) = 0;
  // The METADATA text of a wheel (PEP 658 file when the index has one, else
  // read from the downloaded wheel); its hash is checked.
  virtual std::string metadata(const DistFile& f) = 0;
  // Reads these projects' pages at once, ahead of files() (the resolver asks
  // one page at a time; the last resolve of the same request names what it
  // will ask). A page that fails here is asked again, and reported, by
  // files(). Default: nothing.
  virtual void prefetch(const std::vector<std::string>& keys) { (void)keys; }
  // Starts fetching these wheels' metadata in the background, for
  // metadata() to take when asked (a failure here is met again, with its
  // error, there). Default: nothing.
  virtual void prefetch_metadata(const std::vector<DistFile>& files) { (void)files; }
  // The projects files() was asked for, in the order asked.
  virtual std::vector<std::string> consulted() const { return {}; }
};

// How project pages are kept in the store between runs, as pip keeps them in
// its HTTP cache: a page younger than its lifetime is used without asking the
// index; an older one is revalidated with its ETag / Last-Modified (a 304
// renews it). The lifetime is `max_age` when set, else the index's
// Cache-Control max-age (0 for no-cache or when the index gives none, as pip
// does). "no-store" pages are not kept. `offline`: only kept pages, whatever
// their age; a page not kept is an error naming it.
struct PageCache {
  bool offline = false;
  std::optional<int64_t> max_age;  // seconds; overrides the index's
  std::function<int64_t()> now;    // seconds since the epoch; unset: the clock
  // Pages asked of the index during this run (shared by the indexes one run
  // makes): each is asked once, as one pip run asks once, and the matrix's
  // points see the same index. Unset: no such memory. A max_age of 0 asks
  // every time all the same.
  struct Asked {
    std::mutex mu;
    std::set<std::string> urls;
  };
  std::shared_ptr<Asked> run;
};

std::unique_ptr<Index> make_http_index(const IndexConfig& config, const Store& store, fetch::Fetcher& fetcher,
                                       const PageCache& cache = {});

// What a Cache-Control header says of keeping a response: not at all
// (no-store), or for `max_age` seconds (max-age=N; 0 for no-cache); unset
// when the header gives no lifetime.
struct CacheDirective {
  bool store = true;
  std::optional<int64_t> max_age;
};
CacheDirective cache_directive(const std::string& cache_control);

// Field names of core metadata compare without case, as in the email headers
// they are ("Author-Email", "requires-dist" are what some backends write).
struct FieldLess {
  bool operator()(std::string_view a, std::string_view b) const;
  using is_transparent = void;
};
using Metadata = std::multimap<std::string, std::string, FieldLess>;

// METADATA ("Name: x", "Requires-Dist: y") -> field -> values, in order.
Metadata parse_metadata(const std::string& text);

// The file `name` (e.g. "*.dist-info/METADATA") inside a zip; "" if absent.
std::string read_zip_member(const fs::path& zip, const std::string& suffix);

}  // namespace sb::pip
