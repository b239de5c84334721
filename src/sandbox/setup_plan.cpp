// The parent's half of starting a sandbox: mount point stubs and the list of
// operations the init runs (see setup_plan.hpp).
#include "sandbox/setup_plan.hpp"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <set>

#include "util/error.hpp"
#include "util/file.hpp"

namespace sb::sandbox::detail {

namespace {

// "/a/b/" -> {"a", "b"}; refuses "..".
std::vector<std::string> components(const std::string& path) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    std::string c = path.substr(start, end - start);
    if (c == "..") throw Error("sandbox path '" + path + "' contains '..'");
    if (!c.empty() && c != ".") out.push_back(c);
    start = end + 1;
  }
  return out;
}

std::string join(const std::vector<std::string>& comps, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s += "/" + comps[i];
  return s.empty() ? "/" : s;
}

// Makes `rel` (a file when `leaf_file`) under `base`. The mount points it
// creates in the overlay copy the metadata of the topmost lower directory of
// the same path, so that this layer of mount points changes nothing a step
// sees of the directories it shadows. A
// component that is a symlink in `base` is refused: a mount through it could
// land outside the root.
class StubMaker {
 public:
  StubMaker(fs::path base, std::vector<fs::path> lowers, bool record)
      : base_(std::move(base)), lowers_(std::move(lowers)), record_(record) {}

