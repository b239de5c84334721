// Changesets from an overlayfs upper directory and from the copy-and-compare
// fallback (the same changes must give the same layer), and the sandbox's
// setup plan (mount point stubs, refusals). No namespaces are made here: the
// real sandbox is exercised by tests/integration/test_sandbox*.sh.
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <utime.h>

#include <catch2/catch.hpp>

#include "build/changeset.hpp"
#include "helpers.hpp"
#include "layer/write.hpp"
#include "sandbox/identity.hpp"
#include "sandbox/seccomp.hpp"
#include "sandbox/setup_plan.hpp"
#include "util/file.hpp"

using namespace sb;

namespace {

// The lower tree both cases start from.
void make_lower(const fs::path& l) {
  test::write(l / "a", "a\n");
  test::write(l / "b", "b\n");
  test::write(l / "d/x", "x\n");
  test::write(l / "d/y", "y\n");
  test::write(l / "e/z", "z\n");
  test::write(l / "e/keep", "k\n");
  test::write(l / "g/h", "h\n");
  fs::permissions(l / "d", fs::perms(0755));
  fs::permissions(l / "e", fs::perms(0755));
}

std::string keys(const EntryMap& m) {
  std::string s;
  for (const auto& [p, e] : m) s += p + (e.type == TarEntry::Type::Dir ? "/" : "") + " ";
  return s;
}

// The layer's digest: the same bytes or not.
Digest layer_digest(const EntryMap& m, const fs::path& store) {
  return write_layer(m, Store(store), LayerOptions{}).digest;
}

// An overlay sandbox over one empty lower directory in `tmp`, running `true`.
sandbox::SandboxSpec overlay_spec(const TempDir& tmp) {
  fs::path lower = tmp.path() / "lower";
  fs::create_directories(lower);
  sandbox::SandboxSpec s;
  s.lower = {lower};
  s.upper = tmp.path() / "rw/upper";
  s.work = tmp.path() / "rw/work";
  s.scratch = tmp.path() / "scratch";
  s.argv = {"true"};
  return s;
}

// The index of the plan's first op of `kind` on `b`, -1 when there is none.
long op_at(const sandbox::detail::SetupPlan& plan, sandbox::detail::Op::Kind kind, const std::string& b) {
  for (size_t i = 0; i < plan.ops.size(); ++i)
    if (plan.ops[i].kind == kind && plan.ops[i].b == b) return static_cast<long>(i);
  return -1L;
}

}  // namespace

TEST_CASE("copy-and-compare: changed and new paths stay - touched ones go - deletions are listed",
          "[sandbox][changeset]") {
  TempDir tmp;
  make_lower(tmp.path() / "lower");
  fs::path c = tmp.path() / "copy";
  fs::create_directories(c);
  copy_tree(tmp.path() / "lower", c);
  test::write(c / "a", "changed\n");
  ::utime((c / "b").c_str(), nullptr);  // touched: a new mtime, the same content
  fs::remove_all(c / "d");
  test::write(c / "d/x", "x\n");  // d made again: x the same, y gone, new added
  test::write(c / "d/new", "n\n");
  fs::permissions(c / "d", fs::perms(0755));
  fs::remove(c / "e/z");
  test::write(c / "f", "f\n");

  Changeset cs = changeset_from_copy(c, tmp.path() / "lower");
  CHECK(cs.deleted == std::vector<std::string>{"d/y", "e/z"});
  CHECK(cs.opaque.empty());
  EntryMap m = entries_from_changeset(cs, ScanOptions{});
  CHECK(keys(m) == "a d/ d/.wh.y d/new e/ e/.wh.z f ");
}

