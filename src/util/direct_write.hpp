// Writes a new file's bytes in aligned chunks with O_DIRECT, so that a large
// blob goes from our buffer to the disk: no copy into the page cache, and no
// gigabyte of dirty pages for the final fsync to wait on (issue 39: writing a
// 1.9 GB layer blob through the page cache cost 2 s of CPU on 2 cores and a
// 0.6 s fsync at the end, on the pipeline's critical path).
//
// Only on local filesystems known to do direct I/O well (ext4, XFS, btrfs):
// on NFS each direct write is a synchronous round trip, and tmpfs or overlay
// gain nothing. Anywhere else, or when the kernel refuses a direct write
// (EINVAL: an alignment it wants and we did not guess), it writes through the
// page cache as before. The bytes are the same either way.
//
// What is written with O_DIRECT is not in the page cache afterwards: a later
// read comes from the disk. Layers are read again only by unpacking, which
// inflates slower than a disk reads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace sb {

// The alignment of address, offset and length that direct I/O gets here:
// every block device this may meet accepts it (logical blocks of 512 B or 4 KiB).
constexpr size_t kDirectAlign = 4096;

// Sets or clears O_DIRECT on `fd`; false when the kernel refuses. Clearing
// is safe while other threads write through `fd`; setting is not (their
// unaligned writes would fail).
bool set_direct_io(int fd, bool on);

class DirectWriter {
 public:
  // Chunks of 4 MiB: large enough that each direct write keeps the disk busy,
  // small enough that a writer per parallel download costs little memory.
  static constexpr size_t kChunk = size_t{4} << 20;

  // `fd` is an empty file opened for writing, owned by the caller and kept
  // open until flush(); `what` names it in errors.
  DirectWriter(int fd, std::string what);
  DirectWriter(const DirectWriter&) = delete;
  DirectWriter& operator=(const DirectWriter&) = delete;
  ~DirectWriter();

  // On a filesystem that does not take the direct path, writes at once.
  void write(const void* data, size_t size);
  // Writes what is buffered (the unaligned tail, through the page cache) and
  // leaves the descriptor as it was given. Call before fsync.
  void flush();

  // Whether any chunk went to the disk directly (tests, benchmarks).
  bool wrote_direct() const { return direct_chunks_ > 0; }

  // Whether a file on the filesystem of `fd` takes the direct path at all.
  static bool supported(int fd);

 private:
  void write_chunk();
  void stop_direct();
  int fd_;
  std::string what_;
  bool direct_;  // still trying O_DIRECT
  bool flag_set_ = false;
  struct FreeDeleter {
    void operator()(char* p) const;
  };
  std::unique_ptr<char, FreeDeleter> buf_;
  size_t fill_ = 0;
  uint64_t direct_chunks_ = 0;
};

}  // namespace sb
