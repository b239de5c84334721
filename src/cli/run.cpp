#include <unistd.h>

#include <sstream>

#include "cli/cli.hpp"
#include "image/image.hpp"
#include "image/layout.hpp"
#include "sandbox/emulation.hpp"
#include "util/error.hpp"
#include "verify/driver_check.hpp"
#include "verify/run_in_image.hpp"
#include "verify/unpacked.hpp"

namespace sb::cli {

const char* const kRunHelp =
    "usage: stackbuild run LAYOUT[:REF] [options] -- COMMAND [ARG...]\n"
    "\n"
    "Runs a command inside an image of an OCI layout, in the build sandbox (its own mount,\n"
    "PID, IPC, UTS and network namespaces; a writable layer thrown away afterwards), with the\n"
    "image config's environment and working directory. With --gpus, the host's NVIDIA driver\n"
    "is injected as `stackbuild gpu` shows it (a CDI spec, or discovery) and the image's\n"
    "linker cache refreshed, once the driver passes the check `stackbuild test` makes\n"
    "(dev.stackbuild.driver_min and NVIDIA_REQUIRE_*; --env NVIDIA_DISABLE_REQUIRE=1 switches\n"
    "the requirements off, as with docker run -e). Exits with the command's status. Needs\n"
    "root (or user namespaces). With --json, each line the command prints (stdout and stderr)\n"
    "is an `output` event on stdout, {\"event\":\"output\",\"line\":...}.\n"
    "\n"
    "options:\n"
    "  --gpus SEL        inject the driver and these GPUs: all, indices (0,1) or UUIDs\n"
    "  --env KEY=VALUE   set a variable (repeatable)\n"
    "  --workdir DIR     the working directory (default: the image's, else /)\n"
    "  --network         share the host's network\n"
    "  --platform P      with LAYOUT:TAG naming an index over platforms: the image to run\n"
    "                    (default: this machine's); one of another platform runs under QEMU\n"
    "                    user emulation (qemu-user-static), without --gpus\n"
    "  --timeout SECS    kill the command (and everything it started) after SECS seconds\n"
    "  --host-root DIR   with --gpus: look for the driver and CDI specs under DIR (for tests;\n"
    "                    device nodes come from /dev unless a CDI spec gives a hostPath)\n";

int cmd_run(const std::vector<std::string>& argv) {
  std::vector<std::string> options = kCommonOptions;
  options.insert(options.end(), {"--gpus", "--workdir", "--timeout", "--host-root", "--platform"});
  std::vector<std::string> flags = kCommonFlags;
  flags.push_back("--network");
  Args args(argv, flags, options, {"--env"});
  if (maybe_help(args, kRunHelp)) return kExitOk;
  if (args.positional().size() < 2) throw Error("run wants LAYOUT[:REF] and a command after --", ErrorKind::Usage);
  // Usage errors before the image is opened and unpacked.
  if (auto sel = args.get("--gpus")) verify::check_gpu_selection(*sel);
  if (auto w = args.get("--workdir"); w && (w->empty() || (*w)[0] != '/'))
    throw Error("--workdir wants an absolute path in the image, not '" + *w + "'", ErrorKind::Usage);
  for (const auto& e : args.all("--env"))
    if (e.find('=') == std::string::npos || e[0] == '=')
      throw Error("--env wants KEY=VALUE, not '" + e + "'", ErrorKind::Usage);
  Context ctx = make_context(args);
  Store store = ctx.store();
  auto [layout, ref] = split_layout_ref(args.positional()[0]);
  LayoutImage image = open_layout_image(layout, ref, &store, args.get("--platform").value_or(""));
  ImageConfig config =
      read_image_config(image.config_json, "the config of " + args.positional()[0]);
  verify::UnpackedRoot unpacked = verify::unpacked_root(store, image);  // held while the command runs
  verify::ImageRoot root(unpacked.path);

  verify::RunOptions o;
  o.argv.assign(args.positional().begin() + 1, args.positional().end());
  for (const std::string& s : config.env) {
    auto eq = s.find('=');
    if (eq != std::string::npos) o.env[s.substr(0, eq)] = s.substr(eq + 1);
  }
  if (!o.env.count("PATH")) o.env["PATH"] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  for (const auto& e : args.all("--env")) {  // each has a KEY= (checked above)
    auto eq = e.find('=');
    o.env[e.substr(0, eq)] = e.substr(eq + 1);
  }
  o.cwd = args.get("--workdir").value_or(config.working_dir.empty() ? "/" : config.working_dir);
  o.network = args.has("--network");
  // An image of another platform runs under QEMU user emulation (the sandbox
  // says what to install where there is none); without a GPU.
  if (!config.architecture.empty() && config.architecture != sandbox::host_architecture()) {
    if (args.get("--gpus"))
      throw Error("--gpus: a linux/" + config.architecture + " image cannot use this linux/" +
                      sandbox::host_architecture() + " machine's GPU (it runs emulated)",
                  ErrorKind::Usage);
    o.architecture = config.architecture;
    ctx.status->message(Level::Info, "a linux/" + config.architecture + " image on this linux/" +
                                         sandbox::host_architecture() + " machine: it runs emulated (qemu-" +
                                         sandbox::machine_of(config.architecture) + ")");
  }
  if (auto t = args.integer("--timeout", 1, 86400 * 7)) o.timeout_seconds = *t;

  std::optional<verify::GpuInjection> gpu;
  o.host_root = args.get("--host-root").value_or("/");
  if (auto sel = args.get("--gpus")) {
    gpu = verify::load_cdi(o.host_root, *sel);
    if (!gpu) {
      auto caps = o.env.find("NVIDIA_DRIVER_CAPABILITIES");  // the image's, or --env's
      gpu = verify::discover_gpus(o.host_root, *sel, caps == o.env.end() ? "" : caps->second);
    }
    if (!gpu || !gpu->has_gpu()) throw Error("--gpus " + *sel + ": this host has no NVIDIA GPU (see 'stackbuild gpu')");
    for (const auto& w : gpu->warnings) ctx.status->message(Level::Warning, w);
    // The environment the command gets, --env included, as the toolkit reads the container's.
    auto needs = verify::driver_needs(config.labels, o.env, verify::compat_driver_version(root));
    for (const auto& w : verify::check_driver(*gpu, needs).warnings)
      ctx.status->message(Level::Warning, w);
    // The command's LD_LIBRARY_PATH, where the driver's needs are looked for too.
    std::vector<std::string> ld_path;
    if (auto ld = o.env.find("LD_LIBRARY_PATH"); ld != o.env.end()) {
      std::istringstream in(ld->second);
      for (std::string d; std::getline(in, d, ':');)
        if (!d.empty()) ld_path.push_back(d);
    }
    for (const auto& w : verify::driver_library_gaps(root, *gpu, o.host_root, ld_path))
      ctx.status->message(Level::Warning, w);
    o.gpu = &*gpu;
  }
  sandbox::LinuxSandbox sandbox;
  if (std::string w = verify::full_copy_warning(sandbox, root); !w.empty())
    ctx.status->message(Level::Warning, w);
  // The command's output as it comes, or with --json as `output` events, a
  // line each (stdout stays JSON lines; bytes that are not UTF-8 are replaced).
  std::string partial;
  auto emit = [&](std::string_view line) { ctx.status->event("output", {{"line", std::string(line)}}); };
  auto r = verify::run_in_image(sandbox, root, o, [&](std::string_view s) {
    if (!ctx.json) {
      (void)!::write(1, s.data(), s.size());
      return;
    }
    partial.append(s);
    for (size_t nl; (nl = partial.find('\n')) != std::string::npos; partial.erase(0, nl + 1))
      emit(std::string_view(partial).substr(0, nl));
  });
  if (!partial.empty()) emit(partial);
  if (r.timed_out) throw Error("the command ran past --timeout and was killed");
  return r.exit_status;
}

}  // namespace sb::cli
