// The pip source against a fixture index on 127.0.0.1: resolution, install
// without pip, and every failure a clear error with nothing in the store.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <clocale>
#include <cstdio>
#include <iterator>

#include "helpers.hpp"
#include "layer/tar_writer.hpp"
#include "fetch/pip/duplicates.hpp"
#include "fetch/pip/index.hpp"
#include "fetch/pip/install.hpp"
#include "pip_fixture.hpp"
#include "util/status.hpp"

using namespace sb;
using namespace sb::pip;

namespace {

fetch::FetchOptions quick_retries() {
  fetch::FetchOptions o;
  o.retry.attempts = 2;
  o.retry.sleep = [](double) {};
  return o;
}

struct Fixture : test::IndexBed {
  Target target;

  Fixture() : IndexBed(quick_retries()) {
    target.python = "3.12";
    target.libc_version = "2.28";
    target.site_packages = "/usr/local/lib/python3.12/dist-packages";
    index.add({"torchy", "1.0", "py3-none-any", {"helper"}, {}, {}});
    index.add({"torchy", "2.0", "cp312-cp312-manylinux_2_17_x86_64",
               {"nvidia-fake-cu12==1.2.*; platform_system == 'Linux'", "winonly; sys_platform == 'win32'",
                "helper>=1.1", "cudaplug>=1; extra == 'cuda'"},
               {"cuda"},
               {{"torchy/__init__.py", "import ctypes\n"}}});
    index.add({"torchy", "3.0", "cp311-cp311-manylinux_2_17_x86_64", {}, {}, {}});  // another Python
    index.add({"torchy", "4.0", "cp312-cp312-manylinux_2_34_x86_64", {}, {}, {}});  // a newer glibc
    for (const char* v : {"1.2.0", "1.2.5", "1.3.0"})
      index.add({"nvidia-fake-cu12", v, "py3-none-manylinux2014_x86_64", {}, {},
                 {{"nvidia/fake/lib/libfake.so.12", std::string(4096, 'L')}, {"nvidia/fake/include/fake.h", "int x;\n"}}});
    index.add({"helper", "1.0", "py3-none-any", {}, {}, {}});
    test::FixtureWheel helper{"helper", "1.1", "py3-none-any", {}, {}, {}};
    helper.files = {{"helper/__init__.py", "def main():\n    return 0\n"},
                    {"helper-1.1.dist-info/entry_points.txt", "[console_scripts]\nhelp-me = helper:main\n"},
                    {"helper-1.1.data/scripts/raw-tool", "#!python\nprint('hi')\n"}};
    helper.pep658 = false;  // metadata read from the wheel itself
    index.add(helper);
    index.add({"helper", "1.2rc1", "py3-none-any", {}, {}, {}});
    index.add({"cudaplug", "1.0", "py3-none-any", {}, {}, {}});
    test::FixtureWheel newpy{"cudaplug", "2.0", "py3-none-any", {}, {}, {}};
    newpy.requires_python = ">=3.13";
    index.add(newpy);
  }
  std::vector<PinnedWheel> resolve_(const std::vector<std::string>& reqs,
                                    const std::vector<std::pair<std::string, std::string>>& constraints = {},
                                    ResolveOptions o = {}) {
    auto idx = make_http_index(config(), store, *fetcher);
    std::vector<Requirement> rs;
    for (const auto& r : reqs) rs.push_back(Requirement::parse(r));
    for (const auto& [c, who] : constraints) o.constraints.push_back({Requirement::parse(c), who});
    return resolve(rs, target, *idx, o);
  }
  size_t blobs() const {
    size_t n = 0;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(dir.path() / "store" / "blobs", ec);
         it != fs::recursive_directory_iterator(); ++it)
      n += it->is_regular_file();
    return n;
  }
};

std::string versions(const std::vector<PinnedWheel>& ws) {
  std::string s;
  for (const auto& w : ws) s += (s.empty() ? "" : " ") + w.key + "==" + w.version;
  return s;
}

}  // namespace

TEST_CASE("pip index: resolution picks by tags markers extras and pre-release rules", "[pip]") {
  for (bool html : {false, true}) {
    Fixture f;
    f.index.html = html;
    INFO((html ? "PEP 503 HTML" : "PEP 691 JSON"));
    CHECK(versions(f.resolve_({"torchy"})) == "helper==1.1 nvidia-fake-cu12==1.2.5 torchy==2.0");
    CHECK(versions(f.resolve_({"torchy[cuda]"})) == "cudaplug==1.0 helper==1.1 nvidia-fake-cu12==1.2.5 torchy==2.0");
    CHECK(versions(f.resolve_({"torchy<2", "helper"})) == "helper==1.1 torchy==1.0");
    CHECK(versions(f.resolve_({"helper>=1.2rc1"})) == "helper==1.2rc1");
    // A later constraint makes an earlier choice change; its old dependencies go.
    // torchy 2.0 needs helper>=1.1: backtracking gives torchy 1.0, without 2.0's dependencies.
    CHECK(versions(f.resolve_({"torchy", "helper<1.1"})) == "helper==1.0 torchy==1.0");
    CHECK(versions(f.resolve_({"torchy", "nvidia-fake-cu12", "helper<1.1"})) ==
          "helper==1.0 nvidia-fake-cu12==1.3.0 torchy==1.0");
  }
}

