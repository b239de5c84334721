// A repository made in the test: packages built with dpkg-deb, the Release
// signed with a key gpg generates in a temporary GNUPGHOME, served from a
// directory (file:// URLs). Without gpg, gpgv or dpkg-deb these tests WARN and
// return (reported as skipped in the output, never as checked).
#include <catch2/catch.hpp>

#include <set>

#include "fetch/apt/install.hpp"
#include "fetch/apt/keyring.hpp"
#include "fetch/apt/repository.hpp"
#include "helpers.hpp"
#include "layer/split.hpp"
#include "util/process.hpp"

using namespace sb;
using namespace sb::apt;

namespace {

bool have(const char* tool) {
  ProcessSpec s;
  s.argv = {"sh", "-c", std::string("command -v ") + tool};
  s.env = {{"PATH", "/usr/bin:/bin"}};
  s.capture_stdout = true;
  return run_process(s).exit_status == 0;
}

void run(std::vector<std::string> argv, const fs::path& gnupg = {}) {
  ProcessSpec s;
  s.argv = std::move(argv);
  s.env = {{"PATH", "/usr/bin:/bin"}, {"LC_ALL", "C"}};
  if (!gnupg.empty()) s.env["GNUPGHOME"] = gnupg.string();
  s.capture_stdout = true;
  s.merge_stderr = true;
  auto r = run_process(s);
  if (r.exit_status != 0) throw Error(s.argv[0] + " failed: " + r.output);
}

struct Repo {
  TempDir dir;
  fs::path root = dir.path() / "repo";
  fs::path gnupg = dir.path() / "gnupg";
  fs::path keyring = dir.path() / "key.gpg";
  std::string packages;
  std::string origin = "Test";
  std::string extra_release;  // more Release fields ("Valid-Until: ...\n")
  bool xz_only = false;       // Packages.xz and nothing else
  bool by_hash = false;       // Acquire-By-Hash: the index only under by-hash/SHA256/

  void deb(const std::string& name, const std::string& version, const std::string& fields,
           const std::map<std::string, std::string>& files, const std::map<std::string, std::string>& control = {}) {
    fs::path d = dir.path() / ("src-" + name + "-" + version);
    test::write(d / "DEBIAN/control", "Package: " + name + "\nVersion: " + version +
                                          "\nArchitecture: amd64\nMaintainer: T <t@example.invalid>\n" + fields +
                                          "Description: test package\n");
    for (const auto& [n, c] : control) test::write(d / "DEBIAN" / n, c, n.find("inst") != std::string::npos ? 0755 : 0644);
    for (const auto& [p, c] : files) test::write(d / p, c, 0755);
    fs::path out = root / "pool" / (name + "_" + version + "_amd64.deb");
    fs::create_directories(out.parent_path());
    run({"dpkg-deb", "--root-owner-group", "-Zgzip", "--build", d.string(), out.string()});
    packages += "Package: " + name + "\nVersion: " + version + "\nArchitecture: amd64\n" + fields +
                "Filename: pool/" + out.filename().string() + "\nSize: " + std::to_string(fs::file_size(out)) +
                "\nSHA256: " + Digest::of_file(out).hex() + "\n\n";
  }

  // Writes Packages(.gz), Release and the signed InRelease (or, with
  // `detached`, Release.gpg and no InRelease).
  void publish(bool detached = false) {
    fs::path dist = root / "dists/test";
    fs::remove_all(dist);
    test::write(dist / "main/binary-amd64/Packages", packages);
    std::vector<std::string> files = {"main/binary-amd64/Packages", "main/binary-amd64/Packages.gz"};
    if (xz_only) {
      run({"xz", "-f", (dist / "main/binary-amd64/Packages").string()});
      files = {"main/binary-amd64/Packages.xz"};
    } else {
      run({"gzip", "-kf", (dist / "main/binary-amd64/Packages").string()});
    }
    std::string rel = "Origin: " + origin + "\nSuite: test\nCodename: test\nComponents: main\nArchitectures: amd64\n" +
                      extra_release + (by_hash ? "Acquire-By-Hash: yes\n" : "") + "SHA256:\n";
    for (const auto& f : files) {
      std::string sha = Digest::of_file(dist / f).hex();
      rel += " " + sha + " " + std::to_string(fs::file_size(dist / f)) + " " + f + "\n";
      if (by_hash) {  // only there: a fetch by name would fail
        fs::path h = dist / "main/binary-amd64/by-hash/SHA256" / sha;
        fs::create_directories(h.parent_path());
        fs::rename(dist / f, h);
      }
    }
    test::write(dist / "Release", rel);
    fs::create_directories(gnupg);
    fs::permissions(gnupg, fs::perms::owner_all);
    if (!fs::exists(keyring)) {
      run({"gpg", "--batch", "--passphrase", "", "--quick-gen-key", "Repo <repo@example.invalid>", "ed25519", "sign",
           "never"}, gnupg);
      run({"gpg", "--batch", "--output", keyring.string(), "--export"}, gnupg);
    }
    fs::remove(dist / "InRelease");
    fs::remove(dist / "Release.gpg");
    if (detached)
      run({"gpg", "--batch", "--detach-sign", "--output", (dist / "Release.gpg").string(), (dist / "Release").string()},
          gnupg);
    else
      run({"gpg", "--batch", "--clearsign", "--output", (dist / "InRelease").string(), (dist / "Release").string()},
          gnupg);
  }

