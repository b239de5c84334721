#include "layer/blob_writer.hpp"

#include <isa-l/crc.h>
#include <isa-l/igzip_lib.h>
#include <zlib.h>
// ZSTD_getFrameProgression (for progress) is in the "experimental" part of
// the API; it has been there unchanged since zstd 1.3 and Debian's
// libzstd exports it.
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>
#include <zstd_errors.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <time.h>

#include "layer/compressor.hpp"
#include "layer/estargz.hpp"
#include "layer/zstd_chunked.hpp"
#include "util/error.hpp"
#include "util/interrupt.hpp"
#include "util/resources.hpp"
#include "util/threads.hpp"

namespace sb {

namespace {

double cpu_seconds(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

// One per core this process may use (its affinity, its cgroup's quota).
int thread_count(int requested) {
  if (requested > 0) return requested;
  return static_cast<int>(usable_cores());
}

class NoCompressor final : public Compressor {
 public:
  explicit NoCompressor(Emit emit) : emit_(std::move(emit)) {}
  void write(const char* data, size_t size) override {
    emit_(data, size);
    consumed_ += size;
  }
  void finish(const Tick&) override {}
  uint64_t consumed() const override { return consumed_; }

 private:
  Emit emit_;
  uint64_t consumed_ = 0;
};

// ---- gzip: parallel ISA-L over fixed chunks -------------------------------

constexpr size_t kWindow = 32 * 1024;

// Buffers are recycled between chunks: fresh multi-megabyte allocations
// would cost a page fault per 4 KiB, which showed as more system time than
// the compression itself.
struct Buffer {
  std::unique_ptr<char[]> data;
  size_t capacity = 0;
  size_t size = 0;
  void reserve(size_t n) {
    if (n <= capacity) return;
    data.reset(new char[n]);  // uninitialised on purpose
    capacity = n;
  }
};

struct GzipJob {
  std::string input;     // the chunk, gathered here, or
  std::shared_ptr<const std::string> shared;  // the writer's block, not copied
  const std::string& in() const { return shared ? *shared : input; }
  std::string dict;      // up to 32 KiB of the input before this chunk
  bool last = false;
  Buffer output;
  uint32_t crc = 0;
  bool done = false;
  std::string error;
};

void compress_chunk(GzipJob& job, int level) {
  size_t level_size = level == 1 ? ISAL_DEF_LVL1_DEFAULT
                      : level == 2 ? ISAL_DEF_LVL2_DEFAULT
                      : level == 3 ? ISAL_DEF_LVL3_DEFAULT
                                   : 0;
  thread_local Buffer level_buf;  // ISA-L's work area, one per worker thread
  level_buf.reserve(level_size);
  isal_zstream s;
  isal_deflate_init(&s);
  s.level = static_cast<uint32_t>(level);
  s.level_buf = level_size ? reinterpret_cast<uint8_t*>(level_buf.data.get()) : nullptr;
  s.level_buf_size = static_cast<uint32_t>(level_size);
  s.gzip_flag = IGZIP_DEFLATE;
  if (!job.dict.empty() &&
      isal_deflate_set_dict(&s, reinterpret_cast<uint8_t*>(job.dict.data()),
                            static_cast<uint32_t>(job.dict.size())) != COMP_OK) {
    job.error = "ISA-L: cannot set the dictionary";
    return;
  }
  s.end_of_stream = job.last ? 1 : 0;
  s.flush = job.last ? NO_FLUSH : SYNC_FLUSH;
  const std::string& in = job.in();
  s.next_in = reinterpret_cast<uint8_t*>(const_cast<char*>(in.data()));  // ISA-L only reads it
  s.avail_in = static_cast<uint32_t>(in.size());
  // Deflate never grows data by more than 5 bytes per 64 KiB stored block.
  job.output.reserve(in.size() + in.size() / 1024 + 4096);
  s.next_out = reinterpret_cast<uint8_t*>(job.output.data.get());
  s.avail_out = static_cast<uint32_t>(job.output.capacity);
  int rc = isal_deflate(&s);
  bool finished = job.last ? s.internal_state.state == ZSTATE_END
                           : s.avail_in == 0 && s.internal_state.state == ZSTATE_NEW_HDR;
  if (rc != COMP_OK || !finished) {
    job.error = "ISA-L deflate failed (" + std::to_string(rc) + ")";
    return;
  }
  job.output.size = job.output.capacity - s.avail_out;
  job.crc = crc32_gzip_refl(0, reinterpret_cast<const uint8_t*>(in.data()), in.size());
}

class GzipCompressor final : public Compressor {
 public:
  // `emit_shared`, when given, takes each chunk's output without a copy.
  GzipCompressor(Emit emit, EmitShared emit_shared, int level, int threads, size_t chunk_size)
      : emit_(std::move(emit)), emit_shared_(std::move(emit_shared)), level_(level), chunk_size_(chunk_size) {
    if (level_ < 0) level_ = 2;
    if (level_ > 3) throw Error("gzip level " + std::to_string(level_) + " is not supported (ISA-L levels 0-3)");
#if defined(__x86_64__)
    // ISA-L's deflate gives the same bytes on every x86-64 CPU with SSE4.2
    // (checked under emulation: Nehalem, Haswell, AVX-512 hosts) and other
    // bytes below it. Refuse rather than write layers that differ by machine.
    if (!__builtin_cpu_supports("sse4.2"))
      throw Error("this CPU lacks SSE4.2, on which gzip layers would not be bit-identical to those built "
                  "elsewhere; use --compression zstd (identical on every x86-64 CPU)");
#endif
    // RFC 1952 header: no name, mtime 0, no extra flags, OS unknown.
    static const unsigned char header[10] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff};
    emit_(header, sizeof header);
    // The bytes do not depend on how many workers the system lets us start;
    // with none, submit() compresses each chunk itself.
    workers_ = start_threads(static_cast<size_t>(thread_count(threads)), [this] {
      work();
      double cpu = cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
      std::lock_guard lk(mu_);
      worker_cpu_ += cpu;
    });
    started_workers_ = workers_.size();
    max_in_flight_ = 2 * std::max<size_t>(1, workers_.size());
    current_.reserve(chunk_size_);
  }

  ~GzipCompressor() override { stop(); }

  void write(const char* data, size_t size) override {
    while (size > 0) {
      size_t take = std::min(size, chunk_size_ - current_.size());
      current_.append(data, take);
      data += take;
      size -= take;
      if (current_.size() == chunk_size_) submit(false);
    }
  }

  // A whole chunk at a chunk's edge goes to the workers as it is.
  void write_shared(std::shared_ptr<const std::string> block) override {
    if (!current_.empty() || block->size() != chunk_size_) return write(block->data(), block->size());
    submit(false, std::move(block));
  }

  void finish(const Tick& tick) override {
    submit(true);
    while (!queue_.empty()) {
      drain_one();
      if (tick) tick();
    }
    stop();
    unsigned char trailer[8];
    for (int i = 0; i < 4; ++i) trailer[i] = static_cast<unsigned char>(crc_ >> (8 * i));
    uint32_t isize = static_cast<uint32_t>(total_in_);  // modulo 2^32, as RFC 1952 says
    for (int i = 0; i < 4; ++i) trailer[4 + i] = static_cast<unsigned char>(isize >> (8 * i));
    emit_(trailer, sizeof trailer);
  }

  uint64_t consumed() const override { return total_in_; }
  std::optional<double> worker_cpu_seconds() const override { return worker_cpu_; }
  int worker_count() const override { return static_cast<int>(std::max<size_t>(1, started_workers_)); }

 private:
  // Queues the chunk gathered in current_, or `shared` (a whole chunk).
  void submit(bool last, std::shared_ptr<const std::string> shared = nullptr) {
    std::shared_ptr<GzipJob> job;
    {
      std::lock_guard lk(mu_);
      // A finished job whose output the receiver of emit_shared_ still holds
      // is not reused yet.
      for (auto it = free_.begin(); it != free_.end(); ++it)
        if (it->use_count() == 1) {
          job = std::move(*it);
          free_.erase(it);
          break;
        }
    }
    if (!job) job = std::make_shared<GzipJob>();
    job->done = false;
    job->dict = std::move(dict_);
    dict_.clear();  // moved from: valid, but only clear() makes it empty
    job->last = last;
    const std::string& chunk = shared ? *shared : current_;
    size_t keep = std::min(kWindow, chunk.size());
    // The next chunk's dictionary: the last 32 KiB of everything so far.
    if (keep < kWindow && !job->dict.empty()) {
      size_t from_old = std::min(job->dict.size(), kWindow - keep);
      dict_ = job->dict.substr(job->dict.size() - from_old);
    }
    dict_.append(chunk, chunk.size() - keep, keep);
    job->shared = std::move(shared);
    if (!job->shared) {
      std::swap(job->input, current_);  // current_ takes the recycled input buffer
      current_.clear();
      current_.reserve(chunk_size_);
    }
    if (workers_.empty()) {
      double t0 = cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
      compress_chunk(*job, level_);
      worker_cpu_ += cpu_seconds(CLOCK_THREAD_CPUTIME_ID) - t0;
      job->done = true;
      queue_.push_back(job);
    } else {
      {
        std::lock_guard lk(mu_);
        queue_.push_back(job);
        pending_.push_back(job);
      }
      cv_work_.notify_one();
    }
    while (queue_.size() > max_in_flight_) drain_one();
  }

  // Waits for the oldest job and emits its output, in order.
  void drain_one() {
    std::shared_ptr<GzipJob> job = queue_.front();
    {
      std::unique_lock lk(mu_);
      cv_done_.wait(lk, [&] { return job->done; });
    }
    queue_.pop_front();
    if (!job->error.empty()) throw Error(job->error);
    if (emit_shared_)
      emit_shared_(std::shared_ptr<const void>(job, job->output.data.get()), job->output.data.get(), job->output.size);
    else
      emit_(job->output.data.get(), job->output.size);
    const size_t in_size = job->in().size();
    crc_ = static_cast<uint32_t>(crc32_combine(crc_, job->crc, static_cast<z_off_t>(in_size)));
    total_in_ += in_size;
    job->shared.reset();  // the writer may reuse its block
    std::lock_guard lk(mu_);
    free_.push_back(std::move(job));
  }

  void work() {
    for (;;) {
      std::shared_ptr<GzipJob> job;
      {
        std::unique_lock lk(mu_);
        cv_work_.wait(lk, [&] { return stopping_ || !pending_.empty(); });
        if (pending_.empty()) return;
        job = pending_.front();
        pending_.pop_front();
      }
      compress_chunk(*job, level_);
      {
        std::lock_guard lk(mu_);
        job->done = true;
      }
      cv_done_.notify_all();
    }
  }

  void stop() {
    {
      std::lock_guard lk(mu_);
      stopping_ = true;
    }
    cv_work_.notify_all();
    for (auto& t : workers_)
      if (t.joinable()) t.join();
    workers_.clear();
  }

  Emit emit_;
  EmitShared emit_shared_;
  int level_;
  size_t chunk_size_;
  size_t max_in_flight_;
  std::string current_;
  std::string dict_;
  uint32_t crc_ = 0;
  uint64_t total_in_ = 0;
  std::deque<std::shared_ptr<GzipJob>> queue_;    // submitted, in order (producer only)
  std::deque<std::shared_ptr<GzipJob>> pending_;  // not yet taken by a worker
  std::vector<std::shared_ptr<GzipJob>> free_;    // finished, buffers to reuse
  std::mutex mu_;
  std::condition_variable cv_work_, cv_done_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
  size_t started_workers_ = 0;
  double worker_cpu_ = 0;  // under mu_ while workers run
};

// ---- zstd: libzstd's workers ----------------------------------------------

class ZstdCompressor final : public Compressor {
 public:
  // `emit_shared`, when given, takes the output in blocks of up to 1 MiB
  // without a copy: libzstd writes into a buffer that is handed on whole.
  ZstdCompressor(Emit emit, EmitShared emit_shared, int level, int threads)
      : emit_(std::move(emit)), emit_shared_(std::move(emit_shared)), out_(ZSTD_CStreamOutSize(), '\0') {
    cctx_ = ZSTD_createCCtx();
    if (!cctx_) throw Error("zstd: out of memory");
    check(ZSTD_CCtx_setParameter(cctx_, ZSTD_c_compressionLevel, level < 0 ? 3 : level));
    check(ZSTD_CCtx_setParameter(cctx_, ZSTD_c_checksumFlag, 1));
    // Always at least one worker: libzstd's output is then the same for any count.
    workers_ = thread_count(threads);
    size_t rc = ZSTD_CCtx_setParameter(cctx_, ZSTD_c_nbWorkers, workers_);
    if (ZSTD_isError(rc)) throw Error("zstd: this libzstd has no multithreading support");
  }
  ~ZstdCompressor() override { ZSTD_freeCCtx(cctx_); }

