#include <nlohmann/json.hpp>

#include "cli/cli.hpp"
#include "pipeline/apt_layer.hpp"
#include "pipeline/pip_layer.hpp"
#include "pipeline/redist_layer.hpp"
#include "pipeline/build.hpp"
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
    "  --locked                 refuse to build unless RECIPE.lock exists and matches what the\n"
    "                           recipe resolves to now (see 'stackbuild lock'); says what changed\n"
    "  --set KEY=VALUE          replace matrix.KEY with one value (repeatable)\n"
    "  --catalog DIR            the component catalog (default: $STACKBUILD_CATALOG, else layers/\n"
    "                           beside the recipe or above it, else the built-in one)\n"
    "\n"
    "In an OCI layout the ref name of an image is the TAG part of NAME:TAG.\n"
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
  Args args(argv, flags, options, {"--tag", "--set", "--push-to", "--insecure-registry"});
  if (maybe_help(args, kBuildHelp)) return kExitOk;
  if (args.positional().size() != 1)
    throw Error("build wants one recipe file (see 'stackbuild build --help')", kExitUsage);

  Context ctx = make_context(args);
  Recipe recipe = load_recipe(args.positional()[0]);
  std::map<std::string, std::string> variables;  // the point's ${vars}, for build steps
  std::string apt_lock;                          // --locked: the lockfile's apt packages
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
    if (args.has("--locked")) apt_lock = locked_apt(planned, points.front());  // apt: the pinned .debs
  }

  BuildOptions o;
  o.variables = variables;
  o.apt_lock = apt_lock;
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
  for (const auto& img : r.images) ctx.status->result(img.tag, img.image.manifest.digest.str());
  ctx.status->result("output", o.output.string());

  // build --push: the finished images go to the registry (registry/).
  if (args.has("--push") || args.has("--push-to")) {
    std::vector<std::string> targets = args.all("--push-to");
    if (targets.empty())
      for (const auto& t : recipe.push) targets.push_back(t.value);
    if (targets.empty()) throw Error("--push: the recipe has no push: targets; give --push-to REGISTRY/REPO", kExitUsage);
    push_built_images(r, targets, args, ctx);
  }
  return kExitOk;
}

}  // namespace sb::cli
