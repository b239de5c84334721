// What a layer's build steps changed, as the layer stage takes it.
//
// After the steps ran in the sandbox, their writes are in an overlayfs upper
// directory (or, where overlayfs is unavailable, in a full copy of the root).
// Both become the same Changeset: `root` is pruned in place to the added and
// changed paths (files a step only touched, with the same content, mode,
// owner and xattrs as below, are dropped: mtimes do not count), and every path
// the steps removed from the layers below is listed in `deleted`. A directory
// that was removed and made again (overlayfs marks it opaque) is expressed the
// same way: explicit deletions of what it held below, so the overlay and the
// copy paths give byte-identical layers.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "build/privileged.hpp"

namespace sb {

namespace fs = std::filesystem;

// A changeset: what a build step changed. `root` holds added and changed paths;
// `deleted` paths become `.wh.` whiteouts, `opaque` directories get `.wh..wh..opq`.
struct Changeset {
  fs::path root;
  std::vector<std::string> deleted;
  std::vector<std::string> opaque;
};

// `upper`: an overlayfs upper directory over the single directory `lower`.
// Whiteouts (0/0 character devices) and opaque markers (trusted. or
// user.overlay.opaque) are turned into `deleted` paths and removed from it.
// `privileged`: the lower directory's files whose setuid, setgid or
// capability bits are recorded rather than on disk (build/privileged.hpp);
// they compare with those bits.
Changeset changeset_from_upper(const fs::path& upper, const fs::path& lower, const PrivilegedFiles& privileged = {});

// `root`: a copy of `lower` (see copy_tree) that steps then changed.
Changeset changeset_from_copy(const fs::path& root, const fs::path& lower, const PrivilegedFiles& privileged = {});

// Copies the tree under `src` into the existing directory `dst`: files,
// directories, symlinks, device nodes and fifos, with owner (as root), mode,
// mtime and xattrs. Hardlinks become separate files; with `link_files`,
// every regular file is a hardlink to the source's instead of a copy (for
// trees nobody writes in place, such as overlayfs lower directories).
void copy_tree(const fs::path& src, const fs::path& dst, bool link_files = false);

// Copies one entry as copy_tree does, a directory without its contents.
void copy_entry(const fs::path& src, const fs::path& dst);

}  // namespace sb