  Repository repository() const {
    Repository r;
    r.uri = "file://" + root.string();
    r.suite = "test";
    r.components = {"main"};
    r.signed_by = keyring;
    return r;
  }
};

bool tools() {
  for (const char* t : {"gpg", "gpgv", "dpkg-deb", "gzip"})
    if (!have(t)) {
      WARN("SKIPPED: " << t << " is not installed");
      return false;
    }
  return true;
}

std::vector<LoadedRepository> load(const Repository& r, const Store& store, PackageIndex& index,
                                    const LoadOptions& lo = {}) {
  fetch::FetchOptions o;
  o.retry.sleep = [](double) {};
  auto f = fetch::make_fetcher(store, o, null_status());
  return load_repositories({r}, lo, store, *f, index);
}

// Every blob and record in the store (paths under its root).
std::set<std::string> store_files(const Store& store) {
  std::set<std::string> out;
  for (const char* sub : {"blobs", "refs"})
    for (const auto& e : fs::recursive_directory_iterator(store.root() / sub))
      if (e.is_regular_file()) out.insert(fs::relative(e.path(), store.root()).string());
  return out;
}

// Runs `fn` in `dir` as the working directory, then returns to where it was.
template <class Fn>
void in_dir(const fs::path& dir, Fn fn) {
  fs::path was = fs::current_path();
  fs::current_path(dir);
  try {
    fn();
  } catch (...) {
    fs::current_path(was);
    throw;
  }
  fs::current_path(was);
}

}  // namespace

TEST_CASE("apt repo: a signed fixture repository resolves and installs with a dpkg database", "[apt][repo]") {
  if (!tools()) return;
  Repo repo;
  repo.deb("libgreet", "1.0-1", "", {{"etc/greet.conf", "hello=1\n"}, {"usr/lib/libgreet.so.1", "lib"}},
           {{"conffiles", "/etc/greet.conf\n"}, {"postinst", "#!/bin/sh\nexit 0\n"}});
  repo.deb("hello", "2.0", "Depends: libgreet (>= 1.0)\n", {{"usr/bin/hello", "#!/bin/sh\necho hi\n"}});
  repo.publish();
  TempDir sd;
  Store store(sd.path());
  PackageIndex index("amd64");
  auto loaded = load(repo.repository(), store, index);
  REQUIRE(loaded[0].release.origin == "Test");
  SolveRequest req;
  req.packages = {"hello"};
  auto pkgs = lock_solution(index, solve(index, req));
  REQUIRE(pkgs.size() == 2);
  CHECK(pkgs[0].name == "hello");
  CHECK(pkgs[0].url.ends_with("/pool/hello_2.0_amd64.deb"));
  TempDir staging;
  InstallOptions io;
  io.staging = staging.path();
  io.sources = loaded;
  fetch::FetchOptions fo;
  auto f = fetch::make_fetcher(store, fo, null_status());
  auto inst = install_packages(pkgs, {}, io, store, *f);
  REQUIRE(inst.entries.count("usr/bin/hello"));
  CHECK(inst.entries.at("usr/bin/hello").mode == 0755);
  std::string status = read_file(inst.entries.at("var/lib/dpkg/status").source);
  CHECK(status.find("Package: hello\nStatus: install ok installed\n") != std::string::npos);
  CHECK(status.find("Package: libgreet\nStatus: install ok unpacked\n") != std::string::npos);  // has a postinst
  CHECK(status.find("Conffiles:\n /etc/greet.conf ") != std::string::npos);
  std::string list = read_file(inst.entries.at("var/lib/dpkg/info/libgreet.list").source);
  CHECK(list.find("/etc/greet.conf\n") != std::string::npos);
  CHECK(inst.entries.count("var/lib/dpkg/info/libgreet.postinst"));
  CHECK(inst.entries.count("var/lib/dpkg/info/libgreet.md5sums"));
  CHECK(read_file(inst.entries.at("etc/apt/sources.list.d/stackbuild.sources").source).find("Suites: test") !=
        std::string::npos);
  // An add-on layer on top installs only what is missing.
  SolveRequest more;
  more.packages = {"hello"};
  more.installed = inst.state.status;
  CHECK(solve(index, more).packages.empty());
}

