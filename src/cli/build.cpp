#include <nlohmann/json.hpp>

#include "cli/cli.hpp"
#include "pipeline/apt_layer.hpp"
#include "pipeline/base_image.hpp"
#include "pipeline/pip_layer.hpp"
#include "pipeline/redist_layer.hpp"
#include "pipeline/build.hpp"
#include "pipeline/labels.hpp"
#include "pipeline/lock.hpp"
#include "pipeline/plan.hpp"
#include "resolve/plan.hpp"
#include "util/error.hpp"

namespace sb::cli {

namespace {

// What stops a layer that needs more than local files: fetching or building
// it is later work (apt: issue 4; pip and NVIDIA redist: issue 5; build
// steps and source builds: issue 6).
[[noreturn]] void not_implemented(const Planned& planned) {
  const resolve::PlanPoint* point = nullptr;
  for (const auto& p : planned.plan.points)
    if (p.stack && !point) point = &p;
  for (const auto& l : planned.recipe.layers) {
    std::string need = l.needs();
    if (need.empty() || need == "build" || l.from_source() || is_apt_layer(l) || is_pip_layer(l) ||
        is_redist_layer(l))
      continue;
    std::string what;
    if (need == "use") {
      std::string versions;
      for (const auto& u : l.use) {
        std::string v = "?";
        if (point)
          for (const auto& [c, ver] : point->stack->versions)
            if (c == u) v = ver;
        versions += (versions.empty() ? "" : ", ") + u + (v == "?" ? "" : " " + v);
      }
      what = "needs " + versions + " from pip wheels or NVIDIA redist archives, which build does not "
                                   "fetch yet (issue 5; 'stackbuild pip' and 'stackbuild redist' do)";
    } else {  // pip
      what = "installs pip packages, which build does not do yet (issue 5; 'stackbuild pip' does)";
    }
    Error e("layer '" + l.name + "' (" + l.where.str() + ") " + what);
    e.add_trace("the recipe resolved (" + std::to_string(planned.plan.points.size()) +
                " matrix points; see 'stackbuild plan'); nothing was built");
    throw e;
  }
  throw Error("internal: no layer needs components");
}

}  // namespace

const char* const kBuildHelp =
    "usage: stackbuild build RECIPE.yaml [options]\n"
    "       stackbuild RECIPE.yaml [options]\n"
    "\n"
    "Builds the recipe's layers (reusing cached ones from the store), then writes the image\n"
    "under each of its tags. The same recipe and inputs give the same digests on any machine.\n"
    "\n"
    "options:\n"
    "  -o, --output PATH        where to write: an OCI layout directory (default out/<stack>),\n"
    "                           or with --format docker-archive a tarball (default <stack>.tar)\n"
    "  --format FORMAT          oci (an OCI image layout; several tags share one layout) or\n"
    "                           docker-archive (what 'docker load' and skopeo's docker-archive: read)\n"
    "  --compression ALGO       gzip (default), zstd or none\n"
    "  --level N                compression level: gzip 0-3 (ISA-L; default 2), zstd 1-19 (default 3)\n"
    "  -j, --jobs N             compression threads (default: one per core); never changes the bytes\n"
    "  --source-date-epoch N    the timestamp of the build (mtimes are clamped to it, `created` is\n"
    "                           it); default: the recipe's source_date_epoch, else $SOURCE_DATE_EPOCH,\n"
    "                           else 0\n"
    "  --tag NAME:TAG           tag the image NAME:TAG instead of the recipe's tags (repeatable)\n"
    "  --push                   push the images to the recipe's push: targets when the build is done\n"
    "  --push-to REGISTRY/REPO[:TAG]  push the images there instead (repeatable; see 'push --help';\n"
    "                           --creds, --ca-cert, --insecure-registry as for push)\n"
    "  --verify                 test the images after writing them (as 'stackbuild test' does), even\n"
    "                           without --push; exit 1 when a check or test failed\n"
    "  --no-verify              push without testing the images first\n"
    "  --gpus SEL, --report FILE, --junit FILE, --nvcc PATH  for the tests, as for 'stackbuild test'\n"
    "  --locked                 refuse to build unless RECIPE.lock exists and matches what the\n"
    "                           recipe resolves to now (see 'stackbuild lock'); says what changed;\n"
    "                           apt, pip and redist layers fetch exactly the files it pins\n"
    "  --set KEY=VALUE          replace matrix.KEY with one value (repeatable)\n"
    "  --catalog DIR            the component catalog (default: $STACKBUILD_CATALOG, else layers/\n"
    "                           beside the recipe or above it, else the built-in one)\n"
    "\n"
    "Before --push or --push-to pushes anything, each image is verified: the static checks, its\n"
    "recipe tests and the built-in tests of its components, run in the build sandbox (GPU tests\n"
    "skipped, never passed, without a GPU). A failure stops the build there (exit 1), naming the\n"
    "image and the test; nothing is pushed. After the push, each image's report is attached to\n"
    "it as an OCI artifact (see 'stackbuild test --help' and docs/testing.md).\n"
    "In an OCI layout the ref name of an image is the TAG part of NAME:TAG.\n"
    "A recipe's from: base image is pulled first (--creds, --ca-cert, --insecure-registry\n"
    "as for push); --locked builds from the digest 'stackbuild lock' recorded.\n"
    "A recipe with a matrix, catalog components (use:, apt:, pip:, build:) or ${vars} is\n"
    "resolved first (as 'stackbuild plan' shows it). Layers of components cannot be built yet:\n"
    "the build stops after resolving and names the layer.\n"
    "Also takes the options of every command (stackbuild --help).\n";

int cmd_build(const std::vector<std::string>& argv) {
  std::vector<std::string> flags = kCommonFlags;
  std::vector<std::string> options = kCommonOptions;
  flags.push_back("--locked");
  options.insert(options.end(), {"-o", "--output", "--format", "--compression", "--level", "-j", "--jobs",
                                 "--source-date-epoch", "--catalog"});
  flags.push_back("--push");  // build --push (registry/)
  options.insert(options.end(), {"--creds", "--ca-cert", "--chunk-size"});
  flags.insert(flags.end(), {"--verify", "--no-verify"});  // the gate (cli/test.cpp)
  options.insert(options.end(), {"--gpus", "--report", "--junit", "--nvcc"});
  Args args(argv, flags, options, {"--tag", "--set", "--push-to", "--insecure-registry"});
  if (maybe_help(args, kBuildHelp)) return kExitOk;
  if (args.positional().size() != 1)
    throw Error("build wants one recipe file (see 'stackbuild build --help')", kExitUsage);

  Context ctx = make_context(args);
  Recipe recipe = load_recipe(args.positional()[0]);
  std::map<std::string, std::string> variables;  // the point's ${vars}, for build steps
  std::optional<resolve::ResolvedStack> stack;   // the point's resolution, for the image's labels
  std::string base_lock;                         // --locked: the lockfile's base image digest
  PointInputs point;                             // what the point resolved to; --locked: what the lockfile pins
  if (needs_plan(recipe) || args.has("--locked") || args.has("--set") || args.has("--catalog")) {
    Planned planned = plan_recipe(recipe, plan_options(args));
    if (args.has("--locked")) check_lock(planned);
    const auto& points = planned.plan.points;
    if (planned.plan.unsatisfiable() == points.size())
      throw Error(unsatisfiable_report(planned.plan), kExitUnsatisfiable);
    for (const auto& l : recipe.layers)
      if (!l.needs().empty() && l.needs() != "build" && !l.from_source() && !is_apt_layer(l) && !is_pip_layer(l) &&
          !is_redist_layer(l))
        not_implemented(planned);
    if (points.size() != 1)
      throw Error("the matrix has " + std::to_string(points.size()) +
                      " points; building several images in one run is not implemented yet: choose one "
                      "point with --set KEY=VALUE",
                  kExitUsage);
    recipe = resolve::instantiate(planned.recipe, points.front());
    variables = resolve::point_variables(planned.recipe, points.front());
    stack = points.front().stack;
    point = args.has("--locked") ? locked_point_inputs(planned, points.front()) : point_inputs(points.front());
    if (args.has("--locked")) base_lock = locked_base(planned, points.front());  // from: the pinned digest
  }

  BuildOptions o;
  o.variables = variables;
  o.point = point;
  o.labels = stack_labels(recipe, stack ? &*stack : nullptr);  // pipeline/labels.hpp
  o.base.session = registry_session_options(args);  // from: a base image (pulled with --creds ...)
  o.base.locked = base_lock;
  std::string format = args.get("--format").value_or("oci");
  if (format == "oci")
    o.format = OutputFormat::OciLayout;
  else if (format == "docker-archive")
    o.format = OutputFormat::DockerArchive;
  else
    throw Error("--format wants oci or docker-archive, not '" + format + "'", kExitUsage);
  auto out = args.get("-o") ? args.get("-o") : args.get("--output");
  o.output = out ? fs::path(*out)
                 : (o.format == OutputFormat::OciLayout ? fs::path("out") / recipe.stack : fs::path(recipe.stack + ".tar"));
  o.layer.compression = parse_compression(args.get("--compression").value_or("gzip"));
  if (auto level = args.integer("--level", 0, 22)) o.layer.level = static_cast<int>(*level);
  if (o.layer.compression == Compression::Gzip && o.layer.level > 3)
    throw Error("gzip levels are 0-3 (ISA-L), not " + std::to_string(o.layer.level), kExitUsage);
  auto jobs = args.integer("-j", 1, 256);
  if (!jobs) jobs = args.integer("--jobs", 1, 256);
  if (jobs) o.layer.threads = static_cast<int>(*jobs);
  o.source_date_epoch = args.integer("--source-date-epoch", 0, INT64_MAX);
  o.tags = args.all("--tag");

  Store store = ctx.store();
  BuildResult r = build_recipe(recipe, store, o, *ctx.status);
  size_t built = 0;
  for (const auto& l : r.layers) built += l.cached ? 0 : 1;
  ctx.status->message(Level::Info, "layers: " + std::to_string(r.layers.size()) + " (" + std::to_string(built) +
                                       " built, " + std::to_string(r.layers.size() - built) + " from the cache)");
  for (const auto& w : r.warnings) ctx.status->message(Level::Warning, w);
  if (!r.base.empty()) ctx.status->result("base", r.base);
  for (const auto& img : r.images) ctx.status->result(img.tag, img.image.manifest.digest.str());
  ctx.status->result("output", o.output.string());

  // The gate: the images' tests run before anything is pushed (cli/test.cpp).
  const bool pushing = args.has("--push") || args.has("--push-to");
  std::vector<verify::VerifyReport> reports;
  gate_build(r, args, ctx, pushing, reports);

  // build --push: the finished images go to the registry (registry/).
  if (pushing) {
    std::vector<std::string> targets = args.all("--push-to");
    if (targets.empty())
      for (const auto& t : recipe.push) targets.push_back(t.value);
    if (targets.empty()) throw Error("--push: the recipe has no push: targets; give --push-to REGISTRY/REPO", kExitUsage);
    push_built_images(r, targets, args, ctx);
    attach_built_reports(r, reports, targets, args, ctx);  // the reports refer to the images
  }
  return kExitOk;
}

}  // namespace sb::cli
