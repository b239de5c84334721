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
    "Reads the default repositories of a release (as an apt layer without `repositories:`\n"
    "would: STACKBUILD_APT_SOURCES, else the machine's apt configuration, else the public\n"
    "archives), checks their signatures (an Ubuntu release's with the machine's Ubuntu\n"
    "keyring, else Debian's ubuntu-keyring package; neither: exit 3), and prints what\n"
    "PACKAGE... resolve to, one 'name version url sha256' line a package, sorted by name.\n"
    "Recommends are left out unless --recommends. Downloads take the machine's apt network\n"
    "settings (apt.conf's proxies and CAs, auth.conf's logins). A failure explains which\n"
    "dependency cannot be met.\n"
    "\n"
    "options:\n"
    "  --distro NAME      debian (default) or ubuntu\n"
    "  --release NAME     the codename, e.g. trixie (required)\n"
    "  --base             add the Essential set and apt, as an os layer does\n"
    "  --priority LEVEL   add every package of Priority LEVEL and above (required,\n"
    "                     important or standard)\n"
    "  --recommends       install Recommends too\n"
    "  --names            print only the names\n"
    "Also takes the options of every command (stackbuild --help). See docs/apt.md.\n";

int cmd_apt_resolve(const std::vector<std::string>& argv) {
  std::vector<std::string> flags = kCommonFlags;
  flags.insert(flags.end(), {"--base", "--names", "--recommends"});
  std::vector<std::string> options = kCommonOptions;
  options.insert(options.end(), {"--distro", "--release", "--priority"});
  Args args(argv, flags, options);
  if (maybe_help(args, kAptResolveHelp)) return kExitOk;
  auto release = args.get("--release");
  if (!release) throw Error("apt-resolve wants --release CODENAME (see 'stackbuild apt-resolve --help')", ErrorKind::Usage);
  Context ctx = make_context(args);
  Store store = ctx.store();
  auto start = std::chrono::steady_clock::now();
  AptResolveOptions o;
  o.base = args.has("--base");
  o.recommends = args.has("--recommends");
  o.priority = args.get("--priority").value_or("");
  if (!o.priority.empty() && o.priority != "required" && o.priority != "important" && o.priority != "standard")
    throw Error("--priority wants required, important or standard, not '" + o.priority + "'", ErrorKind::Usage);
  std::string distro = args.get("--distro").value_or("debian");
  if (distro != "debian" && distro != "ubuntu")
    throw Error("--distro wants debian or ubuntu, not '" + distro + "'", ErrorKind::Usage);
  if (args.positional().empty() && !o.base && o.priority.empty())
    throw Error("apt-resolve wants PACKAGE names (or --base, --priority)", ErrorKind::Usage);
  auto lines = apt_resolve(distro, *release, args.positional(), o, store, *ctx.status);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const auto& l : lines) printf("%s\n", args.has("--names") ? l.substr(0, l.find(' ')).c_str() : l.c_str());
  ctx.status->result("packages", std::to_string(lines.size()) + " in " + std::to_string(secs).substr(0, 5) + " s");
  return kExitOk;
}

}  // namespace sb::cli
