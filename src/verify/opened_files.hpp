// The files of an unpacked image that its tests open, in the order first
// opened: what an eStargz layer's prefetch order lists (docs/partial-pulls.md).
//
// fanotify watches the filesystem that holds the image's root, reporting file
// handles, not open descriptors: nothing of the tests' files is opened in
// stackbuild, and no descriptor of stackbuild's reaches the tests. A test
// reads the root through an overlayfs over it, whose opens reach the files
// below, so the events name the root's own files; the handles are matched
// against the root's regular files after the tests end. Opens of those files
// by other processes in that time count too (none on a build machine).
// Linux only; needs CAP_SYS_ADMIN (root), as fanotify does.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace sb::verify {

namespace fs = std::filesystem;

class OpenedFiles {
 public:
  // Starts watching; throws, saying why, where fanotify cannot.
  explicit OpenedFiles(fs::path root);
  ~OpenedFiles();
  OpenedFiles(const OpenedFiles&) = delete;
  OpenedFiles& operator=(const OpenedFiles&) = delete;

  // Stops watching. The root's regular files that were opened, as paths
  // relative to it ("usr/lib/libx.so"; of a file with several names, the
  // first in byte order), first opened first. Call once.
  std::vector<std::string> finish();

  // Whether the kernel dropped events (its queue overflowed): the list may
  // then lack files. Valid after finish().
  bool lost_events() const;

 private:
  struct Watch;
  std::unique_ptr<Watch> watch_;
};

}  // namespace sb::verify
