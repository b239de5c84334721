// stackbuild notes: release notes of a layout's images (image/notes.hpp),
// rendered from a Mustache template.
#include <cstdio>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "cli/cli.hpp"
#include "image/notes.hpp"
#include "image/sbom.hpp"
#include "pipeline/matrix_build.hpp"
#include "registry/pull.hpp"
#include "util/error.hpp"
#include "util/file.hpp"

namespace sb::cli {

const char* const kNotesHelp =
    "usage: stackbuild notes LAYOUT|REGISTRY/REPO[:TAG] [--since OLD] [options]\n"
    "\n"
    "Writes the release notes of a release's images as Markdown: a table of every image's\n"
    "components (OS, Python, CUDA, cuDNN, NCCL, the framework: the dev.stackbuild.version.*\n"
    "labels), then for each image its tags, digest, platform and size, the driver it needs,\n"
    "the GPU architectures it is for, its packages, the tests it declares and its test report.\n"
    "The images are those of an OCI layout (what `build -o LAYOUT` wrote), or those a registry\n"
    "reference names: an image, or each image of an index (the matrix index a build pushes as\n"
    "<stack>-matrix). From a registry, the packages come from the SBOM attached to each image\n"
    "(`build --sbom --push`), and only an image without one is pulled into the store; the test\n"
    "report is the newest one attached (by its created annotation). With --since, each image\n"
    "is compared with its counterpart in the older release, a layout or a reference (the same\n"
    "tag, else the same matrix point, else the one image of the same CUDA X.Y): the components\n"
    "and packages that changed, and the images no longer built. The page comes from\n"
    "templates/release-notes.md.mustache, built into stackbuild; --template renders another\n"
    "(docs/notes.md names the fields).\n"
    "\n"
    "options:\n"
    "  --since OLD          the previous release (a layout or a registry reference), to say\n"
    "                       what changed\n"
    "  --template FILE      a Mustache template of your own instead of the built-in one\n"
    "  --data               print the data the template is rendered with (JSON), not the page\n"
    "  -o, --output FILE    write to FILE (default: standard output)\n"
    "  --only KEY=VALUE     only the images of those matrix points (repeatable: values of one\n"
    "                       KEY are alternatives, different KEYs must all match), by the point\n"
    "                       each image recorded (dev.stackbuild.point)\n"
    "  --creds, --ca-cert, --insecure-registry  registry access, as for pull\n"
    "  --insecure-policy    read from a registry whatever policy.json says (as for pull)\n";

std::string attached_sbom(const registry::ListedImage& image, const std::string& where,
                          Context& ctx) {
  const Digest& digest = image.manifest.digest;
  for (const char* type : {sbom::kSpdxMediaType, sbom::kCycloneDxMediaType}) {
    for (const auto& a : image.artifacts) {
      if (a.type != type) continue;
      std::string described;
      try {
        sbom::contents_from_document(a.file, &described);
      } catch (const Error& e) {
        ctx.status->message(Level::Warning, where + "@" + a.manifest.str() + ", the SBOM of " +
                                                digest.str() + ": " + e.what() + "; not using it");
        continue;
      }
      if (!described.empty() && described != digest.str()) {
        ctx.status->message(Level::Warning, where + "@" + a.manifest.str() + " refers to " +
                                                digest.str() + " but describes " + described +
                                                "; not using it");
        continue;
      }
      return a.file;
    }
  }
  return "";
}

namespace {

// The images `text` names in a registry (registry::list_images), each with
// the SBOM and test report attached to it; an image without an SBOM is
// pulled into the store and read from its layers.
notes::Images read_registry(const std::string& text, const Args& args, Context& ctx,
                            const Store& store) {
  auto ref = registry::Reference::parse(text);
  registry::SessionOptions session = registry_session_options(args);
  auto listing =
      registry::list_images(ref, store, session, *ctx.status,
                            {sbom::kSpdxMediaType, sbom::kCycloneDxMediaType, kTestReportType});
  if (listing.images.empty())
    throw Error(ref.str() + " names no image (" + listing.top.media_type + " " +
                    listing.top.digest.str() + ": an artifact, or an index of none)",
                ErrorKind::Usage);
  notes::Images out;
  out.where = ref.str();
  auto at = [](const std::map<std::string, std::string>& m, const std::string& k) {
    auto it = m.find(k);
    return it == m.end() ? std::string() : it->second;
  };
  out.stack = at(listing.annotations, "dev.stackbuild.stack");
  out.release = at(listing.annotations, "dev.stackbuild.release");
  std::string named = ref.tag.empty() ? listing.top.digest.str() : ref.tag;
  for (auto& li : listing.images) {
    notes::Image f{
        .point = nlohmann::json::object(),
        .digest = li.manifest.digest,
        .manifest = nlohmann::json::parse(li.manifest.bytes),
        .config = notes::image_config(li.config_json, ref.name() + "@" + li.manifest.digest.str())};
    for (const auto& [k, v] : li.annotations) f.point[k] = v;
    // The ref names the build's layout gives it (from the tags it recorded);
    // else what named it, and its platform.
    f.refs = recorded_ref_names(at(li.annotations, "dev.stackbuild.tags"));
    if (f.refs.empty()) {
      std::string platform =
          at(li.platform, "os") + "/" + at(li.platform, "architecture") +
          (at(li.platform, "variant").empty() ? "" : "/" + at(li.platform, "variant"));
      f.refs.push_back(listing.images.size() == 1 || li.platform.empty()
                           ? named
                           : named + " (" + platform + ")");
    }
    std::sort(f.refs.begin(), f.refs.end());
    f.sbom = attached_sbom(li, ref.name(), ctx);
    std::string newest;
    for (const auto& a : li.artifacts)
      if (a.type == kTestReportType)
        notes::offer_report(f, newest, a.file, a.manifest,
                            at(a.annotations, "org.opencontainers.image.created"));
    if (f.sbom.empty()) {
      ctx.status->message(Level::Info,
                          ref.name() + "@" + f.digest.str() +
                              " has no SBOM attached: pulling its layers to read its packages");
      registry::Reference by_digest = ref;
      by_digest.tag.clear();
      by_digest.digest = f.digest;
      registry::PullOptions po;
      po.session = session;
      auto pulled = registry::pull_image(by_digest, store, po, *ctx.status);
      for (const auto& l : pulled.image.layers)
        f.layers.emplace_back(l.digest, store.blob_path(l.digest));
    }
    out.images.push_back(std::move(f));
  }
  std::sort(out.images.begin(), out.images.end(), [](const notes::Image& a, const notes::Image& b) {
    return a.refs.front() < b.refs.front();
  });
  return out;
}

// A layout when `text` is a directory, else a registry reference.
notes::Images read_images(const std::string& text, const Args& args, Context& ctx,
                          const Store& store) {
  if (fs::is_directory(text)) return notes::read_layout(text, &store);
  if (!is_registry_arg(text))
    throw Error(
        "'" + text +
            "' is not an OCI layout directory (nor a registry reference REGISTRY/REPO[:TAG])",
        ErrorKind::Usage);
  return read_registry(text, args, ctx, store);
}

// --only KEY=VALUE: the images whose matrix point (their dev.stackbuild.point
// annotation, "cuda=12.6 pytorch=2.7.0 ...") has it; values of one KEY are
// alternatives, different KEYs must all match, as for build.
void keep_only(notes::Images& images, const std::vector<std::string>& only) {
  if (only.empty()) return;
  const auto want = only_values(only);
  std::set<std::string> points;
  auto matches = [&](const notes::Image& image) {
    std::string point = image.point.is_object() ? image.point.value("dev.stackbuild.point", "") : "";
    points.insert(point.empty() ? "(no matrix point recorded)" : point);
    std::map<std::string, std::string> has;
    for (size_t at = 0; at < point.size();) {
      size_t end = std::min(point.find(' ', at), point.size());
      std::string kv = point.substr(at, end - at);
      if (auto eq = kv.find('='); eq != std::string::npos) has[kv.substr(0, eq)] = kv.substr(eq + 1);
      at = end + 1;
    }
    for (const auto& [key, values] : want)
      if (!has.count(key) || !values.count(has[key])) return false;
    return true;
  };
  std::erase_if(images.images, [&](const notes::Image& i) { return !matches(i); });
  if (images.images.empty()) {
    std::string all;
    for (const auto& p : points) all += "\n  " + p;
    throw Error("--only: no image of " + images.where + " is of such a point; their points:" + all, ErrorKind::Usage);
  }
}

}  // namespace

int cmd_notes(const std::vector<std::string>& argv) {
  std::vector<std::string> options = kCommonOptions;
  options.insert(options.end(),
                 {"-o", "--output", "--since", "--template", "--creds", "--ca-cert"});
  std::vector<std::string> flags = kCommonFlags;
  flags.insert(flags.end(), {"--data", "--insecure-policy"});
  Args args(argv, flags, options, {"--insecure-registry", "--only"});
  if (maybe_help(args, kNotesHelp)) return kExitOk;
  if (args.positional().size() != 1)
    throw Error("notes wants one LAYOUT or REGISTRY/REPO[:TAG]", ErrorKind::Usage);
  auto out = args.get("-o") ? args.get("-o") : args.get("--output");
  if (!out && (args.has("--json") || args.get("--progress") == "json"))
    throw Error("JSON progress goes to standard output; give -o FILE for the notes", ErrorKind::Usage);
  if (args.has("--data") && args.get("--template"))
    throw Error("--data prints the template's data; it takes no --template", ErrorKind::Usage);
  // The template is read (and checked) before the images are.
  std::string tmpl = notes::default_template(), tmpl_name = "the built-in release-notes template";
  if (auto t = args.get("--template")) {
    if (!fs::is_regular_file(*t)) throw Error("--template: '" + *t + "' is not a file", ErrorKind::Usage);
    tmpl = read_file(*t);
    tmpl_name = *t;
  }
  Context ctx = make_context(args);
  Store store = ctx.store();
  notes::Images now = read_images(args.positional()[0], args, ctx, store);
  keep_only(now, args.all("--only"));
  std::optional<notes::Images> since;
  if (auto s = args.get("--since")) {
    try {
      since = read_images(*s, args, ctx, store);
    } catch (Error& e) {
      e.add_trace("while reading --since " + *s);
      throw;
    }
  }
  nlohmann::json data = notes::notes_data(now, store, since);
  std::string text =
      args.has("--data") ? data.dump(2) + "\n" : notes::render(tmpl, data, tmpl_name);
  if (out) {
    write_file_atomic(*out, text);
    ctx.status->result("notes", *out);
  } else {
    fputs(text.c_str(), stdout);
  }
  return kExitOk;
}

}  // namespace sb::cli
