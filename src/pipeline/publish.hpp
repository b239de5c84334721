// What a build publishes beside its images: the verify reports and SBOMs,
// as artifacts that refer to their images in the OCI layout, and in a
// registry the pushed images with their reports and SBOMs attached.
// run_build() calls these after the gate; `stackbuild test`, `push` and
// `sbom` call the single-image ones.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "image/image.hpp"
#include "registry/push.hpp"
#include "registry/session.hpp"
#include "store/store.hpp"
#include "util/status.hpp"
#include "verify/report.hpp"

namespace sb {

struct BuildResult;
struct MatrixResult;

// The image an artifact refers to (its OCI subject).
struct AttachSubject {
  std::string media_type;
  Digest digest;
  uint64_t size = 0;
};

// The images of a build that the gate's reports are of, in their order: each distinct one.
std::vector<AttachSubject> report_subjects(const BuildResult& built);

// A report into `layout` as an artifact that refers to its image (one per
// image; the next replaces it), with a result line naming it.
void add_report_to_layout(const fs::path& layout, const verify::VerifyReport& report, const AttachSubject& subject,
                          Status& status);

// Pushes each report as an artifact referring to its image (subjects[i]) in
// `target` (REGISTRY/REPO, where the images are).
void attach_reports(const std::vector<verify::VerifyReport>& reports, const std::vector<AttachSubject>& subjects,
                    const std::string& target, const registry::SessionOptions& session, const Store& store,
                    Status& status);

// attach_reports() for each point of a build: point i's reports to each of
// its targets (targets[i]).
void attach_built_reports(const MatrixResult& built, const std::vector<std::vector<verify::VerifyReport>>& reports,
                          const std::vector<std::vector<std::string>>& targets, const registry::SessionOptions& session,
                          const Store& store, Status& status);

// The SPDX document of an image built under `tag`, from its layers in the store.
std::string built_image_sbom(const Store& store, const std::string& tag, const Image& image);

struct SbomOf {
  std::string name;
  Descriptor image;
  std::string document;
};

// build --sbom: each distinct image's SBOM added to `layout` (point i's in
// the i-th list), for attach_built_sboms() to push along.
std::vector<std::vector<SbomOf>> add_built_sboms(const MatrixResult& built, const fs::path& layout, const Store& store,
                                                 Status& status);

// Pushes an SBOM to `target` as an artifact whose subject is `image` there.
void attach_sbom(const std::string& target, const std::string& name, const Descriptor& image, const char* type,
                 const std::string& document, const std::map<std::string, std::string>& annotations,
                 const registry::SessionOptions& session, const Store& store, Status& status);

// attach_sbom() for each point's SBOMs (sboms[i]) to each of its targets (targets[i]).
void attach_built_sboms(const std::vector<std::vector<SbomOf>>& sboms,
                        const std::vector<std::vector<std::string>>& targets, const registry::SessionOptions& session,
                        const Store& store, Status& status);

// Pushes what a build made: point i to each of `targets[i]` (REGISTRY/REPO[:TAG];
// without TAG under each of its ref names), then the matrix index (if any) to
// every repository pushed to, tagged `index_tags[REGISTRY/REPO]` or its ref name.
// Two images under one tag of a repository are refused before anything is sent.
// Returns every reference pushed ("REGISTRY/REPO:TAG").
std::vector<std::string> push_built_images(const MatrixResult& built, const std::vector<std::vector<std::string>>& targets,
                       const std::map<std::string, std::string>& index_tags, const registry::PushOptions& options,
                       Status& status);

}  // namespace sb
