// Debian version ordering, dependency fields and the resolver, over an index
// written in the test (no network, no tools).
#include <catch2/catch.hpp>

#include "fetch/apt/index.hpp"
#include "fetch/apt/solver.hpp"
#include "fetch/apt/sources.hpp"
#include "fetch/apt/version.hpp"

using namespace sb;
using namespace sb::apt;

TEST_CASE("apt: version ordering follows Debian policy", "[apt]") {
  struct Case { const char* a; const char* b; int want; };
  const Case cases[] = {
      {"1.0", "1.0", 0},           {"1.0", "1.1", -1},           {"1.10", "1.9", 1},
      {"1.0~rc1", "1.0", -1},      {"1.0~rc1", "1.0~rc2", -1},   {"1.0~~", "1.0~", -1},
      {"1.0~", "1.0", -1},         {"1.0", "1.0+b1", -1},        {"1.0", "1.0a", -1},
      {"1:0.1", "2.0", 1},         {"0:1.0", "1.0", 0},          {"2:1.0", "10:0.1", -1},
      {"1.0-1", "1.0-2", -1},      {"1.0-1", "1.0", 1},          {"1.0-10", "1.0-9", 1},
      {"1.0-1~bpo1", "1.0-1", -1}, {"1.2.3-1", "1.2.3-1.1", -1}, {"001", "1", 0},
      {"1.0.0", "1.0", 1},         {"a", "b", -1},               {"1a", "1+", -1},
      {"1:1.3.dfsg+really1.3.1-1", "1:1.3.dfsg-1", 1},           {"2.41-12+deb13u5", "2.41-12", 1},
      {"3.13.5-2+deb13u5", "3.13.5-2+deb13u10", -1},
  };
  for (const auto& c : cases) {
    INFO(c.a << " vs " << c.b);
    int got = compare_versions(c.a, c.b);
    CHECK((got > 0) - (got < 0) == c.want);
    int back = compare_versions(c.b, c.a);
    CHECK((back > 0) - (back < 0) == -c.want);
  }
  CHECK(satisfies("1.0-1", Relation::GreaterEq, "1.0"));
  CHECK_FALSE(satisfies("1.0~rc1", Relation::GreaterEq, "1.0"));
  CHECK(satisfies("2.0", Relation::Greater, "1:0") == false);
  CHECK(satisfies("1.0", Relation::Less, "1.0.1"));
}

TEST_CASE("apt: a NUL inside a version weighs as a character - the order stays transitive", "[apt]") {
  // Found by fuzz_apt. NUL weighed as the end of the string, the same as a
  // digit, so comparing the two stepped over that digit: "2.3Package12u4" <
  // "29" < "\0-36-10", and yet "2.3Package12u4" > "\0-36-10".
  const std::string nul_version("\0-36-10", 7);
  CHECK(compare_versions("2.3Package12u4", "29") < 0);
  CHECK(compare_versions("29", nul_version) < 0);
  CHECK(compare_versions("2.3Package12u4", nul_version) < 0);
  CHECK(compare_versions(std::string("1\0", 2), "1") > 0);  // as "1+" against "1"
  CHECK(compare_versions(std::string("1\0", 2), "1a") > 0);  // a letter comes before others
}

TEST_CASE("apt: an epoch too large for a long still compares as a number", "[apt]") {
  // Found by fuzz_apt (UBSan: signed overflow in the epoch).
  const std::string huge(40, '9');
  CHECK(compare_versions(huge + ":1.0", "1:2.0") > 0);
  CHECK(compare_versions(huge + ":1.0", "1" + huge + ":0") < 0);
  CHECK(compare_versions("007:1.0", "7:1.0") == 0);
  CHECK(compare_versions("x:1.0", "1.0") == 0);  // not digits: epoch 0, as before
}

TEST_CASE("apt: dependency fields parse with alternatives relations and arch qualifiers", "[apt]") {
  auto d = parse_depends("libc6 (>= 2.36), python3:any | python3-minimal (<< 3.14~),\n awk, foo [!amd64], bar [amd64]",
                         "amd64");
  REQUIRE(d.size() == 4);
  CHECK(d[0][0].name == "libc6");
  CHECK(d[0][0].op == Relation::GreaterEq);
  CHECK(d[0][0].version == "2.36");
  REQUIRE(d[1].size() == 2);
  CHECK(d[1][0].name == "python3");
  CHECK(d[1][0].arch == "any");
  CHECK(d[1][1].op == Relation::Less);
  CHECK(d[2][0].name == "awk");
  CHECK(d[3][0].name == "bar");  // foo [!amd64] is dropped on amd64
  CHECK_THROWS_WITH(parse_depends("libc6 (>= 2.36"), Catch::Contains("unclosed '('"));
}

