// Pull: a manifest (or an index, then the platform's manifest) and its blobs
// into the store, every digest checked before a blob is kept.
#pragma once

#include <string>

#include "image/layout.hpp"
#include "registry/reference.hpp"
#include "registry/session.hpp"
#include "store/store.hpp"
#include "util/status.hpp"

namespace sb::registry {

constexpr const char* kDockerManifest = "application/vnd.docker.distribution.manifest.v2+json";
constexpr const char* kDockerManifestList = "application/vnd.docker.distribution.manifest.list.v2+json";

struct PullOptions {
  SessionOptions session;
  int jobs = 3;
  std::string os = "linux", architecture = "amd64", variant;  // chosen from an index
};

struct PullResult {
  Image image;            // the manifest and config bytes, the layers (in the store)
  Digest index_digest;    // the index the manifest was chosen from, or the manifest's own digest
  uint64_t bytes_fetched = 0;
};

// "linux/arm64/v8" into PullOptions' os, architecture and variant.
void parse_platform(const std::string& text, PullOptions& options);

// The digest `ref` names now: its manifest (or index) fetched by tag or
// digest and checked, no blobs. For `stackbuild lock` (base images).
Digest resolve_digest(const Reference& ref, const SessionOptions& options, Status& status);

PullResult pull_image(const Reference& ref, const Store& store, const PullOptions& options, Status& status);

}  // namespace sb::registry
