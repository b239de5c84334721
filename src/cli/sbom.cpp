// stackbuild sbom: an image's software bill of materials (image/sbom.hpp),
// written out, added to its layout, or attached to it in a registry.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/cli.hpp"
#include "image/layout.hpp"
#include "image/sbom.hpp"
#include "pipeline/publish.hpp"
#include "registry/pull.hpp"
#include "registry/referrers.hpp"
#include "util/error.hpp"
#include "util/file.hpp"

namespace sb::cli {

using json = nlohmann::json;

const char* const kSbomHelp =
    "usage: stackbuild sbom LAYOUT[:TAG]|REGISTRY/REPO[:TAG|@DIGEST] [options]\n"
    "\n"
    "Writes an image's software bill of materials, an SPDX 2.3 JSON document (or CycloneDX 1.5\n"
    "with --format cyclonedx): the image (its manifest digest and a pkg:oci Package URL) and\n"
    "every package found in it, each with its version, supplier, declared license (where the\n"
    "package states an SPDX one) and Package URL:\n"
    "  - Debian and Ubuntu packages, from dpkg's status (and distroless' status.d/);\n"
    "  - Alpine packages, from apk's database;\n"
    "  - Python projects, from *.dist-info and *.egg-info in site- and dist-packages (wheels\n"
    "    such as torch and NVIDIA's nvidia-cudnn-cu12 among them);\n"
    "  - CUDA toolkit components, from /usr/local/cuda*/version.json, and cuDNN and NCCL from\n"
    "    their version headers;\n"
    "  - source trees a layer was compiled from or keeps (NGC's /opt/pytorch), from the image's\n"
    "    dev.stackbuild.source.* labels: where each came from (git URL and commit, archive URL\n"
    "    and sha256) and where the image keeps it;\n"
    "with DEPENDS_ON between packages whose Depends or Requires-Dist name others of the image,\n"
    "and GENERATED_FROM each source tree a layer was compiled from.\n"
    "The layers are read, not unpacked, with their whiteouts; what each holds is kept in the\n"
    "store, so a layer is read once. The same image always gives the same document, wherever\n"
    "it is read from: its time is the image's created time, and the image is named TITLE:TAG\n"
    "(its org.opencontainers.image.title annotation, the recipe's stack, and the tag or ref\n"
    "name it is read under), else as given.\n"
    "A REGISTRY/REPO reference is pulled into the store first.\n"
    "\n"
    "options:\n"
    "  --format spdx|cyclonedx  SPDX 2.3 JSON (default), or CycloneDX 1.5 JSON: the image as\n"
    "                         metadata.component, the packages as components with the same\n"
    "                         purls, suppliers and licenses, and the same graph as dependencies\n"
    "  -o, --output FILE      write the document to FILE (default: standard output)\n"
    "  --add-to-layout        with LAYOUT: also add it there as an artifact that refers to the\n"
    "                         image (artifactType application/spdx+json, as `build --sbom` does,\n"
    "                         or application/vnd.cyclonedx+json; one of each per image);\n"
    "                         `stackbuild push` sends such artifacts along with their image\n"
    "  --attach REGISTRY/REPO push it there as an OCI artifact whose subject is the image (which\n"
    "                         must be in that repository), as test --attach does for reports\n"
    "  --diff OLD             instead of the document, what changed since the image OLD (a\n"
    "                         LAYOUT[:TAG] or REGISTRY/REPO[:TAG]), for release notes: a Markdown\n"
    "                         table of the packages added, removed and of another version, and\n"
    "                         a count of those unchanged. A registry's image with an SBOM\n"
    "                         attached is read from that SBOM, without pulling it\n"
    "  --creds, --ca-cert, --insecure-registry  registry access, as for push\n"
    "  --insecure-policy      pull REF whatever policy.json says (as for pull)\n";

namespace {

struct SbomTarget {
  std::string name;
  Digest manifest;
  std::string manifest_json;
  std::string config_json;
  std::vector<std::pair<Digest, fs::path>> layers;
};

// The image `what` names: a layout's (its directory in *layout) or a
// registry's, pulled into the store.
SbomTarget open_target(const std::string& what, const Args& args, Context& ctx, const Store& store,
                       std::optional<fs::path>* layout) {
  if (is_registry_arg(what)) {
    if (layout && args.has("--add-to-layout"))
      throw Error("--add-to-layout wants a LAYOUT, not a registry reference", ErrorKind::Usage);
    auto ref = registry::Reference::parse(what);
    registry::PullOptions o;
    o.session = registry_session_options(args);
    auto pulled = registry::pull_image(ref, store, o, *ctx.status);
    std::vector<std::pair<Digest, fs::path>> layers;
    for (const auto& l : pulled.image.layers) layers.emplace_back(l.digest, store.blob_path(l.digest));
    return {sbom::sbom_name(pulled.image.manifest_json, ref.tag, ref.str()), pulled.image.manifest.digest,
            pulled.image.manifest_json, pulled.image.config_json, layers};
  }
  if (fs::is_directory(split_layout_ref(what).first)) {
    auto [dir, ref] = split_layout_ref(what);
    LayoutImage img = open_layout_image(dir, ref, &store);
    if (layout) *layout = dir;
    std::vector<std::pair<Digest, fs::path>> layers;
    json m = json::parse(img.manifest_json);
    for (size_t i = 0; i < img.layer_blobs.size(); ++i)
      layers.emplace_back(Digest::parse(m.at("layers").at(i).at("digest").get<std::string>()), img.layer_blobs[i]);
    return {sbom::sbom_name(img.manifest_json, img.ref, what), img.manifest_digest, img.manifest_json, img.config_json,
            layers};
  }
  throw Error("sbom: '" + what + "' is neither an OCI layout nor a registry reference", ErrorKind::Usage);
}

sbom::Contents contents_of(const SbomTarget& t, const Store& store) {
  try {
    auto info = sbom::image_info(t.name, t.manifest, t.config_json);
    return sbom::image_contents(store, info, t.layers);
  } catch (Error& e) {
    e.add_trace("while reading the packages of " + t.name);
    throw;
  }
}

// One side of --diff, named as its SBOM names it: a layout's image read from
// its layers; a registry's from the SBOM attached to it when the reference
// names one image that has one (no layer is pulled), else pulled and read.
std::pair<std::string, sbom::Contents> diff_side(const std::string& what, const Args& args, Context& ctx,
                                                 const Store& store) {
  if (is_registry_arg(what)) {
    auto ref = registry::Reference::parse(what);
    auto listing = registry::list_images(ref, store, registry_session_options(args), *ctx.status,
                                         {sbom::kSpdxMediaType, sbom::kCycloneDxMediaType});
    if (listing.images.size() == 1) {
      std::string doc = attached_sbom(listing.images[0], ref.name(), ctx);
      if (!doc.empty())
        return {sbom::sbom_name(listing.images[0].manifest.bytes, ref.tag, ref.str()), sbom::contents_from_document(doc)};
    }
  }
  SbomTarget t = open_target(what, args, ctx, store, nullptr);
  return {t.name, contents_of(t, store)};
}

}  // namespace

int cmd_sbom(const std::vector<std::string>& argv) {
  std::vector<std::string> options = kCommonOptions;
  options.insert(options.end(), {"-o", "--output", "--attach", "--creds", "--ca-cert", "--format", "--diff"});
  std::vector<std::string> flags = kCommonFlags;
  flags.insert(flags.end(), {"--add-to-layout", "--insecure-policy"});
  Args args(argv, flags, options, {"--insecure-registry"});
  if (maybe_help(args, kSbomHelp)) return kExitOk;
  if (args.positional().size() != 1) throw Error("sbom wants one LAYOUT[:TAG] or REGISTRY/REPO[:TAG]", ErrorKind::Usage);
  std::string fmt = args.get("--format").value_or("spdx");
  if (fmt != "spdx" && fmt != "cyclonedx")
    throw Error("--format wants spdx or cyclonedx, not '" + fmt + "'", ErrorKind::Usage);
  const auto format = fmt == "spdx" ? sbom::Format::Spdx : sbom::Format::CycloneDx;
  const char* artifact_type = fmt == "spdx" ? sbom::kSpdxMediaType : sbom::kCycloneDxMediaType;
  auto out = args.get("-o") ? args.get("-o") : args.get("--output");
  if (!out && (args.has("--json") || args.get("--progress") == "json"))
    throw Error("JSON progress goes to standard output; give -o FILE for the SBOM", ErrorKind::Usage);
  Context ctx = make_context(args);
  Store store = ctx.store();

  const std::string& what = args.positional()[0];
  if (auto old = args.get("--diff")) {  // release notes: what changed since OLD
    if (args.has("--add-to-layout") || args.get("--attach") || args.get("--format"))
      throw Error("--diff prints a comparison; it takes no --format, --add-to-layout or --attach", ErrorKind::Usage);
    auto before = diff_side(*old, args, ctx, store);
    auto after = diff_side(what, args, ctx, store);
    std::string text = sbom::contents_diff(before.second, after.second, before.first, after.first);
    if (out) {
      write_file_atomic(*out, text);
      ctx.status->result("diff", *out);
    } else {
      fputs(text.c_str(), stdout);
    }
    return kExitOk;
  }

  std::optional<fs::path> layout;
  SbomTarget t = open_target(what, args, ctx, store, &layout);
  std::string doc;
  try {
    doc = sbom::image_sbom(store, t.name, t.manifest, t.config_json, t.layers, format);
  } catch (Error& e) {
    e.add_trace("while reading the SBOM of " + t.name);
    throw;
  }
  std::string media_type = json::parse(t.manifest_json).value("mediaType", kMediaTypeManifest);
  Descriptor subject{media_type, t.manifest, t.manifest_json.size(), {}, {}};
  const auto& annotations = sbom::sbom_annotations(format);
  if (out) {
    write_file_atomic(*out, doc);
    ctx.status->result("sbom", *out);
  } else {
    fputs(doc.c_str(), stdout);
  }
  if (args.has("--add-to-layout")) {
    Digest d = add_layout_artifact(*layout, artifact_type, doc, subject, annotations);
    ctx.status->result("sbom artifact", d.str());
  }
  if (auto target = args.get("--attach"))
    attach_sbom(*target, t.name, subject, artifact_type, doc, annotations, registry_session_options(args), store,
                *ctx.status);
  return kExitOk;
}

}  // namespace sb::cli
