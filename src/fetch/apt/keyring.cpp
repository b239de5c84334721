#include "fetch/apt/keyring.hpp"

#include <cctype>
#include <optional>

#include <nlohmann/json.hpp>

#include "archive/entry.hpp"
#include "fetch/apt/deb.hpp"
#include "fetch/apt/index.hpp"
#include "fetch/apt/repository.hpp"
#include "fetch/apt/sources.hpp"
#include "fetch/apt/version.hpp"
#include "util/error.hpp"

namespace sb::apt {

KeyringPackage keyring_package(const std::string& distro) {
  static const KeyringPackage table[] = {
      {"ubuntu", "ubuntu-keyring", "usr/share/keyrings/ubuntu-archive-keyring.gpg", true},
      {"debian", "debian-archive-keyring", "usr/share/keyrings/debian-archive-keyring.gpg", false},
  };
  for (const auto& k : table)
    if (k.distro == distro) return k;
  return {distro, "", "usr/share/keyrings/" + distro + "-archive-keyring.gpg", false};
}

namespace {

// The suites looked in, in order, each with the machine's repositories for it.
struct Suites {
  std::string name;
  std::vector<Repository> repos;
};

// The machine's own release (its repositories for its codename: the release,
// -updates, -security as configured), then the release's archive for its
// -backports, stable, testing and unstable.
std::vector<Suites> debian_suites(const fs::path& root) {
  std::string mine = machine_codename(root);
  if (mine.empty()) return {};
  std::vector<Repository> machine = machine_repositories(root);
  std::vector<Suites> out{{mine, repositories_for(machine, mine, mine)}};
  // The entries for the release itself, not its -updates (a trusted one is noted once, above).
  std::vector<Repository> archive;
  for (const auto& r : machine)
    if (r.suite == mine && !r.trusted) archive.push_back(r);
  for (const std::string& suite : {mine + "-backports", std::string("stable"),
                                   std::string("testing"), std::string("unstable")})
    out.push_back({suite, repositories_for(archive, mine, suite)});
  return out;
}

// A version of the package one repository offers.
struct Offer {
  Repository repo;
  std::string version, filename, sha256;
  uint64_t size = 0;
};

std::string first_line(const std::string& s) {
  return s.substr(0, s.find('\n'));
}

// The newest offer of `package` among `suites`' repositories that are
// checked and Debian's; `notes` says why each other one offered nothing.
std::optional<Offer> best_offer(const Suites& suites, const std::string& package,
                                const fs::path& debian_keyring, const Store& store,
                                fetch::Fetcher& fetcher, std::vector<std::string>& notes) {
  std::optional<Offer> best;
  for (const auto& r : suites.repos) {
    if (r.trusted) {  // nothing checks what it serves
      notes.push_back(r.id() + ": taken on trust (trusted), not asked");
      continue;
    }
    LoadOptions lo;
    lo.default_keyring = debian_keyring;
    PackageIndex index("amd64");
    try {
      auto loaded = load_repositories({r}, lo, store, fetcher, index);
      const std::string& origin = loaded.front().release.origin;
      if (origin != "Debian" && origin != "Debian Backports") {
        notes.push_back(r.id() + ": not Debian's archive (Origin: " + origin + ")");
        continue;
      }
      const Package* p = index.candidate(package);
      if (!p) {
        notes.push_back(r.id() + ": no " + package);
        continue;
      }
      if (!best || compare_versions(p->version, best->version) > 0)
        best = Offer{r, std::string(p->version), std::string(p->filename), std::string(p->sha256),
                     p->size};
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::Interrupted) throw;
      notes.push_back(r.id() + ": " + first_line(e.what()));
    }
  }
  return best;
}

Digest record_key(const KeyringPackage& k, const std::string& codename) {
  return KeyHasher()
      .field("archive-keyring", "1")
      .field("package", k.package)
      .field("file", k.file)
      .field("machine-release", codename)
      .finish();
}

std::string described(const KeyringPackage& k, const std::string& version,
                      const std::string& suite) {
  return "Debian's " + k.package + " " + version + " (" + suite + ")";
}

// The package's keyring file, fetched (by the sha256 its signed index gives)
// and unpacked into the store's scratch space, then kept as a blob.
ArchiveKeyring fetch_keyring(const KeyringPackage& k, const Offer& o, const Store& store,
                             fetch::Fetcher& fetcher) {
  std::string url = o.repo.uri + "/" + o.filename;
  try {
    if (o.filename.empty() || o.sha256.empty())
      throw Error(o.repo.id() + " lists " + k.package + " " + o.version +
                  " without a Filename or SHA256");
    if (canonical_archive_path(o.filename) != o.filename)
      throw Error(o.repo.id() + " lists " + k.package + " at '" + o.filename +
                  "', not a path in the repository");
    fetch::FetchItem item{url, Digest::parse("sha256:" + o.sha256), o.size,
                          k.package + " " + o.version};
    fetch::Fetched deb = fetcher.fetch_one(item);
    auto staging = store.temp_dir();
    DebContents contents = read_deb(store.blob_path(deb.digest), staging->path(), 0);
    if (contents.control.get("Package") != k.package)
      throw Error(url + " is the package '" + contents.control.get("Package") + "', not " +
                  k.package);
    auto it = contents.entries.find(k.file);
    if (it == contents.entries.end() || it->second.type != TarEntry::Type::File ||
        it->second.source.empty())
      throw Error(url + " has no file /" + k.file);
    Digest keyring = store.put_file(it->second.source);
    return {store.blob_path(keyring), "/" + k.file, keyring.hex(),
            described(k, o.version, o.repo.suite)};
  } catch (Error& e) {
    e.add_trace("while fetching " + described(k, o.version, o.repo.suite) + " from " + url +
                " for its /" + k.file);
    throw;
  }
}

}  // namespace

