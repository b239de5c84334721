// Regular files' contents written by a few threads while the extractor goes
// on reading the layer (issue 39: writing into the page cache took a third of
// an unpack, all of it on the thread that also parses the tar).
//
// The extractor still decides everything on its own thread, in order: which
// path, refusals, limits, whiteouts, the file created (O_EXCL, O_NOFOLLOW,
// under a directory it resolved). Only the bytes and the file's own metadata
// after them (size, mode, owner, xattrs, times, through its descriptor) move
// to the writers. wait() is the barrier: the extractor calls it before
// anything could read or change what a pending file is, i.e. at the end of a
// layer (before directory times and the next layer's whiteouts) and before
// copying a file's contents.
//
// Queued bytes and files (each holds a descriptor) are bounded; with no
// thread (the system refused) write() writes at once.
//
// A large file's 4 KiB-aligned pages go to the disk with O_DIRECT where the
// filesystem does it well (util/direct_write.hpp): no copy into the page
// cache and no dirty pages for writeback (on 2 cores, page-cache writes
// took a third of an unpack's CPU). Its unaligned edges (the last partial
// page) are written through the page cache when the file is finished, when
// no other write of it is in flight. The bytes are the same either way.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "util/file.hpp"

namespace sb {

class FileWriters {
 public:
  struct File;
  using Finish = std::function<void(int fd)>;

  explicit FileWriters(size_t threads, size_t max_queued = 32 << 20);
  ~FileWriters();  // stops the threads; what is queued is dropped
  FileWriters(const FileWriters&) = delete;
  FileWriters& operator=(const FileWriters&) = delete;

  // A file the caller created and will fill with `size` bytes; `label`
  // names it in errors.
  std::shared_ptr<File> open(UniqueFd fd, std::string label, uint64_t size = 0);
  // Files from this size up are written with direct I/O where they can be.
  static constexpr uint64_t kDirectFrom = uint64_t{8} << 20;
  // `len` bytes at `offset` (copied; written later).
  void write(const std::shared_ptr<File>& f, const void* data, size_t len, uint64_t offset);
  // No more writes: `finish` runs once they are all done, then the
  // descriptor closes. A throw from it is the extraction's error.
  void close(const std::shared_ptr<File>& f, Finish finish);
  // Every file given so far is written and closed; rethrows the first error.
  void wait();

  size_t threads() const { return threads_.size(); }
  // Bytes written with direct I/O so far (tests, benchmarks).
  uint64_t direct_bytes() const { return direct_bytes_; }

 private:
  struct Task {
    std::shared_ptr<File> file;
    std::string data;
    uint64_t offset = 0;
    bool close = false;
  };
  void submit(Task task);
  void flush(const std::shared_ptr<File>& f);
  void run();
  void perform(Task& task);
  void write_task(File& f, const Task& task);
  static void pwrite_all(File& f, const char* p, size_t len, uint64_t at);
  void rethrow_if_failed();

  const size_t max_queued_;
  const size_t max_tasks_;
  std::mutex mu_;
  std::condition_variable cv_work_, cv_room_, cv_idle_;
  std::deque<Task> queue_;
  std::vector<std::string> spare_;
  size_t queued_bytes_ = 0;
  std::atomic<uint64_t> direct_bytes_{0};
  size_t busy_ = 0;  // tasks taken, not yet done
  bool stopping_ = false;
  std::string error_;
  std::vector<std::thread> threads_;
};

}  // namespace sb
