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
  // The image path a mount on image path `p` lands on: the symlinks of the
  // components that exist followed as for resolve(), the rest taken as
  // written ("/lib/firmware/nvidia/x" -> "/usr/lib/firmware/nvidia/x" where
  // /lib -> usr/lib), as runc's securejoin does. Never outside the root; a
  // symlink loop ends it where it is.
  std::string mount_path(const std::string& p) const;
  // The image path of a host path under the root: root/usr/bin/x -> /usr/bin/x.
  std::string image_path(const fs::path& host) const;

  // The library directories the image's dynamic linker searches by default:
  // /etc/ld.so.conf (with its includes) then the multiarch and plain dirs.
  std::vector<std::string> linker_dirs() const;
  // Whether the image is Debian's or a derivative (/etc/debian_version): its
  // libraries are in glibc's multiarch directories (/usr/lib/x86_64-linux-gnu).
  bool debian_family() const;
  // The directories the image's ldconfig caches unasked, each as mount_path()
  // gives it: those /etc/ld.so.conf names (with its includes), then glibc's
  // trusted ones: /lib/TUPLE, /usr/lib/TUPLE, /lib and /usr/lib in a
  // Debian-family image, /lib64 and /usr/lib64 in others.
  std::vector<std::string> ldconfig_dirs(const std::string& multiarch_tuple) const;

 private:
  // The components `p` names under the root; a missing one ends the walk
  // (nullopt) unless `missing_ok`, when it and the rest are taken as written.
  std::optional<std::vector<std::string>> walk(const std::string& p, bool missing_ok) const;

  fs::path root_;
};

}  // namespace sb::verify
