#include "layer/frames.hpp"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "util/error.hpp"
#include "util/interrupt.hpp"
#include "util/threads.hpp"

namespace sb {

namespace {
// Small frames (a small file's content, a run of headers) travel together, so
// a tree of many small files does not cost a hand-over per file.
constexpr size_t kBatchBytes = 1 << 20;
constexpr size_t kEmitBytes = 128 << 10;
}  // namespace

struct FrameWriter::Job {
  std::string input;                 // the frames' input, one after the other
  size_t first_frame = 0;            // the number of its first frame in the stream
  std::vector<size_t> ends;          // where each frame's input ends
  std::vector<bool> hash;            // whether to hash each frame's input
  // The output, uninitialised: a job and its buffers are reused, as fresh
  // multi-megabyte buffers cost a page fault every 4 KiB (blob_writer.cpp).
  std::unique_ptr<char[]> output;
  size_t output_capacity = 0, output_size = 0;
  std::vector<size_t> out_ends;      // where each frame's output ends
  std::vector<std::optional<Digest>> digests;
  std::string error;
  bool done = false;

  void reset() {
    input.clear();
    ends.clear();
    hash.clear();
    output_size = 0;
    out_ends.clear();
    digests.clear();
    error.clear();
    done = false;
  }

  void run(const Encode& encode, const Bound& bound) {
    try {
      size_t need = 0, from = 0;
      for (size_t end : ends) need += bound(end - std::exchange(from, end));
      if (need > output_capacity) {
        output.reset(new char[need]);
        output_capacity = need;
      }
      from = 0;
      for (size_t i = 0; i < ends.size(); ++i) {
        std::string_view in(input.data() + from, ends[i] - from);
        output_size += encode(in, first_frame + i, output.get() + output_size);
        out_ends.push_back(output_size);
        if (hash[i]) {
          Sha256 h;
          h.update(in);
          digests.emplace_back(h.finish());
        } else {
          digests.emplace_back();
        }
        from = ends[i];
      }
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
};

struct FrameWriter::Pool {
  std::vector<std::thread> threads;
  size_t max_in_flight = 2;
  std::deque<std::shared_ptr<Job>> queue;    // submitted, in order (producer only)
  std::deque<std::shared_ptr<Job>> pending;  // not yet taken by a worker
  std::vector<std::shared_ptr<Job>> free;    // out, to reuse
  std::mutex mu;
  std::condition_variable cv_work, cv_done;
  bool stopping = false;

  void stop() {
    {
      std::lock_guard lk(mu);
      stopping = true;
    }
    cv_work.notify_all();
    for (auto& t : threads)
      if (t.joinable()) t.join();
    threads.clear();
  }
};

FrameWriter::FrameWriter(Emit emit, Encode encode, Bound bound, int threads)
    : emit_(std::move(emit)),
      encode_(std::move(encode)),
      bound_(std::move(bound)),
      open_(std::make_shared<Job>()),
      pool_(std::make_unique<Pool>()) {
  size_t n = threads > 0 ? static_cast<size_t>(threads)
                         : std::max(1u, std::thread::hardware_concurrency());
  // With no thread allowed, submit() encodes each job itself: same bytes.
  pool_->threads = start_threads(n, [this] { work(); });
  pool_->max_in_flight = 2 * std::max<size_t>(1, pool_->threads.size());
}

FrameWriter::~FrameWriter() {
  pool_->stop();
}

void FrameWriter::write(const char* data, size_t size) {
  open_->input.append(data, size);
}

size_t FrameWriter::open_size() const {
  return open_->input.size() - (open_->ends.empty() ? 0 : open_->ends.back());
}

size_t FrameWriter::cut() {
  size_t start = open_->ends.empty() ? 0 : open_->ends.back();
  if (open_->input.size() > start) {
    if (open_->ends.empty()) open_->first_frame = frames_;
    open_->ends.push_back(open_->input.size());
    open_->hash.push_back(hash_open_);
    ++frames_;
    if (open_->input.size() >= kBatchBytes) submit();
  }
  hash_open_ = false;
  return frames_;
}

void FrameWriter::submit() {
  if (open_->ends.empty()) return;
  std::shared_ptr<Job> job = std::move(open_);
  // What follows the last frame in memory is zeros, not what a reused buffer
  // held before: an encoder that looks a few bytes past its input (it must
  // not, but the bytes would then depend on which buffer a job got) sees the
  // same thing on every run.
  job->input.append(64, '\0');
  job->input.resize(job->input.size() - 64);
  {
    std::lock_guard lk(pool_->mu);
    if (!pool_->free.empty()) {
      open_ = std::move(pool_->free.back());
      pool_->free.pop_back();
    }
  }
  if (!open_) open_ = std::make_shared<Job>();
  open_->reset();
  if (pool_->threads.empty()) {
    job->run(encode_, bound_);
    job->done = true;
    pool_->queue.push_back(job);
  } else {
    {
      std::lock_guard lk(pool_->mu);
      pool_->queue.push_back(job);
      pool_->pending.push_back(job);
    }
    pool_->cv_work.notify_one();
  }
  while (pool_->queue.size() > pool_->max_in_flight) drain_one();
}

void FrameWriter::drain_one() {
  std::shared_ptr<Job> job = pool_->queue.front();
  {
    std::unique_lock lk(pool_->mu);
    pool_->cv_done.wait(lk, [&] { return job->done; });
  }
  pool_->queue.pop_front();
  if (!job->error.empty()) throw Error(job->error);
  size_t from = 0;
  for (size_t i = 0; i < job->out_ends.size(); ++i) {
    if (job->digests[i]) digests_.emplace(offsets_.size(), *job->digests[i]);
    offsets_.push_back(emitted_ + from);
    from = job->out_ends[i];
  }
  // Handed on in pieces of 128 KiB, as libzstd hands on its output: one
  // write(2) of megabytes cost three times the system time (measured).
  for (size_t at = 0; at < job->output_size; at += kEmitBytes)
    emit_(job->output.get() + at, std::min(kEmitBytes, job->output_size - at));
  emitted_ += job->output_size;
  consumed_ += job->input.size();
  std::lock_guard lk(pool_->mu);
  pool_->free.push_back(std::move(job));
}

void FrameWriter::drain(const Tick& tick) {
  cut();
  submit();
  while (!pool_->queue.empty()) {
    check_interrupted();
    drain_one();
    if (tick) tick();
  }
}

uint64_t FrameWriter::offset_of(size_t n) const {
  if (n == offsets_.size()) return emitted_;
  if (n > offsets_.size()) throw Error("internal: frame " + std::to_string(n) + " is not out yet");
  return offsets_[n];
}

const Digest& FrameWriter::digest_of(size_t n) const {
  auto it = digests_.find(n);
  if (it == digests_.end()) throw Error("internal: frame " + std::to_string(n) + " was not hashed");
  return it->second;
}

void FrameWriter::work() {
  Pool& p = *pool_;
  for (;;) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock lk(p.mu);
      p.cv_work.wait(lk, [&] { return p.stopping || !p.pending.empty(); });
      if (p.pending.empty()) return;
      job = p.pending.front();
      p.pending.pop_front();
    }
    job->run(encode_, bound_);
    {
      std::lock_guard lk(p.mu);
      job->done = true;
    }
    p.cv_done.notify_all();
  }
}

}  // namespace sb
