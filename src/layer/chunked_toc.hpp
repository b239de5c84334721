// The table of contents that eStargz and zstd:chunked share: one JSON entry a
// tar entry, and for a file's content, where its frames begin in the blob and
// the digest of each chunk. Cuts the frames so that each chunk of content is
// a frame of its own (readers decompress a file's frames and nothing else).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "archive/entry.hpp"
#include "layer/frames.hpp"

namespace sb {

struct TocStyle {
  std::string format;         // "estargz", "zstd:chunked": for errors
  bool zero_modtime = false;  // write "modtime" when it is the epoch (zstd:chunked) too
  bool end_offsets = false;   // write "endOffset" on files (zstd:chunked)
  bool empty_digest = false;  // give empty files the digest of nothing (estargz)
  // A "chunk" entry, with its digest, for each chunk of a file (estargz, whose
  // readers fetch and verify chunk by chunk). Without, a file's content still
  // spans a frame per chunk (for the workers), under its own entry alone:
  // one sha256 pass over the content instead of two (zstd:chunked).
  bool chunk_entries = true;
};

class ChunkedToc {
 public:
  ChunkedToc(FrameWriter& frames, size_t chunk_size, TocStyle style);
  ~ChunkedToc();

  void write(const char* data, size_t size);
  void begin_entry(const std::string& name, const TarEntry& entry);
  void begin_payload();
  void end_payload();
  // After frames.drain(): the entries, in stream order.
  nlohmann::json entries() const;

 private:
  struct Item {
    nlohmann::json meta;   // everything but offsets and digests
    bool payload = false;  // a file's first chunk or a further one
    bool file = false;     // the file's own entry (not "chunk")
    size_t frame = 0;      // the chunk's frame
    uint64_t chunk_offset = 0, chunk_size = 0;
    size_t chunks = 0;                  // file: how many
    size_t end_frame = 0;               // file: the frame after its content
    std::optional<std::string> digest;  // file of several chunks: its digest
  };
  void start_chunk();

  FrameWriter& frames_;
  size_t chunk_size_;
  TocStyle style_;
  std::vector<Item> items_;
  size_t file_ = 0;  // index of the file whose content is being written
  bool in_payload_ = false, payload_due_ = false;
  uint64_t payload_size_ = 0, payload_done_ = 0, chunk_done_ = 0;
  std::unique_ptr<Sha256> file_hash_;  // files of several chunks
};

}  // namespace sb
