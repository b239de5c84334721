#include "util/byte_stage.hpp"

#include <algorithm>
#include <chrono>
#include <system_error>

#include <time.h>

namespace sb {

namespace {

using Clock = std::chrono::steady_clock;

int64_t nanoseconds_since(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t).count();
}

int64_t thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

}  // namespace

ByteStage::ByteStage(Consume consume, size_t block_size, size_t max_blocks, size_t max_bytes)
    : consume_(std::move(consume)), block_size_(std::max<size_t>(1, block_size)),
      max_blocks_(std::max<size_t>(1, max_blocks)), max_bytes_(std::max<size_t>(1, max_bytes)) {
  current_.reserve(block_size_);
  try {
    thread_ = std::thread([this] {
      run();
      std::lock_guard lk(mu_);
      busy_ns_ = thread_cpu_ns();  // CPU, not wall: waiting for blocks is not work
    });
  } catch (const std::system_error&) {
    // EAGAIN (a pids limit): push() consumes on the caller's thread.
  }
}

ByteStage::~ByteStage() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard lk(mu_);
    closing_ = true;
    failed_ = true;  // the consumer stops at the next block
    queue_.clear();
    queued_bytes_ = 0;
  }
  cv_work_.notify_all();
  thread_.join();
}

void ByteStage::push(const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  if (!thread_.joinable()) {
    auto t0 = Clock::now();
    consume_(p, size);
    busy_ns_ += nanoseconds_since(t0);
    return;
  }
  while (size > 0) {
    size_t take = std::min(size, block_size_ - current_.size());
    current_.append(p, take);
    p += take;
    size -= take;
    if (current_.size() == block_size_) enqueue_current();
  }
}

void ByteStage::push_shared(std::shared_ptr<const void> owner, const char* data, size_t size) {
  if (!thread_.joinable()) {
    auto t0 = Clock::now();
    consume_(data, size);
    busy_ns_ += nanoseconds_since(t0);
    return;
  }
  if (!current_.empty()) enqueue_current();
  Block b;
  b.owner = std::move(owner);
  b.data = data;
  b.size = size;
  enqueue(std::move(b));
}

void ByteStage::enqueue_current() {
  Block b;
  b.bytes = std::move(current_);
  {
    std::lock_guard lk(mu_);
    if (!free_.empty()) {
      current_ = std::move(free_.back());
      free_.pop_back();
    }
  }
  current_.clear();
  current_.reserve(block_size_);
  enqueue(std::move(b));
}

void ByteStage::enqueue(Block block) {
  std::unique_lock lk(mu_);
  // A block larger than max_bytes_ still goes in, once the queue is empty.
  auto room = [&] { return queue_.empty() || (queue_.size() < max_blocks_ && queued_bytes_ < max_bytes_); };
  if (!room() && !failed_) {
    auto t0 = Clock::now();
    cv_room_.wait(lk, [&] { return room() || failed_; });
    blocked_seconds_ += std::chrono::duration<double>(Clock::now() - t0).count();
  }
  if (failed_) {
    lk.unlock();
    rethrow_if_failed();
    return;
  }
  queued_bytes_ += block.owner ? block.size : block.bytes.size();
  queue_.push_back(std::move(block));
  lk.unlock();
  cv_work_.notify_one();
}

void ByteStage::run() {
  for (;;) {
    Block block;
    {
      std::unique_lock lk(mu_);
      cv_work_.wait(lk, [&] { return closing_ || failed_ || !queue_.empty(); });
      if (failed_ || queue_.empty()) return;  // failed, or closed and drained
      block = std::move(queue_.front());
      queue_.pop_front();
    }
    const size_t block_bytes = block.owner ? block.size : block.bytes.size();
    try {
      if (block.owner)
        consume_(block.data, block.size);
      else
        consume_(block.bytes.data(), block.bytes.size());
    } catch (...) {
      std::lock_guard lk(mu_);
      error_ = std::current_exception();
      failed_ = true;
      queue_.clear();
      queued_bytes_ = 0;
      cv_room_.notify_all();
      return;
    }
    block.owner.reset();  // its owner may reuse it now
    {
      std::lock_guard lk(mu_);
      queued_bytes_ -= std::min(queued_bytes_, block_bytes);  // cleared by a failure meanwhile
      if (!block.owner && block.bytes.capacity() && free_.size() < max_blocks_) {
        block.bytes.clear();
        free_.push_back(std::move(block.bytes));
      }
    }
    cv_room_.notify_one();
  }
}

void ByteStage::finish() {
  if (!thread_.joinable()) return;
  if (!current_.empty()) enqueue_current();
  {
    std::lock_guard lk(mu_);
    closing_ = true;
  }
  cv_work_.notify_all();
  thread_.join();
  rethrow_if_failed();
}

void ByteStage::rethrow_if_failed() {
  std::lock_guard lk(mu_);
  if (error_) std::rethrow_exception(error_);
}

double ByteStage::busy_seconds() const {
  std::lock_guard lk(mu_);
  return static_cast<double>(busy_ns_) / 1e9;
}

}  // namespace sb