TEST_CASE("pip index: projects a lower layer installed are kept when they satisfy every requirement", "[pip]") {
  Fixture f;
  ResolveOptions o;
  o.installed["helper"] = {"1.1", "tools"};
  // torchy 2.0 needs helper>=1.1: the lower layer's 1.1 stays and no wheel of it is chosen.
  CHECK(versions(f.resolve_({"torchy"}, {}, o)) == "nvidia-fake-cu12==1.2.5 torchy==2.0");
  // A requirement the installed version does not meet names both sides.
  o.installed["helper"] = {"1.0", "tools"};
  try {
    f.resolve_({"torchy==2.0"}, {}, o);
    FAIL("an installed helper 1.0 satisfied torchy 2.0's helper>=1.1");
  } catch (const Error& e) {
    std::string msg = e.what();
    CHECK(msg.find("torchy 2.0 requires 'helper") != std::string::npos);
    CHECK(msg.find("layer 'tools' below installed helper 1.0") != std::string::npos);
  }
}

TEST_CASE("pip index: no wheel for the target is a clear error", "[pip]") {
  Fixture f;
  f.target.libc_version = "2.12";  // no manylinux2014 wheel of nvidia-fake-cu12 fits
  CHECK_THROWS_WITH(f.resolve_({"nvidia-fake-cu12"}),
                    Catch::Contains("no wheel of nvidia-fake-cu12 for CPython 3.12, manylinux glibc 2.12, x86_64"));
  Fixture g;
  try {
    g.resolve_({"torchy==2.0", "nvidia-fake-cu12>=1.3"});
    FAIL("resolved a conflict");
  } catch (const Error& e) {
    std::string r = e.render();
    CHECK_THAT(r, Catch::Contains("satisfies '>=1.3,==1.2.*'"));
    CHECK_THAT(r, Catch::Contains("asked by torchy 2.0"));
    CHECK_THAT(r, Catch::Contains("asked by the recipe"));
  }
  CHECK_THROWS_WITH(g.resolve_({"no-such-project"}), Catch::Contains("the index lists no file of it"));
}

TEST_CASE("pip index: constraints from the point narrow the wheels a dependency pulls and add none", "[pip]") {
  Fixture f;
  // torchy 2.0 asks nvidia-fake-cu12==1.2.*; the point's component holds it to 1.2.0.
  CHECK(versions(f.resolve_({"torchy"}, {{"nvidia-fake-cu12==1.2.0", "the point's fake 1.2.0"}})) ==
        "helper==1.1 nvidia-fake-cu12==1.2.0 torchy==2.0");
  // A constraint on a project nothing asks for installs nothing.
  CHECK(versions(f.resolve_({"helper"}, {{"nvidia-fake-cu12==1.2.0", "the point's fake 1.2.0"}})) == "helper==1.1");
  // A wheel's pin that contradicts the point's version: older torchy without the
  // dependency is taken when the recipe allows it...
  CHECK(versions(f.resolve_({"torchy"}, {{"nvidia-fake-cu12==1.3.0", "the point's fake 1.3.0"}})) ==
        "helper==1.1 torchy==1.0");
  // ...and is a clear error naming both sides when it does not.
  try {
    f.resolve_({"torchy==2.0"}, {{"nvidia-fake-cu12==1.3.0", "the point's fake 1.3.0"}});
    FAIL("resolved a wheel against the point's version");
  } catch (const Error& e) {
    std::string r = e.render();
    CHECK_THAT(r, Catch::Contains("no wheel of nvidia-fake-cu12"));
    CHECK_THAT(r, Catch::Contains("asked by torchy 2.0"));
    CHECK_THAT(r, Catch::Contains("'nvidia-fake-cu12==1.3.0' required by the point's fake 1.3.0"));
  }
}

TEST_CASE("pip index: wheels install without pip with RECORD INSTALLER and scripts", "[pip]") {
  Fixture f;
  auto wheels = f.resolve_({"torchy"});
  fs::path root = f.dir.path() / "root";
  auto inst = install_wheels(wheels, f.target, root, f.store, *f.fetcher);
  CHECK(inst.wheels.size() == 3);
  fs::path site = root / "usr/local/lib/python3.12/dist-packages";
  CHECK(fs::exists(site / "nvidia/fake/lib/libfake.so.12"));
  CHECK(test::slurp(site / "helper-1.1.dist-info/INSTALLER") == "stackbuild\n");
  CHECK(fs::exists(site / "torchy-2.0.dist-info/REQUESTED"));
  CHECK_FALSE(fs::exists(site / "helper-1.1.dist-info/REQUESTED"));
  std::string script = test::slurp(root / "usr/local/bin/help-me");
  CHECK(script.starts_with("#!/usr/bin/python3\n"));
  CHECK_THAT(script, Catch::Contains("from helper import main") && Catch::Contains("sys.exit(main())"));
  CHECK(test::slurp(root / "usr/local/bin/raw-tool") == "#!/usr/bin/python3\nprint('hi')\n");
  CHECK((fs::status(root / "usr/local/bin/raw-tool").permissions() & fs::perms::owner_exec) != fs::perms::none);
  std::string record = test::slurp(site / "helper-1.1.dist-info/RECORD");
  CHECK_THAT(record, Catch::Contains("../../../bin/help-me,sha256="));
  CHECK_THAT(record, Catch::Contains("helper/__init__.py,sha256=") && Catch::Contains("helper-1.1.dist-info/RECORD,,\n"));
  CHECK_THAT(record, !Catch::Contains("stale"));
  CHECK(check_wheels(wheels, f.target).empty());
  // No byte code is written.
  for (auto& e : fs::recursive_directory_iterator(root)) CHECK(e.path().extension() != ".pyc");
}

