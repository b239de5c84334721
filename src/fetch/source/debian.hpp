// Debian source packages as source trees: the machine's Debian repositories
// for a suite (their signed InRelease, checked with gpgv as apt layers check
// it) -> `main/source/Sources` (by its sha256 in the Release) -> the
// package's paragraph -> its `.dsc` (by the sha256 Sources gives) -> every
// file the .dsc lists (by the .dsc's sha256 and Sources' alike). Unpacked as
// `dpkg-source -x` unpacks formats "3.0 (quilt)" and "3.0 (native)": the
// orig tarball's top directory stripped, each orig-COMPONENT tarball into
// COMPONENT/, the debian tarball over debian/, then debian/patches/series
// applied in order; and "1.0": the orig tarball and its .diff.gz (-p1),
// debian/rules made executable, or one native tarball. The .dsc's own (uploader's) signature is checked too
// where the machine has Debian's uploader keyrings (debian-keyring's
// /usr/share/keyrings/debian-keyring.gpg and debian-maintainers.gpg, or
// STACKBUILD_DEBIAN_KEYRINGS): an unsigned .dsc, or one whose signature is
// BAD, is refused. One signed by a key the keyrings lack (a retired uploader,
// a keyring older than the key) is taken on the hash chain, as without them,
// and the result says so: the chain from the signed InRelease always holds.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "fetch/fetcher.hpp"
#include "store/store.hpp"

namespace sb::source {

namespace fs = std::filesystem;

struct DebianFile {
  std::string name;  // a plain file name in the package's directory
  Digest sha256 = Digest::of_bytes("");
  uint64_t size = 0;
};

// What one source package version is made of: what the Sources index says
// (or a lockfile pins).
struct DebianSource {
  std::string name, version, suite;
  std::string format;     // "3.0 (quilt)", "3.0 (native)", "1.0"
  std::string directory;  // "pool/main/p/pytorch-vision", relative to the repository
  DebianFile dsc;
  std::vector<DebianFile> files;  // every file the .dsc lists, in its order
  // Not in a lockfile (checked again each time the .dsc is read): what the
  // uploader check found, for people ("signed by FPR, a key of
  // debian-keyring.gpg"); "" when no uploader keyring was there to check it.
  std::string signature;
};
void to_json(nlohmann::json& j, const DebianSource& s);
// Throws sb::Error when `j` is not one (a hash that is no sha256, a name with a '/').
void from_json(const nlohmann::json& j, DebianSource& s);

struct DebianRequest {
  std::string name;
  std::string version;  // "": the suite's newest
  std::string suite;    // "": the machine's release
  fs::path root = "/";  // the machine: etc/os-release, etc/apt, usr/share/keyrings
  // A lockfile's pins: no index is read; the files are fetched by these hashes.
  std::optional<DebianSource> locked;
};

// The keyrings a .dsc's uploader signature is checked against: those of
// STACKBUILD_DEBIAN_KEYRINGS (':'-separated; every one must exist), else
// whichever of debian-keyring's debian-keyring.gpg and debian-maintainers.gpg
// are under `root`/usr/share/keyrings. Empty: none, not checked.
std::vector<fs::path> uploader_keyrings(const fs::path& root);

// The machine's release codename under `root` (the default suite).
std::string debian_default_suite(const fs::path& root);

// Finds the package (or takes the pins), fetches and checks the .dsc and its
// files into the store, and unpacks and patches the tree into `dest`.
// Returns what was used. Throws sb::Error: a bad signature, a hash that does
// not match (nothing enters the store), a package or version the suite does
// not have, a format other than 3.0 (quilt), 3.0 (native) or 1.0, a patch that
// does not apply (naming it).
DebianSource prepare_debian_source(const DebianRequest& request, const fs::path& dest, const Store& store,
                                   fetch::Fetcher& fetcher);

// The .dsc's fields once its clearsign armour is gone; checks its Source,
// Version and Format against `s` and its Checksums-Sha256 against `s.files`
// when not empty, else fills them. For tests and the fuzz corpus.
void read_dsc(const std::string& text, DebianSource& s);

// Unpacks the fetched files of `s` (blobs of `store`) into `dest` and applies
// the patches. Each patch line of debian/patches/series may say -pN.
void unpack_debian_source(const DebianSource& s, const Store& store, const fs::path& dest);

}  // namespace sb::source
