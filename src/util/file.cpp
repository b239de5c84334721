#include "util/file.hpp"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <sstream>
#include <random>
#include <thread>

#include "util/error.hpp"

namespace sb {

UniqueFd& UniqueFd::operator=(UniqueFd&& o) noexcept {
  if (this != &o) reset(o.release());
  return *this;
}

void UniqueFd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

static std::atomic<double> g_descriptor_wait{20.0};

double descriptor_wait_seconds() { return g_descriptor_wait.load(); }
void set_descriptor_wait_seconds(double seconds) { g_descriptor_wait = seconds; }

bool wait_for_descriptor(int attempt, double& waited) {
  double limit = descriptor_wait_seconds();
  if (waited >= limit) return false;
  // 10 ms, doubling to half a second: a transfer that ends frees its socket and file.
  double d = std::min({0.01 * (1 << std::min(attempt, 6)), 0.5, limit - waited});
  std::this_thread::sleep_for(std::chrono::duration<double>(d));
  waited += d;
  return true;
}

int open_waiting(const char* path, int flags, mode_t mode) {
  double waited = 0;
  for (int attempt = 0;; ++attempt) {
    int fd = ::open(path, flags, mode);
    if (fd >= 0 || errno == EINTR) {
      if (fd >= 0) return fd;
      continue;
    }
    int err = errno;
    if (!out_of_descriptors(err) || !wait_for_descriptor(attempt, waited)) {
      errno = err;
      return -1;
    }
  }
}

static std::string random_suffix() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char chars[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::string s;
  for (int i = 0; i < 10; ++i) s += chars[rng() % 36];
  return s;
}

void write_all(int fd, const void* data, size_t size, const std::string& what) {
  auto* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::write(fd, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno("write " + what);
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
}

void fsync_dir(const fs::path& dir) {
  UniqueFd fd(open_waiting(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() >= 0) ::fsync(fd.get());
}

AtomicFile::AtomicFile(fs::path dest, int mode) : dest_(std::move(dest)) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    temp_ = dest_;
    temp_ += ".tmp-" + random_suffix();
    int fd = open_waiting(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd >= 0) {
      fd_.reset(fd);
      ::fchmod(fd, mode);  // not subject to the umask: the same bytes and modes everywhere
      return;
    }
    // The file the user named, not the temporary one beside it; and a
    // missing directory said as such.
    const int err = errno;
    if (err == EEXIST) continue;
    std::error_code ec;
    if (err == ENOENT &&
        !fs::is_directory(dest_.parent_path().empty() ? "." : dest_.parent_path(), ec))
      throw Error("cannot write " + dest_.string() + ": the directory " +
                  dest_.parent_path().string() + " does not exist");
    errno = err;
    throw_errno("write " + dest_.string());
  }
  throw Error("create " + temp_.string() + ": too many temporary files");
}

AtomicFile::~AtomicFile() {
  if (!done_) {
    fd_.reset();
    ::unlink(temp_.c_str());
  }
}

void AtomicFile::write(const void* data, size_t size) { write_all(fd_.get(), data, size, temp_.string()); }

void AtomicFile::commit() { commit_as(dest_); }

void AtomicFile::commit_as(const fs::path& dest) {
  if (::fsync(fd_.get()) != 0) throw_errno("fsync " + temp_.string());
  fd_.reset();
  if (::rename(temp_.c_str(), dest.c_str()) != 0) throw_errno("rename to " + dest.string());
  done_ = true;
  fsync_dir(dest.parent_path());
}

std::string read_file(const fs::path& path) {
  UniqueFd fd(open_waiting(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) throw_errno("open " + path.string());
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno("read " + path.string());
    }
    if (n == 0) return out;
    out.append(buf, static_cast<size_t>(n));
  }
}

std::string read_file_or_empty(const fs::path& path) {
  try {
    return read_file(path);
  } catch (const Error&) {
    return "";
  }
}

void write_file_atomic(const fs::path& path, std::string_view data, int mode) {
  AtomicFile f(path, mode);
  f.write(data);
  f.commit();
}

