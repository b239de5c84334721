// The changeset walker (build/changeset.hpp) over trees a build step could
// leave: the fuzz bytes are operations that make a lower directory and an
// overlayfs upper directory (or a copy of the lower one that steps then
// changed): files, directories, hardlinks, symlinks (absolute ones and "../"
// ones aimed at the canaries), chmods, user xattrs, opaque markers and, as
// root, whiteouts (0/0 character devices). Then the walker runs. Besides
// only sb::Error: it follows no link out of the tree, so the canaries
// (canary.hpp) and the lower directory are as they were, each deleted path
// is a path of the lower directory through no link, and nothing of a
// canary's is in the result.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <iterator>

#include "build/changeset.hpp"
#include "canary.hpp"
#include "fuzz.hpp"

namespace {

namespace fs = std::filesystem;
using sb::fuzz::Canary;
using sb::fuzz::HostCanary;

// Names, some of them those the canaries hold (a whiteout of one says the
// walker looked through a link if it lists it).
const char* const kNames[] = {"a", "b", "c", "lib", ".wh.a", "x y", "inner", "canary", "dir"};
const char* const kContents[] = {"", "a", "b\n", "same content\n", "#!/bin/sh\nexit 0\n"};
// Where symlinks lead: the host canary, the canary beside the tree (from the
// tree's top, one and two levels down), the lower tree, up and around.
const char* const kTargets[] = {"/tmp/stackbuild-fuzz-host",
                                "/tmp/stackbuild-fuzz-host/canary",
                                "/tmp/stackbuild-fuzz-host/dir",
                                "../outside",
                                "../../outside/canary",
                                "../../../../../../../../../../tmp/stackbuild-fuzz-host/dir",
                                "../lower",
                                "../../lower/a",
                                "..",
                                ".",
                                "a",
                                "/",
                                "lib/../a"};
const mode_t kModes[] = {0755, 0644, 0000, 0700, 04755, 01777, 0444, 0111};

// One tree being made: its top and the directories made in it (relative).
struct Tree {
  fs::path top;
  std::vector<std::string> dirs{""};
  std::vector<std::string> files;

