// zstd:chunked (containers/storage's pkg/chunked, as Debian 12's podman 4.3
// with containers/storage 1.43 reads it): a zstd layer in which each file's
// content is zstd frames of its own (one a 4 MiB chunk, for the workers; the
// TOC has one entry a file, with its digest and its frames' offset and end),
// the headers between them in frames of their own, then the table of
// contents ("manifest"), compressed,
// in a zstd skippable frame, then a skippable frame of 40 bytes that says
// where the manifest is. zstd readers skip both skippable frames, so the
// layer decompresses to the plain tar and its diff_id is that tar's.
#pragma once

#include <memory>

#include "layer/compressor.hpp"

namespace sb {

inline constexpr const char* kZstdChunkedChecksumAnnotation =
    "io.containers.zstd-chunked.manifest-checksum";
inline constexpr const char* kZstdChunkedPositionAnnotation =
    "io.containers.zstd-chunked.manifest-position";

std::unique_ptr<Compressor> make_zstd_chunked_compressor(const LayerOptions& options, Emit emit);

}  // namespace sb
