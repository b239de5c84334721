#include "store/store.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>

#include "util/error.hpp"

namespace sb {

Store::Store(fs::path root) : root_(std::move(root)) {
  try {
    for (const char* sub : {"blobs/sha256", "refs", "tmp", "locks"}) fs::create_directories(root_ / sub);
  } catch (const fs::filesystem_error& e) {
    throw Error("cannot create the store at " + root_.string() + ": " + e.code().message());
  }
}

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
    : store_(store), file_(std::move(temp_name), 0644) {}

void Store::Writer::write(const void* data, size_t size) {
  sha_.update(data, size);
  file_.write(data, size);
  size_ += size;
}

Digest Store::Writer::commit(const std::optional<Digest>& expected) {
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
  return read_file(p);
}

void Store::put_record(std::string_view kind, const Digest& key, std::string_view json) const {
  fs::path p = record_path(root_, kind, key);
  fs::create_directories(p.parent_path());
  write_file_atomic(p, json);
}

std::unique_ptr<FileLock> Store::lock(std::string_view name) const {
  return std::make_unique<FileLock>(root_ / "locks" / std::string(name));
}

std::unique_ptr<TempDir> Store::temp_dir() const { return std::make_unique<TempDir>(root_ / "tmp", "work-"); }

}  // namespace sb