TEST_CASE("apt repo: bad unsigned and foreign signatures are refused unless trusted", "[apt][repo]") {
  if (!tools()) return;
  Repo repo;
  repo.deb("hello", "1.0", "", {{"usr/bin/hello", "x"}});
  repo.publish();
  fs::path inrelease = repo.root / "dists/test/InRelease";
  std::string good = read_file(inrelease);
  TempDir sd;
  Store store(sd.path());
  const std::set<std::string> empty = store_files(store);
  {  // altered after signing: refused before the store keeps it
    std::string bad = good;
    bad.replace(bad.find("Origin: Test"), 12, "Origin: Evil");
    test::write(inrelease, bad);
    PackageIndex index("amd64");
    CHECK_THROWS_WITH(load(repo.repository(), store, index), Catch::Contains("the signature is BAD"));
    CHECK(store_files(store) == empty);
    CHECK_FALSE(fetch::last_fetched(store, repo.repository().uri + "/dists/test/InRelease"));
  }
  {  // a good signature by a key that is not the repository's
    test::write(inrelease, good);
    Repo other;
    other.deb("x", "1", "", {{"x", "x"}});
    other.publish();
    Repository r = repo.repository();
    r.signed_by = other.keyring;
    PackageIndex index("amd64");
    CHECK_THROWS_WITH(load(r, store, index), Catch::Contains("signed by a key that is not in"));
    CHECK(store_files(store) == empty);
  }
  {  // unsigned: refused, unless the repository is trusted
    test::write(inrelease, read_file(repo.root / "dists/test/Release"));
    PackageIndex index("amd64");
    CHECK_THROWS_WITH(load(repo.repository(), store, index), Catch::Contains("it is not signed"));
    CHECK(store_files(store) == empty);
    Repository trusted = repo.repository();
    trusted.trusted = true;
    PackageIndex index2("amd64");
    CHECK_NOTHROW(load(trusted, store, index2));
    CHECK(index2.candidate("hello"));
  }
}

TEST_CASE("apt repo: an index or a package whose sha256 differs is refused and nothing enters the store", "[apt][repo]") {
  if (!tools()) return;
  Repo repo;
  repo.deb("hello", "1.0", "", {{"usr/bin/hello", "x"}});
  repo.publish();
  fs::path gz = repo.root / "dists/test/main/binary-amd64/Packages.gz";
  std::string signed_sha = Digest::of_file(gz).hex();
  test::write(gz, std::string(fs::file_size(gz), 'z'));  // same size, other bytes
  TempDir sd;
  Store store(sd.path());
  PackageIndex index("amd64");
  CHECK_THROWS_WITH(load(repo.repository(), store, index),
                    Catch::Contains("sha256 mismatch") && Catch::Contains("Packages.gz"));
  CHECK_FALSE(store.has(Digest::parse("sha256:" + signed_sha)));
  // A .deb replaced after publishing.
  repo.publish();
  PackageIndex ok("amd64");
  auto loaded = load(repo.repository(), store, ok);
  SolveRequest req;
  req.packages = {"hello"};
  auto pkgs = lock_solution(ok, solve(ok, req));
  test::write(repo.root / "pool/hello_1.0_amd64.deb", "garbage");
  TempDir staging;
  InstallOptions io;
  io.staging = staging.path();
  auto f = fetch::make_fetcher(store, {}, null_status());
  CHECK_THROWS_WITH(install_packages(pkgs, {}, io, store, *f), Catch::Contains("hello_1.0_amd64.deb"));
  CHECK_FALSE(store.has(Digest::parse("sha256:" + pkgs[0].sha256)));
}

TEST_CASE("apt repo: without InRelease the Release is checked against Release.gpg", "[apt][repo]") {
  if (!tools()) return;
  Repo repo;
  repo.deb("hello", "1.0", "", {{"usr/bin/hello", "x"}});
  repo.publish(true);
  fs::path dist = repo.root / "dists/test";
  REQUIRE_FALSE(fs::exists(dist / "InRelease"));
  TempDir sd;
  Store store(sd.path());
  {
    PackageIndex index("amd64");
    auto loaded = load(repo.repository(), store, index);
    CHECK(loaded[0].detached);
    CHECK(loaded[0].keyring == repo.keyring);
    CHECK(index.candidate("hello"));
  }
  std::string release = read_file(dist / "Release");
  {  // Release altered after signing
    test::write(dist / "Release", release + "X-Extra: 1\n");
    PackageIndex index("amd64");
    CHECK_THROWS_WITH(load(repo.repository(), store, index),
                      Catch::Contains("dists/test/Release: refusing the repository: the signature is BAD"));
    test::write(dist / "Release", release);
  }
  {  // signed by another key
    Repo other;
    other.deb("x", "1", "", {{"x", "x"}});
    other.publish(true);
    Repository r = repo.repository();
    r.signed_by = other.keyring;
    PackageIndex index("amd64");
    CHECK_THROWS_WITH(load(r, store, index), Catch::Contains("signed by a key that is not in"));
  }
  fs::remove(dist / "Release.gpg");
  {  // no signature at all: refused, unless trusted
    PackageIndex index("amd64");
    CHECK_THROWS_WITH(load(repo.repository(), store, index),
                      Catch::Contains("it is not signed (there is no InRelease and no Release.gpg)"));
    Repository trusted = repo.repository();
    trusted.trusted = true;
    PackageIndex index2("amd64");
    auto loaded = load(trusted, store, index2);
    CHECK(loaded[0].detached);
    CHECK(index2.candidate("hello"));
  }
  fs::remove(dist / "Release");
  {  // nothing there: a clear error naming the suite
    PackageIndex index("amd64");
    CHECK_THROWS_WITH(load(repo.repository(), store, index),
                      Catch::Contains("has neither InRelease nor Release") && Catch::Contains("is 'test' a suite of"));
  }
}

