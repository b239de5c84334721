#include "cli/cli.hpp"
#include "pipeline/registry_cache.hpp"
#include "pipeline/run_build.hpp"
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
    "  --compression ALGO       gzip (default), zstd, estargz, zstd:chunked (layers that clients\n"
    "                           can fetch file by file; docs/layers.md) or none\n"
    "  --level N                compression level: gzip, estargz 0-3 (ISA-L; default 2), zstd,\n"
    "                           zstd:chunked 1-19 (default 3)\n"
    "  -j, --jobs N             matrix points built at once (default 1), fewer when the memory\n"
    "                           available does not hold N points of --memory-per-point\n"
    "  --memory-per-point SIZE  memory one point may take (default 4GiB; 0: no bound)\n"
    "  --threads N              compression threads of a layer (default: one per core, shared\n"
    "                           by the points built at once)\n"
    "  --write-ahead N          layers of an image written (tarred, compressed, hashed) at once\n"
    "                           while the build goes on to fetch and stage the layers above\n"
    "                           (default: one per 4 cores, at least 1; 0: each layer is written\n"
    "                           before the next begins). A layer that reads the ones below (apt,\n"
    "                           pip, build steps) waits for them; the bytes never change\n"
    "  --source-date-epoch N    the timestamp of the build (mtimes are clamped to it, `created` is\n"
    "                           it); default: the recipe's source_date_epoch, else $SOURCE_DATE_EPOCH,\n"
    "                           else 0\n"
    "  --tag NAME:TAG           tag the image NAME:TAG instead of the recipe's tags (repeatable;\n"
    "                           only when one point is built)\n"
    "  --push                   push the images to the recipe's push: targets when the build is done\n"
    "  --sign KEY.pem           with a push: sign each image and the index pushed, in the sigstore\n"
    "                           format, after their reports and SBOMs (see 'sign --help'); with\n"
    "                           --provenance, each provenance artifact too\n"
    "  --provenance             add each image's SLSA provenance to the layout (see below), and\n"
    "                           with a push attach it to the pushed image\n"
    "  --builder-id URI         the provenance's runDetails.builder.id (default\n"
    "                           https://stackbuild.dev/provenance/builder/local/v1): say which CI\n"
    "                           system ran the build\n"
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
    "  --fetch-ahead            with --locked, download the pinned packages, wheels and redist\n"
    "                           archives of every point, in build order, while the layers before\n"
    "                           them are built (default: each layer's when it is built). For a network\n"
    "                           slower than the build's CPU work (the main job on 2 cores: 1.25x\n"
    "                           faster at 40 MiB/s, 6% slower from a fast mirror; docs/layers.md)\n"
    "  --set KEY=VALUE          replace matrix.KEY with one value (repeatable)\n"
    "  --platform OS/ARCH       build only the points of this platform (linux/amd64, linux/arm64;\n"
    "                           --only platform=OS/ARCH); --format docker-archive takes one\n"
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
    "  --no-index               write and push no matrix index (a task of a fan-out builds one point\n"
    "                           of it; 'stackbuild merge' assembles the index, docs/cluster.md)\n"
    "  --catalog DIR            the component catalog (default: $STACKBUILD_CATALOG, else layers/\n"
    "                           beside the recipe or above it, else the built-in one)\n"
    "  --cache-from REGISTRY/REPO[:TAG]  when a layer is not in the store, take it from the build\n"
    "                           cache there if it has it (repeatable; TAG defaults to buildcache)\n"
    "  --cache-to REGISTRY/REPO[:TAG]  after the build, push the cache of every point built there\n"
    "                           (repeatable); the other points' caches there are kept\n"
    "  --cache REGISTRY/REPO[:TAG]  both: read the cache there and write it back\n"
    "  --prefetch-from LAYOUT|REGISTRY/REPO  eStargz layers: take each point's prefetch order\n"
    "                           (test --record-prefetch) from the image of its tag there rather\n"
    "                           than from the output layout (docs/partial-pulls.md)\n"
    "  --record-inputs          with --locked and a push: last, attach to each image pushed the\n"
    "                           digest of its point's inputs (recipe, lockfile pins, local files),\n"
    "                           which 'stackbuild merge' and 'cluster slurm' read (docs/cluster.md)\n"
    "  --allow-host-paths       let copy:, source: {path:} and patches: name any host path\n"
    "                           (default: only files inside the recipe's directory, or its git\n"
    "                           repository, symlinks resolved)\n"
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
    "--provenance does the same with each image's SLSA provenance: an in-toto Statement v1\n"
    "(artifactType application/vnd.in-toto+json) whose subject is the image's manifest digest\n"
    "and whose SLSA Provenance v1 predicate names what the image was built from: the recipe,\n"
    "its parents, the lockfile (--locked) and the catalog by sha256, the parameters (matrix\n"
    "point, --only, --set, --locked, ...), the base image by digest, every Debian package,\n"
    "wheel, redist archive and source tree the layers used (Package URL, download location,\n"
    "sha256), stackbuild's version, and the run (builder, invocation id, real start and end\n"
    "times, the test report and SBOM made beside the image); 'stackbuild provenance IMAGE'\n"
    "shows it (docs/provenance.md).\n"
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

