// The whole of `stackbuild build`: recipe in; images, reports, SBOMs, cache
// and pushes out. run_build() is the one place that knows the order of the
// job (DESIGN.md, "The driver and the layer kinds"); the command line only
// turns its arguments into a BuildRequest.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "pipeline/matrix_build.hpp"
#include "pipeline/plan.hpp"
#include "pipeline/provenance.hpp"
#include "pipeline/publish.hpp"
#include "pipeline/verify_gate.hpp"
#include "recipe/recipe.hpp"
#include "registry/push.hpp"
#include "registry/reference.hpp"
#include "store/store.hpp"
#include "util/status.hpp"

namespace sb {

// What to build and what to do with it: plain values, no command-line types.
struct BuildRequest {
  Recipe recipe;                      // as loaded, before planning
  PlanOptions plan;                   // --catalog, --set
  bool locked = false;                // --locked: RECIPE.lock must match; its pins are built
  bool strict = false;                // --strict: an unsatisfiable point fails the run
  std::vector<std::string> only;      // --only KEY=VALUE
  // Output, format, layer options, --tag, --jobs ... for every point; index_ref
  // and build.cache_from are set by run_build().
  MatrixOptions matrix;
  std::optional<std::string> index_tag;  // --index-tag; default <stack>-matrix
  bool no_index = false;              // --no-index: no matrix index (a fan-out's task; merge writes it)
  std::vector<registry::Reference> cache_from, cache_to;  // --cache-from, --cache-to (--cache: both)
  // --prefetch-from LAYOUT|REGISTRY/REPO: where eStargz points take their
  // prefetch order (the image of each point's tag there); default: the output layout.
  std::optional<std::string> prefetch_from;
  // Registry access for --cache-*, the pushes and the artifacts (--creds,
  // --ca-cert, --insecure-registry, -j, --chunk-size); `store` is set by run_build().
  registry::PushOptions registry;
  GateOptions gate;                   // --verify, --no-verify, --gpus, --report, --junit, --nvcc
  bool sbom = false;                  // --sbom: each image's SBOM into the layout (and pushed along)
  bool push = false;                  // --push: to each point's push: targets
  std::vector<std::string> push_to;   // --push-to REGISTRY/REPO[:TAG]: there instead
  // --sign KEY.pem: every image and index pushed is signed (sigstore format,
  // registry/sign.hpp) after its reports and SBOMs are attached.
  std::optional<fs::path> sign_key;
  // --provenance: each image's SLSA provenance (pipeline/provenance.hpp) into
  // the layout, and pushed along (signed too, with --sign).
  bool provenance = false;
  std::string builder_id = provenance::kLocalBuilderId;  // --builder-id: runDetails.builder.id
  // --record-inputs (with --locked and a push): after everything else, each
  // image gets its point's inputs digest attached (pipeline/release.hpp), which
  // `stackbuild merge` and `cluster slurm` read to know the point is complete.
  bool record_inputs = false;

  bool pushing() const { return push || !push_to.empty(); }
};

// What the driver is handed rather than makes itself.
struct Services {
  // Opens the store (held shared against gc, which is waited for) when the
  // job first needs it: after planning.
  std::function<Store()> open_store;
  ShowReport show_report;  // where the gate's reports go for people
  // The fetcher factory, the sandbox, the registry and index transports and
  // the clock every point's build is handed (they replace
  // request.matrix.build.services); the registry transport also carries the
  // caches and the pushes, and the clock times the steps.
  BuildServices build;
};

struct BuildOutcome {
  MatrixResult built;
  std::vector<std::vector<verify::VerifyReport>> reports;  // point i's, when the gate ran
  std::vector<std::vector<SbomOf>> sboms;                  // point i's, with --sbom
  std::vector<std::vector<ProvenanceOf>> provenance;       // point i's, with --provenance
};

// Runs the job: plan -> select points -> build points -> write outputs ->
// verify gate -> reports into the layout -> summary -> export cache ->
// SBOMs -> provenance -> push (images, then their reports, SBOMs and
// provenance; --record-inputs: last, each point's inputs record). Each step is
// reported as a "step" event with its seconds. Throws the first point's
// failure (after the summary), then the gate's (after the cache export),
// else any step's error.
BuildOutcome run_build(const BuildRequest& request, Services& services, Status& status);

}  // namespace sb
