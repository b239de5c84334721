// The compressors behind LayerBlobWriter (blob_writer.cpp makes them): one a
// compression, each turning the uncompressed tar stream into the blob's bytes.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "layer/framing.hpp"
#include "layer/layer.hpp"

namespace sb {

using Emit = std::function<void(const void*, size_t)>;
// Emits `size` bytes at `data`, which `owner` keeps unchanged until the
// receiver lets go of it: output handed on without a copy.
using EmitShared = std::function<void(std::shared_ptr<const void> owner, const char* data, size_t size)>;
using Tick = std::function<void()>;

class Compressor {
 public:
  virtual ~Compressor() = default;
  virtual void write(const char* data, size_t size) = 0;
  // The same for a block the caller will not change while the compressor
  // holds it: a compressor may keep it rather than copy it.
  virtual void write_shared(std::shared_ptr<const std::string> block) { write(block->data(), block->size()); }
  // Flushes what is left; `tick` (may be empty) runs whenever more of it is
  // out, so a progress display keeps moving while workers finish.
  virtual void finish(const Tick& tick) = 0;
  // How much of the input written so far has been compressed and handed on.
  virtual uint64_t consumed() const = 0;
  // A format that frames entries (estargz, zstd:chunked) returns itself.
  virtual EntryFramer* framer() { return nullptr; }
  // After finish(): adds what the format records on the layer's descriptor.
  virtual void describe(Layer&) const {}
  // CPU seconds of the workers, after finish(); nullopt when they are not
  // ours to measure (libzstd's).
  virtual std::optional<double> worker_cpu_seconds() const { return std::nullopt; }
  virtual int worker_count() const { return 0; }
};

}  // namespace sb
