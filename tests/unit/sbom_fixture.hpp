// What the SBOM tests share (test_sbom.cpp, test_sbom_layout.cpp): a dpkg
// status file of five packages, and a package looked up by type and name.
#pragma once

#include <string>

#include "image/sbom.hpp"

namespace sb::test::sbom_fixture {

inline const char* const kStatus =
    "Package: libc6\n"
    "Status: install ok installed\n"
    "Architecture: amd64\n"
    "Source: glibc\n"
    "Version: 2.36-9+deb12u4\n"
    "Maintainer: GNU Libc Maintainers <debian-glibc@lists.debian.org>\n"
    "Depends: libgcc-s1\n"
    "Description: GNU C Library: Shared libraries\n"
    " Contains the standard libraries.\n"
    "Homepage: https://www.gnu.org/software/libc/libc.html\n"
    "\n"
    "Package: libgcc-s1\n"
    "Status: install ok installed\n"
    "Architecture: amd64\n"
    "Source: gcc-12 (12.2.0-14)\n"
    "Version: 12.2.0-14\n"
    "Provides: libgcc1 (= 1:12.2.0-14)\n"
    "Maintainer: Debian GCC Maintainers <debian-gcc@lists.debian.org>\n"
    "Depends: gcc-12-base (= 12.2.0-14), libc6 (>= 2.35)\n"
    "Description: GCC support library\n"
    "\n"
    "Package: old-tool\n"
    "Status: deinstall ok config-files\n"
    "Architecture: amd64\n"
    "Version: 1.0\n"
    "\n"
    "Package: never-tool\n"
    "Status: purge ok not-installed\n"
    "Architecture: amd64\n"
    "\n"
    "Package: gzip\n"
    "Status: install ok unpacked\n"
    "Architecture: amd64\n"
    "Version: 1:1.12-1\n"
    "Pre-Depends: libc6 (>= 2.34)\n"
    "Depends: missing-thing | libgcc1\n"
    "Maintainer: Milan Kupcevic <milan@debian.org>\n"
    "Description: GNU compression utilities\n"
    "\n";

inline const sbom::Package* find(const sbom::Contents& c, const std::string& type, const std::string& name) {
  for (const auto& p : c.packages)
    if (p.type == type && p.name == name) return &p;
  return nullptr;
}

}  // namespace sb::test::sbom_fixture
