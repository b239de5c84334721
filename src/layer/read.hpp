// A layer blob (tar, tar+gzip or tar+zstd) open for reading with libarchive:
// a gzip blob is inflated by a GzipStream (ISA-L, on a thread of its own) and
// handed to libarchive as a plain tar; zstd and plain ones go to libarchive
// as they are. What the extractor and every layer listing read layers with.
#pragma once

#include <filesystem>
#include <memory>

struct archive;

namespace sb {

class GzipStream;

class LayerReader {
 public:
  // `raw`: the decompressed bytes as one entry (libarchive's raw format)
  // instead of tar entries. Throws sb::Error naming the blob.
  explicit LayerReader(const std::filesystem::path& blob, bool raw = false);
  ~LayerReader();
  LayerReader(const LayerReader&) = delete;
  LayerReader& operator=(const LayerReader&) = delete;

  struct archive* get() const { return a_; }

 private:
  std::unique_ptr<GzipStream> gzip_;  // outlives the archive that reads it
  struct archive* a_ = nullptr;
};

}  // namespace sb
