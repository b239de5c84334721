// build_matrix with the side effects passed in (BuildServices): a recipe with
// an apt layer and a pip layer, two matrix points, every byte served by the
// recording fetcher (no network, no loopback server) and timed by a fake
// clock. The apt repository is made here (dpkg-deb) and taken on trust (no
// signature); the pip layer resolves against a fixture index handed in as
// the index transport (index pages), its metadata and wheels served by the
// recording fetcher.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>

#include <nlohmann/json.hpp>

#include "fakes.hpp"
#include "helpers.hpp"
#include "pip_fixture.hpp"
#include "archive/extract.hpp"
#include "pipeline/lock.hpp"
#include "pipeline/matrix_build.hpp"
#include "fetch/pip/resolver.hpp"
#include "pipeline/plan.hpp"
#include "util/process.hpp"

using namespace sb;

namespace {

const std::string kApt = "http://apt.invalid/debian";
const std::string kIndex = "http://pypi.invalid/simple";
const std::string kFiles = "http://pypi.invalid/files/";

// The apt layer is the same at both points; the pip layer pins greet ${flavor}.
const std::string kRecipe =
    "stack: svc\n"
    "source_date_epoch: 1700000000\n"
    "platform: {python: \"3.11\", glibc: \"2.36\"}\n"
    "matrix:\n  flavor: [\"1.0\", \"2.0\"]\n"
    "repositories:\n  - {url: \"" + kApt + "\", suites: [test], trusted: true}\n"
    "layers:\n"
    "  - {name: os, apt: [hello]}\n"
    "  - {name: wheels, pip: [\"greet==${flavor}\"]}\n"
    "tags: [\"svc:${flavor}\"]\n";

bool have_dpkg_deb() {
  ProcessSpec s;
  s.argv = {"sh", "-c", "command -v dpkg-deb"};
  s.env = {{"PATH", "/usr/bin:/bin"}};
  s.capture_stdout = true;
  return run_process(s).exit_status == 0;
}

// An unsigned repository in `root` (dists/test, pool/): one package, `hello`.
void make_apt_repo(const fs::path& root, const fs::path& scratch) {
  const fs::path src = scratch / "hello";
  test::write(src / "DEBIAN/control",
              "Package: hello\nVersion: 1.0\nArchitecture: amd64\nMaintainer: T <t@example.invalid>\n"
              "Description: test package\n");
  test::write(src / "usr/bin/hello", "#!/bin/sh\necho hello\n", 0755);
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
  test::write(root / "dists/test/main/binary-amd64/Packages", packages);
  test::write(root / "dists/test/Release",
              "Origin: Test\nSuite: test\nCodename: test\nComponents: main\nArchitectures: amd64\nSHA256:\n " +
                  Digest::of_bytes(packages).hex() + " " + std::to_string(packages.size()) +
                  " main/binary-amd64/Packages\n");
}

// Everything served: the repository, and an index of greet 1.0 and 2.0
// (pages through the index transport; PEP 658 metadata and wheels through
// the fetcher).
struct Served {
  TempDir tmp;
  test::FixtureIndex wheels;
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

// The recipe's points; `locked`: with their lockfile pins (no index is read).
std::vector<MatrixPoint> points_in(const fs::path& dir, const Served& served, bool locked) {
  test::write(dir / "r.yaml", kRecipe);
  Planned planned = plan_recipe(load_recipe(dir / "r.yaml"), PlanOptions{fs::path(SB_SOURCE_DIR) / "layers", {}});
  std::vector<MatrixPoint> out;
  for (const auto& pp : planned.plan.points) {
    out.push_back(matrix_point(planned, pp));
    if (locked) out.back().inputs.lock = served.lock_of(out.back().variables.at("flavor"));
  }
  return out;
}

// STACKBUILD_PIP_INDEX_URL names the fixture's index while a test runs.
struct IndexSetting {
  IndexSetting() { ::setenv("STACKBUILD_PIP_INDEX_URL", kIndex.c_str(), 1); }
  ~IndexSetting() { ::unsetenv("STACKBUILD_PIP_INDEX_URL"); }
};

// A clock that moves 1 s each time it is read.
std::function<std::chrono::steady_clock::time_point()> ticking_clock() {
  auto t = std::make_shared<std::atomic<int64_t>>(0);
  return [t] { return std::chrono::steady_clock::time_point(std::chrono::seconds(++*t)); };
}

struct Run {
  explicit Run(const Served& served) : fetcher(served.files) { fetcher.serve_dir(served.tmp.path() / "repo", kApt); }
  test::RecordingFetcher fetcher;
  test::RecordingStatus status;
  MatrixResult result;
  std::vector<std::string> manifests;
};

void build_in(const fs::path& dir, Served& served, Run& run, bool locked = false) {
  Store store(dir / "store");
  MatrixOptions o;
  o.build.output = dir / "out";
  o.build.services.make_fetcher = run.fetcher.factory();
  o.build.services.index = std::make_shared<test::IndexTransport>(served.wheels);
  o.build.services.now = ticking_clock();
  o.jobs = 1;
  o.index_ref = "svc-matrix";
  run.result = build_matrix(points_in(dir, served, locked), store, o, run.status);
  if (run.result.failure) std::rethrow_exception(run.result.failure);
  for (const auto& p : run.result.points) run.manifests.push_back(p.built->images.front().image.manifest.digest.str());
}

}  // namespace

TEST_CASE("build_matrix: apt and pip layers offline through the recording fetcher", "[matrix][services]") {
  if (!have_dpkg_deb()) {
    WARN("SKIPPED: dpkg-deb is not installed");
    return;
  }
  IndexSetting index;
  Served served;
  TempDir a, b;
  Run first(served), second(served);
  build_in(a.path(), served, first);
  const MatrixResult& r = first.result;
  REQUIRE(r.points.size() == 2);
  CHECK(r.points[0].id == "flavor=1.0");
  // The apt layer is the same at both points: built once, then from the
  // cache. On top of each image, its pip constraints.
  CHECK(r.points[0].layers_built == 3);
  CHECK(r.points[1].layers_built == 2);
  CHECK(r.points[1].layers_reused == 1);
  const auto& la = r.points[0].built->images.front().image.layers;
  const auto& lb = r.points[1].built->images.front().image.layers;
  REQUIRE(la.size() == 3);
  REQUIRE(lb.size() == 3);
  CHECK(la[0].digest == lb[0].digest);
  CHECK(la[1].digest != lb[1].digest);
  {
    TempDir root;
    ExtractStats stats;
    extract_layer(Store(a.path() / "store").blob_path(la[2].digest), root.path(), ExtractOptions{}, stats);
    const std::string text = read_file(root.path() / "etc/pip/constraint.txt");
    CHECK_THAT(text, Catch::Contains("\ngreet==1.0\n"));
    const auto& image = r.points[0].built->images.front().image;
    CHECK(image.config_json.find("PIP_CONSTRAINT=/etc/pip/constraint.txt") != std::string::npos);
  }

  // Every byte came through the fakes the services handed in: the repository
  // (InRelease asked and absent), the package once, greet's index page, each
  // point's own wheel and the metadata the resolver read.
  CHECK(first.fetcher.made() > 0);
  CHECK(served.wheels.hits_of("/simple/greet/") >= 1);
  auto got = first.fetcher.served();
  for (const auto& url : {kApt + "/dists/test/Release", kApt + "/dists/test/main/binary-amd64/Packages",
                          kApt + "/pool/hello_1.0_amd64.deb", kFiles + Served::wheel("1.0"),
                          kFiles + Served::wheel("2.0")})
    CHECK(got.count(url) == 1);
  for (const auto& url : got)
    CHECK((url.starts_with(kApt + "/") || url.starts_with(kFiles)));
  auto asked = first.fetcher.asked();
  CHECK(std::count(asked.begin(), asked.end(), kApt + "/dists/test/InRelease") >= 1);
  CHECK(std::count(asked.begin(), asked.end(), kApt + "/pool/hello_1.0_amd64.deb") == 1);
  // The seconds come from the clock handed in (whole ticks), not the machine's.
  for (const auto& p : r.points) {
    CHECK(p.seconds >= 1);
    CHECK(p.seconds == std::floor(p.seconds));
  }
  CHECK(first.status.events("point_end").size() == 2);
  CHECK(first.status.lines("bad ").empty());

  // Built again in another store and directory: the same bytes.
  build_in(b.path(), served, second);
  CHECK(second.manifests == first.manifests);
  REQUIRE(second.result.index);
  CHECK(second.result.index->digest == r.index->digest);
}

TEST_CASE("build_matrix --locked: the pinned wheels, no index page read", "[matrix][services]") {
  if (!have_dpkg_deb()) {
    WARN("SKIPPED: dpkg-deb is not installed");
    return;
  }
  IndexSetting index;
  Served served, again;
  TempDir a, b;
  Run resolved(served), locked(again);
  build_in(a.path(), served, resolved);
  build_in(b.path(), again, locked, true);
  CHECK(again.wheels.hits_of("/simple/greet/") == 0);
  CHECK(served.wheels.hits_of("/simple/greet/") >= 1);
  CHECK(locked.manifests == resolved.manifests);  // the pins are what the index gives now
}

TEST_CASE("lock: what a new lock changes, --only for some points, --check offline", "[lock][services]") {
  if (!have_dpkg_deb()) {
    WARN("SKIPPED: dpkg-deb is not installed");
    return;
  }
  IndexSetting index;
  ::setenv("STACKBUILD_INDEX_MAX_AGE", "0", 1);  // the index asked every time: it changes below
  Served served;
  TempDir dir;
  std::string recipe = kRecipe;
  recipe.replace(recipe.find("greet==${flavor}"), 16, "greet>=${flavor}");  // the newest greet at least this
  test::write(dir.path() / "r.yaml", recipe);
  Run run(served);
  BuildServices services;
  services.make_fetcher = run.fetcher.factory();
  services.index = std::make_shared<test::IndexTransport>(served.wheels);
  Store store(dir.path() / "store");
  auto plan = [&] {
    return plan_recipe(load_recipe(dir.path() / "r.yaml"), PlanOptions{fs::path(SB_SOURCE_DIR) / "layers", {}});
  };

  LockOutcome first = lock_recipe(plan(), store, {}, run.status, services);
  CHECK(first.changes == std::vector<std::string>{"point flavor=1.0: new", "point flavor=2.0: new"});
  CHECK(lock_problems(plan()).empty());
  CHECK(lock_recipe(plan(), store, {}, run.status, services).changes.empty());

  // greet 3.0 comes out: --only flavor=1.0 takes it there, and flavor=2.0 keeps its pin.
  served.wheels.add({"greet", "3.0", "py3-none-any", {}, {}, {{"greet/__init__.py", "V = '3.0'\n"}}});
  run.fetcher.serve(kFiles + Served::wheel("3.0"), served.wheels.bytes(Served::wheel("3.0")));
  run.fetcher.serve(kFiles + Served::wheel("3.0") + ".metadata", served.wheels.bytes(Served::wheel("3.0") + ".metadata"));
  LockOutcome some = lock_recipe(plan(), store, {{"flavor=1.0"}, {}}, run.status, services);
  CHECK(some.changes == std::vector<std::string>{"point flavor=1.0: pip wheels: greet 2.0 -> 3.0"});
  LockOutcome all = lock_recipe(plan(), store, {}, run.status, services);
  CHECK(all.changes == std::vector<std::string>{"point flavor=2.0: pip wheels: greet 2.0 -> 3.0"});
  CHECK(lock_problems(plan()).empty());

  // The recipe asks for something else: --check says the lock is stale, naming the layer.
  recipe.replace(recipe.find("greet>=${flavor}"), 16, "greet<=${flavor}");
  test::write(dir.path() / "r.yaml", recipe);
  auto problems = lock_problems(plan());
  REQUIRE(problems.size() == 2);
  CHECK_THAT(problems[0], Catch::Contains("point flavor=1.0") && Catch::Contains("layer 'wheels'"));

  // No lockfile at all is a problem too; --only needs one.
  fs::remove(dir.path() / "r.yaml.lock");
  CHECK_THAT(lock_problems(plan()).at(0), Catch::Contains("there is no lockfile"));
  CHECK_THROWS_WITH(lock_recipe(plan(), store, {{"flavor=1.0"}, {}}, run.status, services),
                    Catch::Contains("lock every point first"));
  ::unsetenv("STACKBUILD_INDEX_MAX_AGE");
}
