// Layers written ahead: while one layer's blobs are tarred, compressed and
// hashed on threads of their own, the build goes on to fetch and stage the
// next layers. build_image (build.cpp) gives a layer kind a LayerWrites in
// LayerContext::writes; the kind's last step (finish_layer(), layer_cache.hpp)
// starts the write there and returns a PendingLayer; build_image places the
// layers in the image in recipe order, settling each pending one first: its
// write waited for, then what must see the finished layers below (the
// duplicate-library check) and the cache records.
//
// A kind that reads the layers below before it writes (apt's dpkg state,
// pip's installed projects, build steps' root) is built only after every
// pending layer is settled (LayerKind::reads_below()), so a layer never sees
// a half-built image, and the bytes are the same as when every layer is
// written before the next begins (`--write-ahead 0`). See docs/layers.md,
// "Layers written ahead".
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "layer/layer.hpp"

namespace sb {

// A layer being written on another thread.
class PendingLayer {
 public:
  // Takes the layers below (bottom first) and their names, and the parts
  // written; runs what waited for them. Throws to fail the layer.
  using Finish = std::function<void(const std::vector<Layer>& below, const std::vector<std::string>& names,
                                    const std::vector<Layer>& parts)>;
  PendingLayer(std::future<std::vector<Layer>> written, Finish finish)
      : written_(std::move(written)), finish_(std::move(finish)) {}
  // Waits for the write (its error, if it failed, is thrown here) and runs
  // `finish` once with the complete layers below. Returns the parts.
  std::vector<Layer> settle(const std::vector<Layer>& below, const std::vector<std::string>& names);
  // Seconds settle() waited for the write: 0 when it was done already.
  double waited() const { return waited_; }

 private:
  std::future<std::vector<Layer>> written_;  // from std::async: its destructor waits for the write
  Finish finish_;
  double waited_ = 0;
};

// The writes of one image build, at most `at_once` running (their threads
// besides; each write has its own compressors, see layer/write.hpp).
class LayerWrites {
 public:
  // at_once >= 1.
  explicit LayerWrites(size_t at_once);
  // Runs `write` on a thread of its own, once fewer than at_once run
  // (waiting here until then). `finish` is run by settle().
  std::shared_ptr<PendingLayer> start(std::function<std::vector<Layer>()> write, PendingLayer::Finish finish);
  // The most writes that ran at one time, for tests.
  size_t most_at_once() const;

 private:
  struct Slots {
    std::mutex mu;
    std::condition_variable cv;
    size_t at_once = 1;
    size_t running = 0, most = 0;
  };
  std::shared_ptr<Slots> slots_;  // shared with the writes, which give their slot back
};

// The default number of layers written at once beside the build: one per
// four usable cores (util/resources.hpp), at least one.
size_t default_write_ahead();

}  // namespace sb
