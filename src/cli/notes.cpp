// stackbuild notes: release notes of a layout's images (image/notes.hpp),
// rendered from a Mustache template.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/cli.hpp"
#include "image/notes.hpp"
#include "util/error.hpp"
#include "util/file.hpp"

namespace sb::cli {

const char* const kNotesHelp =
    "usage: stackbuild notes LAYOUT [--since OLD_LAYOUT] [options]\n"
    "\n"
    "Writes the release notes of the images in an OCI layout (what `build -o LAYOUT` wrote),\n"
    "as Markdown: a table of every image's components (OS, Python, CUDA, cuDNN, NCCL, the\n"
    "framework: the dev.stackbuild.version.* labels), then for each image its tags, digest,\n"
    "platform and size, the driver it needs, the GPU architectures it is for, its packages\n"
    "(read off its layers, as the SBOM is), the tests it declares and the last test report in\n"
    "the layout. With --since, each image is compared with its counterpart in the older layout\n"
    "(the same tag, else the same matrix point, else the only one of the same CUDA X.Y): the\n"
    "components and packages that changed, and the images no longer built. The page comes\n"
    "from templates/release-notes.md.mustache, built into stackbuild; --template renders\n"
    "another (docs/notes.md names the fields).\n"
    "\n"
    "options:\n"
    "  --since OLD_LAYOUT   the previous release's layout, to say what changed\n"
    "  --template FILE      a Mustache template of your own instead of the built-in one\n"
    "  --data               print the data the template is rendered with (JSON), not the page\n"
    "  -o, --output FILE    write to FILE (default: standard output)\n";

int cmd_notes(const std::vector<std::string>& argv) {
  std::vector<std::string> options = kCommonOptions;
  options.insert(options.end(), {"-o", "--output", "--since", "--template"});
  std::vector<std::string> flags = kCommonFlags;
  flags.push_back("--data");
  Args args(argv, flags, options);
  if (maybe_help(args, kNotesHelp)) return kExitOk;
  if (args.positional().size() != 1) throw Error("notes wants one LAYOUT", kExitUsage);
  auto out = args.get("-o") ? args.get("-o") : args.get("--output");
  if (!out && (args.has("--json") || args.get("--progress") == "json"))
    throw Error("JSON progress goes to standard output; give -o FILE for the notes", kExitUsage);
  if (args.has("--data") && args.get("--template"))
    throw Error("--data prints the template's data; it takes no --template", kExitUsage);
  fs::path layout = args.positional()[0];
  if (!fs::is_directory(layout))
    throw Error("notes: '" + layout.string() + "' is not an OCI layout directory", kExitUsage);
  std::optional<fs::path> since;
  if (auto s = args.get("--since")) {
    if (!fs::is_directory(*s))
      throw Error("--since: '" + *s + "' is not an OCI layout directory", kExitUsage);
    since = fs::path(*s);
  }
  // The template is read (and checked) before the images are.
  std::string tmpl = notes::default_template(), tmpl_name = "the built-in release-notes template";
  if (auto t = args.get("--template")) {
    if (!fs::is_regular_file(*t)) throw Error("--template: '" + *t + "' is not a file", kExitUsage);
    tmpl = read_file(*t);
    tmpl_name = *t;
  }
  Context ctx = make_context(args);
  Store store = ctx.store();
  nlohmann::json data = notes::notes_data(layout, store, since);
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