TEST_CASE("apt repo: an upgrade in a later layer replaces the status and whites out dropped files", "[apt][repo]") {
  if (!tools()) return;
  Repo repo;
  repo.deb("libgreet", "1.0", "",
           {{"usr/lib/libgreet.so.1", "v1"}, {"usr/share/greet/old.txt", "old"}, {"usr/share/greet/shared", "s"}},
           {{"postinst", "#!/bin/sh\nexit 0\n"}});
  repo.deb("greet-data", "1", "", {{"usr/share/greet/shared", "s"}});
  repo.deb("hello", "1.0", "Depends: libgreet\n", {{"usr/bin/hello", "1"}});
  repo.publish();
  TempDir sd;
  Store store(sd.path());
  auto f = fetch::make_fetcher(store, {}, null_status());
  TempDir staging;
  InstallOptions io;
  io.staging = staging.path();
  Installed lower;
  {
    PackageIndex index("amd64");
    load(repo.repository(), store, index);
    SolveRequest req;
    req.packages = {"hello", "greet-data"};
    lower = install_packages(lock_solution(index, solve(index, req)), {}, io, store, *f);
  }
  REQUIRE(lower.state.files.count("libgreet"));
  CHECK(lower.state.files.at("libgreet") ==
        std::vector<std::string>{"usr/lib/libgreet.so.1", "usr/share/greet/old.txt", "usr/share/greet/shared",
                                 "var/lib/dpkg/info/libgreet.list", "var/lib/dpkg/info/libgreet.md5sums",
                                 "var/lib/dpkg/info/libgreet.postinst"});
  // Version 2 drops old.txt, the postinst and libgreet.so.1, ships libgreet.so.2.
  repo.deb("libgreet", "2.0", "", {{"usr/lib/libgreet.so.2", "v2"}, {"usr/share/greet/shared", "s"}});
  repo.publish();
  PackageIndex index("amd64");
  load(repo.repository(), store, index);
  SolveRequest req;
  req.packages = {"libgreet"};
  req.installed = lower.state.status;
  Solution sol = solve(index, req);
  REQUIRE(sol.upgraded == std::map<std::string, std::string>{{"libgreet", "1.0"}});
  // Through the state as the store keeps it between layers.
  AptState below = AptState::parse(lower.state.str());
  auto upper = install_packages(lock_solution(index, sol), below, io, store, *f);
  const EntryMap& e = upper.entries;
  CHECK(e.count("usr/lib/libgreet.so.2"));
  CHECK(e.count("usr/lib/.wh.libgreet.so.1"));
  CHECK(e.count("usr/share/greet/.wh.old.txt"));
  CHECK(e.count("var/lib/dpkg/info/.wh.libgreet.postinst"));
  CHECK_FALSE(e.count("usr/share/greet/.wh.shared"));   // the new version ships it
  CHECK_FALSE(e.count("usr/bin/.wh.hello"));            // another package's file
  CHECK_FALSE(e.count("var/lib/dpkg/info/.wh.libgreet.list"));
  CHECK(upper.removed ==
        std::vector<std::string>{"usr/lib/libgreet.so.1", "usr/share/greet/old.txt", "var/lib/dpkg/info/libgreet.postinst"});
  std::string status = read_file(e.at("var/lib/dpkg/status").source);
  CHECK(status.find("Package: libgreet\nStatus: install ok installed\n") != std::string::npos);
  CHECK(status.find("Version: 2.0\n") != std::string::npos);
  CHECK(status.find("Version: 1.0\n") != std::string::npos);  // hello 1.0 stays
  size_t records = 0;
  for (size_t p = 0; (p = status.find("Package: ", p)) != std::string::npos; ++p) ++records;
  CHECK(records == 3);
  std::string list = read_file(e.at("var/lib/dpkg/info/libgreet.list").source);
  CHECK(list.find("/usr/lib/libgreet.so.2\n") != std::string::npos);
  CHECK(list.find("old.txt") == std::string::npos);
  CHECK(upper.state.files.at("libgreet") ==
        std::vector<std::string>{"usr/lib/libgreet.so.2", "usr/share/greet/shared", "var/lib/dpkg/info/libgreet.list",
                                 "var/lib/dpkg/info/libgreet.md5sums"});
  // Split by package (a budget of one byte): libgreet's files, the whiteouts of
  // what it dropped (its postinst too) in its part; dpkg's status in the last.
  GroupFn g = package_groups(upper);
  CHECK(g("usr/lib/libgreet.so.2") == "libgreet");
  CHECK(g("var/lib/dpkg/info/libgreet.list") == "libgreet");
  CHECK(g("usr/lib/libgreet.so.1") == "libgreet");  // what a whiteout hides
  CHECK(g("var/lib/dpkg/info/libgreet.postinst") == "libgreet");
  CHECK(g("var/lib/dpkg/info/libgreet.triggers") == "libgreet");  // dpkg's own, for the package
  CHECK(g("var/lib/dpkg/info/hello.list") == "~~dpkg-status");     // not a package of this layer
  CHECK(g("var/lib/dpkg/status") == "~~dpkg-status");
  CHECK(g("etc/apt/sources.list.d/stackbuild.sources") == "~~dpkg-status");
  CHECK(g("etc/passwd") == "~etc");
  std::vector<std::vector<std::string>> groups;
  auto parts = split_entries(e, 1, g, &groups);
  REQUIRE(parts.size() == 2);
  CHECK(groups == std::vector<std::vector<std::string>>{{"libgreet"}, {"~~dpkg-status"}});
  CHECK(parts[0].count("usr/lib/.wh.libgreet.so.1"));
  CHECK(parts[0].count("var/lib/dpkg/info/.wh.libgreet.postinst"));
  CHECK(parts[0].count("usr/share/greet/shared"));
  CHECK(parts[1].count("var/lib/dpkg/status"));
  CHECK_FALSE(parts[1].count("var/lib/dpkg/info/libgreet.list"));
  CHECK(parts[1].count("var/lib/dpkg"));  // the directories above, in every part that needs them
  CHECK(parts[0].count("var/lib/dpkg/info"));
  // In the lower layer, each package is a part of its own, hello's before libgreet's.
  auto lower_parts = split_entries(lower.entries, 1, package_groups(lower), &groups);
  CHECK(groups == std::vector<std::vector<std::string>>{{"greet-data"}, {"hello"}, {"libgreet"}, {"~~dpkg-status"}});
  CHECK(lower_parts[1].count("usr/bin/hello"));
  CHECK(lower_parts[1].count("var/lib/dpkg/info/hello.list"));
  // usr/share/greet/shared is in greet-data and libgreet: the layer holds libgreet's copy (installed later).
  CHECK(lower_parts[2].count("usr/share/greet/shared"));
  CHECK_FALSE(lower_parts[0].count("usr/share/greet/shared"));

  // A lower layer without file lists (an older stackbuild) cannot be upgraded silently.
  AptState old = below;
  old.files.clear();
  CHECK_THROWS_WITH(install_packages(lock_solution(index, sol), old, io, store, *f),
                    Catch::Contains("records no file list for it"));
}

