// Wheel compatibility tags (PEP 425, PEP 600 manylinux, PEP 656 musllinux):
// which wheels run on the image's Python, libc and architecture, and which of
// several is best, in the order pip would prefer them.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace sb::pip {

// The image a wheel is installed into.
struct Target {
  std::string python = "3.12";       // X.Y (CPython)
  std::string machine = "x86_64";    // x86_64, aarch64
  std::string libc = "glibc";        // glibc or musl
  std::string libc_version = "2.36"; // 2.MM (glibc) or 1.N (musl)
  std::string prefix = "/usr/local"; // where scripts (bin/) and data go
  std::string site_packages;         // absolute; "" = <prefix>/lib/pythonX.Y/site-packages
  std::string interpreter = "/usr/bin/python3";  // the shebang of console scripts

  // For an image of `os` "debian"/"ubuntu": pip's Debian layout (dist-packages).
  static Target for_distro(const std::string& distro, const std::string& python, const std::string& glibc,
                           const std::string& oci_arch);
  std::string site() const;  // site_packages or its default
  std::string describe() const;  // "CPython 3.12, manylinux glibc 2.36, x86_64"
};

// "cp312-cp312-manylinux_2_17_x86_64" -> rank, lower is better; a tag not in
// the map is not supported by the target.
class TagPriority {
 public:
  explicit TagPriority(const Target& t);
  std::optional<int> rank(const std::string& python, const std::string& abi, const std::string& platform) const;
  const std::vector<std::string>& ordered() const { return ordered_; }

 private:
  std::map<std::string, int> ranks_;
  std::vector<std::string> ordered_;
};

struct WheelName {
  std::string name, version, build;
  std::vector<std::string> pythons, abis, platforms;  // compressed tag sets expanded
  static std::optional<WheelName> parse(const std::string& filename);
  // The best rank over the file's tags, unset when none is supported.
  std::optional<int> best_rank(const TagPriority& p) const;
};

}  // namespace sb::pip
