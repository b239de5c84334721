// The offline fixture of the build tests that need apt and pip layers: a
// recipe with an apt layer and a pip layer over a two-point matrix, an
// unsigned apt repository made with dpkg-deb (one package, `hello`) and a
// fixture index of greet 1.0 and 2.0, every byte served through the fakes
// (test_matrix_offline.cpp, test_provenance.cpp).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "fetch/pip/resolver.hpp"
#include "helpers.hpp"
#include "pip_fixture.hpp"
#include "util/digest.hpp"
#include "util/process.hpp"

namespace sb::test::offline {

inline const std::string kApt = "http://apt.invalid/debian";
inline const std::string kIndex = "http://pypi.invalid/simple";
inline const std::string kFiles = "http://pypi.invalid/files/";

// The apt layer is the same at both points; the pip layer pins greet ${flavor}.
inline const std::string kRecipe =
    "stack: svc\n"
    "source_date_epoch: 1700000000\n"
    "platform: {python: \"3.11\", glibc: \"2.36\"}\n"
    "matrix:\n  flavor: [\"1.0\", \"2.0\"]\n"
    "repositories:\n  - {url: \"" + kApt + "\", suites: [test], trusted: true}\n"
    "layers:\n"
    "  - {name: os, apt: [hello]}\n"
    "  - {name: wheels, pip: [\"greet==${flavor}\"]}\n"
    "tags: [\"svc:${flavor}\"]\n";

inline bool have_dpkg_deb() {
  ProcessSpec s;
  s.argv = {"sh", "-c", "command -v dpkg-deb"};
  s.env = {{"PATH", "/usr/bin:/bin"}};
  s.capture_stdout = true;
  return run_process(s).exit_status == 0;
}

// An unsigned repository in `root` (dists/test, pool/): one package, `hello`.
inline void make_apt_repo(const fs::path& root, const fs::path& scratch) {
  const fs::path src = scratch / "hello";
  write(src / "DEBIAN/control",
        "Package: hello\nVersion: 1.0\nArchitecture: amd64\nMaintainer: T <t@example.invalid>\n"
        "Description: test package\n");
  write(src / "usr/bin/hello", "#!/bin/sh\necho hello\n", 0755);
  const fs::path deb = root / "pool/hello_1.0_amd64.deb";
  fs::create_directories(deb.parent_path());
  ProcessSpec s;
  s.argv = {"dpkg-deb", "--root-owner-group", "-Zgzip", "--build", src.string(), deb.string()};
  s.env = {{"PATH", "/usr/bin:/bin"}, {"LC_ALL", "C"}, {"SOURCE_DATE_EPOCH", "1700000000"}};
  s.capture_stdout = true;
  s.merge_stderr = true;
  auto r = run_process(s);
  REQUIRE(r.exit_status == 0);
  const std::string packages = "Package: hello\nVersion: 1.0\nArchitecture: amd64\nFilename: pool/hello_1.0_amd64.deb\n"
                               "Size: " + std::to_string(fs::file_size(deb)) + "\nSHA256: " +
                               Digest::of_file(deb).hex() + "\n\n";
  write(root / "dists/test/main/binary-amd64/Packages", packages);
  write(root / "dists/test/Release",
        "Origin: Test\nSuite: test\nCodename: test\nComponents: main\nArchitectures: amd64\nSHA256:\n " +
            Digest::of_bytes(packages).hex() + " " + std::to_string(packages.size()) + " main/binary-amd64/Packages\n");
}

// Everything served: the repository, and an index of greet 1.0 and 2.0
// (pages through the index transport; PEP 658 metadata and wheels through
// the fetcher).
struct Served {
  TempDir tmp;
  FixtureIndex wheels;
  std::map<std::string, std::string> files;  // the wheels and their metadata, by URL
  Served() {
    make_apt_repo(tmp.path() / "repo", tmp.path());
    for (const char* v : {"1.0", "2.0"}) {
      wheels.add({"greet", v, "py3-none-any", {}, {}, {{"greet/__init__.py", std::string("V = '") + v + "'\n"}}});
      files[kFiles + wheel(v)] = wheels.bytes(wheel(v));
      files[kFiles + wheel(v) + ".metadata"] = wheels.bytes(wheel(v) + ".metadata");
    }
  }
  static std::string wheel(const std::string& v) { return "greet-" + v + "-py3-none-any.whl"; }
  // The point's lockfile pins for its pip layer (the apt layer resolves now).
  std::string lock_of(const std::string& v) const {
    pip::PinnedWheel w;
    w.name = "greet";
    w.key = "greet";
    w.version = v;
    w.filename = wheel(v);
    w.url = kFiles + wheel(v);
    w.sha256 = wheels.sha(wheel(v));
    w.size = wheels.bytes(wheel(v)).size();
    w.requested = true;
    return nlohmann::json{{"pip", {{"wheels", {{"wheels", nlohmann::json::array({w})}}}}}}.dump();
  }
};

// STACKBUILD_PIP_INDEX_URL names the fixture's index while a test runs.
struct IndexSetting {
  IndexSetting() { ::setenv("STACKBUILD_PIP_INDEX_URL", kIndex.c_str(), 1); }
  ~IndexSetting() { ::unsetenv("STACKBUILD_PIP_INDEX_URL"); }
};

// A clock that moves 1 s each time it is read.
inline std::function<std::chrono::steady_clock::time_point()> ticking_clock() {
  auto t = std::make_shared<std::atomic<int64_t>>(0);
  return [t] { return std::chrono::steady_clock::time_point(std::chrono::seconds(++*t)); };
}

}  // namespace sb::test::offline
