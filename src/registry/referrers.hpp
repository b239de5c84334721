// Artifacts that refer to an image (OCI 1.1): a manifest whose `subject` is
// the image's manifest, found through the referrers API
// (GET /v2/<repo>/referrers/<digest>) of a registry that has it, and else
// through the referrers tag schema the distribution spec gives for the
// others: an image index tagged `sha256-<hex of the subject>` that lists the
// referring manifests, read, extended and written back by the client.
// stackbuild attaches its test reports this way.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "image/image.hpp"
#include "registry/push.hpp"

namespace sb::registry {

using sb::kTestReportType;  // image/image.hpp

struct Subject {
  std::string media_type;
  Digest digest;
  uint64_t size = 0;
};

// The artifact's manifest: the empty config, one layer (the file), `subject`.
std::string artifact_manifest(const std::string& artifact_type, const BlobRef& file, const Subject& subject,
                              const std::map<std::string, std::string>& annotations);

// The referrers tag of a subject: "sha256-<hex>".
std::string referrers_tag(const Digest& subject);

// `index` ("" when there is none yet) with a descriptor of `manifest` added
// (or replaced, for the same digest); canonical bytes.
std::string add_referrer(const std::string& index, const std::string& manifest);

struct AttachResult {
  Digest artifact;
  std::string how;  // "the referrers API" or "the referrers tag sha256-..."
};

// Pushes `bytes` (of media type `artifact_type`) to target's repository as an
// artifact referring to `subject`, and, when the registry does not take
// `subject` itself (no OCI-Subject header in its answer), updates the
// referrers tag.
AttachResult attach_artifact(const Reference& target, const Subject& subject, const std::string& artifact_type,
                             const std::string& bytes, const std::map<std::string, std::string>& annotations,
                             const PushOptions& options, Status& status);

// The descriptors (mediaType, digest, size, and artifactType and annotations
// where given) of the manifests of `repo` that refer to `subject`: the
// referrers API's list, else, from a registry without it (404, 405, 501), the
// referrers tag's, in the order they were attached; none when neither has any.
std::vector<nlohmann::json> list_referrers(Session& session, http::Client& client, const std::string& repo,
                                           const Digest& subject);

}  // namespace sb::registry
