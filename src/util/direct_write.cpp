#include "util/direct_write.hpp"

#include <fcntl.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "util/error.hpp"
#include "util/file.hpp"

namespace sb {

namespace {

// statfs f_type values (linux/magic.h).
constexpr long kExt4 = 0xEF53;  // ext2, ext3 and ext4 share it
constexpr long kXfs = 0x58465342;
constexpr long kBtrfs = 0x9123683E;

}  // namespace

bool set_direct_io(int fd, bool on) {
  const int flags = ::fcntl(fd, F_GETFL);
  return flags >= 0 && ::fcntl(fd, F_SETFL, on ? flags | O_DIRECT : flags & ~O_DIRECT) == 0;
}

void DirectWriter::FreeDeleter::operator()(char* p) const { std::free(p); }

bool DirectWriter::supported(int fd) {
  struct statfs st{};
  if (::fstatfs(fd, &st) != 0) return false;
  const long type = static_cast<long>(st.f_type);
  return type == kExt4 || type == kXfs || type == kBtrfs;
}

DirectWriter::DirectWriter(int fd, std::string what) : fd_(fd), what_(std::move(what)), direct_(supported(fd)) {}

DirectWriter::~DirectWriter() {
  // Unwinding: what is buffered is dropped with the file; the flag goes, so
  // the descriptor is as it was given.
  if (flag_set_) set_direct_io(fd_, false);
}

void DirectWriter::write(const void* data, size_t size) {
  if (!direct_ && fill_ == 0) return write_all(fd_, data, size, what_);
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    if (!buf_) {
      // Allocated once, on the first byte: a small blob touches only the
      // pages it fills (glibc maps a block this large lazily).
      void* mem = nullptr;
      if (::posix_memalign(&mem, kDirectAlign, kChunk) != 0) throw Error("out of memory for a write buffer");
      buf_.reset(static_cast<char*>(mem));
    }
    const size_t take = std::min(size, kChunk - fill_);
    std::memcpy(buf_.get() + fill_, p, take);
    fill_ += take;
    p += take;
    size -= take;
    if (fill_ == kChunk) write_chunk();
  }
}

void DirectWriter::stop_direct() {
  direct_ = false;
  if (flag_set_ && !set_direct_io(fd_, false)) throw_errno("fcntl " + what_);
  flag_set_ = false;
}

// Writes the buffer, a whole chunk at a chunk-aligned offset (every chunk
// before it was whole), directly where it can.
void DirectWriter::write_chunk() {
  if (direct_ && !flag_set_) direct_ = flag_set_ = set_direct_io(fd_, true);
  size_t done = 0;
  while (done < fill_) {
    ssize_t n = ::write(fd_, buf_.get() + done, fill_ - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      // The filesystem wants another alignment, or refuses direct I/O for
      // this file: the rest goes through the page cache.
      if (errno == EINVAL && flag_set_) {
        stop_direct();
        continue;
      }
      throw_errno("write " + what_);
    }
    done += static_cast<size_t>(n);
    // A short direct write leaves the rest unaligned.
    if (done < fill_ && flag_set_) stop_direct();
  }
  if (flag_set_) ++direct_chunks_;
  fill_ = 0;
}

void DirectWriter::flush() {
  if (flag_set_) stop_direct();
  if (fill_) write_all(fd_, buf_.get(), fill_, what_);
  fill_ = 0;
}

}  // namespace sb