  void write(const char* data, size_t size) override {
    ZSTD_inBuffer in{data, size, 0};
    while (in.pos < in.size) run(&in, ZSTD_e_continue);
  }

  // libzstd's workers hand over output as they compress (every 512 KiB of
  // input or so), so the loop sees a Ctrl-C within a moment; the job a worker
  // is on still runs to its end when the context is freed (libzstd cannot
  // cancel it), up to a few seconds at level 19.
  void finish(const Tick& tick) override {
    ZSTD_inBuffer in{nullptr, 0, 0};
    while (run(&in, ZSTD_e_end) != 0) {
      check_interrupted();
      if (tick) tick();
    }
    pass_shared();
  }

  // With workers, libzstd takes in up to a few jobs' worth of input (tens
  // of MiB at level 19) before any of it is compressed: a small layer is all
  // read at once, then compressed. This is what the workers have done.
  uint64_t consumed() const override { return ZSTD_getFrameProgression(cctx_).consumed; }
  int worker_count() const override { return workers_; }

 private:
  // The buffer libzstd writes into next: the shared one's free end, or out_.
  ZSTD_outBuffer next_out() {
    if (!emit_shared_) return {out_.data(), out_.size(), 0};
    if (!shared_) {
      for (auto& b : shared_pool_)
        if (b.use_count() == 1) {  // the receiver has let go of it
          shared_ = b;
          break;
        }
      if (!shared_) shared_ = shared_pool_.emplace_back(std::make_shared<std::string>(kSharedOut, '\0'));
      shared_fill_ = 0;
    }
    // No more room per call than out_ has: libzstd returns as often as
    // before, so progress ticks as often while it finishes.
    return {shared_->data() + shared_fill_, std::min(shared_->size() - shared_fill_, out_.size()), 0};
  }
  // Hands on what the shared buffer holds, which the receiver keeps until written.
  void pass_shared() {
    if (!shared_ || shared_fill_ == 0) return;
    emit_shared_(std::shared_ptr<const void>(shared_, shared_->data()), shared_->data(), shared_fill_);
    shared_.reset();
  }
  void emit(const ZSTD_outBuffer& out) {
    if (!emit_shared_) {
      if (out.pos) emit_(out_.data(), out.pos);
      return;
    }
    shared_fill_ += out.pos;
    // Handed on once less than libzstd's usual output block is left.
    if (kSharedOut - shared_fill_ < ZSTD_CStreamOutSize()) pass_shared();
  }

