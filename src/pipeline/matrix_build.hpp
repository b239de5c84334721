// Building every point of a matrix in one run. Each point is its recipe
// instantiated there; layers the points share are built once and then come
// from the layer cache (their keys hold no point-specific fields). All images
// go into one output, with an image index over the matrix.
#pragma once

#include <exception>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "pipeline/build.hpp"
#include "pipeline/plan.hpp"
#include "resolve/plan.hpp"

namespace sb {

// One point to build.
struct MatrixPoint {
  std::string id;                                          // resolve::Point::id(); "" for a recipe without a matrix
  Recipe recipe;                                           // resolve::instantiate() at the point
  std::map<std::string, std::string> variables;            // resolve::point_variables(), for build steps
  PointInputs inputs;                                      // resolved versions; --locked: the lockfile's pins
  std::map<std::string, std::string> labels;               // computed labels (pipeline/labels.hpp)
  std::string base_lock;                                   // --locked: the from: image's pinned digest
  std::vector<std::pair<std::string, std::string>> matrix;  // the point's matrix values, as written
  std::map<std::string, std::string> versions;             // the resolved component versions
  // Its eStargz layers' prefetch order, from the image this point's tag names
  // in the output layout now (pipeline/prefetch_order.hpp); empty otherwise.
  std::vector<std::string> prefetch;
};

// The build options of `point`: the build's, with the point's variables,
// inputs (its lockfile pins), labels, base image pin and eStargz order.
BuildOptions point_build_options(const MatrixPoint& point, const BuildOptions& build);

// The point's matrix values but its platform: equal for points that differ
// only in platform, which may share a tag (one image index over them).
std::string platform_siblings(const MatrixPoint& p);

struct PointReport {
  std::string id;
  std::vector<std::string> tags;
  std::string platform;  // "linux/arm64"
  std::string siblings;  // id() less platform: equal for points that differ only in platform
  std::optional<BuildResult> built;  // absent when the point failed or never started
  std::string error;                 // why it failed; "" when it did not
  double seconds = 0;
  size_t layers_built = 0, layers_reused = 0;
  uint64_t image_size = 0;  // config, manifest and compressed layers
  // The hook of the verify gate: what the point's tests gave ("5 passed",
  // "1 failed"). Printed as "-" while nothing fills it.
  std::optional<std::string> tests;
};

struct MatrixOptions {
  // Output, format, layer options, epoch and sandbox for every point;
  // `variables`, `point`, `labels` and `base.locked` come from each MatrixPoint instead.
  BuildOptions build;
  int jobs = 1;            // points built at once; the bytes never depend on it
  // Memory one point may take (its build steps, its layer writers): fewer
  // points run at once than `jobs` when the memory available (the cgroup's
  // limit, if lower) does not hold that many. 0: no bound.
  uint64_t memory_per_point = uint64_t{4} << 30;
  std::string index_ref;   // the matrix index's ref name in an OCI layout; "" = write no index
  // A --locked build's pinned wheels and archives fetched ahead of the layers
  // that need them (pipeline/fetch_ahead.hpp): --fetch-ahead.
  bool fetch_ahead = false;
};

// A tag that points differing only in platform share: one image index under
// it, a manifest per platform (with its `platform`), in point order.
struct PlatformIndex {
  std::string tag;             // "name:tag", as the points give it
  std::vector<size_t> points;  // the points it lists
  TaggedIndex index;           // ref: the tag's ref name in a layout
};

struct MatrixResult {
  std::vector<PointReport> points;   // in the order given
  std::optional<TaggedIndex> index;  // the matrix index, when asked for and every point built
  std::vector<PlatformIndex> platform_indexes;  // written with the images
  double seconds = 0;
  // The first point's failure (its error names the point, then the layer and
  // step). Set, nothing was written: the caller reports, then rethrows it.
  std::exception_ptr failure;
};

// The point `p` of `planned`, ready to build, with its labels and resolved
// inputs (the plan's catalog; no lockfile pins).
MatrixPoint matrix_point(const Planned& planned, const resolve::PlanPoint& p);

// `--only KEY=VALUE` (repeatable): the indexes of the plan's points whose
// ${KEY} (a matrix value as written, a resolved version, arch, ...) is one of
// the VALUEs given for KEY, for every KEY given. Throws Error(ErrorKind::Usage) for
// a filter without '=', a KEY no point has, or when no point matches (saying
// which values there are).
std::vector<size_t> select_points(const Recipe& recipe, const resolve::Plan& plan, const std::vector<std::string>& only);
// --only's KEY=VALUE arguments as KEY -> its VALUEs (alternatives); throws a
// usage error for one that is not KEY=VALUE.
std::map<std::string, std::set<std::string>> only_values(const std::vector<std::string>& only);

// How many points build at once: `options.jobs`, fewer when the memory
// available does not hold that many points of `memory_per_point` (said on
// `status`), never more than there are points.
size_t points_at_once(const MatrixOptions& options, size_t points, Status& status);

// Builds the points, `options.jobs` at a time, into the store. After a
// failure no further point starts; those running finish. Writes no output.
MatrixResult build_points(const std::vector<MatrixPoint>& points, const Store& store, const MatrixOptions& options,
                          Status& status);

// When every point of `result` was built: its images (and, with
// options.index_ref, the matrix index in result.index) to the output in one
// step. A failure to write is kept in result.failure; after a failed point
// nothing is written.
void write_matrix(const std::vector<MatrixPoint>& points, MatrixResult& result, const Store& store,
                  const MatrixOptions& options);

// build_points, then write_matrix.
MatrixResult build_matrix(const std::vector<MatrixPoint>& points, const Store& store, const MatrixOptions& options,
                          Status& status);

// The image index over the built points, in their order: per manifest its
// platform and the annotations dev.stackbuild.point, dev.stackbuild.tags,
// dev.stackbuild.matrix.<key> and dev.stackbuild.version.<component>;
// dev.stackbuild.stack on the index.
TaggedIndex matrix_index(const std::vector<MatrixPoint>& points, const std::vector<PointReport>& reports,
                         const std::string& stack, const std::string& ref);

// A point's image as the index lists it: its manifest's descriptor (media
// type, digest, size; as built, or as a registry holds it) and the tags it
// was built under.
struct IndexEntry {
  Descriptor manifest;
  std::vector<std::string> tags;
};
// The same index from descriptors: entries[i] is point i's (none: left out).
// `stackbuild merge` reads them from the registry the points were pushed to,
// and gets the bytes a one-machine build of the same points pushes.
TaggedIndex matrix_index(const std::vector<MatrixPoint>& points, const std::vector<std::optional<IndexEntry>>& entries,
                         const std::string& stack, const std::string& ref);
// The tags of the built points that several points share (each of another
// platform, as the plan allows only them), each an index over their manifests.
// Its bytes are registry::make_index's over the same manifests, so a push
// gives the digest the layout has.
std::vector<PlatformIndex> platform_indexes(const std::vector<PointReport>& reports);
// The bytes of such an index over `manifests` (type, digest, size), each
// with its architecture (linux/ARCH), in order: what registry::make_index
// gives for the same manifests. `stackbuild merge` makes it from a registry's
// descriptors, for a tag its fan-out's tasks pushed apart.
std::string platform_index_json(const std::vector<std::pair<Descriptor, std::string>>& manifests);

// The final table: point, tag, manifest digest, size, layers built/reused,
// seconds, tests ("-" when not run).
std::string summary_table(const MatrixResult& result);
// Rows as left-aligned columns two spaces apart (the first row the header), a line each.
std::string text_table(const std::vector<std::vector<std::string>>& rows);
nlohmann::json summary_json(const MatrixResult& result);

}  // namespace sb