std::string capitalized(std::string s) {
  if (!s.empty()) s[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(s[0])));
  return s;
}

ArchiveKeyring archive_keyring(const std::string& distro, const KeyringLookup& lookup,
                               const Store& store, fetch::Fetcher& fetcher) {
  const KeyringPackage k = keyring_package(distro);
  const fs::path host = lookup.root / k.file;
  std::error_code ec;
  if (fs::is_regular_file(host, ec)) return {host, host, Digest::of_file(host).hex(), ""};

  std::vector<std::string> notes;
  if (k.in_debian) {
    const std::string codename = machine_codename(lookup.root);
    const Digest key = record_key(k, codename);
    if (auto rec = store.get_record("archive-keyring", key)) {  // an earlier run's
      try {
        auto j = nlohmann::json::parse(*rec);
        Digest keyring = Digest::parse(j.at("keyring").get<std::string>());
        if (store.has(keyring))
          return {
              store.blob_path(keyring), "/" + k.file, keyring.hex(),
              described(k, j.at("version").get<std::string>(), j.at("suite").get<std::string>())};
      } catch (const std::exception&) {  // a record that does not read: looked up again
      }
    }
    const fs::path debian_keyring = lookup.root / keyring_package("debian").file;
    auto suites = debian_suites(lookup.root);
    if (suites.empty() || suites.front().repos.empty())
      notes.push_back("the machine's apt configuration (" + (lookup.root / "etc/apt").string() +
                      ") names no repository of its release" +
                      (codename.empty() ? "" : " (" + codename + ")"));
    for (const auto& s : suites) {
      if (s.repos.empty()) continue;
      if (auto offer = best_offer(s, k.package, debian_keyring, store, fetcher, notes)) {
        ArchiveKeyring found = fetch_keyring(k, *offer, store, fetcher);
        nlohmann::json record = {{"keyring", "sha256:" + found.sha256},
                                 {"package", k.package},
                                 {"version", offer->version},
                                 {"suite", offer->repo.suite},
                                 {"deb_sha256", offer->sha256}};
        store.put_record("archive-keyring", key, record.dump());
        return found;
      }
    }
  }

  std::string urls = lookup.needed_by.empty() ? "a repository" : lookup.needed_by.front();
  if (lookup.needed_by.size() > 1)
    urls += " (and " + std::to_string(lookup.needed_by.size() - 1) + " more)";
  std::string msg = urls + ": no keyring to check its signature: none is given (signed-by), and " +
                    capitalized(distro) + "'s archive keyring is not on this machine (" +
                    host.string() + ")";
  if (k.in_debian) {
    msg += " nor in Debian's " + k.package + " package in the machine's Debian repositories:";
    for (const auto& n : notes) msg += "\n  " + n;
    msg += "\ninstall Debian's " + k.package + " package (apt-get install " + k.package + ")";
  } else if (!k.package.empty()) {
    msg += "; install the " + k.package + " package";
  }
  const std::string give =
      "give the repository's keyring (`keyring:` in the recipe, signed-by in a sources file)";
  msg += k.package.empty() ? "; " + give + ", or mark it trusted" : ", or " + give;
  throw Error(msg, ErrorKind::Input);
}

}  // namespace sb::apt
