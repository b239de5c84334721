// Framework sources (src/fetch/source/): an archive pinned by sha256, a git
// repository at a commit, a local directory; patches in order; the lock.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <cstdio>
#include <map>

#include <nlohmann/json.hpp>

#include "helpers.hpp"
#include "http_server.hpp"
#include "fetch/source/source.hpp"
#include "tar_fixture.hpp"
#include "util/process.hpp"
#include "util/status.hpp"

using namespace sb;
using namespace sb::source;

namespace {

int sh(const std::vector<std::string>& argv, const fs::path& cwd) {
  ProcessSpec s;
  s.argv = argv;
  s.env = current_environment();
  s.env["GIT_AUTHOR_NAME"] = s.env["GIT_COMMITTER_NAME"] = "t";
  s.env["GIT_AUTHOR_EMAIL"] = s.env["GIT_COMMITTER_EMAIL"] = "t@t";
  s.cwd = cwd;
  s.capture_stdout = true;
  s.merge_stderr = true;
  return run_process(s).exit_status;
}

std::string out_of(const std::vector<std::string>& argv, const fs::path& cwd) {
  ProcessSpec s;
  s.argv = argv;
  s.env = current_environment();
  s.cwd = cwd;
  s.capture_stdout = true;
  return run_process(s).output;
}

const char* kPatch1 =
    "--- a/src/main.c\n+++ b/src/main.c\n@@ -1 +1 @@\n-int main() { return 0; }\n+int main() { return 1; }\n";
const char* kPatch2 =
    "--- a/src/main.c\n+++ b/src/main.c\n@@ -1 +1 @@\n-int main() { return 1; }\n+int main() { return 2; }\n";

}  // namespace

TEST_CASE("source: archive git and local sources with patches in order", "[source]") {
  TempDir dir{fs::temp_directory_path()};
  fs::path tree = dir.path() / "fw-1.0";
  test::write(tree / "src/main.c", "int main() { return 0; }\n");
  test::write(tree / "build.sh", "echo hi\n", 0755);
  test::write(dir.path() / "p1.patch", kPatch1);
  test::write(dir.path() / "p2.patch", kPatch2);
  REQUIRE(sh({"tar", "-czf", (dir.path() / "fw.tar.gz").string(), "fw-1.0"}, dir.path()) == 0);
  std::string tarball = read_file(dir.path() / "fw.tar.gz");
  test::HttpServer server([&](const test::HttpRequest& r) {
    return r.path == "/fw.tar.gz" ? test::http_response(200, tarball) : test::http_response(404, "");
  });
  Store store(dir.path() / "store");
  FILE* devnull = fopen("/dev/null", "w");
  auto status = make_status(StatusMode::Plain, devnull);
  fetch::FetchOptions fo;
  fo.retry.attempts = 1;
  auto fetcher = fetch::make_fetcher(store, fo, *status);

  SourceSpec a;
  a.url = server.url("/fw.tar.gz");
  a.sha256 = Digest::of_bytes(tarball);
  a.patches = {dir.path() / "p1.patch", dir.path() / "p2.patch"};
  SourceLock la = prepare_source(a, dir.path() / "a", store, *fetcher);
  CHECK(test::slurp(dir.path() / "a/src/main.c") == "int main() { return 2; }\n");  // both, in order
  CHECK(la.sha256 == a.sha256);
  CHECK(la.patches.size() == 2);
  nlohmann::json j = la;
  CHECK(j["kind"] == "archive");
  CHECK(j["patches"][1]["sha256"] == Digest::of_bytes(kPatch2).hex());

  // The same tree from a local directory has the same tree digest.
  SourceSpec l;
  l.kind = SourceSpec::Kind::Local;
  l.path = tree;
  l.patches = a.patches;
  CHECK(prepare_source(l, dir.path() / "l", store, *fetcher).tree == la.tree);

  // A wrong sha256: an error, nothing unpacked from it.
  SourceSpec bad = a;
  bad.sha256 = Digest::of_bytes("other");
  CHECK_THROWS_WITH(prepare_source(bad, dir.path() / "bad", store, *fetcher), Catch::Contains("sha256"));
  CHECK(fs::is_empty(dir.path() / "bad"));
  SourceSpec unpinned = a;
  unpinned.sha256.reset();
  CHECK_THROWS_WITH(prepare_source(unpinned, dir.path() / "u", store, *fetcher), Catch::Contains("has no sha256"));

  // A patch that does not apply names itself and shows patch's output.
  SourceSpec twice = l;
  twice.patches = {dir.path() / "p2.patch"};
  CHECK_THROWS_WITH(prepare_source(twice, dir.path() / "t", store, *fetcher), Catch::Contains("p2.patch"));

  // git: a repository at a commit, then git apply.
  fs::path repo = dir.path() / "repo";
  fs::copy(tree, repo, fs::copy_options::recursive);
  REQUIRE(sh({"git", "init", "-q"}, repo) == 0);  // git is a build dependency (scripts/install-deps.sh)
  REQUIRE(sh({"git", "add", "-A"}, repo) == 0);
  REQUIRE(sh({"git", "commit", "-qm", "one"}, repo) == 0);
  std::string first = out_of({"git", "rev-parse", "HEAD"}, repo).substr(0, 40);
  test::write(repo / "later.txt", "later\n");
  REQUIRE(sh({"git", "add", "-A"}, repo) == 0);
  REQUIRE(sh({"git", "commit", "-qm", "two"}, repo) == 0);
  SourceSpec g;
  g.kind = SourceSpec::Kind::Git;
  g.url = "file://" + repo.string();
  g.ref = first;
  g.patches = a.patches;
  SourceLock lg = prepare_source(g, dir.path() / "g", store, *fetcher);
  CHECK(lg.commit == first);
  CHECK_FALSE(fs::exists(dir.path() / "g/later.txt"));
  CHECK_FALSE(fs::exists(dir.path() / "g/.git"));
  CHECK(lg.tree == la.tree);
  g.ref = std::string(40, 'f');
  CHECK_THROWS_WITH(prepare_source(g, dir.path() / "g2", store, *fetcher), Catch::Contains("git fetch"));
  fclose(devnull);
}

