#include "verify/run_in_image.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <set>

#include "build/changeset.hpp"
#include "util/error.hpp"
#include "util/file.hpp"
#include "verify/elf.hpp"
#include "verify/static_checks.hpp"

namespace sb::verify {

namespace {

// "libcuda.so.550.54.15", "libfoo.so": a shared library's file name.
bool is_shared_library(const std::string& name) {
  auto at = name.find(".so");
  return at != std::string::npos && at > 0 && (at + 3 == name.size() || name[at + 3] == '.');
}

// Makes the directories of image path `dir` (symlinks already followed) in
// the writable layer `upper`, each with the mode and owner the image gives
// it: overlayfs shows the upper one's over the lower's.
void make_upper_dirs(const ImageRoot& root, const fs::path& upper, const std::string& dir) {
  fs::path at = upper, image = "/";
  for (const auto& c : fs::path(dir).relative_path()) {
    at /= c;
    image /= c;
    std::error_code ec;
    if (fs::is_directory(at, ec)) continue;
    if (!fs::create_directory(at, ec) && ec)
      throw Error("a CDI create-symlinks hook's directory " + image.string() + ": " + ec.message());
    struct stat st {};
    if (::lstat((root.root() / image.relative_path()).c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      ::chmod(at.c_str(), st.st_mode & 07777);
      (void)!::lchown(at.c_str(), st.st_uid,
                      st.st_gid);  // fails unprivileged: the mode is what counts
    }
  }
}

// A create-symlinks hook's link, in the writable layer over the image: its
// directory where the image's links take it, an entry of the image there
// (a file, another link) shadowed, a directory left alone.
void make_link(const ImageRoot& root, const fs::path& upper, const Symlink& l) {
  const fs::path link(l.link);
  const std::string dir = root.mount_path(link.parent_path().string());
  const std::string image = (fs::path(dir) / link.filename()).string();
  std::error_code ec;
  if (fs::is_directory(fs::symlink_status(root.root() / fs::path(image).relative_path(), ec)))
    throw Error("a CDI create-symlinks hook links " + l.link + " -> " + l.target +
                ", and the image has a directory " + image);
  make_upper_dirs(root, upper, dir);
  fs::path at = upper / fs::path(image).relative_path();
  fs::remove(at, ec);
  fs::create_symlink(l.target, at, ec);
  if (ec) throw Error("a CDI create-symlinks hook's link " + image + ": " + ec.message());
}

constexpr const char* kCompatDir = "/usr/local/cuda/compat";

// The image's CUDA forward-compatibility directory, where its libcuda.so is
// of a newer driver branch than the host's `driver` ("535.104.05"), as the
// toolkit's enable-cuda-compat hook decides; "" otherwise.
std::string compat_dir(const ImageRoot& root, const std::string& driver) {
  std::string compat = compat_driver_version(root);
  if (compat.empty() || driver.empty() || std::atol(compat.c_str()) <= std::atol(driver.c_str()))
    return "";
  return root.mount_path(kCompatDir);
}

// The host's ldconfig where it is static (Debian's /sbin/ldconfig, Ubuntu's
// /sbin/ldconfig.real), so it runs inside any image; nullopt otherwise.
std::optional<fs::path> host_static_ldconfig() {
  for (const char* p : {"/sbin/ldconfig.real", "/sbin/ldconfig", "/usr/sbin/ldconfig"}) {
    std::error_code ec;
    fs::path real = fs::canonical(p, ec);
    if (ec) continue;
    try {
      if (auto elf = read_elf(real); elf && elf->interpreter.empty()) return real;
    } catch (const Error&) {  // not an ELF file we can read: not this one
    }
  }
  return std::nullopt;
}

// Where a command's writable layer goes: an overlayfs upper directory beside
// the unpacked root in the store, else, where overlayfs does not take the
// store's filesystem as its upper layer (overlayfs itself: a store inside a
// container's own root), in the first temporary directory it does take;
// where it takes none (or STACKBUILD_SANDBOX_OVERLAY=0, as for builds), a
// full copy of the root in the store.
struct WritablePlace {
  fs::path base;
  bool overlay = true;
  std::string why_not;  // each place tried, and why overlayfs refused it
};

WritablePlace writable_place(const sandbox::Sandbox& sb, const ImageRoot& root) {
  const fs::path store_dir = root.root().parent_path();
  if (const char* force = getenv("STACKBUILD_SANDBOX_OVERLAY"); force && std::string(force) == "0")
    return {store_dir, false, "STACKBUILD_SANDBOX_OVERLAY=0"};
  const std::string why = sb.overlay_unavailable_in(store_dir);
  if (why.empty() || why == sandbox::namespaces_unavailable())
    return {store_dir};  // run() says why
  std::string tried = store_dir.string() + " (" + why + ")";
  std::vector<fs::path> candidates;
  if (const char* t = getenv("TMPDIR"); t && *t) candidates.emplace_back(t);
  for (const char* d : {"/tmp", "/var/tmp", "/dev/shm"}) candidates.emplace_back(d);
  for (const auto& c : candidates) {
    std::error_code ec;
    if (!fs::is_directory(c, ec)) continue;
    if (std::string w = sb.overlay_unavailable_in(c); w.empty())
      return {c};
    else
      tried += ", " + c.string() + " (" + w + ")";
  }
  return {store_dir, false, "overlayfs takes none of these as its upper layer: " + tried};
}

// Why image path `program` cannot be executed in the image, "" when it can:
// execve's ENOENT for a file that is there means its interpreter is not (a
// script's #! line, an ELF file's PT_INTERP), which the sandbox alone
// cannot tell apart from a missing file. `mounted` are the image paths that
// the run mounts over it, which may bring the interpreter.
std::string why_not_runnable(const ImageRoot& root, const std::string& program,
                             const std::vector<std::string>& mounted = {}) {
  auto host = root.resolve(program);
  if (!host) return "";  // not in the image: the sandbox says so
  auto present = [&](const std::string& p) {
    return root.resolve(p) || std::find(mounted.begin(), mounted.end(), p) != mounted.end();
  };
  std::string head(256, '\0');
  {
    std::ifstream in(*host, std::ios::binary);
    in.read(head.data(), static_cast<std::streamsize>(head.size()));
    head.resize(static_cast<size_t>(in.gcount()));
  }
  if (head.rfind("#!", 0) == 0) {
    std::string line = head.substr(2, head.find('\n') - 2);
    size_t b = line.find_first_not_of(" \t"), e = line.find_first_of(" \t", b);
    std::string interp =
        b == std::string::npos ? "" : line.substr(b, e == std::string::npos ? e : e - b);
    if (!interp.empty() && interp[0] == '/' && !present(interp))
      return program + " is a script for " + interp + ", which the image lacks";
    return "";
  }
  try {
    if (auto elf = read_elf(*host); elf && !elf->interpreter.empty() && !present(elf->interpreter))
      return program + " needs the dynamic loader " + elf->interpreter + ", which the image lacks";
  } catch (const Error&) {  // not an ELF file we can read: execve says what it is
  }
  return "";
}

}  // namespace

std::string compat_driver_version(const ImageRoot& root) {
  auto host = root.resolve(kCompatDir);
  if (!host) return "";
  std::string best;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(*host, ec)) {
    std::string name = e.path().filename().string();
    if (name.rfind("libcuda.so.", 0) != 0 || name.find('.', 11) == std::string::npos) continue;
    std::string v = name.substr(11);
    if (best.empty() || compare_versions(v, best) > 0) best = v;
  }
  return best;
}

sandbox::SandboxResult run_in_image(sandbox::Sandbox& sb, const ImageRoot& root, const RunOptions& o,
                                    const sandbox::OutputFn& output) {
  const WritablePlace place = writable_place(sb, root);
  TempDir tmp(place.base, ".run-");
  sandbox::SandboxSpec spec;
  spec.scratch = tmp.path() / "scratch";
  fs::create_directories(spec.scratch);
  if (place.overlay) {
    spec.lower = {root.root()};
    spec.upper = tmp.path() / "upper";
    spec.work = tmp.path() / "work";
    for (const auto& d : {spec.upper, spec.work}) fs::create_directories(d);
  } else {
    spec.root = tmp.path() / "root";
    fs::create_directories(spec.root);
    copy_tree(root.root(), spec.root);
  }
  const fs::path& writable = place.overlay ? spec.upper : spec.root;  // what the command may change
  spec.env = o.env;
  spec.cwd = o.cwd;
  spec.timeout_seconds = o.timeout_seconds;
  spec.network = o.network;
  spec.mounts = o.mounts;
  spec.architecture = o.architecture;

  if (o.gpu) {
    const GpuInjection& g = *o.gpu;
    // The directories of the injected libraries, where the image's ldconfig
    // must look.
    std::vector<std::string> lib_dirs = g.ldconfig_folders;
    const bool debian = root.debian_family();
    for (const auto& m : g.mounts) {
      // Discovery's libraries go where libnvidia-container puts them: the
      // multiarch directory of a Debian-family image, /usr/lib64 in others.
      std::string target = m.container_path;
      if (m.library && !debian) target = "/usr/lib64/" + fs::path(target).filename().string();
      // Each where the image's own symlinks take it: /lib/firmware/... lands
      // in /usr/lib/firmware/... of a merged-/usr image, rather than a mount
      // point directory made at /lib hiding the image's /lib -> usr/lib.
      target = root.mount_path(target);
      spec.mounts.push_back({o.host_root / m.host_path, target, true});
      if (is_shared_library(fs::path(target).filename().string()))
        lib_dirs.push_back(fs::path(target).parent_path().string());
    }
    for (const auto& node : g.device_nodes) {
      if (node.rfind("/dev/", 0) != 0) continue;
      spec.devices.push_back(node.substr(5));
      if (auto host = g.device_host_paths.find(node); host != g.device_host_paths.end())
        spec.device_sources[node.substr(5)] = o.host_root / fs::path(host->second).relative_path();
    }
    for (const auto& e : g.env) {
      auto eq = e.find('=');
      if (eq != std::string::npos && e.substr(0, eq) != "NVIDIA_VISIBLE_DEVICES") spec.env[e.substr(0, eq)] = e.substr(eq + 1);
    }
    // A CDI spec's create-symlinks hook: links in /dev made in the sandbox's
    // fresh /dev, the others in the writable layer.
    for (const auto& l : g.symlinks) {
      if (l.link.rfind("/dev/", 0) == 0)
        spec.device_links.push_back({l.link.substr(5), l.target});
      else
        make_link(root, writable, l);
    }
    // The injected libraries enter the image's linker cache, as the toolkit's
    // update-ldcache hook does: an ldconfig run in the same writable layer,
    // told the directories it would not look in by itself (a CDI spec's
    // /usr/lib64 in a Debian image), after a newer driver branch's compat
    // libraries where the toolkit would use them. The image's own ldconfig
    // (ldconfig.real first: Ubuntu's /sbin/ldconfig is a shell script around
    // it, and the toolkit's configuration there names it), one that cannot
    // run in the image (its shell or loader missing) passed over; in an image
    // without one, the host's where it is static (the toolkit always runs the
    // host's), told every directory, for its trusted ones are the host's.
    sandbox::SandboxSpec ld = spec;
    std::vector<std::string> searched;  // by the image's own ldconfig
    for (const char* own :
         {"/sbin/ldconfig.real", "/usr/sbin/ldconfig.real", "/sbin/ldconfig", "/usr/sbin/ldconfig"})
      if (ld.argv.empty() && root.resolve(own) && why_not_runnable(root, own).empty())
        ld.argv = {own};
    // ldconfig writes /etc/ld.so.cache: an image without /etc gets one in
    // the writable layer.
    if (!root.resolve("/etc")) fs::create_directories(writable / "etc");
    if (!ld.argv.empty()) {
      searched = root.ldconfig_dirs(multiarch_tuple());
    } else if (auto host = host_static_ldconfig()) {
      ld.argv = {"/.stackbuild-ldconfig"};
      ld.mounts.push_back({*host, ld.argv[0], true});
    }
    if (!ld.argv.empty()) {
      if (g.cuda_compat) {
        if (std::string compat = compat_dir(root, g.driver_version); !compat.empty())
          ld.argv.push_back(compat);
      }
      for (const auto& d : lib_dirs) {
        std::string dir = root.mount_path(d);
        if (std::find(searched.begin(), searched.end(), dir) == searched.end() &&
            std::find(ld.argv.begin() + 1, ld.argv.end(), dir) == ld.argv.end())
          ld.argv.push_back(dir);
      }
      std::string out;
      auto r = sb.run(ld, [&](std::string_view s) { out += s; });
      if (r.exit_status != 0)
        throw Error("ldconfig (" + ld.argv[0] + ") in the image failed (" +
                    std::to_string(r.exit_status) + "): " + out);
    }
  }
  spec.argv = o.argv;
  if (!spec.argv.empty() && spec.argv[0].rfind('/', 0) == 0) {
    std::vector<std::string> mounted;
    for (const auto& m : spec.mounts) mounted.push_back(m.target);
    if (std::string why = why_not_runnable(root, spec.argv[0], mounted); !why.empty())
      throw Error("cannot run '" + spec.argv[0] + "' in the image: " + why);
  }
  return sb.run(spec, output);
}

std::vector<std::string> driver_library_gaps(const ImageRoot& root, const GpuInjection& g,
                                             const fs::path& host_root,
                                             const std::vector<std::string>& ld_library_path) {
  std::vector<std::string> dirs = ld_library_path;
  for (const auto& d : root.linker_dirs()) dirs.push_back(d);
  for (const char* d : {"/usr/lib64", "/lib64"})
    dirs.push_back(d);  // where the libraries go in other images
  const std::string kInsufficient =
      " (the CUDA runtime then reports \"CUDA driver version is insufficient for CUDA runtime "
      "version\")";
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const auto& m : g.mounts) {
    const std::string name = fs::path(m.container_path).filename().string();
    if (!is_shared_library(name) || !seen.insert(name).second) continue;
    // Those CUDA loads to start and compile; the others (the debugger's,
    // confidential computing's PKCS#11 one, OpenCL's) only when asked for,
    // and a minimal image lacks what they need with no harm done.
    static const std::vector<std::string> kCore{"libcuda.so", "libnvidia-ml.so",
                                                "libnvidia-ptxjitcompiler.so", "libnvidia-nvvm.so",
                                                "libnvidia-gpucomp.so"};
    if (std::none_of(kCore.begin(), kCore.end(),
                     [&](const std::string& c) { return name.rfind(c, 0) == 0; }))
      continue;
    std::optional<ElfInfo> elf;
    try {
      elf = read_elf(host_root / m.host_path);
    } catch (const Error&) {
    }
    if (!elf) continue;
    std::vector<std::string> missing;
    for (const auto& need : elf->needed) {
      if (is_driver_library(need) || need.find('/') != std::string::npos) continue;
      bool found = false;
      for (const auto& d : dirs)
        if ((found = root.resolve(d + "/" + need).has_value())) break;
      if (!found) missing.push_back(need);
    }
    if (missing.empty()) continue;
    std::string list;
    for (const auto& n : missing) list += (list.empty() ? "" : ", ") + n;
    out.push_back("the driver's " + name + " needs " + list +
                  ", which the image lacks: it will not load there" +
                  (name.rfind("libcuda.so", 0) == 0 ? kInsufficient : ""));
  }
  return out;
}

std::string full_copy_warning(const sandbox::Sandbox& sandbox, const ImageRoot& root) {
  const WritablePlace place = writable_place(sandbox, root);
  if (place.overlay) return "";
  return "each command in the image runs in a full copy of its root, which is slow for a big image "
         "(" +
         place.why_not + ")";
}

}  // namespace sb::verify
