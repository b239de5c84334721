// eStargz (containerd's stargz snapshotter): a gzip layer made of one gzip
// member per chunk of each file's content, the files of the prefetch order
// first and a landmark entry after them (or a no-prefetch landmark first), the table
// of contents as a tar entry `stargz.index.json` in a member of its own at
// the end, and a 51-byte footer member whose extra field holds the TOC's
// offset. Any gzip reader reads it as one tar (the TOC entry included, so the
// diff_id is of that whole stream, as the estargz library computes it).
#pragma once

#include <memory>

#include "layer/compressor.hpp"

namespace sb {

inline constexpr const char* kEstargzTocDigestAnnotation =
    "containerd.io/snapshot/stargz/toc.digest";
inline constexpr const char* kEstargzUncompressedSizeAnnotation =
    "io.containers.estargz.uncompressed-size";
inline constexpr const char* kEstargzTocName = "stargz.index.json";
inline constexpr const char* kEstargzNoPrefetchLandmark = ".no.prefetch.landmark";
inline constexpr const char* kEstargzPrefetchLandmark = ".prefetch.landmark";

std::unique_ptr<Compressor> make_estargz_compressor(const LayerOptions& options, Emit emit);

// The 51-byte footer that points at the TOC member (for tests).
std::string estargz_footer(uint64_t toc_offset);

}  // namespace sb
