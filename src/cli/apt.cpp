// `stackbuild apt-resolve`: what a list of Debian/Ubuntu packages resolves to,
// for debugging recipes and for the benchmark against apt-get --simulate.
#include <chrono>
#include <cstdio>

#include "cli/cli.hpp"
#include "pipeline/apt_layer.hpp"
#include "util/error.hpp"

namespace sb::cli {

const char* const kAptResolveHelp =
    "usage: stackbuild apt-resolve [options] PACKAGE...\n"
    "\n"
    "Reads the repositories of a release (as an apt layer would: the machine's apt\n"
    "configuration, or STACKBUILD_APT_SOURCES), checks their signatures, and prints what\n"
    "PACKAGE... resolve to, one 'name version url sha256' line a package, sorted by name.\n"
    "Recommends are not installed. A failure explains which dependency cannot be met.\n"
    "\n"
    "options:\n"
    "  --distro NAME      debian (default) or ubuntu\n"
    "  --release NAME     the codename, e.g. trixie (required)\n"
    "  --base             add the Essential set and apt, as an os layer does\n"
    "  --names            print only the names\n"
    "Also takes the options of every command (stackbuild --help). See docs/apt.md.\n";

int cmd_apt_resolve(const std::vector<std::string>& argv) {
  std::vector<std::string> flags = kCommonFlags;
  flags.insert(flags.end(), {"--base", "--names"});
  std::vector<std::string> options = kCommonOptions;
  options.insert(options.end(), {"--distro", "--release"});
  Args args(argv, flags, options);
  if (maybe_help(args, kAptResolveHelp)) return kExitOk;
  auto release = args.get("--release");
  if (!release) throw Error("apt-resolve wants --release CODENAME (see 'stackbuild apt-resolve --help')", kExitUsage);
  Context ctx = make_context(args);
  Store store = ctx.store();
  auto start = std::chrono::steady_clock::now();
  auto lines = apt_resolve(args.get("--distro").value_or("debian"), *release, args.positional(), args.has("--base"),
                           store, *ctx.status);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const auto& l : lines) printf("%s\n", args.has("--names") ? l.substr(0, l.find(' ')).c_str() : l.c_str());
  ctx.status->result("packages", std::to_string(lines.size()) + " in " + std::to_string(secs).substr(0, 5) + " s");
  return kExitOk;
}

}  // namespace sb::cli