TEST_CASE("an overlay upper dir gives the same layer as the copy fallback for the same changes",
          "[sandbox][changeset]") {
  TempDir tmp;
  fs::path lower = tmp.path() / "lower", up = tmp.path() / "upper", c = tmp.path() / "copy";
  make_lower(lower);
  // What overlayfs writes for: change a, touch b, rm -rf d + mkdir d + d/x (same) + d/new,
  // rm e/z, add f, rm -rf g.
  test::write(up / "a", "changed\n");
  test::write(up / "b", "b\n");
  test::write(up / "d/x", "x\n");
  test::write(up / "d/new", "n\n");
  fs::permissions(up / "d", fs::perms(0755));
  fs::create_directories(up / "e");
  fs::permissions(up / "e", fs::perms(0755));
  test::write(up / "f", "f\n");
  if (::mknod((up / "e/z").c_str(), S_IFCHR | 0, makedev(0, 0)) != 0 ||
      ::mknod((up / "g").c_str(), S_IFCHR | 0, makedev(0, 0)) != 0) {
    WARN("cannot make overlayfs whiteouts (0/0 character devices) without CAP_MKNOD: part skipped");
    return;
  }
  REQUIRE(::setxattr((up / "d").c_str(), "user.overlay.opaque", "y", 1, 0) == 0);
  // The same changes on a copy.
  fs::create_directories(c);
  copy_tree(lower, c);
  test::write(c / "a", "changed\n");
  ::utime((c / "b").c_str(), nullptr);
  fs::remove_all(c / "d");
  test::write(c / "d/x", "x\n");
  test::write(c / "d/new", "n\n");
  fs::permissions(c / "d", fs::perms(0755));
  fs::remove(c / "e/z");
  test::write(c / "f", "f\n");
  fs::remove_all(c / "g");

  Changeset from_upper = changeset_from_upper(up, lower);
  Changeset from_copy = changeset_from_copy(c, lower);
  CHECK(from_upper.deleted == std::vector<std::string>{"d/y", "e/z", "g"});
  CHECK(from_copy.deleted == from_upper.deleted);
  EntryMap mu = entries_from_changeset(from_upper, ScanOptions{});
  EntryMap mc = entries_from_changeset(from_copy, ScanOptions{});
  CHECK(keys(mu) == ".wh.g a d/ d/.wh.y d/new e/ e/.wh.z f ");
  CHECK(keys(mu) == keys(mc));
  CHECK(layer_digest(mu, tmp.path() / "store") == layer_digest(mc, tmp.path() / "store"));
  // The opaque marker is gone from the tree that becomes the layer.
  char v[2];
  CHECK(::getxattr((up / "d").c_str(), "user.overlay.opaque", v, sizeof v) < 0);
}

TEST_CASE("a directory only copied up (same mode - nothing changed below) does not enter the layer",
          "[sandbox][changeset]") {
  TempDir tmp;
  fs::path lower = tmp.path() / "lower", up = tmp.path() / "upper";
  make_lower(lower);
  test::write(up / "d/x", "x\n");  // copied up by an open for writing, rewritten the same
  fs::permissions(up / "d", fs::perms(0755));
  fs::create_directories(up / "g");
  fs::permissions(up / "g", fs::perms(0700));  // chmod: a change
  fs::permissions(lower / "g", fs::perms(0755));
  Changeset cs = changeset_from_upper(up, lower);
  CHECK(keys(entries_from_changeset(cs, ScanOptions{})) == "g/ ");
  CHECK_FALSE(fs::exists(up / "d"));
}