static UniqueFd open_lock_file(const fs::path& lock_file) {
  UniqueFd fd(open_waiting(lock_file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (fd.get() < 0) throw_errno("open lock " + lock_file.string());
  return fd;
}

FileLock::FileLock(const fs::path& lock_file, LockKind kind) {
  fd_ = open_lock_file(lock_file);
  while (::flock(fd_.get(), kind == LockKind::Shared ? LOCK_SH : LOCK_EX) != 0) {
    if (errno != EINTR) throw_errno("lock " + lock_file.string());
  }
}

std::unique_ptr<FileLock> FileLock::try_lock(const fs::path& lock_file, LockKind kind) {
  std::unique_ptr<FileLock> l(new FileLock());
  l->fd_ = open_lock_file(lock_file);
  while (::flock(l->fd_.get(), (kind == LockKind::Shared ? LOCK_SH : LOCK_EX) | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) return nullptr;
    if (errno != EINTR) throw_errno("lock " + lock_file.string());
  }
  return l;
}

std::vector<long> lock_holders_in(std::string_view text, unsigned long dev_major, unsigned long dev_minor,
                                  unsigned long inode) {
  // "1: FLOCK  ADVISORY  WRITE 4242 08:01:1234 0 EOF"; a waiter's line has "->" after the number
  // (waiters hold nothing: skipped).
  std::vector<long> pids;
  std::istringstream in{std::string(text)};
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string num, type, mode, access, pid, where;
    f >> num >> type;
    if (type == "->") continue;
    f >> mode >> access >> pid >> where;
    unsigned long ma = 0, mi = 0, ino = 0;
    if (type != "FLOCK" || sscanf(where.c_str(), "%lx:%lx:%lu", &ma, &mi, &ino) != 3) continue;
    if (ma != dev_major || mi != dev_minor || ino != inode) continue;
    char* end = nullptr;
    long p = strtol(pid.c_str(), &end, 10);
    if (end && *end == '\0' && p > 0 && std::find(pids.begin(), pids.end(), p) == pids.end()) pids.push_back(p);
  }
  return pids;
}

std::vector<long> lock_holders(const fs::path& lock_file) {
  struct stat st;
  if (::stat(lock_file.c_str(), &st) != 0) return {};
  std::string text;
  try {
    text = read_file("/proc/locks");
  } catch (const Error&) {
    return {};
  }
  auto pids = lock_holders_in(text, major(st.st_dev), minor(st.st_dev), st.st_ino);
  pids.erase(std::remove(pids.begin(), pids.end(), static_cast<long>(::getpid())), pids.end());
  return pids;
}

FileLock::~FileLock() {
  if (fd_.get() >= 0) ::flock(fd_.get(), LOCK_UN);
}

void remove_tree(const fs::path& path) {
  std::error_code ec;
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return;
  if (S_ISDIR(st.st_mode)) {
    ::chmod(path.c_str(), 0700);
    for (auto it = fs::recursive_directory_iterator(path, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
      if (it->is_directory(ec) && !it->is_symlink(ec)) ::chmod(it->path().c_str(), 0700);
    }
  }
  ec.clear();
  fs::remove_all(path, ec);
  if (ec) throw Error("cannot remove " + path.string() + ": " + ec.message());
}

TempDir::TempDir(const fs::path& parent, std::string_view prefix) {
  fs::path base = parent;
  if (base.empty()) {
    const char* t = getenv("TMPDIR");
    base = t && *t ? t : "/tmp";
  }
  fs::create_directories(base);
  std::string templ = (base / (std::string(prefix) + "XXXXXX")).string();
  if (!mkdtemp(templ.data())) throw_errno("mkdtemp in " + base.string());
  path_ = templ;
}

TempDir::~TempDir() {
  if (keep_) return;
  std::error_code ec;
  // Make read-only directories writable so they can be removed.
  for (auto it = fs::recursive_directory_iterator(path_, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->is_directory(ec) && !it->is_symlink(ec)) ::chmod(it->path().c_str(), 0700);
  }
  fs::remove_all(path_, ec);
}

}  // namespace sb
