#include <nlohmann/json.hpp>

#include "cli/cli.hpp"
#include "pipeline/build.hpp"
#include "util/error.hpp"

namespace sb::cli {

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
    "\n"
    "In an OCI layout the ref name of an image is the TAG part of NAME:TAG.\n"
    "Also takes the options of every command (stackbuild --help).\n";

int cmd_build(const std::vector<std::string>& argv) {
  std::vector<std::string> flags = kCommonFlags;
  std::vector<std::string> options = kCommonOptions;
  options.insert(options.end(), {"-o", "--output", "--format", "--compression", "--level", "-j", "--jobs",
                                 "--source-date-epoch"});
  Args args(argv, flags, options, {"--tag"});
  if (maybe_help(args, kBuildHelp)) return kExitOk;
  if (args.positional().size() != 1)
    throw Error("build wants one recipe file (see 'stackbuild build --help')", kExitUsage);

  Context ctx = make_context(args);
  Recipe recipe = load_recipe(args.positional()[0]);

  BuildOptions o;
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
  return kExitOk;
}

}  // namespace sb::cli
