// Pull: a manifest (or an index, then the platform's manifest) and its blobs
// into the store, every digest checked before a blob is kept.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

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

// A manifest or index as a registry gave it.
struct FetchedManifest {
  std::string media_type, bytes;
  Digest digest;
};

// GET a manifest (or index) of `repo` by tag or digest. Its bytes are checked
// against `pinned` (a digest asked for) and against the digest the registry
// says it has. With `missing_ok`, a 404 (no such tag, manifest or
// repository) gives nullopt; any other failure throws, naming the session's op.
std::optional<FetchedManifest> fetch_manifest(Session& session, http::Client& client, const std::string& repo,
                                              const std::string& selector, const std::optional<Digest>& pinned,
                                              bool missing_ok = false);

// One blob of `repo` into the store, its digest (and `size`, when not 0)
// checked before it is kept; a broken download resumes with a Range request.
// Reports progress through `task`. Returns the bytes that came over the wire.
uint64_t fetch_blob(Session& session, http::Client& client, const std::string& repo, const Digest& digest,
                    uint64_t size, const Store& store, int task);

PullResult pull_image(const Reference& ref, const Store& store, const PullOptions& options, Status& status);

// What `ref` names, read without its layers: an image, or each image an
// index lists (artifacts skipped, every platform kept), with its config and
// the files of the artifacts of `artifact_types` that refer to it. For
// reading what a registry holds (release notes) without pulling gigabytes.
// Blobs go through the store, their digests checked.
struct ListedArtifact {
  std::string type;  // its artifactType
  Digest manifest;
  std::string file;  // its one layer
  std::map<std::string, std::string> annotations;  // its manifest's
};
struct ListedImage {
  FetchedManifest manifest;
  std::string config_json;
  std::map<std::string, std::string> annotations;  // its descriptor's in the index; none for an image named itself
  std::map<std::string, std::string> platform;     // its descriptor's platform (os, architecture, variant)
  std::vector<ListedArtifact> artifacts;           // in the order the registry lists them
};
struct Listing {
  FetchedManifest top;  // what `ref` named: the image, or the index
  std::map<std::string, std::string> annotations;  // the index's
  std::vector<ListedImage> images;
};
Listing list_images(const Reference& ref, const Store& store, const SessionOptions& options, Status& status,
                    const std::set<std::string>& artifact_types);

}  // namespace sb::registry
