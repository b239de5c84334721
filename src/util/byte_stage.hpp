// One stage of a byte pipeline: a thread that consumes blocks of bytes in the
// order they were pushed, behind a bounded queue. A layer's tar stream goes
// through two (the diff_id hash; the blob's hash and its writing) so that the
// thread reading files and encoding the tar does neither (issue 39: on one
// thread they bounded a layer near 535 MB/s however many compressors waited).
//
// Blocks are recycled, not freed: fresh multi-megabyte allocations cost a
// page fault per 4 KiB. When the system refuses the thread, push() consumes
// on the caller's thread: slower, the same bytes in the same order.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace sb {

class ByteStage {
 public:
  using Consume = std::function<void(const char* data, size_t size)>;

  // At most `max_blocks` blocks, and at most `max_bytes` (shared blocks may
  // be larger than `block_size`), wait in the queue; a push past either
  // waits for the consumer.
  explicit ByteStage(Consume consume, size_t block_size = 1 << 20, size_t max_blocks = 8,
                     size_t max_bytes = size_t{32} << 20);
  ByteStage(const ByteStage&) = delete;
  ByteStage& operator=(const ByteStage&) = delete;
  // Stops the thread; what is still queued is dropped (finish() was not
  // called: an error is unwinding the producer).
  ~ByteStage();

  // Copies `data` into the current block, queueing each block that fills.
  // Rethrows the consumer's error, if it failed.
  void push(const void* data, size_t size);
  // Queues `size` bytes at `data`, which `owner` keeps alive, without a copy
  // (after what push() gathered, so the order holds). The stage lets go of
  // `owner` once they are consumed.
  void push_shared(std::shared_ptr<const void> owner, const char* data, size_t size);
  // Queues what is buffered, waits until everything is consumed, stops the
  // thread, rethrows the consumer's error. Call once, last.
  void finish();

  // CPU seconds of the stage's thread (after finish(); wall seconds of the
  // consumer when it ran on the caller's thread), and seconds the producer
  // waited for room (a full queue: this stage bounds the pipeline).
  double busy_seconds() const;
  double blocked_seconds() const { return blocked_seconds_; }

 private:
  struct Block {
    std::string bytes;                   // a gathered block, or
    std::shared_ptr<const void> owner;   // a shared one: `data`, `size`
    const char* data = nullptr;
    size_t size = 0;
  };
  void enqueue(Block block);
  void enqueue_current();
  void run();
  void rethrow_if_failed();

  Consume consume_;
  size_t block_size_;
  size_t max_blocks_;
  size_t max_bytes_;
  size_t queued_bytes_ = 0;  // under mu_
  std::string current_;
  std::vector<std::string> free_;
  std::deque<Block> queue_;
  mutable std::mutex mu_;
  std::condition_variable cv_work_, cv_room_;
  bool closing_ = false;
  bool failed_ = false;
  std::exception_ptr error_;
  int64_t busy_ns_ = 0;
  double blocked_seconds_ = 0;
  std::thread thread_;
};

}  // namespace sb