TEST_CASE("apt repo: a detached signature is checked before the store keeps Release and a kept InRelease serves offline", "[apt][repo]") {
  if (!tools()) return;
  Repo repo;
  repo.deb("hello", "1.0", "", {{"usr/bin/hello", "x"}});
  repo.publish();
  TempDir sd;
  Store store(sd.path());
  const std::set<std::string> empty = store_files(store);
  {  // Release + Release.gpg: a Release altered after signing; no signature at all
    repo.publish(true);
    fs::path release = repo.root / "dists/test/Release";
    test::write(release, read_file(release) + "X-Extra: 1\n");
    PackageIndex index("amd64");
    CHECK_THROWS_WITH(load(repo.repository(), store, index), Catch::Contains("the signature is BAD"));
    CHECK(store_files(store) == empty);
    fs::remove(repo.root / "dists/test/Release.gpg");
    PackageIndex index2("amd64");
    CHECK_THROWS_WITH(load(repo.repository(), store, index2), Catch::Contains("it is not signed"));
    CHECK(store_files(store) == empty);
  }
  // Once good, InRelease is kept, and an offline load verifies it from the store.
  repo.publish();
  PackageIndex index("amd64");
  load(repo.repository(), store, index);
  CHECK(fetch::last_fetched(store, repo.repository().uri + "/dists/test/InRelease"));
  fs::remove_all(repo.root);
  fetch::FetchOptions off;
  off.offline = true;
  auto f = fetch::make_fetcher(store, off, null_status());
  PackageIndex again("amd64");
  load_repositories({repo.repository()}, {}, store, *f, again);
  CHECK(again.candidate("hello"));
}

TEST_CASE("apt repo: a keyring path without a directory part is read from the working directory", "[apt][repo]") {
  if (!tools()) return;
  Repo repo;
  repo.deb("hello", "1.0", "", {{"usr/bin/hello", "x"}});
  repo.publish();
  TempDir sd;
  Store store(sd.path());
  Repository r = repo.repository();
  r.signed_by = "key.gpg";  // gpgv alone would look for it in its GNUPGHOME
  in_dir(repo.dir.path(), [&] {
    PackageIndex index("amd64");
    CHECK_NOTHROW(load(r, store, index));
    CHECK(index.candidate("hello"));
  });
  repo.publish(true);  // and for a detached Release.gpg
  in_dir(repo.dir.path(), [&] {
    PackageIndex index("amd64");
    CHECK_NOTHROW(load(r, store, index));
  });
}

