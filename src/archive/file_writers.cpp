#include "archive/file_writers.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cerrno>
#include <cstring>

#include "util/direct_write.hpp"
#include "util/error.hpp"
#include "util/threads.hpp"

namespace sb {

// A file's bytes are gathered up to this much before they become a task:
// libarchive hands them over 64 KiB at a time, and a task per block would
// cost more in locking than the write.
constexpr size_t kGather = 1 << 20;
// Tasks queued at most: each holds its file open, and a layer of many small
// files must not run the process out of descriptors: a sixteenth of the
// soft limit, 2 to 64 (64 under the usual 1024).
size_t max_tasks() {
  struct rlimit r {};
  if (getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return 64;
  return std::clamp<size_t>(static_cast<size_t>(r.rlim_cur) / 16, 2, 64);
}

struct FileWriters::File {
  UniqueFd fd;
  std::string label;
  std::atomic<bool> direct{false};  // O_DIRECT is set on fd
  struct Edge {
    uint64_t offset;
    std::string bytes;
  };
  std::vector<Edge> edges;  // unaligned bytes, written at the end (under mu_)
  std::string gathered;  // the producer's, not yet a task
  uint64_t gathered_at = 0;
  size_t pending = 0;    // data tasks not yet written (under mu_)
  bool closing = false;  // under mu_
  Finish finish;
};

FileWriters::FileWriters(size_t threads, size_t max_queued)
    : max_queued_(std::max<size_t>(max_queued, kGather)), max_tasks_(max_tasks()) {
  threads_ = start_threads(threads, [this] { run(); });
}

FileWriters::~FileWriters() {
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
    queue_.clear();
  }
  cv_work_.notify_all();
  for (auto& t : threads_) t.join();
}

std::shared_ptr<FileWriters::File> FileWriters::open(UniqueFd fd, std::string label, uint64_t size) {
  auto f = std::make_shared<File>();
  f->fd = std::move(fd);
  f->label = std::move(label);
  f->direct = size >= kDirectFrom && DirectWriter::supported(f->fd.get()) && set_direct_io(f->fd.get(), true);
  return f;
}

// A file's writes end at multiples of kGather in the file, so that each of
// a large file's is whole pages but for the file's last.
void FileWriters::write(const std::shared_ptr<File>& f, const void* data, size_t len, uint64_t offset) {
  const char* p = static_cast<const char*>(data);
  while (len > 0) {
    if (!f->gathered.empty() && offset != f->gathered_at + f->gathered.size()) flush(f);  // a hole: sparse
    if (f->gathered.empty()) {
      f->gathered_at = offset;
      std::lock_guard lk(mu_);
      if (!spare_.empty()) {
        f->gathered = std::move(spare_.back());
        spare_.pop_back();
      }
    }
    const size_t take = std::min<uint64_t>(len, kGather - offset % kGather);
    f->gathered.append(p, take);
    p += take;
    len -= take;
    offset += take;
    if (offset % kGather == 0) flush(f);
  }
}

void FileWriters::flush(const std::shared_ptr<File>& f) {
  if (f->gathered.empty()) return;
  Task t{f, std::move(f->gathered), f->gathered_at, false};
  f->gathered = std::string();
  submit(std::move(t));
}

void FileWriters::close(const std::shared_ptr<File>& f, Finish finish) {
  flush(f);
  bool now;
  {
    std::lock_guard lk(mu_);
    f->finish = std::move(finish);
    f->closing = true;
    now = f->pending == 0;  // else the last write finishes it
  }
  if (now) submit(Task{f, {}, 0, true});
}

void FileWriters::submit(Task task) {
  if (threads_.empty()) {
    if (!task.close) ++task.file->pending;
    perform(task);
    rethrow_if_failed();
    return;
  }
  std::unique_lock lk(mu_);
  cv_room_.wait(lk, [&] {
    return (queue_.size() < max_tasks_ && queued_bytes_ + task.data.size() <= max_queued_) || queue_.empty() ||
           !error_.empty();
  });
  if (!error_.empty()) {
    lk.unlock();
    rethrow_if_failed();
  }
  if (!task.close) ++task.file->pending;
  queued_bytes_ += task.data.size();
  queue_.push_back(std::move(task));
  lk.unlock();
  cv_work_.notify_one();
}

void FileWriters::run() {
  for (;;) {
    Task task;
    {
      std::unique_lock lk(mu_);
      cv_work_.wait(lk, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      task = std::move(queue_.front());
      queue_.pop_front();
      queued_bytes_ -= task.data.size();
      ++busy_;
    }
    cv_room_.notify_one();
    perform(task);
    {
      std::lock_guard lk(mu_);
      --busy_;
      if (queue_.empty() && busy_ == 0) cv_idle_.notify_all();
    }
  }
}

// Writes a task's bytes, or (after the file's last bytes) finishes the file.
// Errors are kept for the extractor, which throws them at its next call.
void FileWriters::perform(Task& task) {
  File& f = *task.file;
  try {
    bool finish_now = task.close;
    if (!task.close) {
      write_task(f, task);
      std::lock_guard lk(mu_);
      task.data.clear();
      if (spare_.size() < 16) spare_.push_back(std::move(task.data));
      finish_now = --f.pending == 0 && f.closing;
    }
    if (finish_now) {
      // Every other write of the file is done: the edges go through the page cache.
      if (f.direct.exchange(false) && !set_direct_io(f.fd.get(), false)) throw_errno("fcntl " + f.label);
      for (const auto& edge : f.edges) pwrite_all(f, edge.bytes.data(), edge.bytes.size(), edge.offset);
      f.edges.clear();
      if (f.finish) f.finish(f.fd.get());
      f.fd.reset();
    }
  } catch (const std::exception& e) {
    std::lock_guard lk(mu_);
    if (error_.empty()) error_ = e.what();
    queue_.clear();
    queued_bytes_ = 0;
    cv_room_.notify_all();
  }
}

void FileWriters::pwrite_all(File& f, const char* p, size_t left, uint64_t at) {
  while (left > 0) {
    ssize_t n = ::pwrite(f.fd.get(), p, left, static_cast<off_t>(at));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw_errno("write " + f.label);
    p += n;
    left -= static_cast<size_t>(n);
    at += static_cast<uint64_t>(n);
  }
}

// A task's bytes; for a file written directly, its whole pages from an
// aligned copy and its edges kept for the end. A refusal (EINVAL: an
// alignment the filesystem wants beyond 4 KiB) turns the file's direct I/O
// off, for every thread writing it (set_direct_io: clearing is safe).
void FileWriters::write_task(File& f, const Task& task) {
  const char* data = task.data.data();
  if (!f.direct) return pwrite_all(f, data, task.data.size(), task.offset);
  const uint64_t end = task.offset + task.data.size();
  const uint64_t from = (task.offset + kDirectAlign - 1) / kDirectAlign * kDirectAlign;
  const uint64_t to = std::max(from, end / kDirectAlign * kDirectAlign);
  struct Aligned {
    char* p = nullptr;
    ~Aligned() { std::free(p); }
  };
  thread_local Aligned buf;  // kGather bytes: tasks are no larger
  if (!buf.p && ::posix_memalign(reinterpret_cast<void**>(&buf.p), kDirectAlign, kGather) != 0) {
    buf.p = nullptr;
    throw Error("out of memory for a write buffer");
  }
  const size_t len = static_cast<size_t>(to - from);
  std::memcpy(buf.p, data + (from - task.offset), len);
  for (size_t done = 0; done < len;) {
    ssize_t n = ::pwrite(f.fd.get(), buf.p + done, len - done, static_cast<off_t>(from + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EINVAL) {  // the rest, and the file's, through the page cache
      // The flag first: a thread that sees `direct` false may write unaligned.
      set_direct_io(f.fd.get(), false);
      f.direct = false;
      pwrite_all(f, buf.p + done, len - done, from + done);
      break;
    }
    if (n <= 0) throw_errno("write " + f.label);
    done += static_cast<size_t>(n);
    direct_bytes_ += static_cast<uint64_t>(n);
  }
  std::lock_guard lk(mu_);
  if (task.offset < from) f.edges.push_back({task.offset, task.data.substr(0, from - task.offset)});
  if (to < end) f.edges.push_back({to, task.data.substr(to - task.offset)});
}

void FileWriters::wait() {
  if (!threads_.empty()) {
    std::unique_lock lk(mu_);
    cv_idle_.wait(lk, [&] { return (queue_.empty() && busy_ == 0) || !error_.empty(); });
    if (error_.empty()) return;
    cv_idle_.wait(lk, [&] { return busy_ == 0; });  // the failed task's peers, done
  }
  rethrow_if_failed();
}

void FileWriters::rethrow_if_failed() {
  std::lock_guard lk(mu_);
  if (!error_.empty()) throw Error(error_);
}

}  // namespace sb