OutputFormat output_format(const Args& args) {
  std::string format = args.get("--format").value_or("oci");
  if (format == "oci") return OutputFormat::OciLayout;
  if (format == "docker-archive") return OutputFormat::DockerArchive;
  throw Error("--format wants oci or docker-archive, not '" + format + "'", ErrorKind::Usage);
}

// Output, format, compression, jobs, epoch, tags, budget: how every point is built.
MatrixOptions matrix_options(const Args& args, const Recipe& recipe) {
  MatrixOptions mo;
  BuildOptions& o = mo.build;
  o.base.session = registry_session_options(args);  // from: a base image (pulled with --creds ...)
  o.format = output_format(args);
  auto out = args.get("-o") ? args.get("-o") : args.get("--output");
  o.output = out ? fs::path(*out)
                 : (o.format == OutputFormat::OciLayout ? fs::path("out") / recipe.stack : fs::path(recipe.stack + ".tar"));
  o.layer.compression = parse_compression(args.get("--compression").value_or("gzip"));
  if (auto level = args.integer("--level", 0, 22)) o.layer.level = static_cast<int>(*level);
  if (is_gzip_family(o.layer.compression) && o.layer.level > 3)
    throw Error(to_string(o.layer.compression) + " levels are 0-3 (ISA-L), not " + std::to_string(o.layer.level),
                ErrorKind::Usage);
  if (auto threads = args.integer("--threads", 1, 256)) o.layer.threads = static_cast<int>(*threads);
  if (auto ahead = args.integer("--write-ahead", 0, 64)) o.write_ahead = static_cast<size_t>(*ahead);
  auto jobs = args.integer("-j", 1, 256);
  if (!jobs) jobs = args.integer("--jobs", 1, 256);
  mo.jobs = static_cast<int>(jobs.value_or(1));
  mo.fetch_ahead = args.has("--fetch-ahead");
  if (auto m = args.get("--memory-per-point")) {
    auto bytes = parse_bytes(*m);
    if (!bytes)
      throw Error("--memory-per-point wants a size such as 4GiB or 512MiB (0: no bound), not '" + *m + "'",
                  ErrorKind::Usage);
    mo.memory_per_point = *bytes;
  }
  o.source_date_epoch = args.integer("--source-date-epoch", 0, INT64_MAX);
  o.tags = args.all("--tag");
  if (auto b = args.get("--layer-budget")) {
    o.layer_budget = parse_bytes(*b);
    if (!o.layer_budget)
      throw Error("--layer-budget wants a size such as 8GiB, 500MiB or 1000000 (bytes), not '" + *b + "'", ErrorKind::Usage);
  }
  o.allow_host_paths = args.has("--allow-host-paths");
  return mo;
}

// The registry caches (pipeline/registry_cache.hpp), named before anything is built.
void cache_references(const Args& args, BuildRequest& rq) {
  for (const auto& t : args.all("--cache")) {
    rq.cache_from.push_back(cache_reference(t, "--cache"));
    rq.cache_to.push_back(rq.cache_from.back());
  }
  for (const auto& t : args.all("--cache-from")) rq.cache_from.push_back(cache_reference(t, "--cache-from"));
  for (const auto& t : args.all("--cache-to")) rq.cache_to.push_back(cache_reference(t, "--cache-to"));
  if (auto p = args.get("--prefetch-from")) {
    if (!fs::is_directory(*p) && !is_registry_arg(*p))
      throw Error("--prefetch-from wants an OCI layout directory or REGISTRY/REPO, not '" + *p + "'", ErrorKind::Usage);
    if (is_registry_arg(*p) && !fs::is_directory(*p)) {
      auto ref = registry::Reference::parse(*p);
      if (!ref.tag.empty() || ref.digest)
        throw Error("--prefetch-from " + *p + ": name the repository only; each point's tag is looked up there",
                    ErrorKind::Usage);
    }
    rq.prefetch_from = *p;
  }
}