TEST_CASE("apt repo: a truncated .deb is a clear error and nothing enters the store", "[apt][repo]") {
  if (!tools()) return;
  Repo repo;
  repo.deb("hello", "1.0", "", {{"usr/bin/hello", std::string(4096, 'h')}});
  repo.publish();
  TempDir sd;
  Store store(sd.path());
  PackageIndex index("amd64");
  load(repo.repository(), store, index);
  SolveRequest req;
  req.packages = {"hello"};
  auto pkgs = lock_solution(index, solve(index, req));
  fs::path deb = repo.root / "pool/hello_1.0_amd64.deb";
  std::string whole = read_file(deb);
  test::write(deb, whole.substr(0, whole.size() / 2));
  auto before = store_files(store);
  TempDir staging;
  InstallOptions io;
  io.staging = staging.path();
  auto f = fetch::make_fetcher(store, {}, null_status());
  CHECK_THROWS_WITH(install_packages(pkgs, {}, io, store, *f),
                    Catch::Contains("truncated download of") && Catch::Contains("hello_1.0_amd64.deb") &&
                        Catch::Contains("got " + std::to_string(whole.size() / 2) + " of " +
                                        std::to_string(whole.size()) + " bytes"));
  CHECK(store_files(store) == before);
  CHECK_FALSE(store.has(Digest::parse("sha256:" + pkgs[0].sha256)));
}

TEST_CASE("apt repo: an xz-only repository and one published by hash load", "[apt][repo]") {
  if (!tools()) return;
  if (!have("xz")) {
    WARN("SKIPPED: xz is not installed");
    return;
  }
  for (bool by_hash : {false, true}) {
    INFO("by-hash: " << by_hash);
    Repo repo;
    repo.deb("hello", "1.0", "", {{"usr/bin/hello", "x"}});
    repo.xz_only = true;
    repo.by_hash = by_hash;
    repo.publish();
    fs::path dir = repo.root / "dists/test/main/binary-amd64";
    REQUIRE_FALSE(fs::exists(dir / "Packages.gz"));
    REQUIRE(fs::exists(dir / "Packages.xz") == !by_hash);
    TempDir sd;
    Store store(sd.path());
    PackageIndex index("amd64");
    auto loaded = load(repo.repository(), store, index);
    CHECK(loaded[0].release.acquire_by_hash == by_hash);
    REQUIRE(index.candidate("hello"));
    CHECK(index.candidate("hello")->version == "1.0");
  }
}

TEST_CASE("apt repo: an empty component's compressed index is an empty index", "[apt][repo]") {
  // Ubuntu's and Debian's suites list components with no package for an
  // architecture (a fresh -updates' universe): their Packages.gz is gzip of nothing.
  TempDir dir;
  test::write(dir.path() / "Packages", "");
  run({"gzip", "-k", (dir.path() / "Packages").string()});
  CHECK(decompress(read_file(dir.path() / "Packages.gz"), "Packages.gz").empty());
  if (have("xz")) {
    run({"xz", "-k", (dir.path() / "Packages").string()});
    CHECK(decompress(read_file(dir.path() / "Packages.xz"), "Packages.xz").empty());
  }
  CHECK(decompress("", "Packages").empty());
}