// Hostile git sources (DESIGN.md, "Trust boundary"): what git would read as an
// option or a command-running transport never reaches git.
TEST_CASE("source: git URLs and refs that git would read as options are refused", "[source][hostile]") {
  for (const char* ok : {"https://github.com/pytorch/pytorch", "http://127.0.0.1:8080/r.git", "ssh://git@host/r.git",
                         "git+ssh://host/r", "git://host/r", "git@host:team/r.git", "host:r.git",
                         "file:///srv/mirror/pytorch", "FILE:///srv/m"}) {
    INFO(ok);
    CHECK(git_url_problem(ok).empty());
  }
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"--upload-pack=touch /tmp/x", "begins with '-'"},
      {"-u", "begins with '-'"},
      {"ext::sh -c touch% /tmp/x", "transport-helper"},
      {"fd::3", "transport-helper"},
      {"ftp://host/r", "scheme 'ftp://'"},
      {"ssh://-oProxyCommand=x/r", "beginning with '-'"},
      {"ssh://user@-oProxyCommand=x/r", "beginning with '-'"},
      {"user@-oProxyCommand=x:r", "beginning with '-'"},
      {"/srv/mirror/pytorch", "a local path"},
      {"../mirror", "a local path"},
      {"https://host/r\n--upload-pack=x", "control character"},
      {"", "is empty"}};
  for (const auto& [url, why] : bad) {
    INFO(url);
    CHECK_THAT(git_url_problem(url), Catch::Contains(why));
  }
  for (const std::string ok : {"v2.6.0", "main", "release/2.6", "0123456789abcdef0123456789abcdef01234567"})
    CHECK(git_ref_problem(ok).empty());
  for (const char* ref : {"--upload-pack=touch /tmp/x", "-f", "a b", "v1:refs/heads/x", "HEAD^", "a..b", "x@{1}", ""})
    CHECK_FALSE(git_ref_problem(ref).empty());

  // prepare_source refuses them before git runs: the command never runs.
  TempDir dir{fs::temp_directory_path()};
  fs::path repo = dir.path() / "repo";
  test::write(repo / "f.txt", "x\n");
  REQUIRE(sh({"git", "init", "-q"}, repo) == 0);
  REQUIRE(sh({"git", "add", "-A"}, repo) == 0);
  REQUIRE(sh({"git", "commit", "-qm", "one"}, repo) == 0);
  REQUIRE(sh({"git", "tag", "v1"}, repo) == 0);
  Store store(dir.path() / "store");
  auto fetcher = fetch::make_fetcher(store, {}, null_status());
  const fs::path marker = dir.path() / "pwned";
  SourceSpec g;
  g.kind = SourceSpec::Kind::Git;
  g.url = "--upload-pack=touch " + marker.string();
  g.ref = "v1";
  CHECK_THROWS_WITH(prepare_source(g, dir.path() / "a", store, *fetcher),
                    Catch::Contains("git source URL '--upload-pack=touch") && Catch::Contains("begins with '-'"));
  g.url = "file://" + repo.string();
  g.ref = "--upload-pack=touch " + marker.string();
  CHECK_THROWS_WITH(prepare_source(g, dir.path() / "b", store, *fetcher),
                    Catch::Contains("ref '--upload-pack=touch") && Catch::Contains("begins with '-'"));
  CHECK_FALSE(fs::exists(marker));
  CHECK_FALSE(fs::exists(dir.path() / "b" / "pwned"));
  g.ref = "v1";  // a file:// URL, the explicit form of a local mirror, works
  CHECK(prepare_source(g, dir.path() / "c", store, *fetcher).commit.size() == 40);
}

