// Canaries for the targets that write files (archives, installers, the
// changeset walker): things a hostile input tries to reach, checked after
// every run. Two of them:
//
//   - `Canary`: a directory beside the target in the scratch directory, for
//     relative escapes ("../outside/canary");
//   - `HostCanary`: a fixed absolute path outside the scratch directory,
//     /tmp/stackbuild-fuzz-host/, which the seeds name in absolute symlinks
//     and hardlinks and reach with enough "../" from wherever the scratch
//     directory is.
//
// Each holds a file and a directory of known content and mode; after the
// run, nothing new is there, nothing was changed or chmod-ed, and
// `check_nothing_read` says no file of the result holds a canary's bytes
// (a hardlink or a copy made through a link that led out).
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "fuzz.hpp"

namespace sb::fuzz {

namespace canary_detail {

namespace fs = std::filesystem;

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline std::set<std::string> names(const fs::path& dir) {
  std::set<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) out.insert(e.path().filename().string());
  return out;
}

// `path` is a plain file or directory (not a link) of mode `mode`.
inline void check_node(const fs::path& path, bool dir, mode_t mode, const std::string& what) {
  struct stat st;
  check(::lstat(path.c_str(), &st) == 0, what + ": " + path.string() + " is gone");
  check(dir ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode), what + ": " + path.string() + " changed its type");
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04o, not %04o", unsigned(st.st_mode & 07777), unsigned(mode));
  check((st.st_mode & 07777) == mode, what + ": " + path.string() + " was chmod-ed (" + buf + ")");
}

// A file and a directory holding a file, under `top`.
struct Layout {
  fs::path top;
  std::string text;  // the file's content (and the inner file's, with "inner " in front)

  void make(mode_t top_mode) const {
    fs::create_directories(top / "dir");
    write_file(top / "canary", text);
    write_file(top / "dir" / "inner", "inner " + text);
    ::chmod((top / "canary").c_str(), 0640);
    ::chmod((top / "dir" / "inner").c_str(), 0600);
    ::chmod((top / "dir").c_str(), 0750);
    ::chmod(top.c_str(), top_mode);
  }

  void check_same(mode_t top_mode, const std::string& what) const {
    check_node(top, true, top_mode, what);
    check_node(top / "canary", false, 0640, what);
    check_node(top / "dir", true, 0750, what);
    check_node(top / "dir" / "inner", false, 0600, what);
    check(names(top) == std::set<std::string>{"canary", "dir"},
          what + ": something new appeared in " + top.string());
    check(names(top / "dir") == std::set<std::string>{"inner"},
          what + ": something new appeared in " + (top / "dir").string());
    check(slurp(top / "canary") == text && slurp(top / "dir" / "inner") == "inner " + text,
          what + ": a file in " + top.string() + " was changed");
  }

  // Content and inodes a result must not hold.
  void forbidden(std::vector<std::string>& texts, std::set<std::pair<dev_t, ino_t>>& inodes) const {
    texts.push_back(text);
    texts.push_back("inner " + text);
    for (const fs::path& p : {top / "canary", top / "dir" / "inner"}) {
      struct stat st;
      if (::lstat(p.c_str(), &st) == 0) inodes.insert({st.st_dev, st.st_ino});
    }
  }
};

}  // namespace canary_detail

// scratch/outside/{canary,dir/inner}: after the run, the scratch directory
// holds only that, the target and the paths given as allowed.
struct Canary {
  canary_detail::Layout layout;
  explicit Canary(const std::filesystem::path& scratch)
      : layout{scratch / "outside", "stackbuild fuzz canary beside the target\n"} {
    layout.make(0755);
  }
  void check(const std::filesystem::path& scratch, const std::vector<std::filesystem::path>& allowed) const {
    for (const auto& e : std::filesystem::directory_iterator(scratch)) {
      bool ok = e.path() == layout.top;
      for (const auto& a : allowed) ok = ok || e.path() == a;
      sb::fuzz::check(ok, "something was written outside the target: " + e.path().string());
    }
    layout.check_same(0755, "outside the target");
  }
};

// /tmp/stackbuild-fuzz-host/{canary,dir/inner}, made once (by whichever
// process comes first: fuzz targets run in parallel under CTest) and only
// read after that. If a run finds it already changed, an earlier run broke
// it: that is a finding too, and the directory is to be removed by hand
// after looking at it.
inline constexpr const char* kHostCanaryDir = "/tmp/stackbuild-fuzz-host";

struct HostCanary {
  canary_detail::Layout layout{kHostCanaryDir, "stackbuild fuzz canary on the host\n"};
  HostCanary() {
    namespace fs = std::filesystem;
    static const bool made = [this] {
      if (!fs::exists(layout.top)) {
        // Made aside and renamed into place, so no process sees it half made.
        std::string tmp = layout.top.string() + ".XXXXXX";
        if (!::mkdtemp(tmp.data())) fail("mkdtemp " + tmp);
        canary_detail::Layout{tmp, layout.text}.make(0755);
        if (::rename(tmp.c_str(), layout.top.c_str()) != 0) {
          std::error_code ec;
          fs::remove_all(tmp, ec);  // another process made it first
        }
      }
      layout.check_same(0755, "the host canary (changed before this run: remove " + layout.top.string() +
                                  " after looking at it)");
      return true;
    }();
    (void)made;
  }
  void check() const { layout.check_same(0755, "the host canary"); }
};

// No regular file under `tree` holds the content of, or is, a canary file.
inline void check_nothing_read(const std::filesystem::path& tree, const Canary* beside, const HostCanary* host) {
  namespace fs = std::filesystem;
  std::vector<std::string> texts;
  std::set<std::pair<dev_t, ino_t>> inodes;
  if (beside) beside->layout.forbidden(texts, inodes);
  if (host) host->layout.forbidden(texts, inodes);
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(tree, fs::directory_options::skip_permission_denied, ec);
       it != fs::recursive_directory_iterator(); it.increment(ec)) {
    struct stat st;
    if (::lstat(it->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    check(!inodes.count({st.st_dev, st.st_ino}), "a canary file was linked into the result: " + it->path().string());
    for (const auto& t : texts)
      if (static_cast<size_t>(st.st_size) == t.size())
        check(canary_detail::slurp(it->path()) != t,
              "a canary's content was read into the result: " + it->path().string());
  }
}

}  // namespace sb::fuzz