TEST_CASE("apt repo: a pin by origin picks the older version and the image lists both repositories", "[apt][repo]") {
  if (!tools()) return;
  Repo distro, vendor;
  distro.origin = "Debian";
  distro.deb("tool", "2.0", "", {{"usr/bin/tool", "2"}});
  distro.publish();
  vendor.origin = "Vendor";
  vendor.deb("tool", "1.0", "", {{"usr/bin/tool", "1"}});
  vendor.publish();
  TempDir sd;
  Store store(sd.path());
  auto f = fetch::make_fetcher(store, {}, null_status());
  auto version_of = [&](const LoadOptions& lo) {
    PackageIndex index("amd64");
    auto loaded = load_repositories({distro.repository(), vendor.repository()}, lo, store, *f, index);
    SolveRequest req;
    req.packages = {"tool"};
    return lock_solution(index, solve(index, req)).at(0).version;
  };
  CHECK(version_of({}) == "2.0");
  LoadOptions pinned;
  pinned.origin_pins = {{"Vendor", 990}};
  CHECK(version_of(pinned) == "1.0");
  pinned.origin_pins = {{"Debian", 100}};  // a pin below the default 500 of the other
  CHECK(version_of(pinned) == "1.0");
  pinned.origin_pins = {{"Nobody", 990}};  // an origin no repository has changes nothing
  CHECK(version_of(pinned) == "2.0");

  // Two apt layers, each from one of them: the upper one's sources list names both.
  TempDir staging;
  InstallOptions io;
  io.staging = staging.path();
  PackageIndex di("amd64"), vi("amd64");
  io.sources = load_repositories({distro.repository()}, {}, store, *f, di);
  SolveRequest req;
  req.packages = {"tool"};
  Installed lower = install_packages(lock_solution(di, solve(di, req)), {}, io, store, *f);
  io.sources = load_repositories({vendor.repository()}, {}, store, *f, vi);
  Installed upper = install_packages({}, AptState::parse(lower.state.str()), io, store, *f);
  std::string sources = read_file(upper.entries.at("etc/apt/sources.list.d/stackbuild.sources").source);
  CHECK(sources.find("URIs: " + distro.repository().uri + "\n") != std::string::npos);
  CHECK(sources.find("URIs: " + vendor.repository().uri + "\n") != std::string::npos);
  // Both keyrings are named key.gpg: the lower layer's keeps its name, the
  // upper one's gets its digest in its name, and each stanza names its own.
  CHECK(sources.find("Signed-By: /etc/apt/keyrings/key.gpg\n") != std::string::npos);
  CHECK(read_file(lower.entries.at("etc/apt/keyrings/key.gpg").source) == read_file(distro.keyring));
  std::string vendor_key = "etc/apt/keyrings/key-" + Digest::of_file(vendor.keyring).hex().substr(0, 12) + ".gpg";
  CHECK(sources.find("Signed-By: /" + vendor_key + "\n") != std::string::npos);
  REQUIRE(upper.entries.count(vendor_key));
  CHECK(read_file(upper.entries.at(vendor_key).source) == read_file(vendor.keyring));
  CHECK_FALSE(upper.entries.count("etc/apt/keyrings/key.gpg"));  // the lower layer's stays as it is
  size_t stanzas = 0;
  for (size_t p = 0; (p = sources.find("Types: deb\n", p)) != std::string::npos; ++p) ++stanzas;
  CHECK(stanzas == 2);
}

TEST_CASE("apt repo: an expired Valid-Until is refused naming the key that allows it", "[apt][repo]") {
  if (!tools()) return;
  Repo repo;
  repo.deb("hello", "1.0", "", {{"usr/bin/hello", "x"}});
  repo.extra_release = "Valid-Until: Thu, 01 Jan 2015 00:00:00 UTC\n";
  repo.publish();
  TempDir sd;
  Store store(sd.path());
  Repository r = repo.repository();
  PackageIndex i1("amd64");
  CHECK_THROWS_WITH(load(r, store, i1), Catch::Contains("expired on Thu, 01 Jan 2015") &&
                                            Catch::Contains("`check_valid_until: false`"));
  r.from_sources_file = true;
  PackageIndex i2("amd64");
  CHECK_THROWS_WITH(load(r, store, i2), Catch::Contains("check-valid-until=no"));
  r.check_valid_until = false;
  PackageIndex i3("amd64");
  CHECK_NOTHROW(load(r, store, i3));
  CHECK(i3.candidate("hello"));
  // A Valid-Until in the future passes.
  repo.extra_release = "Valid-Until: Fri, 01 Jan 2100 00:00:00 UTC\n";
  repo.publish();
  PackageIndex i4("amd64");
  CHECK_NOTHROW(load(repo.repository(), store, i4));
}

TEST_CASE("apt repo: a Multi-Arch same package's dpkg files carry its architecture", "[apt][repo]") {
  if (!tools()) return;
  Repo repo;
  repo.deb("libm", "1.0", "Multi-Arch: same\n", {{"usr/lib/x86_64-linux-gnu/libm.so.1", "m"}});
  repo.deb("plain", "1.0", "", {{"usr/bin/plain", "p"}});
  repo.publish();
  TempDir sd;
  Store store(sd.path());
  PackageIndex index("amd64");
  load(repo.repository(), store, index);
  SolveRequest req;
  req.packages = {"libm", "plain"};
  TempDir staging;
  InstallOptions io;
  io.staging = staging.path();
  auto f = fetch::make_fetcher(store, {}, null_status());
  auto inst = install_packages(lock_solution(index, solve(index, req)), {}, io, store, *f);
  CHECK(inst.entries.count("var/lib/dpkg/info/libm:amd64.list"));
  CHECK(inst.entries.count("var/lib/dpkg/info/libm:amd64.md5sums"));
  CHECK_FALSE(inst.entries.count("var/lib/dpkg/info/libm.list"));
  CHECK(inst.entries.count("var/lib/dpkg/info/plain.list"));
  CHECK(inst.state.files.count("libm:amd64"));
}

TEST_CASE("apt repo: a Release whose SHA256 size is not a number is an error that names the entry", "[apt][repo]") {
  const std::string good = std::string("Suite: x\nSHA256:\n ") + std::string(64, 'a') + " 12 main/binary-amd64/Packages\n";
  CHECK(apt::parse_release(good).files.at("main/binary-amd64/Packages").size == 12);
  for (const char* size : {"12x", "-1", "99999999999999999999999"}) {
    INFO(size);
    std::string bad = std::string("Suite: x\nSHA256:\n ") + std::string(64, 'a') + " " + size + " main/binary-amd64/Packages\n";
    CHECK_THROWS_WITH(apt::parse_release(bad), Catch::Contains("main/binary-amd64/Packages") && Catch::Contains(size));
  }
}

