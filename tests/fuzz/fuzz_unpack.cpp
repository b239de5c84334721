// Archives that installers unpack into a tree (through the safe extractor's
// archive mode, archive/extract.hpp): an NVIDIA redist archive installed into
// usr/local/cuda-X.Y, and a framework's source archive. Beyond not crashing
// and only sb::Error for a bad archive: nothing is written, chmod-ed or read
// into the result from outside the target, neither beside it nor at the host
// path the seeds aim at (canary.hpp).
#include <sys/stat.h>

#include <algorithm>

#include "canary.hpp"
#include "fetch/fetcher.hpp"
#include "fuzz.hpp"
#include "fetch/redist/install.hpp"
#include "fetch/source/source.hpp"
#include "store/store.hpp"

namespace {

namespace fs = std::filesystem;
using sb::fuzz::Canary;
using sb::fuzz::HostCanary;

// `rel` is a relative path without '.' or '..' components, and each of its
// directories below `root` is a directory, not a link.
void check_plain_path(const fs::path& root, const std::string& rel, const std::string& what) {
  sb::fuzz::check(!rel.empty() && rel[0] != '/', what + " '" + rel + "' is not relative");
  fs::path at = root;
  fs::path p(rel);
  for (auto it = p.begin(); it != p.end(); ++it) {
    sb::fuzz::check(*it != ".." && *it != "." && !it->empty(), what + " '" + rel + "' has a '.' or '..' component");
    at /= *it;
    if (std::next(it) == p.end()) break;
    struct stat st;
    sb::fuzz::check(::lstat(at.c_str(), &st) == 0 && S_ISDIR(st.st_mode),
                    what + " '" + rel + "' goes through something that is not a directory");
  }
}

// Every symlink under `tree` resolves, now (after the whole archive), to
// `inside` or below it, or to nothing or a loop.
void check_links_inside(const fs::path& tree, const fs::path& inside) {
  std::error_code ec;
  const fs::path base = fs::weakly_canonical(inside, ec);
  for (auto it = fs::recursive_directory_iterator(tree, ec); it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_symlink(ec)) continue;
    std::error_code rec;
    fs::path to = fs::weakly_canonical(it->path(), rec);
    if (rec) continue;  // a loop, or too many links: leads nowhere
    auto rel = to.lexically_relative(base);
    sb::fuzz::check(!rel.empty() && *rel.begin() != "..",
                    "the link " + it->path().string() + " leads out of " + base.string() + ", to " + to.string());
  }
}

// The fetcher a source stage would use, with the archive already there: it
// puts the fuzz bytes in the store and says so.
class BytesFetcher final : public sb::fetch::Fetcher {
 public:
  BytesFetcher(const sb::Store& store, std::string_view bytes) : store_(store), bytes_(bytes) {}
  std::vector<sb::fetch::Fetched> fetch(const std::vector<sb::fetch::FetchItem>& items) override {
    std::vector<sb::fetch::Fetched> out;
    for (const auto& item : items) out.push_back({item.url, store_.put(bytes_, item.sha256), bytes_.size(), false});
    return out;
  }

 private:
  const sb::Store& store_;
  std::string_view bytes_;
};

}  // namespace

// One redist archive installed as install_components() does (then
// version.json and the /usr/local/cuda link): entries land below
// usr/local/cuda-12.6 only, through no link, and every symlink there still
// leads inside usr/local/cuda-12.6 once the whole archive is in.
SB_FUZZ_TARGET(redist_install) {
  const fs::path& scratch = sb::fuzz::fresh_scratch();
  Canary canary(scratch);
  HostCanary host;
  fs::path file = scratch / "cuda_fuzz-linux-x86_64-12.6.77-archive.tar.xz", root = scratch / "root";
  fs::create_directories(root);
  sb::fuzz::write_file(file, sb::fuzz::text(data, size));
  std::vector<std::string> written;
  bool installed = sb::fuzz::expect_errors([&] {
    size_t n = sb::redist::install_archive(file, file.filename().string(), "cuda_fuzz", "12.6", root, &written);
    sb::fuzz::check(n == written.size(), "install_archive counts other entries than it lists");
  });
  if (installed)
    sb::fuzz::expect_errors([&] {
      sb::redist::write_version_json("12.6", "12.6.3", {{"cuda_fuzz", "12.6.77"}}, root);
      sb::redist::finish_layout("12.6", root);
    });
  canary.check(scratch, {root, file});
  host.check();
  sb::fuzz::check_nothing_read(root, &canary, &host);
  for (const auto& w : written) {
    sb::fuzz::check(w.starts_with("usr/local/cuda-12.6/"), "an entry was written outside the CUDA tree: " + w);
    check_plain_path(root, w, "the entry written at");
  }
  check_links_inside(root / "usr/local/cuda-12.6", root / "usr/local/cuda-12.6");
}

// A framework's source archive as prepare_source() takes it (one top
// directory stripped), then the digest of the tree it made, which reads
// every file of it.
SB_FUZZ_TARGET(source_archive) {
  const fs::path& scratch = sb::fuzz::fresh_scratch();
  Canary canary(scratch);
  HostCanary host;
  fs::path dest = scratch / "src";
  sb::Store store(scratch / "store");
  BytesFetcher fetcher(store, sb::fuzz::text(data, size));
  sb::source::SourceSpec spec;
  spec.kind = sb::source::SourceSpec::Kind::Archive;
  spec.url = "https://example.com/framework-1.0.tar.gz";
  spec.allow_unpinned = true;
  sb::fuzz::expect_errors([&] { (void)sb::source::prepare_source(spec, dest, store, fetcher); });
  canary.check(scratch, {dest, scratch / "store"});
  host.check();
  sb::fuzz::check_nothing_read(dest, &canary, &host);
}
