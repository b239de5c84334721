#include <cstdio>
#include <cstring>
#include <csignal>

#include "cli/cli.hpp"
#include "util/error.hpp"
#include "util/interrupt.hpp"
#include "util/utf8.hpp"
#include "util/version.hpp"

namespace sb::cli {

const std::vector<std::string> kCommonFlags = {"--help", "-h", "--verbose", "-v", "--json"};
const std::vector<std::string> kCommonOptions = {"--store", "--progress"};

static const char* const kVersionHelp = "usage: stackbuild version\n\nPrints the version of stackbuild.\n";

static const char* const kMainHelp =
    "usage: stackbuild <command> [options] ...\n"
    "       stackbuild RECIPE.yaml [build options]     (the same as 'stackbuild build RECIPE.yaml')\n"
    "\n"
    "Builds OCI images for GPU deep-learning stacks from YAML recipes, reproducibly.\n"
    "\n"
    "commands:\n"
    "%s"
    "\n"
    "options for every command:\n"
    "  --store DIR          the content-addressed store (default $XDG_CACHE_HOME/stackbuild,\n"
    "                       else ~/.cache/stackbuild)\n"
    "  --progress MODE      tty (progress bars), plain (one line per event) or json (JSON lines);\n"
    "                       default: tty on a terminal, plain otherwise and when CI is set\n"
    "  --json               the same as --progress json\n"
    "  -v, --verbose        more detail\n"
    "  -h, --help           help; 'stackbuild <command> --help' for a command's own\n"
    "\n"
    "the sandbox (build steps, test, run; docs/security.md):\n"
    "  STACKBUILD_SANDBOX_USERNS=off   as root, run foreign code as the host's root where the\n"
    "                                  kernel has no user namespaces or idmapped mounts (weaker)\n"
    "  STACKBUILD_SANDBOX_SECCOMP=off  no seccomp filter, for steps that mount or unshare\n"
    "\n"
    "exit status:\n"
    "  0    success\n"
    "  1    the work failed (I/O, a refused or corrupt layer, a failed tool)\n"
    "  2    bad command line\n"
    "  3    an input file (recipe, catalog, lockfile) is invalid, an apt repository has no\n"
    "       keyring to check it with, or --locked found the lockfile missing or stale\n"
    "  4    --strict: some matrix points cannot be resolved\n"
    "  130  interrupted\n";

const std::vector<Command>& commands() {
  static const std::vector<Command> cmds = {
      {"build", "build a recipe into an OCI layout or a docker-archive", kBuildHelp, cmd_build},
      {"plan", "resolve a recipe's matrix against the catalog and print it", kPlanHelp, cmd_plan},
      {"lock", "write RECIPE.lock: every resolved version of every matrix point", kLockHelp, cmd_lock},
      {"layer", "write one layer blob from a directory tree", kLayerHelp, cmd_layer},
      {"unpack", "unpack an image of an OCI layout into a directory", kUnpackHelp, cmd_unpack},
      {"extract", "apply layer blobs, in order, onto a directory", kExtractHelp, cmd_extract},
      {"test", "verify an image: static checks, GPU tests where there is a GPU", kTestHelp, cmd_test},
      {"sbom", "write an image's software bill of materials (SPDX 2.3 or CycloneDX 1.5 JSON)", kSbomHelp, cmd_sbom},
      {"notes", "write release notes (Markdown) of a layout's or a registry's images", kNotesHelp,
       cmd_notes},
      {"run", "run a command inside an image, in the sandbox, optionally with GPUs", kRunHelp, cmd_run},
      {"cuda-code", "list the GPU code (sm_XY SASS, compute_XY PTX) CUDA binaries carry", kCudaCodeHelp,
       cmd_cuda_code},
      {"gpu", "show what GPU tests would inject from this host (or a CDI spec)", kGpuHelp, cmd_gpu},
      {"push", "push images of an OCI layout to a registry", kPushHelp, cmd_push},
      {"pull", "pull an image from a registry into an OCI layout", kPullHelp, cmd_pull},
      {"merge", "assemble a release from the points a fan-out's tasks pushed (reads the registry only)",
       kMergeHelp, cmd_merge},
      {"sign", "sign an image in a registry (sigstore format, as cosign and skopeo verify)", kSignHelp, cmd_sign},
      {"verify", "check an image's sigstore signature against a public key", kVerifyHelp, cmd_verify},
      {"cluster", "fan a release out over Slurm, or GitHub Actions, GitLab CI, Kubernetes (generated files)", kClusterHelp,
       cmd_cluster},
      {"provenance", "write the SLSA provenance kept beside an image (build --provenance)", kProvenanceHelp,
       cmd_provenance},
      {"apt-resolve", "resolve Debian/Ubuntu packages against a release's repositories", kAptResolveHelp, cmd_apt_resolve},
      {"pip", "resolve Python wheels for an image (and install them without pip)", kPipHelp, cmd_pip},
      {"redist", "fetch NVIDIA redist archives into a /usr/local/cuda-X.Y tree", kRedistHelp, cmd_redist},
      {"gc", "remove from the store what no build needs (--max-size, --older-than to evict more)", kGcHelp, cmd_gc},
      {"version", "print the version", kVersionHelp, cmd_version},
  };
  return cmds;
}

bool maybe_help(const Args& args, const char* help) {
  if (!args.has("--help") && !args.has("-h")) return false;
  fputs(help, stdout);
  return true;
}

void print_document(const nlohmann::json& doc, bool json_lines) {
  const std::string text = (json_lines ? doc.dump() : doc.dump(2)) + "\n";
  fputs(text.c_str(), stdout);
}

Context make_context(const Args& args) {
  Context c;
  StatusMode mode = detect_status_mode(stderr);
  if (args.has("--json")) mode = StatusMode::Json;
  if (auto p = args.get("--progress")) {
    if (*p == "tty") mode = StatusMode::Tty;
    else if (*p == "plain") mode = StatusMode::Plain;
    else if (*p == "json") mode = StatusMode::Json;
    else throw Error("--progress wants tty, plain or json, not '" + *p + "'", ErrorKind::Usage);
  }
  bool verbose = args.has("--verbose") || args.has("-v");
  // JSON events go to stdout for pipelines; human output to stderr.
  c.status = make_status(mode, mode == StatusMode::Json ? stdout : stderr, verbose);
  c.json = mode == StatusMode::Json;
  c.store_root = args.get("--store") ? fs::path(*args.get("--store")) : Store::default_root();
  return c;
}

std::string pid_list(const std::vector<long>& pids) {
  std::string s;
  for (long p : pids) s += (s.empty() ? "" : ", ") + std::to_string(p);
  return pids.empty() ? "" : (pids.size() == 1 ? " (pid " : " (pids ") + s + ")";
}

Store Context::store() const {
  return Store(store_root, [this](const std::vector<long>& pids) {
    status->message(Level::Info, "waiting for 'stackbuild gc'" + pid_list(pids) + " to finish with the store " +
                                     store_root.string());
  });
}

int cmd_version(const std::vector<std::string>& argv) {
  Args args(argv, kCommonFlags, kCommonOptions);
  if (maybe_help(args, kVersionHelp)) return kExitOk;
  if (args.has("--json"))
    print_document({{"version", kStackbuildVersion}}, true);
  else
    printf("stackbuild %s\n", kStackbuildVersion);
  return kExitOk;
}

static void print_main_help(FILE* out) {
  std::string list;
  for (const auto& c : commands()) {
    char line[160];
    snprintf(line, sizeof line, "  %-11s %s\n", c.name, c.summary);
    list += line;
  }
  fprintf(out, kMainHelp, list.c_str());
}

static bool looks_like_recipe(const std::string& s) {
  auto ends = [&](const char* suf) { return s.size() > strlen(suf) && s.compare(s.size() - strlen(suf), strlen(suf), suf) == 0; };
  return ends(".yaml") || ends(".yml");
}

// Prints the error and returns the exit status. After Ctrl-C or SIGTERM
// that is 130 and the message starts with "interrupted"/"terminated", even
// when a catch on the way wrapped the interruption in an error of its own
// (a retry loop's "pull ...: interrupted").
static int report_error(const std::string& what, int exit_code) {
  if (const char* why = interruption(); why && !what.starts_with(why)) {
    std::string indented = "  " + what;
    for (size_t i = 0; (i = indented.find('\n', i)) != std::string::npos; i += 3) indented.replace(i, 1, "\n  ");
    fprintf(stderr, "stackbuild: error: %s\n%s\n", why, printable_utf8(indented).c_str());
  } else {
    fprintf(stderr, "stackbuild: error: %s\n", printable_utf8(what).c_str());
  }
  return interruption() ? kExitInterrupted : exit_code;
}

int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);
  install_interrupt_handlers();
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (args.empty()) {
      print_main_help(stderr);
      return kExitUsage;
    }
    std::string cmd = args[0];
    if (cmd == "--help" || cmd == "-h" || cmd == "help") {
      if (args.size() > 1)
        for (const auto& c : commands())
          if (args[1] == c.name) return fputs(c.help, stdout), kExitOk;
      print_main_help(stdout);
      return kExitOk;
    }
    if (cmd == "--version") return cmd_version({});
    if (looks_like_recipe(cmd)) return cmd_build(args);
    for (const auto& c : commands())
      if (cmd == c.name) return c.run(std::vector<std::string>(args.begin() + 1, args.end()));
    std::vector<std::string> names;
    for (const auto& c : commands()) names.push_back(c.name);
    std::string s = suggest(cmd, names);
    fprintf(stderr, "stackbuild: error: unknown command '%s'%s\n  see 'stackbuild --help'\n", cmd.c_str(),
            s.empty() ? "" : (" (did you mean '" + s + "'?)").c_str());
    return kExitUsage;
  } catch (const Error& e) {
    return report_error(e.render(), exit_code_of(e.kind()));
  } catch (const std::exception& e) {
    return report_error(e.what(), kExitFailure);
  }
}

}  // namespace sb::cli