TEST_CASE("pip index: a hash or size mismatch or a truncated wheel leaves nothing in the store", "[pip]") {
  Fixture f;
  auto wheels = f.resolve_({"nvidia-fake-cu12"});
  REQUIRE(wheels.size() == 1);
  std::string name = wheels[0].filename;
  size_t before = f.blobs();
  SECTION("sha256") {
    f.index.bad_sha[name] = std::string(64, 'a');
    auto bad = f.resolve_({"nvidia-fake-cu12"});
    before = f.blobs();  // the changed project page is kept
    CHECK_THROWS_WITH(install_wheels(bad, f.target, f.dir.path() / "r", f.store, *f.fetcher),
                      Catch::Contains("sha256") && Catch::Contains(name));
  }
  SECTION("size") {
    f.index.bad_size[name] = 99;
    auto bad = f.resolve_({"nvidia-fake-cu12"});
    before = f.blobs();
    CHECK_THROWS_WITH(install_wheels(bad, f.target, f.dir.path() / "r", f.store, *f.fetcher), Catch::Contains(name));
  }
  SECTION("truncated") {
    f.index.truncate.insert(name);
    CHECK_THROWS_WITH(install_wheels(wheels, f.target, f.dir.path() / "r", f.store, *f.fetcher),
                      Catch::Contains(name));
  }
  CHECK(f.blobs() == before);
}

TEST_CASE("pip index: pip configuration is read from a root directory", "[pip]") {
  TempDir d{fs::temp_directory_path()};
  test::write(d.path() / "etc/pip.conf", "[global]\nindex-url = http://global.invalid/simple\ncert = /etc/ca.pem\n");
  test::write(d.path() / "home/u/.config/pip/pip.conf",
              "[install]\nindex_url = http://user.invalid/simple\nextra-index-url =\n  http://a.invalid/\n  http://b.invalid\n");
  std::map<std::string, std::string> env = {{"HOME", "/home/u"}};
  auto c = index_config("", d.path(), env, {});
  CHECK(c.urls == std::vector<std::string>{"http://user.invalid/simple/", "http://a.invalid/", "http://b.invalid/"});
  CHECK(c.ca_file == "/etc/ca.pem");
  env["PIP_INDEX_URL"] = "http://env.invalid/simple";
  CHECK(index_config("", d.path(), env, {}).urls.front() == "http://env.invalid/simple/");
  CHECK(index_config("http://setting.invalid/s/", d.path(), env, {}).urls.front() == "http://setting.invalid/s/");
  CHECK(index_config("", d.path() / "empty", {}, [] { return std::string("http://default.invalid/simple/"); }).origin ==
        "pip's default index");
  CHECK_THROWS_WITH(index_config("", d.path() / "empty", {}, {}), Catch::Contains("no Python package index"));
  // proxy and trusted-host, from the files and then the environment.
  test::write(d.path() / "etc/xdg/pip/pip.conf",
              "[global]\nproxy = http://proxy.invalid:3128\ntrusted-host = Mirror.invalid\n  other.invalid:8443\n");
  auto t = index_config("", d.path(), {{"HOME", "/home/u"}}, {});
  CHECK(t.proxy == "http://proxy.invalid:3128");
  CHECK(t.trusted_hosts == std::vector<std::string>{"mirror.invalid", "other.invalid:8443"});
  auto te = index_config("", d.path(), {{"PIP_PROXY", "socks5h://127.0.0.1:9050"}, {"PIP_TRUSTED_HOST", "env.invalid"}},
                         {});
  CHECK(te.proxy == "socks5h://127.0.0.1:9050");
  CHECK(te.trusted_hosts == std::vector<std::string>{"env.invalid"});
  auto o = client_options(t);
  REQUIRE(o.route);
  CHECK(o.route("https://pypi.invalid/simple/x/").proxy == std::optional<std::string>("http://proxy.invalid:3128"));
  CHECK(o.route("https://pypi.invalid/simple/x/").verify_peer);
  CHECK(o.route("https://pypi.invalid/simple/x/").ca_files == std::vector<fs::path>{"/etc/ca.pem"});
  CHECK_FALSE(o.route("https://mirror.invalid:9999/simple/x/").verify_peer);  // HOST: any port
  CHECK_FALSE(o.route("https://other.invalid:8443/x.whl").verify_host);
  CHECK(o.route("https://other.invalid/x.whl").verify_peer);  // HOST:PORT: that port only
  CHECK_FALSE(client_options(index_config("", d.path() / "empty", {}, [] { return std::string("http://i/"); })).route);
  CHECK(join_url("https://h/simple/torch/", "../../packages/a/b.whl") == "https://h/packages/a/b.whl");
  CHECK(join_url("https://h/simple/torch/", "/x.whl") == "https://h/x.whl");
  CHECK(join_url("https://h/simple/torch/", "https://o/y.whl") == "https://o/y.whl");
}

