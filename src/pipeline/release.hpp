// A release fanned out over machines (docs/cluster.md): each matrix point is
// built by its own task, `stackbuild build RECIPE --locked --only POINT
// --push-to REGISTRY/REPO --record-inputs`, and one merge step
// (`stackbuild merge`) assembles the matrix index from what the tasks pushed,
// reading only the registry. Both sides plan the recipe here, with the code
// `build` plans with, so the task's point, its tag and the index agree with a
// one-machine `build --push-to` of the same recipe, byte for byte.
//
// A point's inputs digest says "built from these inputs": a hash of typed
// fields over what decides its image bytes (stackbuild's version, the point,
// its recipe instantiated there, the lockfile's pins of it, the base image's
// pinned digest, the epoch, the layer options and the bytes of every local
// file it copies or builds from). A task attaches it to its pushed image as
// an artifact (kInputsArtifactType, annotation kInputsAnnotation), after the
// image, its test reports and SBOMs: so its presence says the point is
// complete in the registry, and a re-run that finds it skips the point.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "pipeline/build_options.hpp"
#include "pipeline/matrix_build.hpp"
#include "pipeline/plan.hpp"
#include "recipe/recipe.hpp"
#include "registry/reference.hpp"
#include "registry/session.hpp"
#include "util/digest.hpp"
#include "util/status.hpp"

namespace sb {

constexpr const char* kInputsArtifactType = "application/vnd.stackbuild.inputs.v1+json";
constexpr const char* kInputsAnnotation = "dev.stackbuild.inputs";

// The digest of what decides the bytes of `point`'s image (a locked point:
// its inputs hold the lockfile's entry), built with `options` (its
// source_date_epoch, layer options and budget). Throws InputError when a
// file the recipe copies cannot be read.
Digest point_inputs_digest(const MatrixPoint& point, const BuildOptions& options);

// Points that differ only in platform may share a tag; one machine pushes an
// index over them under it. A task of a fan-out builds one of them and so
// cannot: it pushes its image under "TAG-ARCH" instead (platform_task_tag:
// "1.0-arm64"), and the merge pushes the index under TAG, the same bytes.
std::string platform_task_tag(const std::string& ref_name, const std::string& architecture);

// The ref names of `point`'s tags that another resolved point of `planned`
// has too, one differing from it only in platform.
std::set<std::string> shared_platform_tags(const Planned& planned, const MatrixPoint& point);

struct ReleasePoint {
  MatrixPoint point;              // as `build --locked --only` builds it
  std::vector<std::string> only;  // the --only KEY=VALUE filters that choose it and no other
  // The tag `--push-to REGISTRY/REPO` pushes it under: its first, or that
  // tag's platform_task_tag when the first is shared.
  std::string tag;
  std::vector<std::string> shared;  // its ref names shared with points of other platforms
  Digest inputs;                    // point_inputs_digest()
};

struct ReleaseRequest {
  PlanOptions plan;               // --catalog, --set
  std::vector<std::string> only;  // --only: a part of the release
  bool locked = true;             // the lockfile's pins (what the tasks build with --locked)
  std::optional<std::string> index_tag;  // --index-tag, else <stack>-matrix
  BuildOptions build;             // epoch, layer options: for the inputs digests
};

struct Release {
  std::string stack;
  std::vector<ReleasePoint> points;  // the chosen, satisfiable points, in plan order
  // Whether `build` would write an index: the matrix has more than one point.
  bool matrix = false;
  std::string index_ref;             // its ref name, the tag it is pushed under
  std::vector<std::string> skipped;  // unsatisfiable points left out (a warning, as build gives)
};

// The recipe planned as `build` plans it (--locked: checked against
// RECIPE.lock), its points chosen by request.only.
Release plan_release(const Recipe& recipe, const ReleaseRequest& request);

// What the registry holds of one point.
struct PushedPoint {
  std::optional<Descriptor> manifest;  // the manifest under the point's tag; none: not pushed
  std::vector<std::string> inputs;     // the inputs digests recorded for it (kInputsAnnotation)
  std::vector<std::string> artifact_types;  // of every artifact that refers to it
};

// Reads `point.tag` of `repo` (REGISTRY/REPO) and the artifacts that refer
// to it. A registry that cannot be reached, or answers with an error other
// than 404, throws.
std::vector<PushedPoint> find_pushed_points(const registry::Reference& repo, const std::vector<ReleasePoint>& points,
                                            const registry::SessionOptions& session, Status& status);

// Whether `pushed` holds an inputs record equal to `point.inputs`.
bool same_inputs(const ReleasePoint& point, const PushedPoint& pushed);

}  // namespace sb