// A source archive against the host: a symlink out of the tree, a file
// written through it, a hardlink to a link to a host file, a directory entry
// over a link (chmod through it). Beside the destination, a "host" directory
// (0700) with a secret (0600) that must stay as it is and unread.
TEST_CASE("source: a hostile archive writes, reads and chmods nothing outside its tree", "[source][hostile]") {
  TempDir dir{fs::temp_directory_path()};
  test::HostCanary host(dir.path() / "host");
  const std::string before = host.state();
  auto host_state = [&] { return host.state(); };
  std::map<std::string, std::string> served;
  test::HttpServer server([&](const test::HttpRequest& r) {
    auto it = served.find(r.path);
    return it != served.end() ? test::http_response(200, it->second) : test::http_response(404, "");
  });
  Store store(dir.path() / "store");
  FILE* devnull = fopen("/dev/null", "w");
  auto status = make_status(StatusMode::Plain, devnull);
  fetch::FetchOptions fo;
  fo.retry.attempts = 1;
  auto fetcher = fetch::make_fetcher(store, fo, *status);
  int n = 0;
  // The tree goes to dir/src<n>: "../host" from its top is the host directory.
  auto attempt = [&](const std::vector<test::RawEntry>& entries) {
    std::string name = "/evil" + std::to_string(++n) + ".tar.gz";
    fs::path f = dir.path() / "fixture.tar.gz";
    test::make_tar(f, entries, true);
    served[name] = read_file(f);
    SourceSpec s;
    s.url = server.url(name);
    s.sha256 = Digest::of_bytes(served[name]);
    prepare_source(s, dir.path() / ("src" + std::to_string(n)), store, *fetcher);
  };
  auto leaked = [&] {
    int count = 0;
    for (int i = 1; i <= n; ++i) count += host.copies_in(dir.path() / ("src" + std::to_string(i)));
    return count;
  };
  const std::string t = "fw-1.0/";
  CHECK_THROWS_WITH(attempt({{t + "a", 'f', "x"}, {t + "esc", 'l', "../../host"}, {t + "esc/planted", 'f', "x"}}),
                    Catch::Contains("evil1.tar.gz"));
  CHECK_THROWS(attempt({{t + "a", 'f', "x"}, {t + "s", 'l', "../../host/secret"}, {t + "stolen", 'h', t + "s"}}));
  CHECK_THROWS(attempt({{t + "a", 'f', "x"}, {t + "d", 'l', "../../host"}, {t + "d", 'd', "", 0777}}));
  CHECK(leaked() == 0);
  CHECK(host_state() == before);
  fclose(devnull);
}