TEST_CASE("pip index: a lower layer with non-ASCII names is listed in the C locale", "[pip]") {
  // ca-certificates ships such names; the canonical tar writes them in pax headers as
  // UTF-8, which libarchive refuses to read back under the process's "C" locale.
  TempDir d{fs::temp_directory_path()};
  fs::path blob = d.path() / "layer.tar";
  EntryMap entries;
  TarEntry dir;
  dir.type = TarEntry::Type::Dir;
  dir.mode = 0755;
  entries["usr/share/ca-certificates"] = dir;
  TarEntry link;
  link.type = TarEntry::Type::Symlink;
  link.link = "/usr/share/ca-certificates/F\xc5\x91tan\xc3\xbas\xc3\xadtv\xc3\xa1ny.crt";
  entries["etc/ssl/certs/F\xc5\x91tan\xc3\xbas\xc3\xadtv\xc3\xa1ny.pem"] = link;
  test::write_tar_file(entries, blob);
  REQUIRE(std::string(setlocale(LC_CTYPE, nullptr)) == "C");
  auto l = list_layer("os", blob);
  REQUIRE(l.paths.size() == 1);
  CHECK(l.paths[0] == "etc/ssl/certs/F\xc5\x91tan\xc3\xbas\xc3\xadtv\xc3\xa1ny.pem");
}

TEST_CASE("pip index: a path two wheels write holds the later wheel's file", "[pip]") {
  Fixture f;
  f.index.add({"aaa", "1.0", "py3-none-any", {}, {}, {{"shared/__init__.py", "# from aaa\n"}, {"aaa.py", ""}}});
  f.index.add({"bbb", "1.0", "py3-none-any", {}, {}, {{"shared/__init__.py", "# from bbb\n"}, {"bbb.py", ""}}});
  auto wheels = f.resolve_({"aaa", "bbb"});
  REQUIRE(wheels.size() == 2);
  for (int round = 0; round < 2; ++round) {  // both orders
    fs::path root = f.dir.path() / ("root" + std::to_string(round));
    install_wheels(wheels, f.target, root, f.store, *f.fetcher);
    CHECK(test::slurp(root / "usr/local/lib/python3.12/dist-packages/shared/__init__.py") ==
          "# from " + wheels.back().key + "\n");
    for (auto& e : fs::recursive_directory_iterator(root)) CHECK(e.path().string().find(".sb-") == std::string::npos);
    std::reverse(wheels.begin(), wheels.end());
  }
}

TEST_CASE("pip index: Cache-Control directives", "[pip]") {
  CHECK(cache_directive("").store);
  CHECK_FALSE(cache_directive("").max_age);
  CHECK(cache_directive("max-age=600, public").max_age == 600);
  CHECK(cache_directive("Public, Max-Age=\"30\"").max_age == 30);
  CHECK(cache_directive("max-age=600, no-cache").max_age == 0);
  CHECK(cache_directive("no-cache, max-age=600").max_age == 0);
  CHECK(cache_directive("max-age=soon").max_age == 0);  // unreadable: stale at once
  CHECK_FALSE(cache_directive("private, no-store").store);
}

