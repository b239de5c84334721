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

#include <nlohmann/json.hpp>

#include "store/store.hpp"

namespace sb::notes {

namespace fs = std::filesystem;

// The data of the images of the OCI layout `layout` (those with a ref name;
// an image under several names once), each compared with its counterpart in
// the layout `since` when given: the image of the same ref name, else of
// the same matrix point, else the only one of the same CUDA X.Y. Throws sb::Error
// naming what could not be read.
nlohmann::json notes_data(const fs::path& layout, const Store& store, const std::optional<fs::path>& since);

// `tmpl` (Mustache) rendered with `data`. {{name}} writes a value as a
// Markdown table cell ('|' escaped, no line breaks); {{{name}}} as it is.
// Throws sb::Error naming `template_name` when the template is malformed.
std::string render(const std::string& tmpl, const nlohmann::json& data, const std::string& template_name);

// templates/release-notes.md.mustache, built into stackbuild.
const std::string& default_template();

}  // namespace sb::notes