namespace {

// A Packages text: one record per "name version [Field: value]..." entry.
std::string record(const std::string& name, const std::string& version, const std::string& extra = "") {
  return "Package: " + name + "\nVersion: " + version + "\nArchitecture: amd64\nFilename: pool/" + name + "_" +
         version + ".deb\nSize: 10\nSHA256: " + std::string(64, 'a') + "\n" + extra + "\n";
}

struct Fixture {
  PackageIndex index{"amd64"};
  explicit Fixture(const std::string& packages, const std::string& pinned = "") {
    Repository main;
    main.uri = "file:///repo";
    main.suite = "test";
    index.add_packages(index.add_repository(main), packages);
    if (!pinned.empty()) {
      Repository vendor = main;
      vendor.uri = "file:///vendor";
      vendor.priority = 990;
      index.add_packages(index.add_repository(vendor), pinned);
    }
    index.finish();
  }
  std::vector<std::string> solve(std::vector<std::string> want, bool essential = false) {
    SolveRequest r;
    r.packages = std::move(want);
    r.essential = essential;
    std::vector<std::string> out;
    for (const Package* p : apt::solve(index, r).packages) out.push_back(p->id());
    return out;
  }
};

using V = std::vector<std::string>;

}  // namespace

TEST_CASE("apt: the resolver takes the newest version that fits and the first working alternative", "[apt]") {
  Fixture f(record("app", "1.0", "Depends: libfoo (>= 2), missing | libbar\n") + record("libfoo", "1.0") +
            record("libfoo", "2.5") + record("libfoo", "2.10") + record("libbar", "1:0.1") + record("other", "1"));
  CHECK(f.solve({"app"}) == V{"app=1.0", "libbar=1:0.1", "libfoo=2.10"});
  CHECK(f.solve({"libfoo=2.5"}) == V{"libfoo=2.5"});
}

TEST_CASE("apt: an alternative already chosen satisfies a group and Pre-Depends count", "[apt]") {
  Fixture f(record("app", "1", "Pre-Depends: a | b\n") + record("a", "1") + record("b", "1"));
  CHECK(f.solve({"app"}) == V{"a=1", "app=1"});
  CHECK(f.solve({"b", "app"}) == V{"app=1", "b=1"});
}

TEST_CASE("apt: virtual packages resolve through Provides with versions", "[apt]") {
  Fixture f(record("app", "1", "Depends: awk, mail-transport (>= 2)\n") +
            record("gawk", "5", "Provides: awk\nPriority: optional\n") +
            record("mawk", "1.3", "Provides: awk\nPriority: required\n") +
            record("postfix", "3", "Provides: mail-transport (= 3)\n") +
            record("exim", "4", "Provides: mail-transport\n"));
  // required before optional (as apt orders providers); the unversioned exim
  // cannot satisfy a versioned dependency.
  CHECK(f.solve({"app"}) == V{"app=1", "mawk=1.3", "postfix=3"});
  CHECK_THROWS_WITH(f.solve({"awk"}), Catch::Contains("virtual package provided by gawk, mawk"));
}

TEST_CASE("apt: Conflicts and Breaks rule choices out or explain why nothing fits", "[apt]") {
  Fixture f(record("app", "1", "Depends: impl-a | impl-b\n") + record("impl-a", "1", "Conflicts: base\n") +
            record("impl-b", "1") + record("base", "1") + record("old", "1", "Breaks: base (<< 2)\n"));
  CHECK(f.solve({"base", "app"}) == V{"app=1", "base=1", "impl-b=1"});
  CHECK_THROWS_WITH(f.solve({"base", "old"}), Catch::Contains("old 1 conflicts with base 1") ||
                                                  Catch::Contains("conflicts with base (<< 2)"));
}

