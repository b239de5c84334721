#include "archive/gzip_stream.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <isa-l/igzip_lib.h>

#include <algorithm>
#include <cstring>

#include "util/error.hpp"
#include "util/threads.hpp"

namespace sb {

namespace {
constexpr size_t kChunk = 1 << 20;
constexpr size_t kAhead = 4;  // chunks inflated ahead of the reader, at least

size_t ahead_chunks(size_t bytes) { return std::max(kAhead, bytes / kChunk); }
}  // namespace

bool GzipStream::is_gzip(const std::filesystem::path& file) {
  UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
  unsigned char magic[2];
  return fd.get() >= 0 && ::pread(fd.get(), magic, 2, 0) == 2 && magic[0] == 0x1f &&
         magic[1] == 0x8b;
}

GzipStream::GzipStream(const std::filesystem::path& file, std::string label, bool own_thread,
                       size_t ahead)
    : label_(std::move(label)),
      state_(std::make_unique<inflate_state>()),
      in_(kChunk),
      ahead_chunks_(ahead_chunks(ahead)) {
  fd_ = UniqueFd(open_waiting(file.c_str(), O_RDONLY | O_CLOEXEC, 0));
  if (fd_.get() < 0) throw_errno("open " + file.string());
  ::posix_fadvise(fd_.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
  isal_inflate_init(state_.get());
  state_->crc_flag = ISAL_GZIP;  // header, deflate, and the trailer's CRC-32 and length checked
  if (!own_thread) return;
  auto threads = start_threads(1, [this] { run(); });
  if (!threads.empty()) thread_ = std::move(threads.front());
}

void GzipStream::set_ahead(size_t bytes) {
  {
    std::lock_guard lk(mu_);
    ahead_chunks_ = ahead_chunks(bytes);
  }
  cv_.notify_all();
}

GzipStream::~GzipStream() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

// Moves the bytes not yet inflated to the front of the input buffer and reads
// more after them.
void GzipStream::refill() {
  size_t keep = state_->avail_in;
  if (keep) std::memmove(in_.data(), state_->next_in, keep);
  ssize_t n;
  do n = ::read(fd_.get(), in_.data() + keep, in_.size() - keep);
  while (n < 0 && errno == EINTR);
  if (n < 0) throw_errno(label_ + ": read");
  if (n == 0) input_done_ = true;
  state_->next_in = in_.data();
  state_->avail_in = static_cast<uint32_t>(keep + static_cast<size_t>(n));
}

bool GzipStream::produce(std::string& out) {
  out.resize(kChunk);
  size_t filled = 0;
  while (filled < out.size() && !finished_) {
    if (state_->avail_in == 0 && !input_done_) refill();
    if (state_->block_state == ISAL_BLOCK_FINISH) {
      // The next member, if what follows is one (a gzip header); else the end.
      if (state_->avail_in < 2 && !input_done_) {  // its magic may straddle two reads
        refill();
        continue;
      }
      if (state_->avail_in < 2 || state_->next_in[0] != 0x1f || state_->next_in[1] != 0x8b) {
        finished_ = true;  // the end, or trailing bytes that are not a member
        break;
      }
      unsigned char* next = state_->next_in;
      uint32_t avail = state_->avail_in;
      isal_inflate_reset(state_.get());
      state_->crc_flag = ISAL_GZIP;
      state_->next_in = next;
      state_->avail_in = avail;
    }
    state_->next_out = reinterpret_cast<unsigned char*>(out.data() + filled);
    state_->avail_out = static_cast<uint32_t>(out.size() - filled);
    uint32_t before_in = state_->avail_in, before_out = state_->avail_out;
    int rc = isal_inflate(state_.get());
    if (rc == ISAL_INCORRECT_CHECKSUM)
      throw Error(label_ + ": corrupt gzip data (a member fails its CRC-32 check)");
    if (rc < 0)
      throw Error(label_ + ": corrupt gzip data (ISA-L error " + std::to_string(rc) + ")");
    filled += before_out - state_->avail_out;
    bool progress = state_->avail_in != before_in || state_->avail_out != before_out;
    if (!progress && input_done_ && state_->avail_in == 0 &&
        state_->block_state != ISAL_BLOCK_FINISH)
      throw Error(label_ + ": the gzip data ends early (truncated?)");
  }
  out.resize(filled);
  return filled > 0 || !finished_;
}

void GzipStream::run() {
  for (;;) {
    std::string chunk;
    {
      std::unique_lock lk(mu_);
      cv_.wait(lk, [&] { return stop_ || ready_.size() < ahead_chunks_; });
      if (stop_) return;
      if (!spare_.empty()) chunk = std::move(spare_.back()), spare_.pop_back();
    }
    bool more;
    std::string err;
    try {
      more = produce(chunk);
    } catch (const std::exception& e) {
      err = e.what(), more = false;
    }
    {
      std::lock_guard lk(mu_);
      if (!chunk.empty()) ready_.push_back(std::move(chunk));
      if (!more) end_ = true, error_ = err;
    }
    cv_.notify_all();
    if (!more) return;
  }
}

std::string_view GzipStream::next() {
  if (!thread_.joinable()) {  // no thread of its own: inflate here
    while (produce(current_))
      if (!current_.empty()) return current_;
    return {};
  }
  std::unique_lock lk(mu_);
  if (!current_.empty()) spare_.push_back(std::move(current_));
  current_.clear();
  cv_.notify_all();
  cv_.wait(lk, [&] { return !ready_.empty() || end_; });
  if (!ready_.empty()) {
    current_ = std::move(ready_.front());
    ready_.pop_front();
    cv_.notify_all();
    return current_;
  }
  if (!error_.empty()) throw Error(error_);
  return {};
}

}  // namespace sb
