// Files: owned descriptors, atomic writes, locks and scratch directories.
#pragma once

#include <sys/types.h>

#include <cerrno>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace sb {

namespace fs = std::filesystem;

// Where a tree's absolute path `abs` is when the tree lies at `root`
// ("/usr/lib" of a tree at "/img" is "/img/usr/lib"). Lookups take a root so
// that tests point them at fake trees.
inline fs::path under(const fs::path& root, const fs::path& abs) { return root / abs.relative_path(); }

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept;
  ~UniqueFd() { reset(); }
  int get() const { return fd_; }
  int release() { int f = fd_; fd_ = -1; return f; }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

// Writes to a temporary file beside the destination; commit() fsyncs and
// renames it into place. Destroyed without commit(), it leaves nothing behind
// (ccache's AtomicFile, mold's output file).
class AtomicFile {
 public:
  explicit AtomicFile(fs::path dest, int mode = 0644);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t size);
  void write(std::string_view s) { write(s.data(), s.size()); }
  int fd() const { return fd_.get(); }
  const fs::path& temp_path() const { return temp_; }
  void commit();                           // fsync, rename over dest, fsync the directory
  void commit_as(const fs::path& dest);    // the same, to a name known only now

 private:
  fs::path dest_;
  fs::path temp_;
  UniqueFd fd_;
  bool done_ = false;
};

// True for EMFILE and ENFILE: no file descriptor is free (the process's limit,
// ulimit -n, or the system's).
inline bool out_of_descriptors(int err) { return err == EMFILE || err == ENFILE; }

// ::open, except that when no descriptor is free it waits for other work (the
// transfers in flight of a push, pull or fetch) to close some and tries again,
// with backoff, for up to descriptor_wait_seconds(). Returns the descriptor, or
// -1 with errno set (EMFILE still, when the wait ran out).
int open_waiting(const char* path, int flags, mode_t mode = 0);
// How long open_waiting() waits (default 20 s); tests shorten it.
double descriptor_wait_seconds();
void set_descriptor_wait_seconds(double seconds);
// Waits (once, with the backoff of attempt number `attempt`, from 0) for a
// descriptor to be closed elsewhere; false when `waited` seconds reach the limit.
bool wait_for_descriptor(int attempt, double& waited);

std::string read_file(const fs::path& path);
// The file's bytes, or "" when it cannot be read (missing, a directory, no
// permission): for probes of files that may well not be there.
std::string read_file_or_empty(const fs::path& path);
void write_file_atomic(const fs::path& path, std::string_view data, int mode = 0644);
void write_all(int fd, const void* data, size_t size, const std::string& what);
void fsync_dir(const fs::path& dir);

// An advisory lock (flock) held for the object's lifetime; blocks until it is
// free. Exclusive by default: two stackbuild processes sharing a store
// serialise on it. Shared locks exclude only an exclusive one (readers and a
// writer). The lock belongs to the open file, so a forked child shares it.
enum class LockKind { Exclusive, Shared };
class FileLock {
 public:
  explicit FileLock(const fs::path& lock_file, LockKind kind = LockKind::Exclusive);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  // The lock if it is free now, else nullptr (never blocks).
  static std::unique_ptr<FileLock> try_lock(const fs::path& lock_file, LockKind kind = LockKind::Exclusive);

 private:
  FileLock() = default;
  UniqueFd fd_;
};

// The processes that hold a flock on `lock_file` (not those waiting), from
// /proc/locks; empty when that cannot be read. For messages only: a pid may
// be gone by the time it is printed.
std::vector<long> lock_holders(const fs::path& lock_file);
// The same from the text of a /proc/locks, for a file's device and inode.
std::vector<long> lock_holders_in(std::string_view proc_locks, unsigned long dev_major, unsigned long dev_minor,
                                  unsigned long inode);

// Removes a file or a whole tree, making read-only directories writable on
// the way (an unpacked image has them); throws when something stays behind.
void remove_tree(const fs::path& path);

// A fresh directory under `parent` (or $TMPDIR), removed with everything in it
// when the object goes away, unless keep() was called.
class TempDir {
 public:
  explicit TempDir(const fs::path& parent = {}, std::string_view prefix = "stackbuild-");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }
  void keep() { keep_ = true; }

 private:
  fs::path path_;
  bool keep_ = false;
};

}  // namespace sb