TEST_CASE("apt: a failure names the package the dependency and why", "[apt]") {
  Fixture f(record("python3-torch-cuda", "2.6", "Depends: libcudart12 (>= 12.4)\n") +
            record("tool", "1", "Depends: libz (>= 2)\n") + record("libz", "1.3"));
  CHECK_THROWS_WITH(f.solve({"python3-torch-cuda"}),
                    Catch::Contains("python3-torch-cuda: depends on libcudart12 (>= 12.4) which no source provides"));
  CHECK_THROWS_WITH(f.solve({"tool"}), Catch::Contains("tool: depends on libz (>= 2) but only 1.3 is available"));
  CHECK_THROWS_WITH(f.solve({"nope"}), Catch::Contains("package nope is not in any repository"));
}

TEST_CASE("apt: a pinned repository wins over a newer version and Essential joins on request", "[apt]") {
  Fixture f(record("tool", "2.0") + record("sh", "1", "Essential: yes\n"), record("tool", "1.5"));
  CHECK(f.solve({"tool"}) == V{"tool=1.5"});
  CHECK(f.solve({"tool"}, true) == V{"sh=1", "tool=1.5"});
}

TEST_CASE("apt: sources come from one-line and deb822 files and follow another release", "[apt]") {
  auto list = parse_sources_list(
      "# comment\ndeb [signed-by=/k.gpg trusted=yes] http://mirror.invalid/debian bookworm main contrib\n"
      "deb-src http://mirror.invalid/debian bookworm main\n",
      "sources.list");
  REQUIRE(list.size() == 1);
  CHECK(list[0].signed_by == "/k.gpg");
  CHECK(list[0].trusted);
  CHECK(list[0].components == V{"main", "contrib"});
  auto d822 = parse_sources_deb822(
      "Types: deb\nURIs: http://mirror.invalid/debian/\nSuites: bookworm bookworm-updates\nComponents: main\n"
      "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\n"
      "Types: deb\nURIs: http://other.invalid/x\nSuites: stable\nComponents: main\nEnabled: no\n",
      "debian.sources");
  REQUIRE(d822.size() == 2);
  CHECK(d822[0].uri == "http://mirror.invalid/debian");
  auto trixie = repositories_for(d822, "bookworm", "trixie");
  REQUIRE(trixie.size() == 2);
  CHECK(trixie[0].suite == "trixie");
  CHECK(trixie[1].suite == "trixie-updates");
  CHECK(trixie[0].signed_by == "/usr/share/keyrings/debian-archive-keyring.gpg");
  CHECK(list[0].from_sources_file);
  CHECK(d822[0].from_sources_file);
}

TEST_CASE("apt: a sources line of options alone is an error and relative keyrings sit beside the file", "[apt]") {
  CHECK_THROWS_WITH(parse_sources_list("deb http://mirror.invalid/debian trixie main\n  [trusted=yes]  # no more\n",
                                       "/etc/apt/x.list"),
                    Catch::Contains("/etc/apt/x.list:2: a sources line with options and nothing else"));
  CHECK_THROWS_WITH(parse_sources_list("[signed-by=/k.gpg]", "y.list"), Catch::Contains("y.list:1:"));
  auto repos = parse_sources_list("deb [signed-by=keys/k.gpg] http://m.invalid/d trixie main\n"
                                  "deb [signed-by=/abs/k.gpg] http://m.invalid/d trixie-updates main\n"
                                  "deb http://m.invalid/d trixie-backports main\n",
                                  "x.list");
  resolve_keyrings(repos, "/srv/apt/x.list");
  CHECK(repos[0].signed_by == "/srv/apt/keys/k.gpg");
  CHECK(repos[1].signed_by == "/abs/k.gpg");
  CHECK(repos[2].signed_by.empty());
  resolve_keyrings(repos = parse_sources_list("deb [signed-by=k.gpg] http://m.invalid/d trixie main\n", "x.list"),
                   "x.list");  // a file named without a directory: the working directory
  CHECK(repos[0].signed_by == fs::current_path() / "k.gpg");
}

namespace {

// A dpkg status record of a package in a lower layer.
Paragraph installed(const std::string& name, const std::string& version, const std::string& extra = "") {
  return parse_paragraphs("Package: " + name + "\nStatus: install ok installed\nVersion: " + version +
                          "\nArchitecture: amd64\n" + extra)
      .front();
}

struct Result {
  std::vector<std::string> ids;
  std::map<std::string, std::string> upgraded, reason;
};

Result solve_with(Fixture& f, std::vector<std::string> want, std::vector<Paragraph> below, bool recommends = false) {
  SolveRequest r;
  r.packages = std::move(want);
  r.installed = std::move(below);
  r.recommends = recommends;
  Solution s = apt::solve(f.index, r);
  Result out;
  for (const Package* p : s.packages) out.ids.push_back(p->id());
  out.upgraded = s.upgraded;
  out.reason = s.reason;
  return out;
}

}  // namespace