// Project pages are kept in the store: used without asking while fresh,
// revalidated with the ETag when stale, never kept for no-store, and the
// only pages an offline resolution reads.
TEST_CASE("pip index: project pages are kept by the index's Cache-Control", "[pip]") {
  test::FixtureIndex index;
  index.add({"helper", "1.0", "py3-none-any", {}, {}, {}});
  std::string cache_control = "max-age=600";
  std::atomic<int> pages{0}, not_modified{0};
  test::HttpServer server{[&](const test::HttpRequest& r) {
    std::string res = index.respond(r);
    if (!r.path.starts_with("/simple/") || res.rfind("HTTP/1.1 200", 0) != 0) return res;
    ++pages;
    std::string etag = "\"" + Digest::of_bytes(res).hex().substr(0, 16) + "\"";
    auto it = r.headers.find("if-none-match");
    if (it != r.headers.end() && it->second == etag) {
      ++not_modified;
      return "HTTP/1.1 304 Not Modified\r\nETag: " + etag + "\r\nCache-Control: " + cache_control +
             "\r\nContent-Length: 0\r\n\r\n";
    }
    size_t eol = res.find("\r\n");
    return res.substr(0, eol) + "\r\nETag: " + etag + "\r\nCache-Control: " + cache_control + res.substr(eol);
  }};
  TempDir dir{fs::temp_directory_path()};
  Store store{dir.path() / "store"};
  FILE* devnull = fopen("/dev/null", "w");
  auto status = make_status(StatusMode::Plain, devnull);
  auto fetcher = fetch::make_fetcher(store, fetch::FetchOptions{}, *status);
  int64_t clock = 1'700'000'000;
  auto files_of = [&](PageCache c, const std::string& key = "helper") {
    c.now = [&] { return clock; };
    // A new Index each time: what it remembers is in the store, not in memory.
    return make_http_index(index_config(server.url("/simple"), "/nonexistent", {}, {}), store, *fetcher, c)->files(key);
  };

  REQUIRE(files_of({}).size() == 1);
  CHECK(pages == 1);
  clock += 599;  // fresh: not asked
  CHECK(files_of({}).size() == 1);
  CHECK(pages == 1);
  clock += 2;  // stale: asked with the ETag; 304 renews it
  CHECK(files_of({}).size() == 1);
  CHECK(pages == 2);
  CHECK(not_modified == 1);
  clock += 300;
  CHECK(files_of({}).size() == 1);
  CHECK(pages == 2);

  // A new version on the index: seen once the kept page is stale, or at once with max_age 0.
  index.add({"helper", "1.1", "py3-none-any", {}, {}, {}});
  CHECK(files_of({}).size() == 1);
  PageCache now_please;
  now_please.max_age = 0;
  CHECK(files_of(now_please).size() == 2);
  CHECK(not_modified == 1);  // the body changed: a 200 with the new page
  CHECK(files_of({}).size() == 2);

  // Offline: the kept page whatever its age; a page never fetched is an error naming it.
  PageCache offline;
  offline.offline = true;
  clock += 100'000;
  int before = pages;
  CHECK(files_of(offline).size() == 2);
  CHECK(pages == before);
  CHECK_THROWS_WITH(files_of(offline, "numpy"), Catch::Contains("offline") && Catch::Contains("/simple/numpy/"));

  // no-store: asked every time, nothing kept; an index without Cache-Control is asked every time too.
  for (std::string cc : {"no-store", "public"}) {
    INFO(cc);
    cache_control = cc;
    before = pages;
    files_of(now_please);
    files_of({});
    files_of({});
    CHECK(pages == before + 3);
  }
  fclose(devnull);
}

// What makes an unchanged rebuild cheap without changing what it resolves:
// pages asked once per run (PageCache::run; a max_age of 0 still asks every
// time), read ahead in parallel (prefetch), kept parsed in the store by their
// bytes, and a wheel's METADATA kept by the wheel's sha256.
TEST_CASE("pip index: a run asks each page once and keeps parsed pages and wheel metadata", "[pip]") {
  test::FixtureIndex index;
  index.add({"app", "1.0", "py3-none-any", {"helper>=1"}, {}, {}, false, ""});  // no PEP 658 file
  index.add({"helper", "1.0", "py3-none-any", {}, {}, {}});
  std::atomic<int> pages{0}, wheels{0};
  test::HttpServer server{[&](const test::HttpRequest& r) {
    if (r.path.starts_with("/simple/")) ++pages;
    if (r.path.ends_with(".whl")) ++wheels;
    return index.respond(r);  // no Cache-Control: every page is stale at once
  }};
  TempDir dir{fs::temp_directory_path()};
  Store store{dir.path() / "store"};
  FILE* devnull = fopen("/dev/null", "w");
  auto status = make_status(StatusMode::Plain, devnull);
  auto fetcher = fetch::make_fetcher(store, fetch::FetchOptions{}, *status);
  auto cfg = index_config(server.url("/simple"), "/nonexistent", {}, {});

  // Two indexes of one run: the second asks nothing.
  PageCache run;
  run.run = std::make_shared<PageCache::Asked>();
  auto first = make_http_index(cfg, store, *fetcher, run);
  std::vector<DistFile> app = first->files("app");
  REQUIRE(app.size() == 1);
  REQUIRE(first->files("helper").size() == 1);
  CHECK(first->consulted() == std::vector<std::string>{"app", "helper"});
  CHECK(pages == 2);
  CHECK(make_http_index(cfg, store, *fetcher, run)->files("app").size() == 1);
  CHECK(pages == 2);
  PageCache always = run;
  always.max_age = 0;
  CHECK(make_http_index(cfg, store, *fetcher, always)->files("app").size() == 1);
  CHECK(pages == 3);

  // Another run asks again; read ahead, its pages come at once and files() asks nothing more.
  auto next = make_http_index(cfg, store, *fetcher, PageCache{});
  next->prefetch({"app", "helper", "absent"});
  CHECK(pages == 6);
  CHECK(next->files("app").size() == 1);
  CHECK(next->files("helper").size() == 1);
  CHECK(pages == 6);
  CHECK(next->files("absent").empty());  // a 404 is an answer too: not asked again
  CHECK(pages == 6);

  // A read-ahead that fails is tried once; files() asks again (with retries) and gets it.
  std::atomic<int> refuse{1}, asked{0};
  test::HttpServer flaky{[&](const test::HttpRequest& r) {
    if (r.path.starts_with("/simple/") && ++asked && refuse-- > 0) return test::http_response(503, "busy");
    return index.respond(r);
  }};
  auto flaky_index = make_http_index(index_config(flaky.url("/simple"), "/nonexistent", {}, {}), store, *fetcher, PageCache{});
  flaky_index->prefetch({"app"});
  CHECK(asked == 1);  // no retry in the read-ahead
  CHECK(flaky_index->files("app").size() == 1);
  CHECK(asked == 2);

  // The parsed page is a record of the page's bytes; the files read back are the same.
  std::vector<DistFile> again = make_http_index(cfg, store, *fetcher, PageCache{})->files("app");
  REQUIRE(again.size() == 1);
  CHECK(again[0].filename == app[0].filename);
  CHECK(again[0].url == app[0].url);
  CHECK(again[0].sha256 == app[0].sha256);
  CHECK(again[0].size == app[0].size);
  CHECK(again[0].has_metadata == app[0].has_metadata);
  CHECK_FALSE(again[0].has_metadata);

  // METADATA without a PEP 658 file: read from the wheel once, then kept by its sha256.
  std::string meta = first->metadata(app[0]);
  CHECK(meta.find("Requires-Dist: helper>=1") != std::string::npos);
  CHECK(wheels == 1);
  REQUIRE(app[0].sha256);
  fs::remove(store.blob_path(*app[0].sha256));  // the wheel is gone from the store: the record answers
  CHECK(make_http_index(cfg, store, *fetcher, PageCache{})->metadata(app[0]) == meta);
  CHECK(wheels == 1);
  fclose(devnull);
}