// --verify, --no-verify and the tests' options, as `stackbuild test` takes them.
GateOptions gate_options(const Args& args) {
  GateOptions g;
  g.verify = args.has("--verify");
  g.skip = args.has("--no-verify");
  g.verify_options.gpus = args.get("--gpus").value_or("all");
  if (auto n = args.get("--nvcc")) g.verify_options.nvcc = *n;
  if (auto f = args.get("--report")) g.report_file = *f;
  if (auto f = args.get("--junit")) g.junit_file = *f;
  return g;
}

}  // namespace

int cmd_build(const std::vector<std::string>& argv) {
  std::vector<std::string> flags = kCommonFlags;
  std::vector<std::string> options = kCommonOptions;
  flags.insert(flags.end(), {"--locked", "--strict", "--allow-host-paths", "--record-inputs", "--no-index",
                             "--fetch-ahead"});
  options.insert(options.end(), {"-o", "--output", "--format", "--compression", "--level", "-j", "--jobs",
                                 "--memory-per-point",
                                 "--threads", "--write-ahead", "--source-date-epoch", "--catalog", "--index-tag", "--layer-budget",
                                 "--platform"});
  flags.push_back("--push");  // build --push (registry/)
  flags.push_back("--insecure-policy");  // from: a base image
  options.insert(options.end(), {"--creds", "--ca-cert", "--chunk-size", "--sign", "--prefetch-from"});
  flags.insert(flags.end(), {"--verify", "--no-verify"});  // the gate (pipeline/verify_gate.hpp)
  flags.push_back("--sbom");  // pipeline/publish.hpp
  flags.push_back("--provenance");  // pipeline/provenance.hpp
  options.push_back("--builder-id");
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
  BuildRequest rq;
  rq.recipe = load_recipe(args.positional()[0]);
  rq.matrix = matrix_options(args, rq.recipe);
  cache_references(args, rq);
  rq.plan = plan_options(args);
  rq.locked = args.has("--locked");
  rq.strict = args.has("--strict");
  rq.only = args.all("--only");
  if (auto p = args.get("--platform")) {  // the points of one platform: --only platform=P
    if (platform_architecture(*p).empty())
      throw Error("--platform: '" + *p + "' is not a platform stackbuild builds for (write linux/amd64 or linux/arm64)",
                  ErrorKind::Usage);
    rq.only.push_back("platform=" + *p);
  }
  rq.index_tag = args.get("--index-tag");
  rq.no_index = args.has("--no-index");
  if (rq.no_index && rq.index_tag) throw Error("--no-index writes no index to name with --index-tag", ErrorKind::Usage);
  rq.gate = gate_options(args);
  rq.sbom = args.has("--sbom");
  rq.provenance = args.has("--provenance");
  if (auto id = args.get("--builder-id")) {
    if (!rq.provenance) throw Error("--builder-id names the builder in the provenance; give --provenance", ErrorKind::Usage);
    if (id->find(':') == std::string::npos)
      throw Error("--builder-id wants a URI (https://ci.example/runners/7), not '" + *id + "'", ErrorKind::Usage);
    rq.builder_id = *id;
  }
  rq.push = args.has("--push");
  rq.push_to = args.all("--push-to");
  if (auto key = args.get("--sign")) {
    if (!rq.pushing()) throw Error("--sign signs the images in the registry; give --push or --push-to", ErrorKind::Usage);
    if (!fs::is_regular_file(*key)) throw Error("--sign " + *key + ": no such file", ErrorKind::Usage);
    rq.sign_key = fs::absolute(*key);
  }
  rq.record_inputs = args.has("--record-inputs");
  if (rq.record_inputs && (!rq.locked || !rq.pushing()))
    throw Error("--record-inputs records what a locked build pushed; give --locked and --push or --push-to",
                ErrorKind::Usage);
  if (rq.pushing() || !rq.cache_from.empty() || !rq.cache_to.empty())
    rq.registry = push_options(args);  // -j is also the blobs sent at once

  Services services{[&] { return ctx.store(); }, [&](const verify::VerifyReport& r) { show_report(r, ctx); }};
  run_build(rq, services, *ctx.status);
  return kExitOk;
}

}  // namespace sb::cli