TEST_CASE("sandbox setup: stubs mirror the lower directories - mounts through symlinks are refused",
          "[sandbox][setup]") {
  TempDir tmp;
  fs::path lower = tmp.path() / "lower";
  fs::create_directories(lower / "etc");
  fs::permissions(lower / "etc", fs::perms(0750));
  fs::create_directories(tmp.path() / "cache");
  fs::create_directories(lower / "opt");
  fs::create_symlink("/host/elsewhere", lower / "opt/link");

  sandbox::SandboxSpec s;
  s.lower = {lower};
  s.upper = tmp.path() / "upper";
  s.work = tmp.path() / "work";
  s.scratch = tmp.path() / "scratch";
  s.argv = {"make", "-j2"};
  s.env = {{"PATH", "/usr/bin:/bin"}};
  s.network = true;
  s.mounts = {{tmp.path() / "cache", "/etc/ccache", false}};
  auto plan = sandbox::detail::make_setup_plan(s, sandbox::detail::Identity::HostRoot);
  fs::path stubs = s.scratch / "stubs";
  CHECK(fs::is_directory(stubs / "etc/ccache"));
  CHECK((fs::status(stubs / "etc").permissions() & fs::perms::all) == fs::perms(0750));
  CHECK(fs::is_regular_file(stubs / "etc/resolv.conf"));
  CHECK(plan.exe_candidates == std::vector<std::string>{"/usr/bin/make", "/bin/make"});
  REQUIRE(plan.lower.size() == 2);
  CHECK(plan.lower[0] == stubs);
  bool binds_cache = false, no_new_net = true;
  for (const auto& op : plan.ops) {
    if (op.kind == sandbox::detail::Op::Mount && op.b.ends_with("/etc/ccache")) binds_cache = true;
    if (op.kind == sandbox::detail::Op::LoopbackUp) no_new_net = false;
  }
  CHECK(binds_cache);
  CHECK(no_new_net);

  // Root mode (the copy fallback): a mount target through a symlink could land on the host.
  sandbox::SandboxSpec r = s;
  r.lower.clear();
  r.root = lower;
  r.mounts = {{tmp.path() / "cache", "/opt/link/cache", false}};
  CHECK_THROWS_WITH(sandbox::detail::make_setup_plan(r, sandbox::detail::Identity::HostRoot),
                    Catch::Contains("goes through the symlink /opt/link"));
  r.mounts = {{tmp.path() / "cache", "/opt/../etc", false}};
  CHECK_THROWS_WITH(sandbox::detail::make_setup_plan(r, sandbox::detail::Identity::HostRoot), Catch::Contains("'..'"));

  // Overlay mode: the same for a symlink of a lower layer. Before, a mount
  // point directory /opt/link was made above it, hiding the link from the step.
  sandbox::SandboxSpec o = s;
  o.scratch = tmp.path() / "scratch2";
  o.mounts = {{tmp.path() / "cache", "/opt/link/cache", false}};
  CHECK_THROWS_WITH(sandbox::detail::make_setup_plan(o, sandbox::detail::Identity::HostRoot),
                    Catch::Contains("goes through the symlink /opt/link"));
  // The mount point itself may be a link of a lower layer: the mount replaces
  // it (an image whose /etc/resolv.conf links to ../run/systemd/...).
  fs::remove(lower / "etc/resolv.conf");  // the root-mode plan above made it
  fs::create_symlink("../run/systemd/resolve/resolv.conf", lower / "etc/resolv.conf");
  o.mounts = {{tmp.path() / "cache", "/opt/link", false}};
  o.scratch = tmp.path() / "scratch4";
  CHECK_NOTHROW(sandbox::detail::make_setup_plan(o, sandbox::detail::Identity::HostRoot));  // network: resolv.conf is mounted too
  CHECK(fs::is_regular_file(o.scratch / "stubs/etc/resolv.conf"));
  o.mounts = {{tmp.path() / "cache", "/opt/link/cache", false}};
  // ... unless a higher layer deleted it (a whiteout): then nothing is there.
  fs::path upper_layer = tmp.path() / "lower2";
  fs::create_directories(upper_layer / "opt");
  if (::mknod((upper_layer / "opt/link").c_str(), S_IFCHR | 0600, 0) == 0) {
    o.lower = {lower, upper_layer};  // bottom first
    o.scratch = tmp.path() / "scratch3";
    CHECK_NOTHROW(sandbox::detail::make_setup_plan(o, sandbox::detail::Identity::HostRoot));
    CHECK(fs::is_directory(o.scratch / "stubs/opt/link/cache"));
  }
}