  // `rel` below `top` goes through real directories only (a step may have
  // put a link where a directory was: the maker must not follow it either).
  bool plain(const std::string& rel) const {
    fs::path at = top;
    for (const auto& c : fs::path(rel)) {
      at /= c;
      struct stat st;
      if (::lstat(at.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return false;
    }
    return true;
  }
};

void apply(Tree& t, const uint8_t* op) {
  const std::string& parent = t.dirs[op[1] % t.dirs.size()];
  if (!t.plain(parent)) return;
  std::string rel = parent.empty() ? kNames[op[2] % std::size(kNames)] : parent + "/" + kNames[op[2] % std::size(kNames)];
  fs::path p = t.top / rel;
  struct stat st;
  bool there = ::lstat(p.c_str(), &st) == 0;
  const uint8_t arg = op[3];
  switch (op[0] % 9) {
    case 0:
      if (::mkdir(p.c_str(), 0755) == 0) t.dirs.push_back(rel);
      break;
    case 1:
      if (!there) {
        sb::fuzz::write_file(p, kContents[arg % std::size(kContents)]);
        t.files.push_back(rel);
      }
      break;
    case 2:
      (void)::symlink(kTargets[arg % std::size(kTargets)], p.c_str());
      break;
    case 3:  // a whiteout: only root may make one
      if (::geteuid() == 0) (void)::mknod(p.c_str(), S_IFCHR | 0, ::makedev(0, 0));
      break;
    case 4:  // the opaque marker on a directory
      if (there && S_ISDIR(st.st_mode)) {
        (void)::lsetxattr(p.c_str(), arg & 1 ? "trusted.overlay.opaque" : "user.overlay.opaque", "y", 1, 0);
      }
      break;
    case 5:
      if (there && !S_ISLNK(st.st_mode)) (void)::chmod(p.c_str(), kModes[arg % std::size(kModes)]);
      break;
    case 6: {  // a step removed it
      std::error_code ec;
      fs::remove_all(p, ec);
      break;
    }
    case 7:
      if (there && !S_ISLNK(st.st_mode)) (void)::lsetxattr(p.c_str(), "user.fuzz", &arg, 1, 0);
      break;
    case 8:  // a hardlink to a file made before (in this tree)
      if (!t.files.empty()) {
        const std::string& from = t.files[arg % t.files.size()];
        if (t.plain(fs::path(from).parent_path().string())) (void)::link((t.top / from).c_str(), p.c_str());
      }
      break;
  }
}

// Everything about a tree that a walker must not change: each path with its
// type, mode, owner, link target, device, xattrs and content.
std::string snapshot(const fs::path& top) {
  std::string out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(top, ec); it != fs::recursive_directory_iterator(); it.increment(ec)) {
    struct stat st;
    if (::lstat(it->path().c_str(), &st) != 0) continue;
    out += it->path().lexically_relative(top).string() + " " + std::to_string(st.st_mode) + " " +
           std::to_string(st.st_uid) + ":" + std::to_string(st.st_gid) + " " + std::to_string(st.st_rdev);
    if (S_ISLNK(st.st_mode)) out += " -> " + fs::read_symlink(it->path(), ec).string();
    if (S_ISREG(st.st_mode)) out += " = " + sb::fuzz::canary_detail::slurp(it->path());
    char names[1024];
    ssize_t n = ::llistxattr(it->path().c_str(), names, sizeof names);
    if (n > 0) out += " xattrs " + std::string(names, static_cast<size_t>(n));
    out += "\n";
  }
  return out;
}

}  // namespace

// The first byte: bit 0 picks the overlay upper directory (else a copy of
// the lower one); then 4-byte operations (kind, parent, name, argument),
// each with bit 7 of its first byte saying which tree (lower, or upper or
// copy). The copy is made after every lower operation, and only then
// changed (its directories and files are the lower tree's, to begin with).
// tests/fuzz/make_seeds.py writes such programs.
SB_FUZZ_TARGET(changeset) {
  if (size == 0) return;
  const fs::path& scratch = sb::fuzz::fresh_scratch();
  Canary canary(scratch);
  HostCanary host;
  const bool overlay = data[0] & 1;
  Tree lower{scratch / "lower", {""}, {}}, upper{scratch / "upper", {""}, {}};
  fs::create_directories(lower.top);
  fs::create_directories(upper.top);
  const size_t ops = std::min<size_t>((size - 1) / 4, 64);
  for (size_t i = 0; i < ops; ++i)
    if (!(data[1 + 4 * i] & 0x80)) apply(lower, data + 1 + 4 * i);
  const std::string before = snapshot(lower.top);
  if (!overlay) {
    if (!sb::fuzz::expect_errors([&] { sb::copy_tree(lower.top, upper.top); })) return;
    upper.dirs = lower.dirs, upper.files = lower.files;
  }
  for (size_t i = 0; i < ops; ++i)
    if (data[1 + 4 * i] & 0x80) apply(upper, data + 1 + 4 * i);

  sb::Changeset cs;
  sb::fuzz::expect_errors([&] {
    cs = overlay ? sb::changeset_from_upper(upper.top, lower.top) : sb::changeset_from_copy(upper.top, lower.top);
  });
  canary.check(scratch, {lower.top, upper.top});
  host.check();
  sb::fuzz::check(snapshot(lower.top) == before, "the walker changed the lower directory");
  sb::fuzz::check_nothing_read(upper.top, &canary, &host);
  for (const auto& d : cs.deleted) {
    sb::fuzz::check(!d.empty() && d[0] != '/', "a deleted path that is not relative: " + d);
    fs::path p(d);
    for (const auto& c : p) sb::fuzz::check(c != ".." && c != "." && !c.empty(), "a deleted path with '.' or '..': " + d);
    sb::fuzz::check(lower.plain(p.parent_path().string()), "a deleted path through a link of the lower directory: " + d);
    struct stat st;
    sb::fuzz::check(::lstat((lower.top / p).c_str(), &st) == 0, "a deleted path that the lower directory does not have: " + d);
  }
}
