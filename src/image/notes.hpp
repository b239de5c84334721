// Release notes of a stack's images, the page a monthly release publishes
// with them (as NGC's framework release notes do): each image's tags and
// digest, the versions of its components (CUDA, cuDNN, NCCL, the framework,
// Python, the OS), the driver it needs, the GPU architectures it is for, its
// packages, the tests it declares, and what changed since the last release.
// The facts come from the images alone (their config, labels, annotations
// and layers, read as the SBOM reads them), gathered into one JSON value
// that a Mustache template (templates/release-notes.md.mustache, or the
// user's) renders; docs/notes.md names every field.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "store/store.hpp"
#include "util/digest.hpp"

namespace sb::notes {

namespace fs = std::filesystem;

// One image on the page, however it was read: from an OCI layout
// (read_layout) or from a registry (cli/notes.cpp).
struct Image {
  std::vector<std::string> refs;  // sorted: its ref names in a layout, its tags in a registry
  nlohmann::json point;           // its descriptor's annotations in a matrix index ({} when none)
  Digest digest;                  // the manifest's
  nlohmann::json manifest, config;
  // Where its packages are read from: its layer blobs (digest, file), else
  // an SBOM document attached to it (SPDX or CycloneDX).
  std::vector<std::pair<Digest, fs::path>> layers;
  std::string sbom;
  nlohmann::json report;      // its test report (`stackbuild test`'s JSON); null when none
  std::string report_digest;  // the manifest digest of the artifact that holds it
};

// Offers a test report artifact that refers to `f` (its file's text, its
// manifest's digest and org.opencontainers.image.created annotation, "" when
// it has none): it becomes f's report when it is a report stackbuild wrote and
// is no older than the one chosen so far, whose time `newest` keeps. So the
// newest report wins, whatever order a registry lists referrers in (the
// OCI distribution spec leaves it open); among reports of the same time or
// of none (older stackbuild wrote none), the one listed last.
void offer_report(Image& f, std::string& newest, const std::string& text, const Digest& manifest,
                  const std::string& created);

// An image's config document for Image::config, read as `test` and `run` read
// it (read_image_config(): a field of the wrong type is refused naming `name`
// and the field).
nlohmann::json image_config(const std::string& bytes, const std::string& name);

// The images of one release.
struct Images {
  std::string where;           // the layout or the reference, as given
  std::vector<Image> images;   // by first ref
  std::string stack, release;  // from a matrix index's annotations
};

// The images of the OCI layout `layout` that have a ref name (an image under
// several names once), their layers checked against their digests as they
// are opened, each with the last test report in the layout that refers to
// it. Throws sb::Error naming what could not be read.
Images read_layout(const fs::path& layout, const Store* store = nullptr);

// The data the template is rendered with: every image of `now`, each
// compared with its counterpart in `since` when given: the image of the same
// ref name, else of the same matrix point, else the only one of the same
// CUDA X.Y. Throws sb::Error naming what could not be read.
nlohmann::json notes_data(const Images& now, const Store& store,
                          const std::optional<Images>& since);

// `tmpl` (Mustache) rendered with `data`. {{name}} writes a value as a
// Markdown table cell ('|' escaped, no line breaks); {{{name}}} as it is.
// Throws sb::Error naming `template_name` when the template is malformed.
std::string render(const std::string& tmpl, const nlohmann::json& data,
                   const std::string& template_name);

// templates/release-notes.md.mustache, built into stackbuild.
const std::string& default_template();

}  // namespace sb::notes
