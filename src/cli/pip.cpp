// `stackbuild pip` and `stackbuild redist`: the pip and redist sources on
// their own, for debugging recipes, for tests and for the benchmark.
#include <chrono>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/cli.hpp"
#include "layer/write.hpp"
#include "fetch/pip/install.hpp"
#include "pipeline/pip_layer.hpp"
#include "fetch/redist/install.hpp"
#include "util/error.hpp"
#include "util/process.hpp"

namespace sb::cli {

const char* const kPipHelp =
    "usage: stackbuild pip [options] REQUIREMENT...\n"
    "\n"
    "Resolves Python requirements (PEP 508: 'torch==2.6.0', 'jax[cuda12]') to wheels for an\n"
    "image's Python, glibc and architecture, on the configured index (STACKBUILD_PIP_INDEX_URL,\n"
    "else pip's own configuration: PIP_INDEX_URL, pip.conf), and prints one line a wheel:\n"
    "'name version url sha256'. With --target or --layer the wheels are fetched (hashes\n"
    "checked) and installed without pip.\n"
    "\n"
    "options:\n"
    "  --python X.Y        the image's Python (default 3.12)\n"
    "  --glibc 2.MM        the image's glibc (default 2.36)\n"
    "  --arch ARCH         amd64 (default) or arm64\n"
    "  --distro NAME       debian/ubuntu: Debian's dist-packages layout\n"
    "  --index-url URL     the index, instead of the configured one\n"
    "  --pre               allow pre-releases\n"
    "  --target DIR        install into DIR as an image root (DIR/usr/local/lib/...)\n"
    "  --layer             write the installed tree as a layer blob into the store\n"
    "  --lock              print the resolution as lockfile JSON instead\n"
    "Also takes the options of every command (stackbuild --help). See docs/pip.md.\n";

const char* const kRedistHelp =
    "usage: stackbuild redist [options] COMPONENT...\n"
    "\n"
    "Reads NVIDIA's redistrib_<version>.json for a product from the mirror (--base-url, else\n"
    "STACKBUILD_REDIST_URL, else NVIDIA's public compute/ directory), selects COMPONENT...\n"
    "(cudart, cublas, nvcc, cudnn, ... or manifest keys) for the architecture and CUDA major,\n"
    "fetches them with size and sha256 checked and unpacks them into DIR/usr/local/cuda-X.Y,\n"
    "with usr/local/cuda pointing at it.\n"
    "\n"
    "options:\n"
    "  --product NAME      cuda (default), cudnn, ...\n"
    "  --version V         the manifest's version, e.g. 12.4.1 (required)\n"
    "  --cuda X.Y          the CUDA release the tree is for (default: --version's X.Y)\n"
    "  --arch ARCH         amd64 (default) or arm64\n"
    "  --base-url URL      the mirror: the directory holding <product>/redist/\n"
    "  --target DIR        where to unpack (required unless --layer)\n"
    "  --layer             write the tree as a layer blob into the store\n"
    "Also takes the options of every command (stackbuild --help). See docs/redist.md.\n";

namespace {

void write_tree_layer(const fs::path& dir, const Store& store, Context& ctx) {
  ScanOptions so;
  so.normalize_modes = true;
  EntryMap entries;
  scan_tree(dir, "", so, entries);
  add_parent_dirs(so, entries);
  Layer l = write_layer(entries, store, LayerOptions{});
  ctx.status->result("diff_id", l.diff_id.str());
  ctx.status->result("digest", l.digest.str());
  ctx.status->result("size", std::to_string(l.size));
}

// Where `pip` and `redist` install: --target DIR, else (--layer) a temporary
// directory in the store, removed when done.
struct InstallTarget {
  std::unique_ptr<TempDir> tmp;
  fs::path dir;
};

InstallTarget install_target(const Args& args, const Store& store) {
  InstallTarget t;
  if (auto d = args.get("--target")) {
    t.dir = *d;
    fs::create_directories(t.dir);
  } else {
    t.tmp = store.temp_dir();
    t.dir = t.tmp->path();
  }
  return t;
}

}  // namespace

int cmd_pip(const std::vector<std::string>& argv) {
  std::vector<std::string> flags = kCommonFlags;
  flags.insert(flags.end(), {"--pre", "--layer", "--lock"});
  std::vector<std::string> options = kCommonOptions;
  options.insert(options.end(), {"--python", "--glibc", "--arch", "--distro", "--index-url", "--target"});
  Args args(argv, flags, options);
  if (maybe_help(args, kPipHelp)) return kExitOk;
  if (args.positional().empty()) throw Error("pip wants at least one requirement (see 'stackbuild pip --help')", ErrorKind::Usage);
  Context ctx = make_context(args);
  Store store = ctx.store();
  pip::Target t = pip::Target::for_distro(args.get("--distro").value_or(""), args.get("--python").value_or("3.12"),
                                          args.get("--glibc").value_or("2.36"), args.get("--arch").value_or("amd64"));
  auto start = std::chrono::steady_clock::now();
  auto wheels = pip_resolve(args.positional(), t, args.get("--index-url").value_or(""), args.has("--pre"), store,
                            *ctx.status);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ctx.status->result("resolved", std::to_string(wheels.size()) + " wheels in " + std::to_string(secs).substr(0, 5) + " s");
  if (args.has("--lock")) print_document(nlohmann::json(wheels), args.has("--json"));
  else
    for (const auto& w : wheels)
      printf("%s %s %s %s\n", w.name.c_str(), w.version.c_str(), w.url.c_str(), w.sha256 ? w.sha256->hex().c_str() : "-");
  for (const auto& p : pip::check_wheels(wheels, t)) ctx.status->message(Level::Warning, p);
  if (!args.get("--target") && !args.has("--layer")) return kExitOk;
  InstallTarget target = install_target(args, store);
  const fs::path& dir = target.dir;
  auto fetcher = fetch::make_fetcher(store, wheel_fetch_options(), *ctx.status);
  start = std::chrono::steady_clock::now();
  auto inst = pip::install_wheels(wheels, t, dir, store, *fetcher);
  secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ctx.status->result("installed", std::to_string(inst.wheels.size()) + " wheels, " +
                                      human_bytes(static_cast<double>(inst.bytes)) + " in " +
                                      std::to_string(secs).substr(0, 5) + " s (fetch included)");
  if (args.has("--layer")) write_tree_layer(dir, store, ctx);
  return kExitOk;
}

int cmd_redist(const std::vector<std::string>& argv) {
  std::vector<std::string> flags = kCommonFlags;
  flags.insert(flags.end(), {"--layer"});
  std::vector<std::string> options = kCommonOptions;
  options.insert(options.end(), {"--product", "--version", "--cuda", "--arch", "--base-url", "--target"});
  Args args(argv, flags, options);
  if (maybe_help(args, kRedistHelp)) return kExitOk;
  auto version = args.get("--version");
  if (!version) throw Error("redist wants --version (see 'stackbuild redist --help')", ErrorKind::Usage);
  if (args.positional().empty()) throw Error("redist wants at least one component", ErrorKind::Usage);
  if (!args.get("--target") && !args.has("--layer")) throw Error("redist wants --target DIR or --layer", ErrorKind::Usage);
  std::string base = args.get("--base-url").value_or(env_or("STACKBUILD_REDIST_URL", redist::kPublicBaseUrl));
  std::string cuda = args.get("--cuda").value_or(*version);
  if (std::count(cuda.begin(), cuda.end(), '.') > 1) cuda = cuda.substr(0, cuda.rfind('.'));
  Context ctx = make_context(args);
  Store store = ctx.store();
  InstallTarget target = install_target(args, store);
  const fs::path& dir = target.dir;
  auto fetcher = fetch::make_fetcher(store, fetch::fetch_options_from_env(), *ctx.status);
  auto got = redist::install_components(base, args.get("--product").value_or("cuda"), *version, args.positional(),
                                        redist::platform_for(args.get("--arch").value_or("amd64")), cuda, dir, store,
                                        *fetcher);
  for (const auto& f : got)
    printf("%s %s %s %s\n", f.selected.component.c_str(), f.selected.version.c_str(), f.url.c_str(),
           f.digest.hex().c_str());
  if (args.has("--layer")) write_tree_layer(dir, store, ctx);
  return kExitOk;
}

}  // namespace sb::cli
