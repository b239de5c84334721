#include <chrono>
#include <memory>
#include <set>

#include <nlohmann/json.hpp>

#include "cli/cli.hpp"
#include "pipeline/base_image.hpp"
#include "pipeline/build.hpp"
#include "pipeline/labels.hpp"
#include "pipeline/lock.hpp"
#include "pipeline/matrix_build.hpp"
#include "pipeline/plan.hpp"
#include "pipeline/registry_cache.hpp"
#include "registry/push.hpp"
#include "registry/reference.hpp"
#include "resolve/plan.hpp"
#include "util/error.hpp"
#include "verify/gpu.hpp"

namespace sb::cli {

const char* const kBuildHelp =
    "usage: stackbuild build RECIPE.yaml [options]\n"
    "       stackbuild RECIPE.yaml [options]\n"
    "\n"
    "Builds the image of every point of the recipe's matrix (reusing cached layers from the\n"
    "store: a layer the points share is built once), then writes them all to one output, each\n"
    "under its tags, and prints a summary. The same recipe and inputs give the same digests on\n"
    "any machine, whatever --jobs and --threads are.\n"
    "\n"
    "options:\n"
    "  -o, --output PATH        where to write: an OCI layout directory (default out/<stack>),\n"
    "                           or with --format docker-archive a tarball (default <stack>.tar)\n"
    "  --format FORMAT          oci (an OCI image layout; several tags share one layout) or\n"
    "                           docker-archive (what 'docker load' and skopeo's docker-archive: read)\n"
    "  --compression ALGO       gzip (default), zstd or none\n"
    "  --level N                compression level: gzip 0-3 (ISA-L; default 2), zstd 1-19 (default 3)\n"
    "  -j, --jobs N             matrix points built at once (default 1)\n"
    "  --threads N              compression threads of a layer (default: one per core)\n"
    "  --source-date-epoch N    the timestamp of the build (mtimes are clamped to it, `created` is\n"
    "                           it); default: the recipe's source_date_epoch, else $SOURCE_DATE_EPOCH,\n"
    "                           else 0\n"
    "  --tag NAME:TAG           tag the image NAME:TAG instead of the recipe's tags (repeatable;\n"
    "                           only when one point is built)\n"
    "  --push                   push the images to the recipe's push: targets when the build is done\n"
    "  --push-to REGISTRY/REPO[:TAG]  push the images there instead (repeatable; see 'push --help';\n"
    "                           --creds, --ca-cert, --insecure-registry, --chunk-size as for push).\n"
    "                           With several points, TAG names the matrix index and each image\n"
    "                           keeps its ref name\n"
    "  --verify                 test the images after writing them (as 'stackbuild test' does), even\n"
    "                           without --push; exit 1 when a check or test failed\n"
    "  --no-verify              push without testing the images first\n"
    "  --gpus SEL, --report FILE, --junit FILE, --nvcc PATH  for the tests, as for 'stackbuild test'\n"
    "  --locked                 refuse to build unless RECIPE.lock exists and matches what the\n"
    "                           recipe resolves to now (see 'stackbuild lock'); says what changed\n"
    "  --set KEY=VALUE          replace matrix.KEY with one value (repeatable)\n"
    "  --only KEY=VALUE         build only the points where ${KEY} is VALUE (repeatable: values of\n"
    "                           one KEY are alternatives, different KEYs must all match); the\n"
    "                           matrix stays as it is\n"
    "  --strict                 exit 4, building nothing, when a chosen point is unsatisfiable\n"
    "                           (default: report it and build the others)\n"
    "  --layer-budget SIZE      split a layer with more content than SIZE (8GiB, 500MiB, bytes)\n"
    "                           into several: a copy or build-step layer by top-level path, a pip\n"
    "                           layer by distribution, an apt layer by package, a redist layer by\n"
    "                           component (default: the recipe's layer_budget, else 8GiB; 0: never)\n"
    "  --index-tag TAG          the ref name (and pushed tag) of the matrix index (default\n"
    "                           <stack>-matrix)\n"
    "  --catalog DIR            the component catalog (default: $STACKBUILD_CATALOG, else layers/\n"
    "                           beside the recipe or above it, else the built-in one)\n"
    "  --cache-from REGISTRY/REPO[:TAG]  when a layer is not in the store, take it from the build\n"
    "                           cache there if it has it (repeatable; TAG defaults to buildcache)\n"
    "  --cache-to REGISTRY/REPO[:TAG]  after the build, push the cache of every point built there\n"
    "                           (repeatable); the other points' caches there are kept\n"
    "  --cache REGISTRY/REPO[:TAG]  both: read the cache there and write it back\n"
    "  --allow-host-paths       let copy: read any host path (default: only files inside the\n"
    "                           recipe's directory, or its git repository, symlinks resolved)\n"
    "\n"
    "In an OCI layout the ref name of an image is the TAG part of NAME:TAG. When the matrix has\n"
    "more than one point, the layout also holds an image index over the points built, under\n"
    "--index-tag: per point its manifest and platform, with the annotations dev.stackbuild.point,\n"
    "dev.stackbuild.tags, dev.stackbuild.matrix.<key> and dev.stackbuild.version.<component>.\n"
    "A failed point stops the run (no further point starts) and nothing is written; the error\n"
    "names the point, the layer and the step.\n"
    "Before --push or --push-to pushes anything, each image is verified: the static checks, its\n"
    "recipe tests and the built-in tests of its components, run in the build sandbox (GPU tests\n"
    "skipped, never passed, without a GPU). A failure stops the build there (exit 1), naming the\n"
    "image and the test; nothing is pushed. After the push, each image's report is attached to\n"
    "it as an OCI artifact (see 'stackbuild test --help' and docs/testing.md).\n"
    "--sbom adds each image's software bill of materials (SPDX 2.3 JSON; 'stackbuild sbom\n"
    "--help' says what it lists) to the layout as an artifact that refers to the image, and\n"
    "with --push attaches it to the pushed image.\n"
    "A recipe's from: base image is pulled first (--creds, --ca-cert, --insecure-registry\n"
    "as for push, --insecure-policy as for pull); --locked builds from the digest 'stackbuild\n"
    "lock' recorded.\n"
    "A shared library a layer holds while a layer below has the same soname (libcublas.so.12 from\n"
    "a CUDA layer and from a wheel) is reported: a warning per copy, with paths, layers, versions\n"
    "and sizes, and a summary line. A layer's duplicates: key (else $STACKBUILD_DUPLICATE_LIBRARIES)\n"
    "says which copy wins: report (default), lower, upper or error (docs/layers.md).\n"
    "The build cache in a registry lets machines share layers: --cache-to pushes the layers and\n"
    "records of the points built, --cache-from fetches a layer the store lacks (its digest,\n"
    "diff_id and size checked) instead of building it; a cache that is missing or unreadable\n"
    "is a warning (docs/cache.md).\n"
    "Also takes the options of every command (stackbuild --help).\n";

namespace {

// Points i and j may not share a ref name in one layout, nor take the index's.
void check_ref_names(const std::vector<MatrixPoint>& points, const std::string& index_ref) {
  std::map<std::string, std::string> owner;  // ref name -> the point's label
  for (const auto& p : points)
    for (const auto& t : p.recipe.tags) {
      std::string ref = layout_ref_name(t);
      std::string who = p.id.empty() ? t : p.id;
      auto [it, fresh] = owner.emplace(ref, who);
      if (!fresh && it->second != who)
        throw Error("two matrix points would have the ref name '" + ref + "' in one OCI layout: " + it->second +
                        " and " + who + "; make the TAG parts of their tags differ (e.g. ${cuda})",
                    ErrorKind::Input);
    }
  if (!index_ref.empty() && owner.count(index_ref))
    throw Error("the matrix index's ref name '" + index_ref + "' is also the tag of " + owner[index_ref] +
                    "; choose another with --index-tag",
                ErrorKind::Usage);
}

}  // namespace

int cmd_build(const std::vector<std::string>& argv) {
  std::vector<std::string> flags = kCommonFlags;
  std::vector<std::string> options = kCommonOptions;
  flags.insert(flags.end(), {"--locked", "--strict", "--allow-host-paths"});
  options.insert(options.end(), {"-o", "--output", "--format", "--compression", "--level", "-j", "--jobs",
                                 "--threads", "--source-date-epoch", "--catalog", "--index-tag", "--layer-budget"});
  flags.push_back("--push");  // build --push (registry/)
  flags.push_back("--insecure-policy");  // from: a base image
  options.insert(options.end(), {"--creds", "--ca-cert", "--chunk-size"});
  flags.insert(flags.end(), {"--verify", "--no-verify"});  // the gate (cli/test.cpp)
  flags.push_back("--sbom");  // cli/sbom.cpp
  options.insert(options.end(), {"--gpus", "--report", "--junit", "--nvcc"});
  Args args(argv, flags, options,
            {"--tag", "--set", "--only", "--push-to", "--insecure-registry", "--cache", "--cache-from", "--cache-to"});
  if (maybe_help(args, kBuildHelp)) return kExitOk;
  if (args.positional().size() != 1)
    throw Error("build wants one recipe file (see 'stackbuild build --help')", ErrorKind::Usage);
  if (auto g = args.get("--gpus"))
    verify::check_gpu_selection(*g);  // before the build, not after it
  check_report_files(args);

  Context ctx = make_context(args);
  Recipe recipe = load_recipe(args.positional()[0]);

  MatrixOptions mo;
  BuildOptions& o = mo.build;
  o.base.session = registry_session_options(args);  // from: a base image (pulled with --creds ...)
  std::string format = args.get("--format").value_or("oci");
  if (format == "oci")
    o.format = OutputFormat::OciLayout;
  else if (format == "docker-archive")
    o.format = OutputFormat::DockerArchive;
  else
    throw Error("--format wants oci or docker-archive, not '" + format + "'", ErrorKind::Usage);
  auto out = args.get("-o") ? args.get("-o") : args.get("--output");
  o.output = out ? fs::path(*out)
                 : (o.format == OutputFormat::OciLayout ? fs::path("out") / recipe.stack : fs::path(recipe.stack + ".tar"));
  o.layer.compression = parse_compression(args.get("--compression").value_or("gzip"));
  if (auto level = args.integer("--level", 0, 22)) o.layer.level = static_cast<int>(*level);
  if (o.layer.compression == Compression::Gzip && o.layer.level > 3)
    throw Error("gzip levels are 0-3 (ISA-L), not " + std::to_string(o.layer.level), ErrorKind::Usage);
  if (auto threads = args.integer("--threads", 1, 256)) o.layer.threads = static_cast<int>(*threads);
  auto jobs = args.integer("-j", 1, 256);
  if (!jobs) jobs = args.integer("--jobs", 1, 256);
  mo.jobs = static_cast<int>(jobs.value_or(1));
  o.source_date_epoch = args.integer("--source-date-epoch", 0, INT64_MAX);
  o.tags = args.all("--tag");
  if (auto b = args.get("--layer-budget")) {
    o.layer_budget = parse_bytes(*b);
    if (!o.layer_budget)
      throw Error("--layer-budget wants a size such as 8GiB, 500MiB or 1000000 (bytes), not '" + *b + "'", ErrorKind::Usage);
  }  o.allow_host_paths = args.has("--allow-host-paths");


  // The registry caches (pipeline/registry_cache.hpp), named before anything is built.
  std::vector<registry::Reference> cache_from, cache_to;
  for (const auto& t : args.all("--cache")) {
    cache_from.push_back(cache_reference(t, "--cache"));
    cache_to.push_back(cache_from.back());
  }
  for (const auto& t : args.all("--cache-from")) cache_from.push_back(cache_reference(t, "--cache-from"));
  for (const auto& t : args.all("--cache-to")) cache_to.push_back(cache_reference(t, "--cache-to"));

  // The points to build: the plan's, or the recipe as written.
  std::set<std::string> matrix_ids;  // every point of the matrix, for --cache-to
  std::vector<MatrixPoint> points;
  std::vector<std::vector<std::string>> push_of;  // each point's push: targets
  bool matrix = false;                             // more than one point: an index over them
  if (needs_plan(recipe) || args.has("--locked") || args.has("--set") || args.has("--catalog") || args.has("--only")) {
    Planned planned = plan_recipe(recipe, plan_options(args));
    if (args.has("--locked")) check_lock(planned);
    const auto& all = planned.plan.points;
    for (const auto& p : all) matrix_ids.insert(p.point.id());
    if (planned.plan.unsatisfiable() == all.size())
      throw Error(unsatisfiable_report(planned.plan), ErrorKind::Unsatisfiable);
    std::vector<size_t> chosen;
    if (args.has("--only"))
      chosen = select_points(planned.recipe, planned.plan, args.all("--only"));
    else
      for (size_t i = 0; i < all.size(); ++i) chosen.push_back(i);
    resolve::Plan picked = planned.plan;  // the chosen points, for the report
    picked.points.clear();
    for (size_t i : chosen) picked.points.push_back(all[i]);
    if (size_t bad = picked.unsatisfiable()) {
      if (args.has("--strict") || bad == picked.points.size())
        throw Error((args.has("--strict") ? "--strict: " : "") + unsatisfiable_report(picked) +
                        "\nnothing was built",
                    ErrorKind::Unsatisfiable);
      ctx.status->message(Level::Warning, unsatisfiable_report(picked) + "\nthey are skipped; building the other " +
                                              std::to_string(picked.points.size() - bad));
      for (const auto& p : picked.points)
        if (!p.stack) ctx.status->event("point_skipped", {{"point", p.point.id()}, {"reason", "unsatisfiable"}});
    }
    for (const auto& p : picked.points) {
      if (!p.stack) continue;
      points.push_back(matrix_point(planned, p));
      if (args.has("--locked")) {
        points.back().inputs = locked_point_inputs(planned, p);  // apt, pip, redist: the pinned files
        points.back().base_lock = locked_base(planned, p);       // from: the pinned digest
      }
      push_of.push_back(p.push);
    }
    matrix = all.size() > 1;
  } else {
    matrix_ids.insert("");
    MatrixPoint only;
    only.recipe = recipe;
    only.labels = stack_labels(recipe, nullptr);  // pipeline/labels.hpp
    points.push_back(std::move(only));
    std::vector<std::string> push;
    for (const auto& t : recipe.push) push.push_back(t.value);
    push_of.push_back(push);
  }
  if (!o.tags.empty() && points.size() > 1)
    throw Error("--tag names one image, and this run builds " + std::to_string(points.size()) +
                    " points; give the recipe's tags: ${vars} (e.g. ${cuda}) or choose one point with --only",
                ErrorKind::Usage);
  if (!o.tags.empty())
    for (auto& p : points) p.recipe.tags = o.tags;
  if (matrix) {
    mo.index_ref = args.get("--index-tag").value_or(recipe.stack + "-matrix");
    try {
      validate_tag(mo.index_ref);
    } catch (Error& e) {
      throw Error("--index-tag: " + std::string(e.what()), ErrorKind::Usage);
    }
  }
  if (o.format == OutputFormat::OciLayout) check_ref_names(points, mo.index_ref);
  if (args.has("--sbom") && o.format != OutputFormat::OciLayout)
    throw Error("--sbom goes into an OCI layout, and --format docker-archive writes none; build a layout, or run "
                "'stackbuild sbom' on one",
                ErrorKind::Usage);

  Store store = ctx.store();
  if (points.size() > 1)
    ctx.status->message(Level::Info, "building " + std::to_string(points.size()) + " matrix points, " +
                                         std::to_string(std::min<size_t>(mo.jobs, points.size())) + " at a time");
  std::unique_ptr<RegistryCache> remote;
  if (!cache_from.empty()) {
    auto po = push_options(args, store);
    remote = std::make_unique<RegistryCache>(cache_from, po.session, *ctx.status, po.jobs);
    o.cache_from = remote.get();
  }
  MatrixResult r = build_matrix(points, store, mo, *ctx.status);
  for (const auto& p : r.points)
    if (p.built) {
      for (const auto& w : p.built->warnings) ctx.status->message(Level::Warning, w);
      if (!p.built->base.empty()) ctx.status->result("base", p.built->base);
    }

  // The gate: the images' tests run before anything is pushed (cli/test.cpp);
  // each point's counts go into the summary.
  const bool pushing = args.has("--push") || args.has("--push-to");
  std::vector<std::vector<verify::VerifyReport>> reports(r.points.size());
  std::optional<Error> gate_failure;
  if (!r.failure) gate_failure = gate_build(r, args, ctx, pushing, reports);
  // The gate's reports go into the layout beside their images, as `test
  // --add-to-layout` puts them (`notes` reads them; a failed one says what failed).
  if (o.format == OutputFormat::OciLayout)
    for (size_t i = 0; i < r.points.size() && i < reports.size(); ++i) {
      if (!r.points[i].built) continue;
      auto subjects = report_subjects(*r.points[i].built);
      for (size_t k = 0; k < reports[i].size() && k < subjects.size(); ++k)
        add_report_to_layout(o.output, reports[i][k], subjects[k], ctx);
    }
  std::string table = summary_table(r);
  ctx.status->message(Level::Info, "summary (" + std::to_string(r.points.size()) +
                                       (r.points.size() == 1 ? " point, " : " points, ") +
                                       std::to_string(r.seconds).substr(0, 5) + " s):\n" +
                                       table.substr(0, table.empty() ? 0 : table.size() - 1));
  ctx.status->event("summary", summary_json(r));
  if (r.failure) std::rethrow_exception(r.failure);
  // --cache-to: what was built goes to the registry cache even when a test
  // failed, so that the run after the fix starts from it.
  if (!cache_to.empty()) {
    std::vector<PointCache> caches;
    for (const auto& p : r.points)
      if (p.built) caches.push_back({recipe.stack, p.id, cache_entries(p.built->layers, store)});
    auto po = push_options(args, store);
    for (const auto& ref : cache_to) {
      auto start = std::chrono::steady_clock::now();
      CacheExport done = export_cache(ref, caches, matrix_ids, store, po, *ctx.status);
      ctx.status->message(Level::Info, "cache to " + ref.str() + ": " + counted(caches.size(), "point", "points") +
                                           " written, " + std::to_string(done.points_kept) + " kept; blobs: " +
                                           std::to_string(done.push.blobs_sent) + " sent (" +
                                           human_bytes(static_cast<double>(done.push.bytes_sent)) + "), " +
                                           std::to_string(done.push.blobs_mounted) + " mounted, " +
                                           std::to_string(done.push.blobs_present) + " already there, in " +
                                           std::to_string(seconds_since(start)).substr(0, 4) + " s");
      ctx.status->result("cache " + ref.str(), done.index.str());
    }
  }
  if (gate_failure) throw *gate_failure;
  for (const auto& p : r.points)
    for (const auto& img : p.built->images) ctx.status->result(img.tag, img.image.manifest.digest.str());
  if (r.index) ctx.status->result(r.index->ref + " (matrix index)", r.index->digest.str());
  ctx.status->result("output", o.output.string());

  // --sbom: each image's SBOM into the layout, beside the image it refers to.
  std::vector<std::vector<SbomOf>> sboms(r.points.size());
  if (args.has("--sbom")) sboms = add_built_sboms(r, o.output, store, ctx);

  // build --push: the finished images go to the registry (registry/).
  if (args.has("--push") || args.has("--push-to")) {
    std::map<std::string, std::string> index_tags;  // REGISTRY/REPO -> the index's tag there
    if (args.has("--push-to")) {
      std::vector<std::string> targets;
      for (const auto& t : args.all("--push-to")) {
        auto ref = registry::Reference::parse(t);
        if (ref.digest) throw Error("--push-to " + t + ": push to a digest is not possible", ErrorKind::Usage);
        if (r.index && !ref.tag.empty()) {  // TAG names the index; each image keeps its ref names
          index_tags[ref.name()] = ref.tag;
          targets.push_back(ref.name());
        } else {
          targets.push_back(t);
        }
      }
      for (auto& p : push_of) p = targets;
    }
    bool any = false;
    for (const auto& p : push_of) any = any || !p.empty();
    if (!any) throw Error("--push: the recipe has no push: targets; give --push-to REGISTRY/REPO", ErrorKind::Usage);
    push_built_images(r, push_of, index_tags, args, ctx);
    attach_built_reports(r, reports, push_of, args, ctx);  // the reports refer to the images
    attach_built_sboms(sboms, push_of, args, ctx);
  }
  return kExitOk;
}

}  // namespace sb::cli
