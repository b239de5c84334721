// Looking at an unpacked image from the host: paths are resolved the way the
// image would see them (absolute symlinks start at the image root, '..'
// stops at it), never reaching outside the root.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace sb::verify {

namespace fs = std::filesystem;

class ImageRoot {
 public:
  explicit ImageRoot(fs::path root) : root_(std::move(root)) {}
  const fs::path& root() const { return root_; }

  // The host path of image path `p` (absolute, e.g. "/usr/lib/libx.so"), with
  // every symlink followed inside the root; nullopt when it does not exist.
  std::optional<fs::path> resolve(const std::string& p) const;
  // The image path of a host path under the root: root/usr/bin/x -> /usr/bin/x.
  std::string image_path(const fs::path& host) const;

  // The library directories the image's dynamic linker searches by default:
  // /etc/ld.so.conf (with its includes) then the multiarch and plain dirs.
  std::vector<std::string> linker_dirs() const;

 private:
  fs::path root_;
};

}  // namespace sb::verify