// pip's default index is asked of the python3 on PATH once, then kept in the
// store for that python3; another python3 is asked again.
TEST_CASE("pip index: pip's default index is asked once per python3 and kept", "[pip]") {
  TempDir dir{fs::temp_directory_path()};
  Store store{dir.path() / "store"};
  fs::path asked = dir.path() / "asked";
  auto fake_python = [&](const fs::path& bin, const std::string& url) {
    test::write(bin / "python3", "#!/bin/sh\necho x >> '" + asked.string() + "'\necho '" + url + "'\n", 0755);
  };
  auto times_asked = [&] {
    std::ifstream in(asked);
    return static_cast<int>(std::count(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>(), '\n'));
  };
  const char* old_path = getenv("PATH");
  std::string saved = old_path ? old_path : "";
  fake_python(dir.path() / "a", "http://a.invalid/simple/");
  fake_python(dir.path() / "b", "http://b.invalid/simple/");
  setenv("PATH", ((dir.path() / "a").string() + ":/usr/bin:/bin").c_str(), 1);
  CHECK(pip_default_index(store) == "http://a.invalid/simple/");
  CHECK(pip_default_index(store) == "http://a.invalid/simple/");
  CHECK(times_asked() == 1);
  setenv("PATH", ((dir.path() / "b").string() + ":/usr/bin:/bin").c_str(), 1);
  CHECK(pip_default_index(store) == "http://b.invalid/simple/");
  CHECK(times_asked() == 2);
  setenv("PATH", (dir.path() / "none").c_str(), 1);
  CHECK(pip_default_index(store).empty());  // no python3 at all: nothing to ask
  setenv("PATH", saved.c_str(), 1);
}

namespace {

// An index in memory that logs what the resolver asks of it.
class LoggingIndex : public Index {
 public:
  std::map<std::string, std::vector<std::string>> deps;  // project -> Requires-Dist
  std::vector<std::string> log;
  std::vector<DistFile> files(const std::string& key) override {
    DistFile f;
    f.filename = key + "-1.0-py3-none-any.whl";
    f.url = "http://index.invalid/" + f.filename;
    return {f};
  }
  std::string metadata(const DistFile& f) override {
    std::string key = f.filename.substr(0, f.filename.find('-'));
    log.push_back("metadata " + key);
    std::string m = "Metadata-Version: 2.1\nName: " + key + "\nVersion: 1.0\n";
    for (const auto& d : deps[key]) m += "Requires-Dist: " + d + "\n";
    return m;
  }
  void prefetch_metadata(const std::vector<DistFile>& fs) override {
    std::string s = "ahead";
    for (const auto& f : fs) s += " " + f.filename.substr(0, f.filename.find('-'));
    log.push_back(s);
  }
};

}  // namespace

TEST_CASE("pip index: the metadata of every queued project is asked for ahead, once", "[pip]") {
  LoggingIndex idx;
  idx.deps["app"] = {"alpha", "beta", "gamma>=1"};
  idx.deps["alpha"] = {"beta", "delta"};
  Target t;
  t.python = "3.12";
  t.libc_version = "2.28";
  auto ws = resolve({Requirement::parse("app")}, t, idx, {});
  CHECK(versions(ws) == "alpha==1.0 app==1.0 beta==1.0 delta==1.0 gamma==1.0");
  std::vector<std::string> want = {"ahead app",   "metadata app",   "ahead alpha beta gamma", "metadata alpha",
                                   "ahead delta", "metadata beta", "metadata gamma",         "metadata delta"};
  CHECK(idx.log == want);
}