  void make(const std::string& rel, bool leaf_file) {
    auto comps = components(rel);
    for (size_t i = 1; i <= comps.size(); ++i) {
      std::string sub = join(comps, i);
      fs::path p = base_ / sub.substr(1);
      bool file = leaf_file && i == comps.size();
      struct stat st;
      if (::lstat(p.c_str(), &st) == 0) {
        check(st, rel, sub, file);
        continue;
      }
      // In overlay mode `base_` holds only the mount points made here: what
      // the step sees at `sub` is the topmost lower's entry. A mount point
      // directory made above a lower symlink would hide it and all under it (a mount on /lib/x in a
      // merged-/usr image would replace its /lib -> usr/lib with a directory
      // holding x alone). The mount point itself may shadow a link: that is
      // what a mount does (an image's /etc/resolv.conf -> ../run/... link).
      if (i < comps.size())
        if (const struct stat* below = topmost_lower(sub, st)) check(*below, rel, sub, file);
      if (file) {
        UniqueFd fd(::open(p.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
        if (fd.get() < 0) throw_errno("create " + p.string());
      } else if (::mkdir(p.c_str(), 0755) != 0) {
        throw_errno("mkdir " + p.string());
      }
      ::chmod(p.c_str(), file ? 0644 : 0755);  // whatever the umask
      if (record_) created_.push_back(p);
      if (!file) dirs_.push_back(sub);
    }
  }

  // Stub directories take the mode, owner and times of the lower directory
  // they shadow (deepest first, so a parent's mtime is set last).
  void mirror_metadata() {
    std::sort(dirs_.begin(), dirs_.end(),
              [](const auto& a, const auto& b) { return a.size() > b.size(); });
    for (const auto& sub : dirs_) {
      for (const auto& lower : lowers_) {
        struct stat st;
        if (::lstat((lower / sub.substr(1)).c_str(), &st) != 0) continue;
        if (!S_ISDIR(st.st_mode)) break;
        fs::path p = base_ / sub.substr(1);
        (void)!::lchown(p.c_str(), st.st_uid, st.st_gid);
        ::chmod(p.c_str(), st.st_mode & 07777);
        struct timespec ts[2] = {st.st_atim, st.st_mtim};
        ::utimensat(AT_FDCWD, p.c_str(), ts, AT_SYMLINK_NOFOLLOW);
        break;
      }
    }
  }

  std::vector<fs::path> created() const { return created_; }

 private:
  static void check(const struct stat& st, const std::string& rel, const std::string& sub,
                    bool file) {
    if (S_ISLNK(st.st_mode))
      throw Error("sandbox mount point " + rel + " goes through the symlink " + sub +
                  " in the root");
    if (!file && !S_ISDIR(st.st_mode))
      throw Error("sandbox mount point " + rel + ": " + sub + " is not a directory in the root");
  }

  // The entry at `sub` of the topmost lower that has one, in `st`; null when
  // none has, or the topmost one's is a whiteout (a deletion: nothing there).
  const struct stat* topmost_lower(const std::string& sub, struct stat& st) const {
    for (const auto& lower : lowers_) {
      if (::lstat((lower / sub.substr(1)).c_str(), &st) != 0) continue;
      if (S_ISCHR(st.st_mode) && st.st_rdev == 0) return nullptr;
      return &st;
    }
    return nullptr;
  }

  fs::path base_;
  std::vector<fs::path> lowers_;
  bool record_;
  std::vector<fs::path> created_;
  std::vector<std::string> dirs_;
};

// The flags a read-only bind remount must keep (a user namespace may not drop them).
unsigned long locked_flags(const fs::path& source) {
  struct statvfs sv;
  unsigned long f = 0;
  if (::statvfs(source.c_str(), &sv) != 0) return f;
  if (sv.f_flag & ST_NOSUID) f |= MS_NOSUID;
  if (sv.f_flag & ST_NODEV) f |= MS_NODEV;
  if (sv.f_flag & ST_NOEXEC) f |= MS_NOEXEC;
  return f;
}

void check_overlay_path(const fs::path& p) {
  if (p.string().find_first_of(":,\\") != std::string::npos)
    throw Error("overlayfs cannot use the path " + p.string() + " (it holds ':', ',' or '\\')");
}

}  // namespace

std::string overlay_options(const std::vector<fs::path>& lower, const fs::path& upper,
                            const fs::path& work, bool user_namespace, bool extra_features_off) {
  std::string o = "lowerdir=";
  for (size_t i = 0; i < lower.size(); ++i) {
    check_overlay_path(lower[i]);
    o += (i ? ":" : "") + lower[i].string();
  }
  check_overlay_path(upper);
  check_overlay_path(work);
  o += ",upperdir=" + upper.string() + ",workdir=" + work.string();
  // Self-contained upper directories: no redirects to lower paths, no
  // metadata-only copies (DESIGN: the upper directory is the changeset).
  if (extra_features_off) o += ",redirect_dir=off,metacopy=off,index=off";
  if (user_namespace) o += ",userxattr";
  return o;
}

SetupPlan make_setup_plan(const SandboxSpec& given, Identity identity, const std::string& binfmt_register) {
  // The init enters the scratch directory first: every host path absolute.
  SandboxSpec spec = given;
  for (fs::path* p : {&spec.upper, &spec.work, &spec.root, &spec.scratch})
    if (!p->empty()) *p = fs::absolute(*p);
  for (auto& l : spec.lower) l = fs::absolute(l);
  for (auto& m : spec.mounts) m.source = fs::absolute(m.source);
  for (auto& [name, source] : spec.device_sources) source = fs::absolute(source);
  const bool overlay = spec.root.empty();
  const bool user_namespace = identity != Identity::HostRoot;
  const bool detach = identity == Identity::RootRange;
  if (spec.argv.empty()) throw Error("sandbox: nothing to run (empty argv)");
  if (overlay && (spec.lower.empty() || spec.upper.empty() || spec.work.empty()))
    throw Error("sandbox: an overlay root needs lower, upper and work directories");
  if (spec.scratch.empty()) throw Error("sandbox: no scratch directory");
  if (spec.cwd.empty() || spec.cwd[0] != '/')
    throw Error("sandbox: the working directory must be absolute");

  SetupPlan plan;
  plan.mountpoint = spec.scratch / "root";
  fs::create_directories(plan.mountpoint);
  fs::path stubs = spec.scratch / "stubs";
  if (overlay) fs::create_directories(stubs);

  std::vector<fs::path> lowers_top_first(spec.lower.rbegin(), spec.lower.rend());
  StubMaker maker(overlay ? stubs : spec.root, lowers_top_first, !overlay);
  maker.make("/dev", false);
  maker.make("/proc", false);
  maker.make("/tmp", false);
  fs::path resolv;
  if (spec.network) {
    std::error_code ec;
    resolv = fs::canonical(spec.host_resolv_conf, ec);
    if (!ec) maker.make("/etc/resolv.conf", true);
  }
  for (const auto& m : spec.mounts) {
    if (m.target.empty() || m.target[0] != '/')
      throw Error("sandbox: mount target '" + m.target + "' is not absolute");
    std::error_code ec;
    if (!fs::exists(m.source, ec))
      throw Error("sandbox: mount source " + m.source.string() + " does not exist");
    maker.make(m.target, !fs::is_directory(m.source, ec));
  }
  if (overlay) maker.mirror_metadata();
  plan.created = maker.created();

  // Every path from here on is relative to the scratch directory (see setup_plan.hpp).
  const std::string root = "root";
  auto add = [&](Op op) { plan.ops.push_back(std::move(op)); };
  // A mount the parent makes (detached, see Detached) and the init attaches at `target`.
  auto attach = [&](const fs::path& source, const std::string& target, bool idmap, bool read_only) {
    plan.detached.push_back({source, idmap, read_only, plan.ops.size()});
    add({Op::Attach, "", target, "", "", 0, 0, "attach the mount of " + source.string() + " on " + target});
  };
  add({Op::Chdir, "", spec.scratch.string(), "", "", 0, 0, "enter " + spec.scratch.string()});
  add({Op::Mount, "none", "/", "", "", MS_REC | MS_PRIVATE, 0,
       "make the mounts private to the sandbox"});
  std::vector<fs::path> lower_paths;
  fs::path upper = spec.upper, work = spec.work;
  if (detach) {
    // The init looks its paths up from here as the range's root: others may enter it.
    fs::permissions(spec.scratch, fs::perms(0711));
    // The root's layers, idmapped, at idmap/N; attached while the init is
    // still the host's root, which may look the store's paths up.
    const fs::path idmap = spec.scratch / "idmap";
    if (overlay) {
      std::vector<fs::path> layers{stubs};
      layers.insert(layers.end(), lowers_top_first.begin(), lowers_top_first.end());
      for (size_t i = 0; i < layers.size(); ++i) {
        fs::create_directories(idmap / std::to_string(i));
        attach(layers[i], "idmap/" + std::to_string(i), true, true);
        lower_paths.push_back("idmap/" + std::to_string(i));
      }
      // overlayfs wants the upper and work directories on one mount: their parent's.
      const fs::path parent = spec.upper.parent_path();
      if (spec.work.parent_path() != parent)
        throw Error("sandbox: the upper and work directories must be siblings (" +
                    spec.upper.string() + ", " + spec.work.string() + ")");
      fs::create_directories(idmap / "rw");
      attach(parent, "idmap/rw", true, false);
      upper = fs::path("idmap/rw") / spec.upper.filename();
      work = fs::path("idmap/rw") / spec.work.filename();
    } else {
      attach(spec.root, root, true, false);
    }
    add({Op::BecomeRoot, "", "", "", "", 0, 0, "become the sandbox's root"});
  } else if (overlay) {
    lower_paths.push_back(stubs);
    lower_paths.insert(lower_paths.end(), lowers_top_first.begin(), lowers_top_first.end());
  }
  if (overlay) {
    plan.lower = lower_paths;
    // Older kernels lack the options that turn features off; they lack the features too.
    add({Op::Mount, "overlay", root, "overlay",
         overlay_options(plan.lower, upper, work, user_namespace, true), MS_NODEV, 0,
         "mount the overlay root on " + plan.mountpoint.string(),
         overlay_options(plan.lower, upper, work, user_namespace, false)});
  } else if (!detach) {
    add({Op::Mount, spec.root.string(), root, "", "", MS_BIND | MS_REC, 0,
         "bind the root " + spec.root.string()});
  }
  add({Op::Mount, "proc", root + "/proc", "proc", "", MS_NOSUID | MS_NODEV | MS_NOEXEC, 0,
       "mount /proc"});
  if (!binfmt_register.empty()) {
    // QEMU for code of another platform: a binfmt_misc instance of the
    // sandbox's user namespace (never the host's), its interpreter opened now
    // (F), while the host's paths are still there; then read-only, so the
    // command cannot register anything else in it.
    if (identity == Identity::HostRoot)
      throw Error("sandbox: cannot register an emulator without a user namespace (it would be the host's binfmt_misc)");
    const std::string at = root + "/proc/sys/fs/binfmt_misc";
    add({Op::Mount, "binfmt_misc", at, "binfmt_misc", "", MS_NOSUID | MS_NODEV | MS_NOEXEC, 0,
         "mount the sandbox's own binfmt_misc (Linux 6.7 and later)"});
    add({Op::Write, binfmt_register, at + "/register", "", "", 0, 0, "register the emulator in binfmt_misc"});
    add({Op::BindRemount, "", at, "", "", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, 0,
         "make the sandbox's binfmt_misc read-only"});
  }
  // What runc masks and makes read-only in /proc (its defaults for OCI
  // containers): the kernel's memory and keys, timers, and the knobs of the host.
  for (const char* f : {"kcore", "keys", "timer_list", "timer_stats", "sched_debug",
                        "latency_stats", "sysrq-trigger"}) {
    Op op{Op::Mount, "/dev/null", root + "/proc/" + f, "", "", MS_BIND, 0,
          "mask /proc/" + std::string(f)};
    op.optional = true;
    add(op);
  }
  for (const char* d : {"acpi", "scsi"}) {
    Op op{Op::Mount, "tmpfs", root + "/proc/" + d, "tmpfs", "size=0",
          MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, 0, "mask /proc/" + std::string(d)};
    op.optional = true;
    add(op);
  }
  for (const char* d : {"sys", "bus", "fs", "irq", "asound"}) {
    const std::string at = root + "/proc/" + d;
    Op bind{Op::Mount, at, at, "", "", MS_BIND | MS_REC, 0, "bind /proc/" + std::string(d)};
    bind.optional = true;
    add(bind);
    Op ro{Op::BindRemount, "", at, "", "", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, 0,
          "make /proc/" + std::string(d) + " read-only"};
    ro.optional = true;
    add(ro);
  }
  add({Op::Mount, "tmpfs", root + "/dev", "tmpfs", "mode=0755,size=65536k", MS_NOSUID | MS_NOEXEC,
       0, "mount /dev"});
  // Device nodes, also in directories of /dev: a CDI spec of nvidia-ctk names
  // the GPUs' /dev/dri/card1 and /dev/dri/renderD128 beside /dev/nvidia0.
  std::set<std::string> dev_dirs;
  // The components of a name under /dev, checked; its directories made.
  auto dev_name = [&](const std::string& d, const char* what) {
    std::vector<std::string> comps;
    try {
      comps = components(d);
    } catch (const Error&) {
    }
    if (comps.empty() || join(comps, comps.size()) != "/" + d)
      throw Error("sandbox: bad " + std::string(what) + " '" + d +
                  "' (want a path under /dev such as nvidia0 or dri/card1)");
    for (size_t i = 1; i < comps.size(); ++i)
      if (std::string dir = join(comps, i); dev_dirs.insert(dir).second)
        add({Op::Mkdir, "", root + "/dev" + dir, "", "", 0, 0755, "mkdir /dev" + dir});
  };
  for (const auto& d : spec.devices) {
    dev_name(d, "device name");
    add({Op::Touch, "", root + "/dev/" + d, "", "", 0, 0, "create /dev/" + d});
    auto source = spec.device_sources.find(d);
    const std::string from =
        source != spec.device_sources.end() ? source->second.string() : "/dev/" + d;
    if (detach)
      attach(from, root + "/dev/" + d, false, false);
    else
      add({Op::Mount, from, root + "/dev/" + d, "", "", MS_BIND, 0, "bind /dev/" + d});
  }
  // A CDI spec's links among them (nvidia-ctk's /dev/dri/by-path/...). No
  // name may go through one: the links are made before the root is entered.
  std::set<std::string> link_names;
  for (const auto& l : spec.device_links) link_names.insert("/" + l.first);
  auto through_link = [&](const std::string& name) {
    for (size_t at = name.find('/'); at != std::string::npos; at = name.find('/', at + 1))
      if (link_names.count("/" + name.substr(0, at)))
        throw Error("sandbox: /dev/" + name + " would be made through the link /dev/" +
                    name.substr(0, at));
  };
  for (const auto& d : spec.devices) through_link(d);
  for (const auto& [name, target] : spec.device_links) {
    through_link(name);
    dev_name(name, "device link name");
    if (target.empty()) throw Error("sandbox: device link /dev/" + name + " has no target");
    add({Op::Symlink, target, root + "/dev/" + name, "", "", 0, 0, "link /dev/" + name});
  }
  add({Op::Mkdir, "", root + "/dev/pts", "", "", 0, 0755, "mkdir /dev/pts"});
  add({Op::Mount, "devpts", root + "/dev/pts", "devpts", "newinstance,ptmxmode=0666,mode=0620",
       MS_NOSUID | MS_NOEXEC, 0, "mount /dev/pts"});
  add({Op::Symlink, "pts/ptmx", root + "/dev/ptmx", "", "", 0, 0, "link /dev/ptmx"});
  add({Op::Mkdir, "", root + "/dev/shm", "", "", 0, 01777, "mkdir /dev/shm"});
  add({Op::Mount, "tmpfs", root + "/dev/shm", "tmpfs", "mode=1777", MS_NOSUID | MS_NODEV, 0,
       "mount /dev/shm"});
  const char* links[][2] = {{"/proc/self/fd", "fd"},
                            {"/proc/self/fd/0", "stdin"},
                            {"/proc/self/fd/1", "stdout"},
                            {"/proc/self/fd/2", "stderr"}};
  for (const auto& l : links)
    add({Op::Symlink, l[0], root + "/dev/" + l[1], "", "", 0, 0, "link /dev/" + std::string(l[1])});
  add({Op::Mount, "tmpfs", root + "/tmp", "tmpfs", "mode=1777", MS_NOSUID | MS_NODEV, 0,
       "mount /tmp"});
  auto bind = [&](const fs::path& source, const std::string& target, bool read_only) {
    // As the range's root, a host path is attached from the parent's mount:
    // idmapped where the sandbox writes it, read-only as it is otherwise.
    if (detach) return attach(source, root + target, !read_only, read_only);
    add({Op::Mount, source.string(), root + target, "", "", MS_BIND | MS_REC, 0,
         "bind " + source.string() + " on " + target});
    if (read_only)
      add({Op::BindRemount, "", root + target, "", "", MS_RDONLY | locked_flags(source), 0,
           "make " + target + " read-only"});
  };
  if (!resolv.empty()) bind(resolv, "/etc/resolv.conf", true);
  for (const auto& m : spec.mounts)
    bind(m.source, "/" + fs::path(m.target).relative_path().string(), m.read_only);
  add({Op::EnterRoot, "", root, "", "", 0, 0, "pivot_root into " + plan.mountpoint.string()});
  add({Op::Hostname, spec.hostname, "", "", "", 0, 0, "set the hostname"});
  if (!spec.network) add({Op::LoopbackUp, "", "", "", "", 0, 0, "bring up the loopback interface"});
  add({Op::Workdir, "", spec.cwd, "", "", 0, 0755, "enter the working directory " + spec.cwd});

  // argv[0] against the step's PATH, as execvpe would (without allocating later).
  const std::string& exe = spec.argv[0];
  if (exe.find('/') != std::string::npos) {
    plan.exe_candidates.push_back(exe);
  } else {
    auto it = spec.env.find("PATH");
    std::string path = it != spec.env.end()
                           ? it->second
                           : "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
    size_t start = 0;
    while (start <= path.size()) {
      size_t end = path.find(':', start);
      if (end == std::string::npos) end = path.size();
      std::string dir = path.substr(start, end - start);
      plan.exe_candidates.push_back((dir.empty() ? "." : dir) + "/" + exe);
      start = end + 1;
    }
  }
  return plan;
}

void remove_stubs(const SetupPlan& plan) {
  for (auto it = plan.created.rbegin(); it != plan.created.rend(); ++it) {
    struct stat st;
    if (::lstat(it->c_str(), &st) != 0) continue;
    if (S_ISDIR(st.st_mode))
      ::rmdir(it->c_str());  // only when empty
    else if (S_ISREG(st.st_mode) && st.st_size == 0)
      ::unlink(it->c_str());
  }
}

}  // namespace sb::sandbox::detail
