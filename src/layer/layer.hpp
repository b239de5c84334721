// The output of the layer stage: one OCI layer blob in the store.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "util/digest.hpp"

namespace sb {

// Estargz is gzip and ZstdChunked is zstd with a table of contents, so that a
// client can fetch single files (docs/layers.md); both read as plain gzip/zstd.
enum class Compression { Gzip, Zstd, None, Estargz, ZstdChunked };

std::string to_string(Compression c);  // as parse_compression() takes it
Compression parse_compression(const std::string& name);  // "gzip", "zstd", "none", "estargz", "zstd:chunked"
std::string layer_media_type(Compression c);  // application/vnd.oci.image.layer.v1.tar+gzip ...
bool is_gzip_family(Compression c);            // gzip or estargz: ISA-L levels 0-3

struct Layer {
  Digest diff_id;           // sha256 of the uncompressed tar
  Digest digest;            // sha256 of the blob as stored (compressed)
  uint64_t size = 0;        // bytes of the blob
  uint64_t uncompressed_size = 0;
  std::string media_type;
  // The descriptor's annotations: a chunked format's table of contents
  // (estargz: containerd.io/snapshot/stargz/toc.digest, ...).
  std::map<std::string, std::string> annotations = {};
};

void to_json(nlohmann::json& j, const Layer& l);
Layer layer_from_json(const nlohmann::json& j);

// What stackbuild keeps of the annotations of a layer descriptor it did not
// write (a base image's, a pulled image's, a registry cache's): the chunked
// formats' table-of-contents annotations (estargz, zstd:chunked), each only
// when its value has its format's syntax. Anything else a registry put there
// is dropped, so it never reaches an image stackbuild writes.
std::map<std::string, std::string> chunked_annotations(const nlohmann::json& descriptor);

// How layers are written. The output bytes depend on `compression`, `level`
// and (eStargz) `prefetch` only: never on `threads`.
struct LayerOptions {
  Compression compression = Compression::Gzip;
  int level = -1;           // -1: the default (gzip: ISA-L level 2; zstd: 3)
  int threads = 0;          // 0: one per core
  size_t chunk_size = 4 << 20;  // gzip: bytes of input per independently compressed chunk;
                                // estargz, zstd:chunked: the most bytes of a file in one chunk
  // eStargz: the image's prefetch order, paths as EntryMap keys ("usr/lib/x"):
  // those a layer holds go first, before its prefetch landmark.
  std::vector<std::string> prefetch = {};
};

// Adds what a layer's cache key takes from its options: the compression and
// level, and an eStargz layer's prefetch order when it has one (so the keys
// of every other layer are what they were before prefetch orders).
KeyHasher& hash_layer_options(KeyHasher& key, const LayerOptions& options);

}  // namespace sb