TEST_CASE("pip index: wheels read ahead for their METADATA are downloaded once, and resolve the same", "[pip]") {
  test::IndexBed bed(quick_retries());
  Target t;
  t.python = "3.12";
  t.libc_version = "2.28";
  test::FixtureWheel app{"app", "1.0", "py3-none-any", {"alpha", "beta", "gamma"}, {}, {}};
  app.pep658 = false;
  bed.index.add(app);
  for (const char* n : {"alpha", "beta", "gamma"}) {
    test::FixtureWheel w{n, "1.0", "py3-none-any", {}, {}, {{std::string(n) + "/__init__.py", "x = 1\n"}}};
    w.pep658 = false;  // no PEP 658 file: the wheel itself is downloaded for its METADATA
    bed.index.add(w);
  }
  auto idx = make_http_index(bed.config(), bed.store, *bed.fetcher);
  CHECK(versions(resolve({Requirement::parse("app")}, t, *idx, {})) == "alpha==1.0 app==1.0 beta==1.0 gamma==1.0");
  for (const char* n : {"app", "alpha", "beta", "gamma"}) {
    INFO(n);
    CHECK(bed.index.hits_of("/files/" + std::string(n) + "-1.0-py3-none-any.whl") == 1);
  }
  // A second index (the next run) reads their METADATA from the store: nothing is downloaded.
  auto again = make_http_index(bed.config(), bed.store, *bed.fetcher);
  CHECK(versions(resolve({Requirement::parse("app")}, t, *again, {})) == "alpha==1.0 app==1.0 beta==1.0 gamma==1.0");
  for (const char* n : {"app", "alpha", "beta", "gamma"})
    CHECK(bed.index.hits_of("/files/" + std::string(n) + "-1.0-py3-none-any.whl") == 1);
}

TEST_CASE("pip index: character references in HTML pages decode to UTF-8 - a bad one stays as written", "[pip][index]") {
  const std::string page_url = "https://index.invalid/simple/x/";
  auto name_of = [&](const std::string& text) {
    auto page = pip::parse_html_page("<a href=\"x-1.0-py3-none-any.whl\">" + text + "</a>", page_url);
    REQUIRE(page.files.size() == 1);
    return page.files[0].filename;
  };
  CHECK(name_of("x&#x2D;1.0&#45;py3-none-any.whl") == "x-1.0-py3-none-any.whl");
  CHECK(name_of("caf&#233;") == "caf\xc3\xa9");
  CHECK(name_of("a&#x20AC;") == "a\xe2\x82\xac");
  // Found by the fuzzer: these threw std::invalid_argument / out_of_range.
  CHECK(name_of("a&#xZZ;") == "a&#xZZ;");
  CHECK(name_of("a&#99999999999;") == "a&#99999999999;");
  CHECK(name_of("a&#xD800;") == "a&#xD800;");
  CHECK(name_of("a&#0;") == "a&#0;");
}

TEST_CASE("pip metadata: field names compare without case, as email headers do", "[pip]") {
  // meson-python writes Author-Email; a backend may write requires-dist.
  auto m = pip::parse_metadata("Metadata-Version: 2.4\nName: x\nAuthor-Email: A <a@x.org>\nrequires-dist: numpy>=2\n"
                               "Requires-Dist: six\n\nRequires-Dist: not a header (the description)\n");
  std::vector<std::string> deps;
  for (auto [it, end] = m.equal_range("Requires-Dist"); it != end; ++it) deps.push_back(it->second);
  CHECK(deps == std::vector<std::string>{"numpy>=2", "six"});  // in the order written
  CHECK(m.count("author-email") == 1);
  CHECK(m.find("Author-email")->second == "A <a@x.org>");
}

namespace {

// A wheel of about 2.5 MiB without a PEP 658 file: METADATA first, then a
// large member and `small` more, which make its central directory that long.
test::FixtureWheel big_wheel(const std::string& project, std::vector<std::string> requires_dist, int small) {
  test::FixtureWheel w{project, "1.0", "py3-none-any", std::move(requires_dist), {}, {}};
  w.pep658 = false;
  std::string noise;
  uint64_t x = 88172645463325252ull;
  for (int i = 0; i < (5 << 19); ++i) {  // xorshift: incompressible bytes
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    noise.push_back(static_cast<char>(x));
  }
  w.files_after.push_back({project + "/big.bin", noise});
  for (int i = 0; i < small; ++i)
    w.files_after.push_back({project + "/a_rather_long_directory_name/module_" + std::to_string(i) + ".py", "x = 1\n"});
  return w;
}

}  // namespace

TEST_CASE("pip index: a large wheel's METADATA is read with range requests when the index has no PEP 658 file", "[pip]") {
  test::IndexBed bed(quick_retries());
  Target t;
  t.python = "3.12";
  t.libc_version = "2.28";
  bed.index.ranges = true;
  // Its directory fits the last 256 KiB; helper's needs a request of its own (3000 members).
  bed.index.add(big_wheel("app", {"helper"}, 10));
  bed.index.add(big_wheel("helper", {}, 3000));
  const std::string app = "/files/app-1.0-py3-none-any.whl", helper = "/files/helper-1.0-py3-none-any.whl";
  SECTION("a JSON index (sizes given)") {}
  SECTION("an HTML index (no sizes: the first answer's Content-Range says it)") { bed.index.html = true; }
  auto idx = make_http_index(bed.config(), bed.store, *bed.fetcher);
  CHECK(versions(resolve({Requirement::parse("app")}, t, *idx, {})) == "app==1.0 helper==1.0");
  CHECK(bed.index.hits_of(app) == 2);     // the tail (directory included), the member
  CHECK(bed.index.hits_of(helper) == 3);  // the tail, the rest of the directory, the member
  for (const auto& p : {app, helper}) {
    INFO(p);
    CHECK(bed.index.served[p] < (1u << 20));  // of 2.5 MiB
  }
  // Kept by the wheel's sha256: the next resolve asks nothing.
  auto again = make_http_index(bed.config(), bed.store, *bed.fetcher);
  CHECK(versions(resolve({Requirement::parse("app")}, t, *again, {})) == "app==1.0 helper==1.0");
  CHECK(bed.index.hits_of(app) == 2);
  CHECK(bed.index.hits_of(helper) == 3);
}