TEST_CASE("apt repo: an InRelease or an index past its cap is refused naming the setting", "[apt][repo][limits]") {
  if (!tools()) return;
  Repo repo;
  repo.deb("hello", "1.0", "", {{"usr/bin/hello", "x"}});
  repo.publish();
  TempDir sd;
  Store store(sd.path());
  PackageIndex index("amd64");
  setenv("STACKBUILD_APT_MAX_RELEASE", "100", 1);  // the fixture's InRelease is a few KiB
  CHECK_THROWS_WITH(load(repo.repository(), store, index),
                    Catch::Contains("InRelease: larger than the 100 B cap (STACKBUILD_APT_MAX_RELEASE raises it)"));
  unsetenv("STACKBUILD_APT_MAX_RELEASE");
  setenv("STACKBUILD_APT_MAX_INDEX", "10", 1);  // the Packages index is a few hundred bytes
  PackageIndex index2("amd64");
  CHECK_THROWS_WITH(load(repo.repository(), store, index2),
                    Catch::Contains("over the 10 B cap (STACKBUILD_APT_MAX_INDEX raises it)"));
  unsetenv("STACKBUILD_APT_MAX_INDEX");
  PackageIndex index3("amd64");
  CHECK_NOTHROW(load(repo.repository(), store, index3));
}

TEST_CASE("apt keyring: Debian's package, only from a checked repository of Debian's, kept for later runs offline",
          "[apt][repo][keyring]") {
  if (!tools()) return;
  Repo debian;
  debian.origin = "Vendor";
  debian.deb("ubuntu-keyring", "1", "", {{"usr/share/keyrings/ubuntu-archive-keyring.gpg", "the keys"}});
  debian.publish();
  TempDir machine;
  const fs::path root = machine.path();
  test::write(root / "etc/os-release", "ID=debian\nVERSION_CODENAME=test\n");
  test::write(root / "etc/apt/sources.list",
              "deb [signed-by=" + debian.keyring.string() + "] file://" + debian.root.string() + " test main\n");
  TempDir sd;
  Store store(sd.path());
  fetch::FetchOptions o;
  o.retry.sleep = [](double) {};
  auto online = fetch::make_fetcher(store, o, null_status());
  KeyringLookup lookup{root, {"http://archive.example/ubuntu/dists/noble/InRelease"}};

  // Origin: Vendor is not Debian's archive: not asked, and the error says what to do.
  try {
    archive_keyring("ubuntu", lookup, store, *online);
    FAIL("a keyring from a repository whose Origin is not Debian");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Input);
    std::string what = e.what();
    CHECK(what.find("http://archive.example/ubuntu/dists/noble/InRelease: no keyring") == 0);
    CHECK(what.find((root / "usr/share/keyrings/ubuntu-archive-keyring.gpg").string()) != std::string::npos);
    CHECK(what.find("not Debian's archive (Origin: Vendor)") != std::string::npos);
    CHECK(what.find("install Debian's ubuntu-keyring package") != std::string::npos);
  }

  debian.origin = "Debian";
  debian.publish();
  ArchiveKeyring k = archive_keyring("ubuntu", lookup, store, *online);
  CHECK(read_file(k.file) == "the keys");
  CHECK(k.file.string().rfind(store.root().string(), 0) == 0);  // kept in the store, nowhere else
  CHECK(k.stands_for == "/usr/share/keyrings/ubuntu-archive-keyring.gpg");
  CHECK(k.sha256 == Digest::of_bytes("the keys").hex());
  CHECK(k.from == "Debian's ubuntu-keyring 1 (test)");

  // A later run, offline and with the repository gone: the store's record.
  fs::remove_all(debian.root);
  o.offline = true;
  auto offline = fetch::make_fetcher(store, o, null_status());
  ArchiveKeyring again = archive_keyring("ubuntu", lookup, store, *offline);
  CHECK(again.file == k.file);
  CHECK(again.from == k.from);

  // The machine's own keyring wins.
  test::write(root / "usr/share/keyrings/ubuntu-archive-keyring.gpg", "the host's keys");
  ArchiveKeyring host = archive_keyring("ubuntu", lookup, store, *offline);
  CHECK(host.file == root / "usr/share/keyrings/ubuntu-archive-keyring.gpg");
  CHECK(host.stands_for == host.file);
  CHECK(host.from.empty());

  // Debian's own keyring cannot come through Debian's archive: only the machine's.
  try {
    archive_keyring("debian", lookup, store, *offline);
    FAIL("a Debian keyring without one on the machine");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Input);
    CHECK(std::string(e.what()).find("install the debian-archive-keyring package") != std::string::npos);
  }
}
