// Reading apt repositories: the signed InRelease (checked with gpgv against
// the repository's keyring), the Release fields, and the Packages indexes it
// lists (fetched by their sha256, decompressed from xz or gzip) into a
// PackageIndex.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "fetch/apt/index.hpp"
#include "fetch/apt/sources.hpp"
#include "fetch/fetcher.hpp"

namespace sb::apt {

struct IndexFile {
  std::string sha256;  // hex
  uint64_t size = 0;
};

struct ReleaseFile {
  std::string origin, label, suite, codename, date, valid_until;
  bool acquire_by_hash = false;
  std::map<std::string, IndexFile> files;  // path under dists/<suite>/ -> SHA256 entry
};

ReleaseFile parse_release(const std::string& text);

// Checks a clearsigned InRelease with gpgv against `keyring` and returns the
// text that was signed (never the bytes around the signature). Throws a
// clear error naming `url` when the signature is missing, bad, or made by a
// key not in the keyring.
std::string verify_inrelease(const fs::path& file, const fs::path& keyring, const std::string& url);

// Who signed a clearsigned file, as gpgv says.
struct Signer {
  std::string fingerprint;  // VALIDSIG's: the signature verifies with a key of the keyrings
  bool expired = false;     // that key has expired in this copy of the keyring (EXPKEYSIG)
  std::string key_id;       // NO_PUBKEY's: signed by a key in none of them (fingerprint "")
};

// Checks a clearsigned file (a source package's .dsc) with gpgv against
// `keyrings` (each must exist). Throws naming `what` when it is not signed
// or its signature is BAD; a signature by a key that has expired in the
// keyring, or by a key in none of them, comes back as such (Signer).
Signer verify_signer(const fs::path& file, const std::vector<fs::path>& keyrings, const std::string& what);

// Checks a Release file against its detached signature (Release.gpg) with
// gpgv, as verify_inrelease does, and returns the Release text.
std::string verify_detached(const fs::path& release, const fs::path& signature, const fs::path& keyring,
                            const std::string& url);

// The signed text of an InRelease taken on trust (a `trusted` repository):
// the armour is removed, nothing is checked.
std::string strip_clearsign(const std::string& text);

// The decompressed bytes of an xz, gzip or plain file, by its name's suffix.
std::string decompress(const std::string& data, const std::string& name);

struct LoadOptions {
  std::string architecture = "amd64";
  std::map<std::string, int> origin_pins;  // Origin (from Release) -> priority
  fs::path default_keyring;                // for repositories without signed-by
  // What default_keyring stands for in images and lockfiles when it is a copy
  // (a package's keyring kept in the store: /usr/share/keyrings/...); empty:
  // default_keyring itself.
  fs::path default_keyring_as;
};

// What was read from one repository, for the image's sources list.
struct LoadedRepository {
  Repository repo;
  ReleaseFile release;
  fs::path keyring;  // the keyring it was verified with (empty if trusted)
  fs::path keyring_as;  // what `keyring` stands for when it is a copy (LoadOptions::default_keyring_as)
  bool detached = false;  // signed by Release.gpg (no InRelease)

  // The keyring's path as images and lockfiles name it.
  const fs::path& keyring_path() const { return keyring_as.empty() ? keyring : keyring_as; }
};

// Fetches and verifies every repository's InRelease (or, where a
// repository has none, its Release and the detached Release.gpg), then every
// Packages index (in parallel, through `fetcher`), and fills `index`.
std::vector<LoadedRepository> load_repositories(const std::vector<Repository>& repos, const LoadOptions& options,
                                                const Store& store, fetch::Fetcher& fetcher, PackageIndex& index);

}  // namespace sb::apt