  size_t run(ZSTD_inBuffer* in, ZSTD_EndDirective mode) {
    ZSTD_outBuffer out = next_out();
    const size_t in_from = in->pos;
    size_t remaining = ZSTD_compressStream2(cctx_, &out, in, mode);
    // libzstd starts its workers on the first call; when the system refuses
    // threads that fails as an allocation error. Fewer workers give the
    // same bytes, so retry with one before giving up.
    if (ZSTD_isError(remaining) && !started_ && workers_ > 1 &&
           ZSTD_getErrorCode(remaining) == ZSTD_error_memory_allocation) {
      workers_ = 1;
      ZSTD_CCtx_reset(cctx_, ZSTD_reset_session_only);
      check(ZSTD_CCtx_setParameter(cctx_, ZSTD_c_nbWorkers, workers_));
      in->pos = in_from;
      out.pos = 0;
      remaining = ZSTD_compressStream2(cctx_, &out, in, mode);
    }
    if (ZSTD_isError(remaining) && !started_ && ZSTD_getErrorCode(remaining) == ZSTD_error_memory_allocation)
      throw Error("zstd could not start a worker thread (" + std::string(ZSTD_getErrorName(remaining)) +
                  "); a process or pids limit may refuse new threads. zstd layers need one worker to be the "
                  "same bytes everywhere; gzip layers can be written without");
    check(remaining);
    started_ = true;
    emit(out);
    return remaining;
  }
  static void check(size_t rc) {
    if (ZSTD_isError(rc)) throw Error(std::string("zstd: ") + ZSTD_getErrorName(rc));
  }

