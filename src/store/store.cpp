#include "store/store.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "util/error.hpp"

namespace sb {

// `dir` and its missing parents below `top` (which exists), each made 0700.
static void make_private(const fs::path& top, const fs::path& rel) {
  fs::path p = top;
  for (const auto& c : rel) {
    p /= c;
    if (::mkdir(p.c_str(), 0700) != 0 && errno != EEXIST) throw_errno("mkdir " + p.string());
  }
}

// The store is private (DESIGN.md, "Trust boundary"): its root and all it
// makes are 0700, since it holds logs, unpacked roots with the images'
// setuid files and devices' places, and caches that build steps write. A
// store made before this rule has its root tightened when opened (by its
// owner; another user's store is left as it is).
void Store::create_layout(const fs::path& root) {
  try {
    if (root.has_parent_path()) fs::create_directories(root.parent_path());
    make_private(root.parent_path(), root.filename());
    ::chmod(root.c_str(), 0700);
    for (const char* sub : {"blobs/sha256", "refs", "tmp", "locks"}) make_private(root, sub);
  } catch (const fs::filesystem_error& e) {
    throw Error("cannot create the store at " + root.string() + ": " + e.code().message());
  } catch (Error& e) {
    e.add_trace("while creating the store at " + root.string());
    throw;
  }
}

fs::path Store::private_dir(const fs::path& rel) const {
  make_private(root_, rel);
  return root_ / rel;
}

static fs::path use_lock(const fs::path& root) { return root / "store.lock"; }

Store::Store(fs::path root, const WaitFn& on_wait) : root_(std::move(root)) {
  create_layout(root_);
  if (auto l = FileLock::try_lock(use_lock(root_), LockKind::Shared)) {
    use_ = std::move(l);
    return;
  }
  if (on_wait) on_wait(users(root_));
  use_ = std::make_shared<FileLock>(use_lock(root_), LockKind::Shared);
}

std::optional<Store> Store::open_exclusive(fs::path root, bool wait, const WaitFn& on_wait) {
  create_layout(root);
  std::shared_ptr<FileLock> l = FileLock::try_lock(use_lock(root), LockKind::Exclusive);
  if (!l) {
    if (!wait) return std::nullopt;
    if (on_wait) on_wait(users(root));
    l = std::make_shared<FileLock>(use_lock(root), LockKind::Exclusive);
  }
  return Store(std::move(root), std::move(l));
}

std::vector<long> Store::users(const fs::path& root) { return lock_holders(use_lock(root)); }

fs::path Store::default_root() {
  const char* xdg = getenv("XDG_CACHE_HOME");
  if (xdg && *xdg) return fs::path(xdg) / "stackbuild";
  const char* home = getenv("HOME");
  if (home && *home) return fs::path(home) / ".cache" / "stackbuild";
  throw Error("no store: set XDG_CACHE_HOME or HOME, or pass --store DIR");
}

fs::path Store::blob_path(const Digest& d) const { return root_ / "blobs" / "sha256" / d.hex(); }

bool Store::has(const Digest& d) const { return ::access(blob_path(d).c_str(), F_OK) == 0; }

uint64_t Store::size(const Digest& d) const { return fs::file_size(blob_path(d)); }

Store::Writer::Writer(const Store& store, fs::path temp_name)
    : store_(store), file_(std::move(temp_name), 0644), out_(file_.fd(), file_.temp_path().string()) {}

void Store::Writer::write(const void* data, size_t size) {
  sha_.update(data, size);
  out_.write(data, size);
  size_ += size;
}

Digest Store::Writer::commit(const std::optional<Digest>& expected) {
  out_.flush();
  Digest got = sha_.finish();
  if (expected && *expected != got)
    throw Error("digest mismatch: expected " + expected->str() + ", got " + got.str() + " (" +
                std::to_string(size_) + " bytes)");
  file_.commit_as(store_.blob_path(got));
  return got;
}

Store::Writer Store::writer() const { return Writer(*this, root_ / "tmp" / "blob"); }

Digest Store::put(std::string_view bytes, const std::optional<Digest>& expected) const {
  Digest d = Digest::of_bytes(bytes);
  if (expected && *expected != d)
    throw Error("digest mismatch: expected " + expected->str() + ", got " + d.str());
  if (has(d)) return d;
  Writer w = writer();
  w.write(bytes);
  return w.commit(d);
}

Digest Store::put_file(const fs::path& src, const std::optional<Digest>& expected) const {
  UniqueFd fd(open_waiting(src.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) throw_errno("open " + src.string());
  Writer w = writer();
  std::string buf(1 << 20, '\0');
  for (;;) {
    ssize_t n = ::read(fd.get(), buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno("read " + src.string());
    }
    if (n == 0) break;
    w.write(buf.data(), static_cast<size_t>(n));
  }
  return w.commit(expected);
}

std::string Store::read(const Digest& d) const {
  std::string data = read_file(blob_path(d));
  if (Digest::of_bytes(data) != d)
    throw Error("store blob " + d.str() + " is corrupt (its content has another digest); delete " +
                blob_path(d).string());
  return data;
}

static fs::path record_path(const fs::path& root, std::string_view kind, const Digest& key) {
  return root / "refs" / std::string(kind) / key.hex();
}

std::optional<std::string> Store::get_record(std::string_view kind, const Digest& key) const {
  fs::path p = record_path(root_, kind, key);
  if (::access(p.c_str(), F_OK) != 0) return std::nullopt;
  std::string text = read_file(p);
  ::utimensat(AT_FDCWD, p.c_str(), nullptr, 0);  // last used now; a read-only store just keeps the old time
  return text;
}

bool Store::touch_record(std::string_view kind, const Digest& key) const {
  return ::utimensat(AT_FDCWD, record_path(root_, kind, key).c_str(), nullptr, 0) == 0 || errno != ENOENT;
}

void Store::put_record(std::string_view kind, const Digest& key, std::string_view json) const {
  fs::path p = record_path(root_, kind, key);
  make_private(root_, fs::path("refs") / std::string(kind));
  write_file_atomic(p, json);
}

std::unique_ptr<FileLock> Store::lock(std::string_view name) const {
  return std::make_unique<FileLock>(root_ / "locks" / std::string(name));
}

std::unique_ptr<TempDir> Store::temp_dir() const { return std::make_unique<TempDir>(root_ / "tmp", "work-"); }

}  // namespace sb
