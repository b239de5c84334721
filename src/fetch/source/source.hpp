// A framework's source tree to compile: a tarball or zip pinned by sha256, a
// git repository at a commit (through the `git` program, with its submodules
// at the commits it pins, shallow), a Debian source package (debian.hpp), or
// a local directory; then patches applied in order (`patch -p1`, or `git apply` for
// a git source). What was used is returned, for the lockfile: the URL and
// sha256, the commit, each patch's sha256, and a digest of the tree.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "fetch/fetcher.hpp"
#include "fetch/source/debian.hpp"

namespace sb::source {

namespace fs = std::filesystem;

struct SourceSpec {
  enum class Kind { Archive, Git, Local, Debian };
  Kind kind = Kind::Archive;
  std::string url;                 // archive or git URL (git: see git_url_problem())
  std::optional<Digest> sha256;    // archive: required unless `allow_unpinned`
  std::string ref;                 // git: a commit (40 hex) or a tag/branch to pin now
  fs::path path;                   // local directory
  std::vector<fs::path> patches;   // applied in order
  bool allow_unpinned = false;     // archive without sha256: pin what arrives (lock time)
  DebianRequest debian;            // Debian: the package, version, suite, machine root, pins
};

struct PatchLock {
  std::string path;
  Digest sha256;
};

struct SourceLock {
  std::string kind;     // archive, git, local, debian
  std::string url;
  std::optional<Digest> sha256;  // archive
  std::string commit;   // git
  std::string path;     // local
  std::optional<DebianSource> debian;  // Debian: the version, .dsc and files used
  std::vector<PatchLock> patches;
  Digest tree;          // digest of the resulting tree (paths, modes, contents)
};
void to_json(nlohmann::json& j, const SourceLock& l);

// Why git may not be given `url` as the repository to fetch, or "" when it
// may. Recipes and the catalog are data, and git reads a leading '-' as an
// option (`--upload-pack=CMD` runs CMD) and `X::ADDR` as a transport helper
// (`ext::CMD` runs CMD). Allowed: https, http, ssh (also git+ssh, ssh+git)
// and git URLs, scp-like [USER@]HOST:PATH, and file:// URLs, the explicit
// form of a local mirror. A bare local path is refused (name it file:///...).
std::string git_url_problem(const std::string& url);
// The same for a ref (a commit, tag or branch): nothing git would read as an
// option or that is no ref name (spaces, control characters, ~^:?*[\ ..).
std::string git_ref_problem(const std::string& ref);

// Prepares the tree in `dest` (an empty or missing directory). Throws
// sb::Error: a sha256 mismatch (nothing enters the store), a commit that is
// not there, a patch that does not apply (with patch's output), a git URL or
// ref that git_url_problem() or git_ref_problem() refuses (before git runs).
SourceLock prepare_source(const SourceSpec& spec, const fs::path& dest, const Store& store, fetch::Fetcher& fetcher);

// A digest over a directory tree (sorted paths, types, modes, link targets,
// file contents), independent of mtimes and of the host.
Digest tree_digest(const fs::path& dir);

}  // namespace sb::source
