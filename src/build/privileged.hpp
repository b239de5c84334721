// Setuid, setgid and file-capability files of a cached root, kept off the
// host's disk.
//
// A cached root (<store>/rootfs/, pipeline/step_runner.hpp) is a host
// directory that build steps run on. Its regular files carry none of those
// bits on disk: whoever reaches the store (root, or a bug in a later stage)
// finds no setuid-root program or capability there. What the image has is
// recorded beside the tree instead, and given back inside the sandbox only:
// before the steps run, each such file is copied with its bits into the
// step's own upper directory (or root copy), and the changeset compares
// against the recorded bits, so that a file the steps left alone stays out of
// the layer and a step's `chmod u-s` is a change like any other.
// Directories keep their setgid bits (a group to inherit, not a privilege).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>

namespace sb {

namespace fs = std::filesystem;

struct PrivilegedFile {
  uint32_t mode = 0;       // permission bits as the image has them (07777)
  std::string capability;  // the security.capability value; "" for none
};

// By path relative to the root, '/'-separated.
using PrivilegedFiles = std::map<std::string, PrivilegedFile>;

// Walks `tree` (never through a symlink) and takes the setuid and setgid
// bits and security.capability off every regular file that has them,
// returning what it took. `inherited`: the record of the tree `tree` was
// hardlinked from (its files are already without the bits); a file that is
// still one of those inodes keeps that record.
PrivilegedFiles take_privileged(const fs::path& tree, const PrivilegedFiles& inherited = {},
                                const fs::path& inherited_tree = {});

// Gives the recorded bits back under `top`: with `lower` set, `top` is an
// overlayfs upper directory over `lower`, and each file is copied up from
// there first (its parents made with the lower ones' mode, owner and xattrs);
// otherwise `top` is a full copy of the root and its files are changed in
// place. Never follows a symlink.
void restore_privileged(const PrivilegedFiles& files, const fs::path& top, const fs::path& lower = {});

// The record as JSON text, and back. Throws sb::Error for a malformed record.
std::string privileged_to_json(const PrivilegedFiles& files);
PrivilegedFiles privileged_from_json(const std::string& text, const std::string& where);

}  // namespace sb
