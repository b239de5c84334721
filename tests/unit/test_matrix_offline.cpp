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
#include "offline_fixture.hpp"
#include "pip_fixture.hpp"
#include "archive/extract.hpp"
#include "pipeline/fetch_ahead.hpp"
#include "pipeline/layer_kind.hpp"
#include "pipeline/lock.hpp"
#include "pipeline/matrix_build.hpp"
#include "fetch/pip/resolver.hpp"
#include "pipeline/plan.hpp"
#include "util/process.hpp"

using namespace sb;

namespace {

using namespace test::offline;

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

struct Run {
  explicit Run(const Served& served) : fetcher(served.files) { fetcher.serve_dir(served.tmp.path() / "repo", kApt); }
  test::RecordingFetcher fetcher;
  test::RecordingStatus status;
  MatrixResult result;
  std::vector<std::string> manifests;
};

void build_in(const fs::path& dir, Served& served, Run& run, bool locked = false,
              std::optional<size_t> write_ahead = std::nullopt, bool fetch_ahead = false) {
  Store store(dir / "store");
  MatrixOptions o;
  o.build.output = dir / "out";
  o.build.write_ahead = write_ahead;
  o.fetch_ahead = fetch_ahead;
  o.build.services.make_fetcher = run.fetcher.factory();
  o.build.services.index = std::make_shared<test::IndexTransport>(served.wheels);
  o.build.services.now = ticking_clock();
  o.jobs = 1;
  o.index_ref = "svc-matrix";
  run.result = build_matrix(points_in(dir, served, locked), store, o, run.status);
  if (run.result.failure) std::rethrow_exception(run.result.failure);
  for (const auto& p : run.result.points) run.manifests.push_back(p.built->images.front().image.manifest.digest.str());
}

// The recipe locked (`stackbuild lock`, through the fakes), and its points
// as `build --locked` reads them from the lockfile: apt and pip pinned.
std::vector<MatrixPoint> points_from_lockfile(const fs::path& dir, Served& served) {
  test::write(dir / "r.yaml", kRecipe);
  Run locking(served);
  BuildServices services;
  services.make_fetcher = locking.fetcher.factory();
  services.index = std::make_shared<test::IndexTransport>(served.wheels);
  auto plan = [&] {
    return plan_recipe(load_recipe(dir / "r.yaml"), PlanOptions{fs::path(SB_SOURCE_DIR) / "layers", {}});
  };
  {
    Store scratch(dir / "lock-store");
    lock_recipe(plan(), scratch, {}, locking.status, services);
  }
  Planned planned = plan();
  std::vector<MatrixPoint> points;
  for (const auto& pp : planned.plan.points) {
    points.push_back(matrix_point(planned, pp));
    points.back().inputs = locked_point_inputs(planned, pp);
  }
  return points;
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
  build_in(b.path(), again, locked, true, 0);  // each layer written before the next begins
  // Written ahead: the pinned pip layer does not wait for the apt layer below
  // it (pip_layer_kind().reads_below, tested below), and the bytes are the same.
  Served third;
  TempDir c;
  Run ahead(third);
  build_in(c.path(), third, ahead, true, 4);
  CHECK(ahead.manifests == locked.manifests);
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

TEST_CASE("build --locked: a pip layer whose wheels are pinned does not wait for the layers below",
          "[matrix][write-ahead]") {
  // Resolving reads the layers below (what they installed, their musl);
  // pinned wheels need only the duplicate check, which waits for them.
  const LayerKind& pip = pip_layer_kind();
  LayerSpec spec;
  spec.name = "wheels";
  BuildOptions o;
  CHECK(pip.reads_below(spec, o));
  o.point.lock = R"({"pip": {"other": {}}})";
  CHECK(pip.reads_below(spec, o));
  o.point.lock = R"({"pip": {"wheels": {"wheels": []}}})";
  CHECK_FALSE(pip.reads_below(spec, o));
  CHECK(apt_layer_kind().reads_below(spec, o));  // the dpkg state below, locked or not
}

TEST_CASE("build --locked: the pinned wheels are fetched ahead, and the image is the same", "[matrix][fetch-ahead]") {
  if (!have_dpkg_deb()) {
    WARN("SKIPPED: dpkg-deb is not installed");
    return;
  }
  IndexSetting index;
  Served served;
  TempDir a, b, c;
  // Ahead of the build: every point's pinned wheel, and nothing unpinned
  // (the apt layer resolves when it is built).
  {
    Store store(a.path() / "store");
    test::RecordingFetcher fetcher(served.files);
    BuildOptions o;
    o.services.make_fetcher = fetcher.factory();
    o.services.index = std::make_shared<test::IndexTransport>(served.wheels);
    auto points = points_in(a.path(), served, true);
    test::RecordingStatus status;
    FetchAhead ahead(points, store, o, status);
    ahead.wait();
    for (const char* v : {"1.0", "2.0"}) CHECK(store.has(served.wheels.sha(Served::wheel(v))));
    CHECK(fetcher.served().size() == 2);
    for (const auto& url : fetcher.asked()) CHECK_THAT(url, Catch::EndsWith(".whl"));
    // What it did, told when it is done.
    const std::string bytes = human_bytes(static_cast<double>(served.wheels.bytes(Served::wheel("1.0")).size() +
                                                             served.wheels.bytes(Served::wheel("2.0")).size()));
    CHECK(status.messages() == std::vector<std::string>{"ahead: 2 files, " + bytes + " fetched ahead of their layers"});
  }
  // The same image with and without, each wheel served once.
  Served again, third;
  Run ahead(again), own(third);
  build_in(b.path(), again, ahead, true, std::nullopt, true);
  build_in(c.path(), third, own, true, std::nullopt, false);
  CHECK(ahead.manifests == own.manifests);
  // build_points fetched ahead with --fetch-ahead only: it tells what it did.
  auto told = [](const Run& run) {
    size_t n = 0;
    for (const auto& m : run.status.messages()) n += m.find("fetched ahead of their layers") != std::string::npos;
    return n;
  };
  CHECK(told(ahead) == 1);
  CHECK(told(own) == 0);
  for (const char* v : {"1.0", "2.0"}) {
    CHECK(ahead.fetcher.served().count(kFiles + Served::wheel(v)));
    CHECK(own.fetcher.served().count(kFiles + Served::wheel(v)));
  }
}

TEST_CASE("build --locked: the pinned packages of an apt layer are fetched ahead too", "[matrix][fetch-ahead]") {
  if (!have_dpkg_deb()) {
    WARN("SKIPPED: dpkg-deb is not installed");
    return;
  }
  IndexSetting index;
  Served served;
  TempDir dir;
  std::vector<MatrixPoint> points = points_from_lockfile(dir.path(), served);
  Store store(dir.path() / "store");
  test::RecordingFetcher fetcher(served.files);
  fetcher.serve_dir(served.tmp.path() / "repo", kApt);
  BuildOptions o;
  o.services.make_fetcher = fetcher.factory();
  o.services.index = std::make_shared<test::IndexTransport>(served.wheels);
  test::RecordingStatus status;
  FetchAhead ahead(points, store, o, status);
  ahead.wait();
  // The package, once for both points, before its layer is built; no index
  // of the repository is read (the lockfile says where the package is).
  CHECK(store.has(Digest::of_file(served.tmp.path() / "repo/pool/hello_1.0_amd64.deb")));
  auto got = fetcher.served();
  CHECK(got.count(kApt + "/pool/hello_1.0_amd64.deb") == 1);
  for (const auto& url : fetcher.asked())
    CHECK((url.ends_with(".deb") || url.ends_with(".whl")));
  CHECK(got.size() == 3);  // the package and the two wheels
  CHECK_THAT(status.messages().back(), Catch::StartsWith("ahead: 3 files, "));
}

TEST_CASE("build --locked: a package whose bytes are not its pin is refused ahead, and by its layer",
          "[matrix][fetch-ahead][hostile]") {
  if (!have_dpkg_deb()) {
    WARN("SKIPPED: dpkg-deb is not installed");
    return;
  }
  IndexSetting index;
  Served served;
  TempDir dir;
  std::vector<MatrixPoint> points = points_from_lockfile(dir.path(), served);
  // After the lock, the mirror serves other bytes of the same size for the
  // package: the lockfile's sha256 is all that stands between them and the image.
  const std::string url = kApt + "/pool/hello_1.0_amd64.deb";
  std::string tampered = read_file(served.tmp.path() / "repo/pool/hello_1.0_amd64.deb");
  tampered[tampered.size() / 2] ^= 0x20;
  const Digest bad = Digest::of_bytes(tampered);
  test::RecordingFetcher fetcher(served.files);
  fetcher.serve_dir(served.tmp.path() / "repo", kApt);
  fetcher.serve(url, tampered);

  Store store(dir.path() / "store");
  {
    BuildOptions o;
    o.services.make_fetcher = fetcher.factory();
    o.services.index = std::make_shared<test::IndexTransport>(served.wheels);
    test::RecordingStatus status;
    FetchAhead ahead(points, store, o, status);
    ahead.wait();
    CHECK_FALSE(store.has(bad));
    CHECK(fetcher.served().count(url) == 1);
    CHECK_THAT(status.messages().back(),
               Catch::StartsWith("ahead: 2 files, ") && Catch::EndsWith("1 failed, left to their layers"));
  }
  // The build fetches it again in its layer, and fails there, naming it.
  MatrixOptions mo;
  mo.build.output = dir.path() / "out";
  mo.fetch_ahead = true;
  mo.build.services.make_fetcher = fetcher.factory();
  mo.build.services.index = std::make_shared<test::IndexTransport>(served.wheels);
  mo.build.services.now = ticking_clock();
  mo.jobs = 1;
  test::RecordingStatus status;
  MatrixResult r = build_matrix(points, store, mo, status);
  REQUIRE(r.failure);
  try {
    std::rethrow_exception(r.failure);
  } catch (const Error& e) {
    CHECK_THAT(e.what(), Catch::Contains(url) && Catch::Contains("sha256 mismatch"));
    std::string traces;
    for (const auto& t : e.traces()) traces += t + "\n";
    CHECK_THAT(traces, Catch::Contains("layer 'os'"));
  }
  CHECK_FALSE(store.has(bad));
  CHECK_FALSE(fs::exists(dir.path() / "out/index.json"));
}

TEST_CASE("build --locked: a wheel that fails ahead fails its layer with the layer's own error",
          "[matrix][fetch-ahead]") {
  if (!have_dpkg_deb()) {
    WARN("SKIPPED: dpkg-deb is not installed");
    return;
  }
  IndexSetting index;
  Served served;
  served.files.erase(kFiles + Served::wheel("1.0"));  // the index names it, the server has it no longer
  TempDir a;
  Run run(served);
  try {
    build_in(a.path(), served, run, true, std::nullopt, true);
    FAIL("a missing pinned wheel built");
  } catch (const Error& e) {
    CHECK_THAT(e.what(), Catch::Contains("greet-1.0-py3-none-any.whl: HTTP 404"));
    std::string traces;
    for (const auto& t : e.traces()) traces += t + "\n";
    CHECK_THAT(traces, Catch::Contains("while building the pip layer 'wheels'"));
  }
}