TEST_CASE("sandbox setup: device nodes in directories of /dev (a CDI spec's /dev/dri/card1)",
          "[sandbox][setup]") {
  TempDir tmp;
  sandbox::SandboxSpec s = overlay_spec(tmp);
  // Before, any name with a '/' was refused, so a GPU test under an
  // nvidia-ctk spec failed with "sandbox: bad device name 'dri/card1'".
  s.devices = {"nvidia0", "dri/card1", "dri/renderD128"};
  auto plan = sandbox::detail::make_setup_plan(s, sandbox::detail::Identity::HostRoot);
  std::vector<std::string> made;
  for (const auto& op : plan.ops) {
    if (op.b.find("/dev/") == std::string::npos || op.b.ends_with("/dev/pts") ||
        op.b.ends_with("/dev/shm"))
      continue;
    std::string dev = op.b.substr(op.b.find("/dev/"));
    if (op.kind == sandbox::detail::Op::Mkdir) made.push_back("mkdir " + dev);
    if (op.kind == sandbox::detail::Op::Touch) made.push_back("touch " + dev);
    if (op.kind == sandbox::detail::Op::Mount && op.a == dev) made.push_back("bind " + dev);
  }
  CHECK(made == std::vector<std::string>{"touch /dev/nvidia0", "bind /dev/nvidia0",
                                         "mkdir /dev/dri", "touch /dev/dri/card1",
                                         "bind /dev/dri/card1", "touch /dev/dri/renderD128",
                                         "bind /dev/dri/renderD128"});
  // A node bound from elsewhere on the host (a CDI spec's hostPath).
  s.device_sources = {{"dri/card1", "/run/nvidia/driver/dev/dri/card1"}};
  s.scratch = tmp.path() / "scratch-sources";
  plan = sandbox::detail::make_setup_plan(s, sandbox::detail::Identity::HostRoot);
  CHECK(std::any_of(plan.ops.begin(), plan.ops.end(), [](const auto& op) {
    return op.kind == sandbox::detail::Op::Mount && op.a == "/run/nvidia/driver/dev/dri/card1" &&
           op.b.ends_with("/dev/dri/card1");
  }));
  s.device_sources.clear();
  // A CDI spec's links among them, made after the nodes; no name through one.
  s.device_links = {{"dri/by-path/pci-0000:3b:00.0-card", "../card1"}};
  plan = sandbox::detail::make_setup_plan(s, sandbox::detail::Identity::HostRoot);
  auto link = std::find_if(plan.ops.begin(), plan.ops.end(), [](const auto& op) {
    return op.kind == sandbox::detail::Op::Symlink && op.a == "../card1";
  });
  REQUIRE(link != plan.ops.end());
  CHECK(link->b.ends_with("/dev/dri/by-path/pci-0000:3b:00.0-card"));
  s.device_links = {{"x", "/etc"}, {"x/passwd", "y"}};
  s.scratch = tmp.path() / "scratch-links";
  CHECK_THROWS_WITH(sandbox::detail::make_setup_plan(s, sandbox::detail::Identity::HostRoot),
                    Catch::Contains("/dev/x/passwd would be made through the link /dev/x"));
  s.device_links = {{"dri/../../etc/x", "y"}};
  s.scratch = tmp.path() / "scratch-links2";
  CHECK_THROWS_WITH(sandbox::detail::make_setup_plan(s, sandbox::detail::Identity::HostRoot),
                    Catch::Contains("bad device link name"));
  s.device_links.clear();
  for (const char* bad :
       {"", "/nvidia0", "../nvidia0", "dri/../../etc", "dri//card1", "dri/./card1", "dri/"}) {
    CAPTURE(bad);
    s.devices = {bad};
    s.scratch = tmp.path() / ("scratch-" + std::to_string(std::hash<std::string>{}(bad)));
    CHECK_THROWS_WITH(sandbox::detail::make_setup_plan(s, sandbox::detail::Identity::HostRoot),
                      Catch::Contains("bad device name"));
  }
}