  static constexpr size_t kSharedOut = size_t{1} << 20;
  Emit emit_;
  EmitShared emit_shared_;
  ZSTD_CCtx* cctx_ = nullptr;
  std::string out_;
  std::shared_ptr<std::string> shared_;  // being filled (emit_shared_ only)
  size_t shared_fill_ = 0;
  std::vector<std::shared_ptr<std::string>> shared_pool_;
  int workers_ = 1;
  bool started_ = false;  // input went in: a retry would no longer be the same stream
};

std::unique_ptr<Compressor> make_compressor(const LayerOptions& o, Emit emit, EmitShared emit_shared = {}) {
  switch (o.compression) {
    case Compression::Gzip:
      return std::make_unique<GzipCompressor>(std::move(emit), std::move(emit_shared), o.level,
                                              thread_count(o.threads), o.chunk_size);
    case Compression::Zstd:
      return std::make_unique<ZstdCompressor>(std::move(emit), std::move(emit_shared), o.level, o.threads);
    case Compression::Estargz: return make_estargz_compressor(o, std::move(emit));
    case Compression::ZstdChunked: return make_zstd_chunked_compressor(o, std::move(emit));
    case Compression::None: break;
  }
  return std::make_unique<NoCompressor>(std::move(emit));
}

}  // namespace

// 1 MiB blocks, 8 queued: a stage falls up to 8 MiB behind before the
// thread feeding it waits, which absorbs a slow file or a long zstd job.
LayerBlobWriter::LayerBlobWriter(const Store& store, const LayerOptions& options)
    : options_(options), out_(store.writer()),
      block_size_(options.compression == Compression::Gzip ? options.chunk_size : size_t{1} << 20),
      diff_stage_([this](const char* d, size_t n) { diff_sha_.update(d, n); }),
      blob_stage_([this](const char* d, size_t n) { out_.write(d, n); }, 128 << 10, 64),
      cpu_start_(cpu_seconds(CLOCK_THREAD_CPUTIME_ID)), process_cpu_start_(cpu_seconds(CLOCK_PROCESS_CPUTIME_ID)),
      start_(std::chrono::steady_clock::now()) {
  compressor_ = make_compressor(
      options_, [this](const void* d, size_t n) { blob_stage_.push(d, n); },
      [this](std::shared_ptr<const void> owner, const char* d, size_t n) {
        blob_stage_.push_shared(std::move(owner), d, n);
      });
  framing_ = compressor_->framer() != nullptr;
}

LayerBlobWriter::~LayerBlobWriter() = default;

// Input is gathered into blocks of the compressor's chunk size (gzip's 4
// MiB, else 1 MiB) that the diff_id stage and the compressor share: one copy
// of the tar stream, not one each.
void LayerBlobWriter::write(const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  bytes_in_ += size;
  if (framing_) {
    // A format that frames entries learns where they begin between writes:
    // every byte must reach it now, not when a block fills.
    diff_stage_.push(p, size);
    compressor_->write(p, size);
    return;
  }
  while (size > 0) {
    if (!block_) block_ = free_block();
    size_t take = std::min(size, block_size_ - block_->size());
    block_->append(p, take);
    p += take;
    size -= take;
    if (block_->size() == block_size_) pass_block();
  }
}

std::shared_ptr<std::string> LayerBlobWriter::free_block() {
  for (auto& b : blocks_)
    if (b.use_count() == 1) {  // neither stage holds it any more
      b->clear();
      return b;
    }
  auto b = std::make_shared<std::string>();
  b->reserve(block_size_);
  blocks_.push_back(b);
  return b;
}

void LayerBlobWriter::pass_block() {
  std::shared_ptr<const std::string> b = std::move(block_);
  block_.reset();
  diff_stage_.push_shared(b, b->data(), b->size());
  compressor_->write_shared(std::move(b));
}

EntryFramer* LayerBlobWriter::framer() { return compressor_->framer(); }

uint64_t LayerBlobWriter::bytes_compressed() const { return compressor_->consumed(); }

Layer LayerBlobWriter::finish(const std::function<void()>& tick) {
  if (block_ && !block_->empty()) pass_block();
  compressor_->finish(tick);
  diff_stage_.finish();
  blob_stage_.finish();
  Digest diff_id = diff_sha_.finish();
  uint64_t size = out_.bytes_written();
  Digest digest = out_.commit();

  stages_.wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  stages_.tar = cpu_seconds(CLOCK_THREAD_CPUTIME_ID) - cpu_start_;
  stages_.diff_hash = diff_stage_.busy_seconds();
  stages_.blob = blob_stage_.busy_seconds();
  stages_.compress_threads = compressor_->worker_count();
  // libzstd's workers are not ours to clock: theirs is what the process
  // spent beyond the three stages above (exact when one layer is written
  // at a time, as `stackbuild layer` and a build's points do).
  stages_.compress = compressor_->worker_cpu_seconds().value_or(
      std::max(0.0, cpu_seconds(CLOCK_PROCESS_CPUTIME_ID) - process_cpu_start_ - stages_.tar -
                        stages_.diff_hash - stages_.blob));
  Layer l{diff_id, digest, size, bytes_in_, layer_media_type(options_.compression)};
  compressor_->describe(l);
  return l;
}

namespace {

std::vector<std::pair<std::string, double>> stage_shares(const LayerStages& s) {
  double wall = s.wall > 0 ? s.wall : 1;
  return {{"tar", s.tar / wall},
          {"diff hash", s.diff_hash / wall},
          {"compress", s.compress / wall / std::max(1, s.compress_threads)},
          {"blob", s.blob / wall}};
}

}  // namespace

std::string LayerStages::summary() const {
  std::string out;
  for (const auto& [name, share] : stage_shares(*this)) {
    if (!out.empty()) out += ", ";
    out += name + " ";
    if (name == "compress" && compress_threads > 1) out += std::to_string(compress_threads) + "x";
    out += std::to_string(static_cast<int>(share * 100 + 0.5)) + "%";
  }
  return out;
}

std::string LayerStages::bound_by() const {
  auto shares = stage_shares(*this);
  return std::max_element(shares.begin(), shares.end(), [](const auto& a, const auto& b) { return a.second < b.second; })
      ->first;
}

std::string compress_bytes(std::string_view data, const LayerOptions& options) {
  std::string out;
  auto c = make_compressor(options, [&](const void* d, size_t n) { out.append(static_cast<const char*>(d), n); });
  c->write(data.data(), data.size());
  c->finish({});
  return out;
}

}  // namespace sb
