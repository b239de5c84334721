#include "cli/cli.hpp"
#include "image/layout.hpp"
#include "registry/pull.hpp"
#include "util/error.hpp"

namespace sb::cli {

const char* const kPullHelp =
    "usage: stackbuild pull REGISTRY/REPO[:TAG|@DIGEST] LAYOUT[:REF] [options]\n"
    "\n"
    "Pulls an image into the store and writes it into the OCI layout LAYOUT under the ref\n"
    "name REF (default: TAG, else latest). Reads OCI and Docker v2 manifests and indexes\n"
    "(manifest lists); from an index it takes the image for --platform. Every blob's digest\n"
    "is checked before it enters the store; a manifest named by digest must hash to it.\n"
    "The machine's registries.conf (its mirrors, remapped locations, insecure and blocked\n"
    "registries), certs.d and policy.json (names it rejects; signatures are not verified, so\n"
    "names it wants signed are refused) are read as skopeo reads them (docs/registry.md).\n"
    "\n"
    "options:\n"
    "  --platform OS/ARCH[/VARIANT]  the image to take from an index (default linux/amd64)\n"
    "  --creds USER:PASSWORD     credentials (default: $STACKBUILD_REGISTRY_USER and\n"
    "                            $STACKBUILD_REGISTRY_PASSWORD, else the auth files of skopeo\n"
    "                            login and docker login, and their credential helpers)\n"
    "  --ca-cert FILE            trust this CA (PEM) besides the system store and certs.d\n"
    "  --insecure-registry HOST[:PORT]  allow plain HTTP and unverified TLS for HOST (repeatable)\n"
    "  -j, --jobs N              blobs fetched at once (default 3, at most 256)\n"
    "Also takes the options of every command (stackbuild --help).\n";

int cmd_pull(const std::vector<std::string>& argv) {
  std::vector<std::string> options = kCommonOptions;
  options.insert(options.end(), {"--creds", "--ca-cert", "-j", "--jobs", "--platform"});
  Args args(argv, kCommonFlags, options, {"--insecure-registry"});
  if (maybe_help(args, kPullHelp)) return kExitOk;
  if (args.positional().size() != 2) throw Error("pull wants REGISTRY/REPO[:TAG|@DIGEST] and LAYOUT[:REF]", kExitUsage);
  auto ref = registry::Reference::parse(args.positional()[0]);
  std::string dest = args.positional()[1];
  fs::path layout = dest;
  std::string name = ref.tag.empty() ? "latest" : ref.tag;
  if (auto colon = dest.rfind(':'); colon != std::string::npos && dest.find('/', colon) == std::string::npos) {
    layout = dest.substr(0, colon), name = dest.substr(colon + 1);
  }
  registry::PullOptions o;
  o.session = registry_session_options(args);
  if (auto p = args.get("--platform")) registry::parse_platform(*p, o);
  auto jobs = args.integer("-j", 1, 256);
  if (!jobs) jobs = args.integer("--jobs", 1, 256);
  if (jobs) o.jobs = static_cast<int>(*jobs);

  Context ctx = make_context(args);
  Store store = ctx.store();
  auto r = registry::pull_image(ref, store, o, *ctx.status);
  validate_tag(name);
  write_oci_layout(layout, store, {TaggedImage{"pulled:" + name, r.image}});
  ctx.status->message(Level::Info, "fetched " + human_bytes(static_cast<double>(r.bytes_fetched)) + " of blobs");
  ctx.status->result(ref.str(), r.image.manifest.digest.str());
  ctx.status->result("output", layout.string() + ":" + name);
  return kExitOk;
}

}  // namespace sb::cli