TEST_CASE("sandbox setup as root: a user namespace over idmapped mounts, /proc masked",
          "[sandbox][setup]") {
  using sandbox::detail::Op;
  TempDir tmp;
  sandbox::SandboxSpec s = overlay_spec(tmp);
  const fs::path lower = s.lower.front();
  fs::create_directories(lower / "etc");
  fs::create_directories(tmp.path() / "cache");
  fs::create_directories(tmp.path() / "drivers");
  s.devices = {"null", "nvidia0"};
  s.mounts = {{tmp.path() / "cache", "/root/.cache", false},
              {tmp.path() / "drivers", "/usr/lib/drivers", true}};
  auto plan = sandbox::detail::make_setup_plan(s, sandbox::detail::Identity::RootRange);
  auto at = [&](Op::Kind k, const std::string& b) { return op_at(plan, k, b); };
  // Every path is relative to the scratch directory, entered first.
  REQUIRE(plan.ops.size() > 2);
  CHECK(plan.ops[0].kind == Op::Chdir);
  CHECK(plan.ops[0].b == s.scratch.string());
  // The layers are attached (idmapped, the lower read-only) while still the
  // host's root, then the init becomes the range's root, then mounts the overlay.
  const long become = at(Op::BecomeRoot, "");
  REQUIRE(become > 0);
  CHECK(at(Op::Attach, "idmap/0") < become);  // the stubs
  CHECK(at(Op::Attach, "idmap/1") < become);  // the lower
  CHECK(at(Op::Attach, "idmap/rw") < become);
  long overlay = -1;
  for (size_t i = 0; i < plan.ops.size(); ++i)
    if (plan.ops[i].c == "overlay") overlay = static_cast<long>(i);
  REQUIRE(overlay > become);
  CHECK(plan.ops[overlay].data.starts_with("lowerdir=idmap/0:idmap/1,upperdir=idmap/rw/upper,workdir=idmap/rw/work"));
  CHECK(plan.ops[overlay].data.find("userxattr") != std::string::npos);
  std::map<std::string, const sandbox::detail::Detached*> by_source;
  for (const auto& d : plan.detached) {
    CHECK(plan.ops[d.op].kind == Op::Attach);
    by_source[d.source.string()] = &d;
  }
  REQUIRE(by_source.count(lower.string()));
  CHECK((by_source[lower.string()]->idmap && by_source[lower.string()]->read_only));
  REQUIRE(by_source.count((tmp.path() / "rw").string()));
  CHECK(!by_source[(tmp.path() / "rw").string()]->read_only);
  // A writable bind is idmapped (what the step writes keeps its owners on
  // disk); a read-only one is not (nobody may write it, and the host's files
  // stay the host's); device nodes are neither.
  REQUIRE(by_source.count((tmp.path() / "cache").string()));
  CHECK(by_source[(tmp.path() / "cache").string()]->idmap);
  REQUIRE(by_source.count((tmp.path() / "drivers").string()));
  CHECK(!by_source[(tmp.path() / "drivers").string()]->idmap);
  CHECK(by_source[(tmp.path() / "drivers").string()]->read_only);
  REQUIRE(by_source.count("/dev/nvidia0"));
  CHECK(!by_source["/dev/nvidia0"]->idmap);
  CHECK(at(Op::Attach, "root/root/.cache") > overlay);
  // runc's masked and read-only paths of /proc.
  CHECK(at(Op::Mount, "root/proc/kcore") > 0);
  CHECK(at(Op::Mount, "root/proc/keys") > 0);
  CHECK(at(Op::BindRemount, "root/proc/sys") > 0);
  CHECK(at(Op::BindRemount, "root/proc/sysrq-trigger") < 0);  // masked instead
  CHECK(at(Op::Mount, "root/proc/sysrq-trigger") > 0);
  // The copy fallback: its root directory itself is the idmapped mount.
  sandbox::SandboxSpec r = s;
  r.lower.clear();
  r.root = lower;
  r.scratch = tmp.path() / "scratch2";
  plan = sandbox::detail::make_setup_plan(r, sandbox::detail::Identity::RootRange);
  REQUIRE(!plan.detached.empty());
  CHECK(plan.detached[0].source == lower);
  CHECK(plan.detached[0].idmap);
  CHECK(plan.ops[plan.detached[0].op].b == "root");
}

