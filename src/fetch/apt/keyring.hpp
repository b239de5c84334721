// The archive keyring that checks a distribution's repositories when they
// name none of their own (no signed-by): the machine's copy
// (<root>/usr/share/keyrings/ubuntu-archive-keyring.gpg), else, for a
// distribution whose keyring Debian packages (Ubuntu: `ubuntu-keyring`),
// Debian's package, fetched through the machine's Debian repositories as the
// apt stage reads any repository (InRelease checked with gpgv, the Packages
// index and the .deb by their sha256), its keyring kept in the store and a
// record naming it, so later runs (offline too) take it from there.
//
// Only repositories the machine checks (never a trusted one) whose Release
// says `Origin: Debian` (or `Debian Backports`) are asked, the machine's release first, then its
// -backports (bookworm carries ubuntu-keyring only there), then stable,
// testing and unstable. Nothing is written outside the store.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "fetch/fetcher.hpp"
#include "store/store.hpp"

namespace sb::apt {

namespace fs = std::filesystem;

// Which package ships a distribution's archive keyring, and where.
struct KeyringPackage {
  std::string distro;  // "ubuntu"
  // The package that ships it ("ubuntu-keyring"); "" for a distribution not in the table.
  std::string package;
  // Its path in the package and on a machine: "usr/share/keyrings/ubuntu-archive-keyring.gpg".
  std::string file;
  // Debian's archive carries the package (Debian's own keyring cannot vouch for itself).
  bool in_debian = false;
};

// The table's entry for `distro`; one not in it: no package, and the file
// usr/share/keyrings/<distro>-archive-keyring.gpg.
KeyringPackage keyring_package(const std::string& distro);

// A keyring found for a distribution.
struct ArchiveKeyring {
  fs::path file;  // where its bytes are: the machine's file, or a blob of the store
  // What images and lockfiles call it: `file`, or "/usr/share/keyrings/..." for a package's.
  fs::path stands_for;
  std::string sha256;  // hex, of its bytes
  // "" for the machine's; "Debian's ubuntu-keyring 2023.11.28.1-0.2~bpo12+1 (bookworm-backports)".
  std::string from;
};

struct KeyringLookup {
  fs::path root = "/";                 // the machine: etc/os-release, etc/apt, usr/share/keyrings
  std::vector<std::string> needed_by;  // the URLs (InRelease) that need it, for the error
};

// The keyring of `distro`: the machine's, else one of Debian's package kept
// in the store (by a record of an earlier run, else fetched now through
// `fetcher`). Throws an Input error when there is neither, naming the URLs
// that need it, the file looked for, what the machine's Debian repositories
// said, and the package to install (or signed-by to give). A .deb that fails
// its sha256, or that lacks the file, is an error of its own.
ArchiveKeyring archive_keyring(const std::string& distro, const KeyringLookup& lookup,
                               const Store& store, fetch::Fetcher& fetcher);

// "Ubuntu" for "ubuntu", for messages.
std::string capitalized(std::string distro);

}  // namespace sb::apt
