// stackbuild provenance: the SLSA provenance kept beside an image
// (image/provenance.hpp; `build --provenance` makes it), read from its
// layout or its registry and checked to be of that image.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/cli.hpp"
#include "image/layout.hpp"
#include "image/provenance.hpp"
#include "registry/pull.hpp"
#include "util/error.hpp"
#include "util/file.hpp"

namespace sb::cli {

const char* const kProvenanceHelp =
    "usage: stackbuild provenance LAYOUT[:TAG]|REGISTRY/REPO[:TAG|@DIGEST] [options]\n"
    "\n"
    "Writes the SLSA provenance of an image, as 'build --provenance' kept it: an in-toto\n"
    "Statement v1 (JSON) whose subject is the image's manifest digest and whose predicate\n"
    "(https://slsa.dev/provenance/v1) names the recipe, the lockfile, the parameters and every\n"
    "package, wheel, archive and source tree the image was built from (docs/provenance.md).\n"
    "In a LAYOUT it is the artifact (artifactType application/vnd.in-toto+json) that refers to\n"
    "the image; in a registry, the one attached to it (the referrers API, else the referrers\n"
    "tag). Before it is written, the statement must name the image's manifest digest as a\n"
    "subject: else, or when the image has none, exit 3.\n"
    "\n"
    "options:\n"
    "  -o, --output FILE      write it to FILE (default: standard output)\n"
    "  --creds, --ca-cert, --insecure-registry  registry access, as for pull\n";

namespace {

// The statement kept beside the image `what` names, and that image's digest.
std::pair<std::string, Digest> find_statement(const std::string& what, const Args& args, Context& ctx) {
  if (is_registry_arg(what)) {
    auto ref = registry::Reference::parse(what);
    Store store = ctx.store();
    auto listing =
        registry::list_images(ref, store, registry_session_options(args), *ctx.status, {provenance::kMediaType});
    if (listing.images.size() != 1)
      throw Error(ref.str() + " names " + std::to_string(listing.images.size()) +
                      " images; name one (by its tag or digest)",
                  ErrorKind::Usage);
    const auto& image = listing.images.front();
    for (const auto& a : image.artifacts)
      if (a.type == provenance::kMediaType) return {a.file, image.manifest.digest};
    throw Error(ref.name() + "@" + image.manifest.digest.str() + " has no provenance attached", ErrorKind::Input);
  }
  if (fs::is_directory(split_layout_ref(what).first)) {
    auto [dir, ref] = split_layout_ref(what);
    Store store = ctx.store();  // a blob that is the store's own file is not hashed again
    LayoutImage img = open_layout_image(dir, ref, &store);
    for (const auto& a : layout_referrers(dir, img.manifest_digest))
      if (a.artifact_type == provenance::kMediaType) return {read_file(a.file), img.manifest_digest};  // checked
    throw Error(what + " (" + img.manifest_digest.str() + ") has no provenance in its layout (build --provenance)",
                ErrorKind::Input);
  }
  throw Error("provenance: '" + what + "' is neither an OCI layout nor a registry reference", ErrorKind::Usage);
}

}  // namespace

int cmd_provenance(const std::vector<std::string>& argv) {
  std::vector<std::string> options = kCommonOptions;
  options.insert(options.end(), {"-o", "--output", "--creds", "--ca-cert"});
  Args args(argv, kCommonFlags, options, {"--insecure-registry"});
  if (maybe_help(args, kProvenanceHelp)) return kExitOk;
  if (args.positional().size() != 1)
    throw Error("provenance wants one LAYOUT[:TAG] or REGISTRY/REPO[:TAG|@DIGEST]", ErrorKind::Usage);
  auto out = args.get("-o") ? args.get("-o") : args.get("--output");
  if (!out && (args.has("--json") || args.get("--progress") == "json"))
    throw Error("JSON progress goes to standard output; give -o FILE for the provenance", ErrorKind::Usage);
  Context ctx = make_context(args);
  auto [text, image] = find_statement(args.positional()[0], args, ctx);
  try {
    provenance::check_statement_of(text, image);
  } catch (Error& e) {
    e.add_trace("while checking the provenance of " + args.positional()[0]);
    throw;
  }
  if (out) {
    write_file_atomic(*out, text);
    ctx.status->result("provenance", *out);
  } else {
    fputs(text.c_str(), stdout);
  }
  return kExitOk;
}

}  // namespace sb::cli
