#include <chrono>

#include <nlohmann/json.hpp>

#include "cli/cli.hpp"
#include "image/layout.hpp"
#include "registry/push.hpp"
#include "registry/referrers.hpp"
#include "util/error.hpp"
#include "util/file.hpp"
#include "util/process.hpp"

namespace sb::cli {

const std::vector<std::string> kRegistryOptions = {"--creds", "--ca-cert"};

const char* const kPushHelp =
    "usage: stackbuild push LAYOUT[:REF] REGISTRY/REPO[:TAG] [options]\n"
    "\n"
    "Pushes images of the OCI layout LAYOUT to a registry (OCI distribution spec): blobs the\n"
    "registry has are skipped (HEAD), blobs known to be in another repository of the same\n"
    "registry are mounted, small blobs go in one request and large ones in chunks that resume\n"
    "where the registry says the upload stands; the manifest goes last, with its exact bytes.\n"
    "The machine's registries.conf (insecure and blocked registries) and certs.d are read as\n"
    "skopeo reads them (docs/registry.md). Artifacts in the layout that refer to a pushed\n"
    "image (the SBOMs of build --sbom and sbom --add-to-layout) are pushed after it, as\n"
    "artifacts referring to it there (the referrers API, else the referrers tag).\n"
    "\n"
    "  LAYOUT:REF REG/REPO:TAG   the image named REF, tagged TAG (default: REF)\n"
    "  LAYOUT REG/REPO           every image of the layout, each tagged with its ref name\n"
    "  LAYOUT REG/REPO:TAG       with several images: all of them, and an image index over\n"
    "                            them (one entry per platform) tagged TAG\n"
    "  A REF that names an index over platforms pushes the index and every platform's image;\n"
    "  with --platform, only that platform's image, tagged TAG (default: REF).\n"
    "\n"
    "options:\n"
    "  --creds USER:PASSWORD     credentials (default: $STACKBUILD_REGISTRY_USER and\n"
    "                            $STACKBUILD_REGISTRY_PASSWORD, else the auth files of skopeo\n"
    "                            login and docker login, and their credential helpers)\n"
    "  --ca-cert FILE            trust this CA (PEM) besides the system store and certs.d\n"
    "  --insecure-registry HOST[:PORT]  allow plain HTTP and unverified TLS for HOST (repeatable;\n"
    "                            localhost and 127.0.0.1 may always use plain HTTP)\n"
    "  -j, --jobs N              blobs sent at once (default 3, at most 256; fewer when the\n"
    "                            limit on open files allows fewer)\n"
    "  --platform OS/ARCH        with LAYOUT:REF naming an index over platforms: push only the\n"
    "                            image of that platform (linux/arm64)\n"
    "  --chunk-size BYTES        bytes per PATCH of a chunked upload (default 64 MiB); blobs up\n"
    "                            to 16 MiB (or the chunk size, if smaller) go in one PUT\n"
    "Also takes the options of every command (stackbuild --help).\n";

bool is_registry_arg(const std::string& what) {
  if (fs::is_directory(what)) return false;
  auto colon = what.rfind(':');
  if (colon != std::string::npos && what.find('/', colon) == std::string::npos && fs::is_directory(what.substr(0, colon)))
    return false;  // DIR:REF
  auto slash = what.find('/');
  return slash != std::string::npos && !fs::exists(what) && !what.starts_with(".") && !what.starts_with("/") &&
         !fs::is_directory(what.substr(0, slash));
}

registry::SessionOptions registry_session_options(const Args& args) {
  registry::SessionOptions o;
  o.credentials.creds = args.get("--creds");
  o.credentials.env = current_environment();
  if (auto ca = args.get("--ca-cert")) {
    if (!fs::exists(*ca)) throw Error("--ca-cert " + *ca + ": no such file", ErrorKind::Usage);
    o.ca_file = fs::absolute(*ca);
  }
  o.insecure = args.all("--insecure-registry");
  // The machine's registries.conf, certs.d and auth files, as skopeo reads them.
  o.machine = registry::machine_registries(o.credentials.env);
  o.credentials.root = o.machine->paths().root;
  o.check_policy = !args.has("--insecure-policy");  // a flag of the commands that pull
  return o;
}

registry::PushOptions push_options(const Args& args) {
  registry::PushOptions o;
  o.session = registry_session_options(args);
  auto jobs = args.integer("-j", 1, 256);  // as build's -j, which build --push passes on
  if (!jobs) jobs = args.integer("--jobs", 1, 256);
  if (jobs) o.jobs = static_cast<int>(*jobs);
  if (auto c = args.integer("--chunk-size", 1 << 16, int64_t{1} << 40)) {
    o.chunk_size = static_cast<uint64_t>(*c);
    o.monolithic_limit = std::min(o.monolithic_limit, o.chunk_size);
  }
  return o;
}

int cmd_push(const std::vector<std::string>& argv) {
  std::vector<std::string> options = kCommonOptions;
  options.insert(options.end(), {"--creds", "--ca-cert", "-j", "--jobs", "--chunk-size", "--platform"});
  Args args(argv, kCommonFlags, options, {"--insecure-registry"});
  if (maybe_help(args, kPushHelp)) return kExitOk;
  if (args.positional().size() != 2) throw Error("push wants LAYOUT[:REF] and REGISTRY/REPO[:TAG]", ErrorKind::Usage);
  std::string src = args.positional()[0];
  fs::path layout = src;
  std::string ref;
  if (!fs::is_directory(layout)) {
    auto colon = src.rfind(':');
    if (colon == std::string::npos || !fs::is_directory(src.substr(0, colon)))
      throw Error(src + " is not an OCI layout directory (LAYOUT[:REF])", ErrorKind::Usage);
    layout = src.substr(0, colon), ref = src.substr(colon + 1);
  }
  auto target = registry::Reference::parse(args.positional()[1]);
  if (target.digest) throw Error("push to a digest is not possible; give REGISTRY/REPO[:TAG]", ErrorKind::Usage);

  std::vector<registry::LayoutEntry> entries = registry::layout_entries(layout);
  if (!ref.empty()) {
    std::erase_if(entries, [&](const auto& e) { return e.ref != ref; });
    if (entries.empty()) throw Error(layout.string() + " has no image named '" + ref + "'", ErrorKind::Usage);
  }
  if (entries.empty()) throw Error(layout.string() + " holds no image", ErrorKind::Usage);
  if (auto platform = args.get("--platform")) {
    // One platform's image of REF (an index over platforms): that image alone, under TAG.
    if (ref.empty()) throw Error("--platform wants LAYOUT:REF, the tag of an index over platforms", ErrorKind::Usage);
    LayoutImage image = open_layout_image(layout, ref, nullptr, *platform, LayerDigests::LeftToCaller);
    const std::string type = nlohmann::json::parse(image.manifest_json).value("mediaType", kMediaTypeManifest);
    entries = {{ref, type, image.manifest_digest}};
  }
  std::vector<registry::TaggedManifest> images;
  for (const auto& e : entries) {
    std::string tag = e.ref.empty() ? "latest" : e.ref;
    images.push_back({tag, registry::manifest_from_layout(layout, e.media_type, e.digest)});
  }
  if (images.size() == 1 && !target.tag.empty()) images[0].tag = target.tag;
  if (images.size() > 1 && !target.tag.empty()) {  // one index over them all
    std::vector<registry::ManifestRef> ms;
    for (auto& i : images) ms.push_back(std::move(i.manifest));
    images = {{target.tag, registry::make_index(ms)}};
  }

  Context ctx = make_context(args);
  Store store = ctx.store();
  auto start = std::chrono::steady_clock::now();
  auto po = push_options(args);
  po.store = &store;
  auto r = registry::push_images(target, images, po, *ctx.status);
  registry::report_push(r, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
                        *ctx.status);

  // The layout's artifacts that refer to a pushed image (build --sbom's SBOMs)
  // go along, with the same manifests.
  for (const auto& e : entries)
    for (const auto& a : layout_referrers(layout, e.digest)) {
      auto m = nlohmann::json::parse(a.manifest_json);
      std::map<std::string, std::string> annotations;
      if (m.contains("annotations")) annotations = m["annotations"].get<std::map<std::string, std::string>>();
      std::string subject_json = read_file(layout / "blobs" / "sha256" / e.digest.hex());
      registry::Subject subject{e.media_type, e.digest, subject_json.size()};
      auto at = registry::attach_artifact(target, subject, a.artifact_type, read_file(a.file), annotations, po,
                                          *ctx.status);
      ctx.status->message(Level::Info, a.artifact_type + " artifact " + at.artifact.str() + " refers to " +
                                           e.digest.str() + " (" + at.how + ")");
    }
  return kExitOk;
}

}  // namespace sb::cli
