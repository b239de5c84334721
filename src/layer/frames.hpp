// Independent frames, compressed on worker threads and emitted in order: the
// engine under eStargz (a gzip member a frame) and zstd:chunked (a zstd frame
// a frame). Where frames begin is the caller's choice (cut()), never the
// workers', so the bytes do not depend on the thread count.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "layer/compressor.hpp"
#include "util/digest.hpp"

namespace sb {

class FrameWriter {
 public:
  // Writes the compressed form of `in`, frame number `frame` of the stream,
  // at `out` (room for bound(in.size()) bytes) and returns its size; runs on
  // any worker, so its bytes may depend on `in` and `frame` only.
  using Encode = std::function<size_t(std::string_view in, size_t frame, char* out)>;
  using Bound = std::function<size_t(size_t in_size)>;

  FrameWriter(Emit emit, Encode encode, Bound bound, int threads);
  ~FrameWriter();
  FrameWriter(const FrameWriter&) = delete;
  FrameWriter& operator=(const FrameWriter&) = delete;

  // Appends to the open frame.
  void write(const char* data, size_t size);
  // Closes the open frame unless it is empty. Returns the number of the
  // frame that the next write() opens.
  size_t cut();
  // The worker also hashes the open frame's input (digest_of()).
  void hash_open_frame() { hash_open_ = true; }
  // Closes the open frame and waits until every frame is out.
  void drain(const Tick& tick = {});
  // After drain(): where frame `n` begins in what this writer emitted, or
  // the end of the output for the frame after the last; and the sha256 of
  // its input, if hash_open_frame() asked for it.
  uint64_t offset_of(size_t n) const;
  const Digest& digest_of(size_t n) const;
  uint64_t consumed() const { return consumed_; }  // input of the frames out
  uint64_t emitted() const { return emitted_; }    // bytes out
  // Input bytes of the open frame so far.
  size_t open_size() const;

 private:
  struct Job;
  void submit();
  void drain_one();
  void work();

  Emit emit_;
  Encode encode_;
  Bound bound_;
  std::shared_ptr<Job> open_;  // frames gathered for the next job
  bool hash_open_ = false;
  size_t frames_ = 0;  // frames closed
  uint64_t consumed_ = 0, emitted_ = 0;
  std::vector<uint64_t> offsets_;  // of the frames out
  std::map<size_t, Digest> digests_;
  struct Pool;
  std::unique_ptr<Pool> pool_;
};

}  // namespace sb
