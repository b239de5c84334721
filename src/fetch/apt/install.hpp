// Installing packages into a layer: .deb files fetched into the store (by the
// sha256 their index gives), data.tar unpacked into layer entries, and the
// dpkg database written so that dpkg and apt work in the image: status (every
// package of this layer and the layers below), info/<pkg>.{list,md5sums,
// conffiles} and the maintainer scripts, plus the sources and keyrings used.
// Maintainer scripts are NOT run: packages with a postinst or preinst are
// "unpacked" (a later `dpkg --configure -a` in the image configures them),
// the others "installed".
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "fetch/apt/control.hpp"
#include "fetch/apt/index.hpp"
#include "fetch/apt/repository.hpp"
#include "fetch/apt/solver.hpp"
#include "archive/entry.hpp"
#include "fetch/fetcher.hpp"

namespace sb::apt {

// One package as a lockfile pins it.
struct LockedPackage {
  std::string name, version, architecture, url, sha256;  // sha256: hex
  uint64_t size = 0;
  // In a lockfile: where it is in its repository ("pool/main/p/python3.11/
  // ...deb") and which of the entry's repositories that is, instead of `url`,
  // so that the repository's URL can be this machine's (its mirror).
  std::string path;
  int repository = -1;
  friend bool operator==(const LockedPackage&, const LockedPackage&) = default;
};
void to_json(nlohmann::json& j, const LockedPackage& p);
void from_json(const nlohmann::json& j, LockedPackage& p);

std::vector<LockedPackage> lock_solution(const PackageIndex& index, const Solution& solution);

// What the layers below left: their dpkg status, the files each package
// owns and their directory symlinks (bin -> usr/bin), so an add-on layer
// installs only what is missing, puts files where the image's directories
// really are, and removes what an upgraded package no longer ships.
struct AptState {
  std::vector<Paragraph> status;
  std::map<std::string, std::string> dir_links;  // "bin" -> "usr/bin"
  // dpkg name ("libc6:amd64" for Multi-Arch: same) -> the layer paths of
  // everything but directories it put in the image (its files, links and
  // var/lib/dpkg/info/ files), as the image resolves them.
  std::map<std::string, std::vector<std::string>> files;
  // The deb822 stanzas of etc/apt/sources.list.d/stackbuild.sources so far:
  // each apt layer writes those below and its own, so apt in the image sees
  // every repository any layer used.
  std::vector<std::string> sources;
  std::map<std::string, std::string> keyrings;  // keyring written ("etc/apt/keyrings/k.gpg") -> its sha256
  std::string str() const;                       // for the store (JSON)
  static AptState parse(const std::string& json);
};

struct InstallOptions {
  int64_t epoch = 0;
  std::vector<LoadedRepository> sources;  // added to etc/apt/sources.list.d/stackbuild.sources
  fs::path staging;                       // scratch directory for file contents; must outlive the entries
  int threads = 0;                        // .deb unpacking; 0 = one per core
};

struct Installed {
  EntryMap entries;
  AptState state;  // below + this layer
  std::vector<std::string> removed;  // paths of packages below that upgrades here whited out
  // Layer path -> the dpkg name of the package of this layer that put it
  // there: its files, links and directories (a directory several ship: the
  // first by name; a file: the one whose copy the layer holds) and its
  // var/lib/dpkg/info/ files; and what an upgraded package no longer ships
  // (`removed`: its whiteout goes with the package).
  std::map<std::string, std::string> owner;
};

// The group of a path when an apt layer over the budget is split by package
// (layer/split.hpp), so that dpkg and apt work in the image once all parts
// are stacked: the package of this layer that owns it (its files and
// var/lib/dpkg/info/<pkg>.*, also those dpkg --configure -a wrote);
// "~~dpkg-status" for dpkg's and apt's own state that no package ships (the
// status file, var/lib/dpkg's other files and directories, var/lib/apt,
// var/cache/apt, etc/apt: the sources and keyrings written), which sorts
// after every package and so lands in the last part, with the status that
// lists them all; "~" + the top-level path for the rest (etc/passwd made
// from base-passwd's master, what maintainer scripts wrote), just before it.
GroupFn package_groups(const Installed& installed);

// What install_packages() fetches: each package's .deb, by its URL, sha256
// and size (build --fetch-ahead asks for the same files ahead of it).
std::vector<fetch::FetchItem> package_fetch_items(const std::vector<LockedPackage>& packages);

// A package already in `below.status` is upgraded: its status record and
// info files are replaced, and what its old version owned that neither the
// new version nor another package ships is whited out (dpkg deletes those
// files on upgrade; directories are left, as dpkg leaves non-empty ones).
Installed install_packages(const std::vector<LockedPackage>& packages, const AptState& below,
                           const InstallOptions& options, const Store& store, fetch::Fetcher& fetcher);

}  // namespace sb::apt
