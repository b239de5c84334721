#include "verify/unpacked.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>

#include "archive/extract.hpp"
#include "util/error.hpp"
#include "util/file.hpp"
#include "util/number.hpp"
#include "util/process.hpp"
#include "util/status.hpp"

namespace sb::verify {

static fs::path use_lock(const Store& store, const std::string& hex) { return store.root() / "locks" / ("root-use-" + hex); }
static fs::path size_file(const Store& store, const std::string& hex) { return store.root() / "roots" / (".size-" + hex); }

uint64_t keep_root_bytes() {
  std::string v = env_or("STACKBUILD_ROOTS_MAX_SIZE", "");
  if (v.empty()) return kKeepRootBytes;
  auto n = parse_bytes(v);
  if (!n) throw Error("STACKBUILD_ROOTS_MAX_SIZE='" + v + "' is not a size such as 16G or 500MiB");
  return *n;
}

UnpackedRoot unpacked_root(const Store& store, const LayoutImage& image, size_t keep) {
  fs::path roots = store.private_dir("roots");
  const std::string hex = image.manifest_digest.hex();
  fs::path dest = roots / hex;
  // In use first, then looked at: an eviction either finished before (the root is gone) or waits.
  UnpackedRoot out{dest, std::make_shared<FileLock>(use_lock(store, hex), LockKind::Shared)};
  if (fs::is_directory(dest)) {
    ::utimensat(AT_FDCWD, dest.c_str(), nullptr, 0);  // recently used: evicted last
    return out;
  }
  {
    auto lock = store.lock("root-" + hex);
    if (fs::is_directory(dest)) return out;  // another stackbuild unpacked it meanwhile
    TempDir tmp(roots, ".unpack-");
    fs::path root = tmp.path() / "rootfs";
    fs::create_directory(root);
    ExtractOptions o;
    ExtractStats stats;
    extract_layers(image.layer_blobs, root, o, stats);
    write_file_atomic(size_file(store, hex), std::to_string(stats.bytes));
    fs::rename(root, dest);
  }
  evict_roots(store, keep, hex, keep_root_bytes());
  return out;
}

size_t evict_roots(const Store& store, size_t keep, const std::string& except, uint64_t max_bytes) {
  struct Root {
    int64_t mtime;
    std::string name;
  };
  std::vector<Root> all;
  std::error_code ec;
  for (auto it = fs::directory_iterator(store.root() / "roots", ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    std::string name = it->path().filename().string();
    struct stat st;
    if (name.empty() || name[0] == '.' || ::lstat(it->path().c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    all.push_back({static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec, name});
  }
  std::sort(all.begin(), all.end(), [](const Root& a, const Root& b) {
    return std::tie(b.mtime, b.name) < std::tie(a.mtime, a.name);  // most recent first
  });
  auto bytes_of = [&](const std::string& name) -> uint64_t {
    std::string text = read_file_or_empty(size_file(store, name));
    return parse_integer<uint64_t>(text).value_or(0);
  };
  size_t removed = 0, kept = 0;
  uint64_t kept_bytes = except.empty() ? 0 : bytes_of(except);
  for (const auto& r : all) {
    if (r.name == except) continue;
    const uint64_t size = bytes_of(r.name);
    if (kept < keep && size <= max_bytes && kept_bytes <= max_bytes - size) {
      ++kept;
      kept_bytes += size;
      continue;
    }
    auto lock = FileLock::try_lock(use_lock(store, r.name), LockKind::Exclusive);
    if (!lock) continue;  // in use by another stackbuild
    fs::path doomed = store.root() / "tmp" / (".evict-root-" + r.name);
    if (::rename((store.root() / "roots" / r.name).c_str(), doomed.c_str()) != 0) continue;
    remove_tree(doomed);
    fs::remove(size_file(store, r.name), ec);
    ++removed;
  }
  return removed;
}

}  // namespace sb::verify
