// Turns an uncompressed tar stream into a layer blob in the store, computing
// diff_id (of the input) and digest (of the output) in the same pass.
//
// A pipeline: the caller's thread (reading files, encoding the tar) hands
// each block to the diff_id hash's thread and to the compressor's workers;
// the compressed blocks go, in order, to a thread that hashes and writes
// them. Bounded queues between them; the bytes are those of one thread.
//
// gzip uses ISA-L in fixed-size chunks compressed in parallel, each primed with
// the 32 KiB before it and ended with a sync flush (pigz's method), so the
// bytes are the same for any thread count; the header carries no name and
// mtime 0. zstd uses libzstd's own workers, whose output does not depend on
// their number either (nbWorkers >= 1 always).
//
// estargz and zstd:chunked (estargz.hpp, zstd_chunked.hpp) frame each file's
// content: the tar writer reports entry boundaries through framer(), and the
// format's annotations land on the Layer that finish() returns.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "layer/framing.hpp"
#include "layer/layer.hpp"
#include "store/store.hpp"
#include "util/byte_stage.hpp"

namespace sb {

class ByteSink {
 public:
  virtual ~ByteSink() = default;
  virtual void write(const void* data, size_t size) = 0;
  // A sink whose format frames entries (estargz, zstd:chunked) returns the
  // framer that the tar writer reports entry boundaries to.
  virtual EntryFramer* framer() { return nullptr; }
};

class Compressor;  // one per compression (layer/compressor.hpp)

// Where a layer's time went: CPU seconds of each stage of the pipeline, to
// tell a user what bounds the writing (the progress display and `stackbuild
// layer --json` show them).
struct LayerStages {
  double wall = 0;       // seconds from the first byte to the committed blob
  double tar = 0;        // the caller's thread: reading files, encoding the tar, feeding the rest
  double diff_hash = 0;  // sha256 of the tar stream (diff_id)
  double compress = 0;   // the compressor's workers, all together
  int compress_threads = 0;
  double blob = 0;       // sha256 of the blob and writing it
  // "tar 41%, diff hash 28%, compress 2x88%, blob 33%": each stage's share
  // of the wall time, the compressors' per thread.
  std::string summary() const;
  // The stage with the largest share: the one to make faster.
  std::string bound_by() const;
};

class LayerBlobWriter final : public ByteSink {
 public:
  LayerBlobWriter(const Store& store, const LayerOptions& options);
  ~LayerBlobWriter() override;

  void write(const void* data, size_t size) override;
  EntryFramer* framer() override;
  uint64_t bytes_in() const { return bytes_in_; }
  // How much of bytes_in() the compressor has finished with. It lags behind
  // while workers hold input: zstd's take up to a few jobs (tens of MiB).
  uint64_t bytes_compressed() const;
  // Flushes, commits the blob, returns its description. `tick` runs each
  // time more of the held input is compressed, for progress.
  Layer finish(const std::function<void()>& tick = {});
  // Valid after finish().
  const LayerStages& stages() const { return stages_; }

 private:
  std::shared_ptr<std::string> free_block();
  void pass_block();
  const LayerOptions options_;
  Store::Writer out_;
  Sha256 diff_sha_;
  uint64_t bytes_in_ = 0;
  // The block being gathered, and every block made, for reuse once no stage
  // holds it (pass_block, free_block).
  size_t block_size_;
  std::shared_ptr<std::string> block_;
  std::vector<std::shared_ptr<std::string>> blocks_;
  bool framing_ = false;  // the compressor frames entries: no gathering
  // Declared in the order they are destroyed last to first: the compressor
  // emits into blob_stage_, so it goes first.
  ByteStage diff_stage_;
  ByteStage blob_stage_;
  std::unique_ptr<Compressor> compressor_;
  LayerStages stages_;
  double cpu_start_ = 0, process_cpu_start_ = 0;
  std::chrono::steady_clock::time_point start_;
};

// The compressed form of `data` as one blob would hold it (for tests and tools).
std::string compress_bytes(std::string_view data, const LayerOptions& options);

}  // namespace sb
