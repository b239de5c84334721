#include "verify/run_in_image.hpp"

#include "util/error.hpp"
#include "util/file.hpp"

namespace sb::verify {

sandbox::SandboxResult run_in_image(sandbox::Sandbox& sb, const ImageRoot& root, const RunOptions& o,
                                    const sandbox::OutputFn& output) {
  TempDir tmp(root.root().parent_path(), ".run-");
  sandbox::SandboxSpec spec;
  spec.lower = {root.root()};
  spec.upper = tmp.path() / "upper";
  spec.work = tmp.path() / "work";
  spec.scratch = tmp.path() / "scratch";
  for (const auto& d : {spec.upper, spec.work, spec.scratch}) fs::create_directories(d);
  spec.env = o.env;
  spec.cwd = o.cwd;
  spec.timeout_seconds = o.timeout_seconds;
  spec.network = o.network;
  spec.mounts = o.mounts;

  if (o.gpu) {
    // Each where the image's own symlinks take it: /lib/firmware/... lands in
    // /usr/lib/firmware/... of a merged-/usr image, rather than a mount point
    // directory made at /lib hiding the image's /lib -> usr/lib.
    for (const auto& m : o.gpu->mounts)
      spec.mounts.push_back({o.host_root / m.host_path, root.mount_path(m.container_path), true});
    for (const auto& node : o.gpu->device_nodes)
      if (node.rfind("/dev/", 0) == 0) spec.devices.push_back(node.substr(5));
    for (const auto& e : o.gpu->env) {
      auto eq = e.find('=');
      if (eq != std::string::npos && e.substr(0, eq) != "NVIDIA_VISIBLE_DEVICES") spec.env[e.substr(0, eq)] = e.substr(eq + 1);
    }
    // The injected libraries enter the image's linker cache, as the toolkit's
    // update-ldcache hook does: an ldconfig run in the same writable layer.
    if (auto ldconfig = root.resolve("/sbin/ldconfig"); ldconfig || root.resolve("/usr/sbin/ldconfig")) {
      sandbox::SandboxSpec ld = spec;
      ld.argv = {ldconfig ? "/sbin/ldconfig" : "/usr/sbin/ldconfig"};
      std::string out;
      auto r = sb.run(ld, [&](std::string_view s) { out += s; });
      if (r.exit_status != 0) throw Error("ldconfig in the image failed (" + std::to_string(r.exit_status) + "): " + out);
    }
  }
  spec.argv = o.argv;
  return sb.run(spec, output);
}

}  // namespace sb::verify
