// Turns an uncompressed tar stream into a layer blob in the store, computing
// diff_id (of the input) and digest (of the output) in the same pass.
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

#include <cstddef>
#include <functional>
#include <memory>

#include "layer/framing.hpp"
#include "layer/layer.hpp"
#include "store/store.hpp"

namespace sb {

class ByteSink {
 public:
  virtual ~ByteSink() = default;
  virtual void write(const void* data, size_t size) = 0;
  // A sink whose format frames entries (estargz, zstd:chunked) returns the
  // framer that the tar writer reports entry boundaries to.
  virtual EntryFramer* framer() { return nullptr; }
};

class Compressor;  // one per compression, in blob_writer.cpp

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

 private:
  const LayerOptions options_;
  Store::Writer out_;
  Sha256 diff_sha_;
  uint64_t bytes_in_ = 0;
  std::unique_ptr<Compressor> compressor_;
};

// The compressed form of `data` as one blob would hold it (for tests and tools).
std::string compress_bytes(std::string_view data, const LayerOptions& options);

}  // namespace sb
