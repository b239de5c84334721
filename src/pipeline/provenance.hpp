// What goes into an image's SLSA provenance (image/provenance.hpp), and
// where it goes: `build --provenance` adds each image's statement to the
// layout beside the image, and with a push attaches it to the pushed image
// (and, with --sign, signs it there). The recipe's files are read when the
// run plans, each layer kind says what it was made from (LayerReport::inputs),
// and the test reports and SBOMs the run made beside an image are its
// byproducts.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "image/image.hpp"
#include "image/provenance.hpp"
#include "pipeline/matrix_build.hpp"
#include "pipeline/publish.hpp"
#include "recipe/recipe.hpp"
#include "registry/push.hpp"
#include "store/store.hpp"
#include "util/status.hpp"
#include "verify/report.hpp"

namespace sb {

// What every statement of one run shares.
struct ProvenanceRun {
  provenance::Parameters parameters;  // the request's; each point adds its own (point, matrix, tags ...)
  // The files read before anything is built: the recipe, the recipes it
  // extends, RECIPE.lock (--locked) and the catalog's files, by sha256.
  std::vector<provenance::Resource> files;
  provenance::Run run;  // builder, invocation, start; `finished` is set when the statements are made
};

// The recipe (named as given), the recipes it extends, RECIPE.lock when the
// build is --locked, and every *.yaml of `catalog_dir` ("" = none), read now.
std::vector<provenance::Resource> recipe_files(const Recipe& recipe, bool locked, const fs::path& catalog_dir);

// The source tree of layer `layer` as its label says it (source_label(),
// pipeline/source_tree.hpp): a git repository at its commit (digest
// gitCommit), an archive (sha256), a local directory (its tree digest,
// digest "stackbuildTree"), and each patch (sha256). None for a label
// that does not read.
std::vector<provenance::Resource> source_inputs(const std::string& layer, const std::string& label);

// The provenance of `image` (a digest of built.images): the run's parameters
// with the point's, the run's files, the base image, every layer's inputs,
// and `byproducts`.
provenance::Provenance image_provenance(const ProvenanceRun& run, const MatrixPoint& point, const BuildResult& built,
                                        const Digest& image, std::vector<provenance::Resource> byproducts);

struct ProvenanceOf {
  std::string name;  // the image's first tag, for messages
  Descriptor image;
  std::string document;
};

// build --provenance: the statement of each distinct image of each built
// point (points[i] is built.points[i]), its byproducts the point's test
// reports (reports[i], as the gate's report_subjects() order them) and
// SBOMs (sboms[i]); added to `layout` as an artifact referring to the
// image (one per image: the next replaces it) unless `layout` is empty.
std::vector<std::vector<ProvenanceOf>> add_built_provenance(
    const ProvenanceRun& run, const std::vector<MatrixPoint>& points, const MatrixResult& built,
    const std::vector<std::vector<verify::VerifyReport>>& reports, const std::vector<std::vector<SbomOf>>& sboms,
    const fs::path& layout, Status& status);

// The annotations of a provenance artifact: its title and predicate type.
const std::map<std::string, std::string>& provenance_annotations();

// Pushes point i's statements to each of its targets (targets[i]) as
// artifacts referring to their images there; with `sign_key`, then signs
// each artifact (REPO@DIGEST) as `stackbuild sign` signs an image.
void attach_built_provenance(const std::vector<std::vector<ProvenanceOf>>& statements,
                             const std::vector<std::vector<std::string>>& targets,
                             const std::optional<fs::path>& sign_key, const registry::PushOptions& options,
                             Status& status);

}  // namespace sb