TEST_CASE("apt: Recommends are left out unless asked for and a missing one is skipped", "[apt]") {
  Fixture f(record("app", "1", "Depends: lib\nRecommends: helper | other, missing-rec\n") + record("lib", "1") +
            record("helper", "1", "Depends: helper-data\nRecommends: deep\n") + record("helper-data", "1") +
            record("deep", "1") + record("other", "1") + record("clash", "1", "Conflicts: app\n") +
            record("tool", "1", "Recommends: clash | other\n"));
  CHECK(solve_with(f, {"app"}, {}).ids == V{"app=1", "lib=1"});  // --no-install-recommends by default
  auto with = solve_with(f, {"app"}, {}, true);
  // The first alternative that installs, its Depends and its own Recommends;
  // a Recommends nothing provides is left out, not an error.
  CHECK(with.ids == V{"app=1", "deep=1", "helper=1", "helper-data=1", "lib=1"});
  CHECK(with.reason["helper"] == "app (Recommends)");
  // An alternative that conflicts with what is chosen is passed over.
  CHECK(solve_with(f, {"app", "tool"}, {}, true).ids ==
        V{"app=1", "deep=1", "helper=1", "helper-data=1", "lib=1", "other=1", "tool=1"});
  // A Recommends already installed below needs nothing.
  CHECK(solve_with(f, {"app"}, {installed("helper", "1"), installed("lib", "1")}, true).ids == V{"app=1"});
}

TEST_CASE("apt: a later layer upgrades a package below when asked or when a dependency needs it", "[apt]") {
  Fixture f(record("libgreet", "1.0") + record("libgreet", "2.0", "Provides: greeting (= 2)\n") +
            record("hello", "2.0", "Depends: libgreet (>= 2.0)\n") + record("tool", "1", "Depends: libgreet\n"));
  std::vector<Paragraph> below = {installed("libgreet", "1.0")};
  // Not asked for and nothing needs newer: the version below stays.
  CHECK(solve_with(f, {"tool"}, below).ids == V{"tool=1"});
  // Asked for, with a newer candidate: upgraded.
  auto up = solve_with(f, {"libgreet"}, below);
  CHECK(up.ids == V{"libgreet=2.0"});
  CHECK(up.upgraded == std::map<std::string, std::string>{{"libgreet", "1.0"}});
  // A dependency on a newer version upgrades it too.
  auto dep = solve_with(f, {"hello"}, below);
  CHECK(dep.ids == V{"hello=2.0", "libgreet=2.0"});
  CHECK(dep.upgraded.count("libgreet"));
  // Already the newest below: nothing to do.
  CHECK(solve_with(f, {"libgreet"}, {installed("libgreet", "2.0")}).ids.empty());
  // Never an implicit downgrade; an explicit version may.
  CHECK(solve_with(f, {"libgreet"}, {installed("libgreet", "3.0")}).ids.empty());
  auto down = solve_with(f, {"libgreet=1.0"}, {installed("libgreet", "2.0")});
  CHECK(down.ids == V{"libgreet=1.0"});
  CHECK(down.upgraded.at("libgreet") == "2.0");
}

TEST_CASE("apt: an upgrade that breaks a package below is refused with the reason", "[apt]") {
  Fixture f(record("libgreet", "1.0") + record("libgreet", "2.0") + record("breaker", "1", "Breaks: libgreet (<< 3)\n"));
  std::vector<Paragraph> below = {installed("libgreet", "1.0"),
                                  installed("hello", "1.0", "Depends: libc6, libgreet (<< 2.0)\n")};
  CHECK_THROWS_WITH(solve_with(f, {"libgreet"}, below),
                    Catch::Contains("cannot upgrade libgreet 1.0 -> 2.0: hello 1.0 (installed in a lower layer) "
                                    "depends on libgreet (<< 2.0)"));
  // Conflicts of the new version against what stays below still count.
  CHECK_THROWS_WITH(solve_with(f, {"breaker"}, {installed("libgreet", "2.0")}),
                    Catch::Contains("conflicts with libgreet"));
  // What the old version provided no longer counts once it is replaced.
  Fixture g(record("impl", "1", "Provides: iface\n") + record("impl", "2"));
  CHECK_THROWS_WITH(solve_with(g, {"impl"}, {installed("impl", "1", "Provides: iface\n"),
                                             installed("user", "1", "Depends: iface\n")}),
                    Catch::Contains("user 1 (installed in a lower layer) depends on iface"));
}