TEST_CASE("pip index: a server that ignores Range requests is cut off and the wheel downloaded whole", "[pip]") {
  test::IndexBed bed(quick_retries());
  Target t;
  t.python = "3.12";
  t.libc_version = "2.28";
  bed.index.ranges = false;
  bed.index.add(big_wheel("app", {}, 10));
  auto idx = make_http_index(bed.config(), bed.store, *bed.fetcher);
  CHECK(versions(resolve({Requirement::parse("app")}, t, *idx, {})) == "app==1.0");
  CHECK(bed.index.hits_of("/files/app-1.0-py3-none-any.whl") == 2);  // the range asked for, then the wheel
  CHECK(bed.store.has(bed.index.sha("app-1.0-py3-none-any.whl")));
}

TEST_CASE("pip index: a small wheel of an HTML index comes whole in the first answer, ranges or not", "[pip]") {
  test::IndexBed bed(quick_retries());
  Target t;
  t.python = "3.12";
  t.libc_version = "2.28";
  bed.index.html = true;  // no sizes: the size is not known before the first answer
  SECTION("a server that answers ranges") { bed.index.ranges = true; }
  SECTION("one that does not") { bed.index.ranges = false; }
  test::FixtureWheel w{"app", "1.0", "py3-none-any", {}, {}, {{"app/__init__.py", "x = 1\n"}}};
  w.pep658 = false;
  bed.index.add(w);
  auto idx = make_http_index(bed.config(), bed.store, *bed.fetcher);
  CHECK(versions(resolve({Requirement::parse("app")}, t, *idx, {})) == "app==1.0");
  CHECK(bed.index.hits_of("/files/app-1.0-py3-none-any.whl") == 1);
  CHECK(bed.store.has(bed.index.sha("app-1.0-py3-none-any.whl")));  // the install takes it from the store
}

TEST_CASE("pip index: METADATA read by ranges that the whole wheel contradicts stops the install and is replaced", "[pip]") {
  test::IndexBed bed(quick_retries());
  Target t;
  t.python = "3.12";
  t.libc_version = "2.28";
  bed.index.html = true;  // no sizes, so the other bytes' size is not caught first
  bed.index.ranges = true;
  const std::string file = "app-1.0-py3-none-any.whl";
  bed.index.add(big_wheel("app", {"helper"}, 10));
  bed.index.add(big_wheel("helper", {}, 10));
  test::FixtureIndex other;  // the same wheel without its dependency, served to range requests
  other.add(big_wheel("app", {}, 10));
  bed.index.range_lies[file] = other.bytes(file);
  auto idx = make_http_index(bed.config(), bed.store, *bed.fetcher);
  auto wheels = resolve({Requirement::parse("app")}, t, *idx, {});
  REQUIRE(versions(wheels) == "app==1.0");  // what the ranges said
  try {
    install_wheels(wheels, t, bed.dir.path() / "root", bed.store, *bed.fetcher);
    FAIL("installed a wheel whose METADATA differs from the one resolved with");
  } catch (const Error& e) {
    CHECK_THAT(e.render(), Catch::Contains("METADATA in wheel " + file));
    CHECK_THAT(e.render(), Catch::Contains("run again"));
  }
  // The kept METADATA is now the wheel's: the next resolve finds the dependency.
  auto again = make_http_index(bed.config(), bed.store, *bed.fetcher);
  auto fixed = resolve({Requirement::parse("app")}, t, *again, {});
  CHECK(versions(fixed) == "app==1.0 helper==1.0");
  fs::remove_all(bed.dir.path() / "root");
  CHECK_NOTHROW(install_wheels(fixed, t, bed.dir.path() / "root", bed.store, *bed.fetcher));
}

TEST_CASE("pip index: a project page past its cap is refused naming the setting", "[pip][limits]") {
  test::FixtureIndex index;
  index.add({"helper", "1.0", "py3-none-any", {}, {}, {}});
  test::HttpServer server{[&](const test::HttpRequest& r) { return index.respond(r); }};
  TempDir dir{fs::temp_directory_path()};
  Store store{dir.path() / "store"};
  auto fetcher = fetch::make_fetcher(store, fetch::FetchOptions{}, null_status());
  auto files = [&] {
    return make_http_index(index_config(server.url("/simple"), "/nonexistent", {}, {}), store, *fetcher, {})
        ->files("helper");
  };
  setenv("STACKBUILD_INDEX_MAX_PAGE", "20", 1);
  CHECK_THROWS_WITH(files(),
                    Catch::Contains("the answer is larger than the 20 B cap (STACKBUILD_INDEX_MAX_PAGE raises it)"));
  unsetenv("STACKBUILD_INDEX_MAX_PAGE");
  CHECK(files().size() == 1);
}