TEST_CASE("sandbox setup: an emulator registered in the sandbox's own binfmt_misc - read-only - never the host's",
          "[sandbox][setup][emulation]") {
  using sandbox::detail::Op;
  TempDir tmp;
  sandbox::SandboxSpec s = overlay_spec(tmp);
  const std::string line = ":qemu-aarch64:M::magic:mask:/usr/bin/qemu-aarch64-static:F";
  auto plan = sandbox::detail::make_setup_plan(s, sandbox::detail::Identity::RootRange, line);
  auto at = [&](Op::Kind k, const std::string& b) { return op_at(plan, k, b); };
  const std::string dir = "root/proc/sys/fs/binfmt_misc";
  const long proc = at(Op::Mount, "root/proc"), mount = at(Op::Mount, dir);
  const long reg = at(Op::Write, dir + "/register"), ro = at(Op::BindRemount, dir);
  // After /proc, as the namespace's root, before /proc/sys is bound read-only
  // and the root entered (the interpreter is opened by its host path).
  REQUIRE(proc > at(Op::BecomeRoot, ""));
  CHECK(mount > proc);
  CHECK(plan.ops[mount].c == "binfmt_misc");
  REQUIRE(reg > mount);
  CHECK(plan.ops[reg].a == line);
  CHECK(ro > reg);
  CHECK((plan.ops[ro].flags & MS_RDONLY) != 0);
  CHECK(at(Op::BindRemount, "root/proc/sys") > ro);
  CHECK(at(Op::EnterRoot, "root") > ro);
  // Without one, none of it.
  s.scratch = tmp.path() / "scratch2";
  plan = sandbox::detail::make_setup_plan(s, sandbox::detail::Identity::RootRange);
  CHECK(at(Op::Mount, dir) < 0);
  // Without a user namespace the binfmt_misc would be the host's: refused.
  s.scratch = tmp.path() / "scratch3";
  CHECK_THROWS_WITH(sandbox::detail::make_setup_plan(s, sandbox::detail::Identity::HostRoot, line),
                    Catch::Contains("without a user namespace"));
}

TEST_CASE("sandbox identity: root's subordinate ids from /etc/subuid and /etc/subgid",
          "[sandbox][identity]") {
  using sandbox::detail::subid_range;
  CHECK(subid_range("# comment\nalice:100000:65536\nroot:200000:65536\n", "root", "0") ==
        std::optional<std::pair<uint32_t, uint32_t>>({200000u, 65536u}));
  CHECK(subid_range("0:300000:1000\n", "root", "0") ==
        std::optional<std::pair<uint32_t, uint32_t>>({300000u, 1000u}));
  CHECK(!subid_range("alice:100000:65536\n", "root", "0"));
  // Bad lines are passed over: no count, a zero count, a range past 2^32, a start of 0.
  CHECK(!subid_range("root:100000\nroot:100000:0\nroot:4294967000:65536\nroot:0:65536\nroot:x:1\n",
                     "root", "0"));
  TempDir tmp;
  write_file_atomic(tmp.path() / "subuid", "root:200000:131072\n");
  write_file_atomic(tmp.path() / "subgid", "root:300000:65536\n");
  auto r = sandbox::detail::root_id_range(tmp.path() / "subuid", tmp.path() / "subgid");
  CHECK(r.uid == 200000u);
  CHECK(r.gid == 300000u);
  CHECK(r.count == 65536u);  // at most 65536, and no more than either file gives
  // Without both files: the fixed, documented range.
  r = sandbox::detail::root_id_range(tmp.path() / "subuid", tmp.path() / "missing");
  CHECK(r.uid == sandbox::detail::kDefaultRange.uid);
  CHECK(r.count == 65536u);
  CHECK(sandbox::detail::id_map_line(200000, 65536) == "0 200000 65536\n");
}

TEST_CASE("sandbox seccomp: the filter is built and refuses what Docker's profile refuses",
          "[sandbox][seccomp]") {
  const auto& program = sandbox::detail::seccomp_program();
  CHECK(program.size() > 20);
  const auto& denied = sandbox::detail::seccomp_denied();
  for (const char* name : {"kexec_load", "init_module", "bpf", "perf_event_open", "keyctl",
                           "userfaultfd", "mount", "unshare", "setns", "open_by_handle_at"})
    CHECK(std::find_if(denied.begin(), denied.end(),
                       [&](const char* d) { return std::string(d) == name; }) != denied.end());
}
