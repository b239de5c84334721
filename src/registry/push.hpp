// Push (OCI distribution spec v1.1): blobs the registry lacks, several at a
// time, then each manifest with its exact bytes, then the tags.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "registry/reference.hpp"
#include "registry/session.hpp"
#include "store/store.hpp"
#include "util/digest.hpp"
#include "util/status.hpp"

namespace sb::registry {

// A blob to send: its bytes in a file (a layout or store blob) or in memory.
struct BlobRef {
  Digest digest;
  uint64_t size = 0;
  std::string media_type;
  std::filesystem::path path;  // or, when empty:
  std::string bytes;
};

// A manifest (with the config and layers it names) or an index (with its
// manifests), with its exact bytes.
struct ManifestRef {
  std::string media_type;
  std::string bytes;
  Digest digest;
  std::vector<BlobRef> blobs;
  std::vector<ManifestRef> children;
  std::string os, architecture, variant;  // a manifest's platform, from its config
};

// Reads a manifest or index (recursively) from the OCI layout `dir`, by descriptor.
ManifestRef manifest_from_layout(const std::filesystem::path& dir, const std::string& media_type,
                                 const Digest& digest);
// The ref names of a layout's index.json, with their descriptors (ref "" when unnamed);
// artifacts that refer to an image (image/layout.hpp) are not among them.
struct LayoutEntry {
  std::string ref;
  std::string media_type;
  Digest digest;
};
std::vector<LayoutEntry> layout_entries(const std::filesystem::path& dir);
// An image index over `manifests` (a manifest each, with its platform).
ManifestRef make_index(const std::vector<ManifestRef>& manifests);

struct PushOptions {
  SessionOptions session;
  int jobs = 3;                          // blobs sent at once, each over its own connection
  uint64_t chunk_size = 64ull << 20;     // bytes per PATCH of a chunked upload
  uint64_t monolithic_limit = 16ull << 20;  // blobs up to this size go in one PUT
  const Store* store = nullptr;          // remembers which repositories hold which blobs (for mounts)
};

struct TaggedManifest {
  std::string tag;  // empty: push by digest only
  ManifestRef manifest;
};

struct PushReport {
  uint64_t bytes_sent = 0;  // blob bytes that went over the wire (retries included)
  int blobs_sent = 0, blobs_present = 0, blobs_mounted = 0;
  int restarts = 0, resumes = 0;
  std::vector<std::pair<std::string, Digest>> pushed;  // "HOST/REPO:TAG" -> manifest digest
};

// Pushes every image to `target` (REGISTRY/REPO; its tag and digest are not
// used), sharing blobs and one session. Throws sb::Error with
// "push to HOST/REPO: ..." on failure.
PushReport push_images(const Reference& target, const std::vector<TaggedManifest>& images, const PushOptions& options,
                       Status& status);

// What a push did, for people: "blobs: 2 sent (1.5 MiB), 1 already there, 0
// mounted; 0 resumed, 0 restarted; 0.123 s", then a result per image pushed.
void report_push(const PushReport& report, double seconds, Status& status);

// What the upload of one blob did.
enum class BlobOutcome { Present, Mounted, Sent };
struct UploadStats {
  uint64_t bytes_sent = 0;
  int restarts = 0, resumes = 0;
};
// Sends one blob to `repository` unless it is there; tries a mount from each
// of `mount_from` first. Reports progress through `task`.
BlobOutcome upload_blob(Session& session, http::Client& client, const std::string& repository, const BlobRef& blob,
                        const std::vector<std::string>& mount_from, const PushOptions& options, int task,
                        UploadStats& stats);

// The repositories of `registry` known (from earlier pushes and pulls) to hold `blob`.
std::vector<std::string> known_repositories(const Store& store, const std::string& registry, const Digest& blob);
void remember_repository(const Store& store, const std::string& registry, const Digest& blob,
                         const std::string& repository);

}  // namespace sb::registry