TEST_CASE("apt: priority adds every package of that Priority and above", "[apt]") {
  Fixture f(record("req", "1", "Priority: required\n") + record("imp", "1", "Priority: important\nDepends: dep\n") +
            record("std", "1", "Priority: standard\n") + record("opt", "1", "Priority: optional\n") +
            record("dep", "1", "Priority: optional\n"));
  auto with = [&](const std::string& level) {
    SolveRequest r;
    r.priority = level;
    V out;
    for (const Package* p : apt::solve(f.index, r).packages) out.push_back(p->id());
    return out;
  };
  CHECK(with("required") == V{"req=1"});
  CHECK(with("important") == V{"dep=1", "imp=1", "req=1"});
  CHECK(with("standard") == V{"dep=1", "imp=1", "req=1", "std=1"});
  CHECK_THROWS_WITH(with("optional"), Catch::Contains("not required, important or standard"));
}

TEST_CASE("apt: Multi-Arch qualifiers in an image of one architecture follow dpkg", "[apt]") {
  auto all = [](std::string r) { return r.replace(r.find("Architecture: amd64"), 19, "Architecture: all"); };
  Fixture f(record("py", "3", "Multi-Arch: allowed\n") + record("perlish", "5") +
            record("foreign-tool", "1", "Multi-Arch: foreign\n") + all(record("data", "1")) +
            record("wants-py", "1", "Depends: py:any\n") + record("wants-perl", "1", "Depends: perlish:any\n") +
            record("wants-i386", "1", "Depends: perlish:i386\n") +
            record("wants-native", "1", "Depends: perlish:amd64, data:native\n") +
            record("alt-i386", "1", "Depends: perlish:i386 | foreign-tool\n") +
            record("no-i386", "1", "Conflicts: perlish:i386\n") + record("no-any", "1", "Conflicts: perlish:any\n"));
  // :any is satisfied only by a package that is Multi-Arch: allowed.
  CHECK(f.solve({"wants-py"}) == V{"py=3", "wants-py=1"});
  CHECK_THROWS_WITH(f.solve({"wants-perl"}),
                    Catch::Contains("perlish:any, but perlish is not 'Multi-Arch: allowed'"));
  // Installed by name first, it still does not satisfy :any.
  CHECK_THROWS_WITH(f.solve({"perlish", "wants-perl"}), Catch::Contains("wants-perl: depends on perlish:any"));
  // Another architecture: nothing of this image matches it.
  CHECK_THROWS_WITH(f.solve({"wants-i386"}),
                    Catch::Contains("perlish:i386, but the image has one architecture, amd64"));
  CHECK_THROWS_WITH(f.solve({"perlish", "wants-i386"}), Catch::Contains("wants-i386: depends on perlish:i386"));
  CHECK(f.solve({"alt-i386"}) == V{"alt-i386=1", "foreign-tool=1"});
  // The native architecture (by name or :native) matches it and Architecture: all.
  CHECK(f.solve({"wants-native"}) == V{"data=1", "perlish=5", "wants-native=1"});
  // Conflicts: perlish:i386 does not hit the amd64 perlish; :any hits any.
  CHECK(f.solve({"perlish", "no-i386"}) == V{"no-i386=1", "perlish=5"});
  CHECK_THROWS_WITH(f.solve({"perlish", "no-any"}), Catch::Contains("conflicts with perlish"));
  // Requests: name:amd64 and name:all are this image's; name:i386 is not.
  CHECK(f.solve({"perlish:amd64", "data:all"}) == V{"data=1", "perlish=5"});
  CHECK_THROWS_WITH(f.solve({"perlish:i386"}), Catch::Contains("package perlish:i386: the image has one architecture"));
  CHECK_THROWS_WITH(f.solve({"perlish:all"}), Catch::Contains("perlish is Architecture: amd64, not all"));
}
