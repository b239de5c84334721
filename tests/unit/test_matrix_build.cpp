// Building a whole matrix: a layer the points share is built once and is the
// same blob in every image; the matrix index lists each point with its
// annotations; --jobs never changes the bytes; --only picks points; a failed
// point is named and nothing is written; the summary's tests column.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "fakes.hpp"
#include "helpers.hpp"
#include "pipeline/matrix_build.hpp"
#include "pipeline/plan.hpp"
#include "util/resources.hpp"

using namespace sb;

namespace {

const fs::path kSource = SB_SOURCE_DIR;

const std::string& kRecipe = test::kFlavorMatrix;

Planned plan_in(const fs::path& dir, const std::string& yaml = kRecipe) {
  return plan_recipe(load_recipe(test::write_flavor_matrix(dir, yaml)), PlanOptions{kSource / "layers", {}});
}

std::vector<MatrixPoint> points_of(const Planned& p) {
  std::vector<MatrixPoint> out;
  for (const auto& pp : p.plan.points) out.push_back(matrix_point(p, pp));
  return out;
}

MatrixOptions options_for(const fs::path& out, int jobs) {
  MatrixOptions o;
  o.build.output = out;
  o.jobs = jobs;
  o.index_ref = "mx-matrix";
  return o;
}

std::vector<std::string> layer_digests(const PointReport& r) {
  std::vector<std::string> out;
  for (const auto& l : r.built->images.front().image.layers) out.push_back(l.digest.str());
  return out;
}

std::string manifest(const PointReport& r) { return r.built->images.front().image.manifest.digest.str(); }

}  // namespace

TEST_CASE("a layer the matrix points share is built once and stored once", "[matrix]") {
  TempDir tmp;
  Planned planned = plan_in(tmp.path());
  REQUIRE(planned.plan.points.size() == 2);
  Store store(tmp.path() / "store");
  MatrixResult r = build_matrix(points_of(planned), store, options_for(tmp.path() / "out", 1), null_status());
  REQUIRE_FALSE(r.failure);
  REQUIRE(r.points.size() == 2);
  CHECK(r.points[0].id == "flavor=a");
  CHECK(r.points[0].layers_built == 2);
  CHECK(r.points[0].layers_reused == 0);
  // The second point takes `base` from the cache the first one filled.
  CHECK(r.points[1].layers_built == 1);
  CHECK(r.points[1].layers_reused == 1);
  auto a = layer_digests(r.points[0]), b = layer_digests(r.points[1]);
  REQUIRE(a.size() == 2);
  REQUIRE(b.size() == 2);
  CHECK(a[0] == b[0]);
  CHECK(a[1] != b[1]);
  CHECK(manifest(r.points[0]) != manifest(r.points[1]));
  // One blob for the shared layer in the layout: 3 layers, 2 configs, 2 manifests, 1 index.
  size_t blobs = 0;
  for (const auto& e : fs::directory_iterator(tmp.path() / "out" / "blobs" / "sha256")) blobs += e.is_regular_file();
  CHECK(blobs == 8);

  SECTION("a rebuild takes every layer from the cache and gives the same digests") {
    MatrixResult again = build_matrix(points_of(planned), store, options_for(tmp.path() / "out2", 1), null_status());
    REQUIRE_FALSE(again.failure);
    for (size_t i = 0; i < 2; ++i) {
      CHECK(again.points[i].layers_built == 0);
      CHECK(manifest(again.points[i]) == manifest(r.points[i]));
    }
    REQUIRE(again.index);
    CHECK(again.index->digest == r.index->digest);
  }
}

TEST_CASE("the matrix index lists every point with its annotations", "[matrix]") {
  TempDir tmp;
  Planned planned = plan_in(tmp.path());
  Store store(tmp.path() / "store");
  MatrixResult r = build_matrix(points_of(planned), store, options_for(tmp.path() / "out", 1), null_status());
  REQUIRE_FALSE(r.failure);
  REQUIRE(r.index);
  auto idx = nlohmann::json::parse(r.index->json);
  CHECK(idx["mediaType"] == kMediaTypeIndex);
  CHECK(idx["annotations"]["dev.stackbuild.stack"] == "mx");
  REQUIRE(idx["manifests"].size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    const auto& m = idx["manifests"][i];
    std::string flavor = i == 0 ? "a" : "b";
    CHECK(m["digest"] == manifest(r.points[i]));
    CHECK(m["platform"]["architecture"] == "amd64");
    CHECK(m["annotations"]["dev.stackbuild.point"] == "flavor=" + flavor);
    CHECK(m["annotations"]["dev.stackbuild.tags"] == "mx:" + flavor);
    CHECK(m["annotations"]["dev.stackbuild.matrix.flavor"] == flavor);
  }
  // The layout names each point and the index.
  auto layout = nlohmann::json::parse(read_file(tmp.path() / "out" / "index.json"));
  std::map<std::string, std::string> refs;
  for (const auto& m : layout["manifests"])
    refs[m["annotations"]["org.opencontainers.image.ref.name"]] = m["mediaType"];
  CHECK(refs == std::map<std::string, std::string>{
                    {"a", kMediaTypeManifest}, {"b", kMediaTypeManifest}, {"mx-matrix", kMediaTypeIndex}});
  CHECK(read_file(tmp.path() / "out" / "blobs" / "sha256" / r.index->digest.hex()) == r.index->json);
}

TEST_CASE("building points at once gives the bytes of building them one by one", "[matrix]") {
  TempDir tmp;
  Planned planned = plan_in(tmp.path());
  Store one(tmp.path() / "store1"), two(tmp.path() / "store2");
  MatrixResult a = build_matrix(points_of(planned), one, options_for(tmp.path() / "out1", 1), null_status());
  MatrixResult b = build_matrix(points_of(planned), two, options_for(tmp.path() / "out2", 2), null_status());
  REQUIRE_FALSE(a.failure);
  REQUIRE_FALSE(b.failure);
  for (size_t i = 0; i < 2; ++i) CHECK(manifest(a.points[i]) == manifest(b.points[i]));
  CHECK(a.index->json == b.index->json);
  CHECK(read_file(tmp.path() / "out1" / "index.json") == read_file(tmp.path() / "out2" / "index.json"));
  // Both workers asked for `base`; the store lock let one build it.
  CHECK(b.points[0].layers_built + b.points[1].layers_built == 3);
}

TEST_CASE("a failed point is named and nothing is written", "[matrix]") {
  TempDir tmp;
  Planned planned = plan_in(tmp.path());
  fs::remove(tmp.path() / "b.txt");
  Store store(tmp.path() / "store");
  MatrixResult r = build_matrix(points_of(planned), store, options_for(tmp.path() / "out", 1), null_status());
  REQUIRE(r.failure);
  CHECK(r.points[0].built);
  CHECK_FALSE(r.points[1].built);
  CHECK_THAT(r.points[1].error, Catch::Contains("b.txt"));
  CHECK_FALSE(fs::exists(tmp.path() / "out"));
  try {
    std::rethrow_exception(r.failure);
  } catch (const Error& e) {
    std::string all = e.render();
    CHECK_THAT(all, Catch::Contains("layer 'flavor'"));
    CHECK_THAT(all, Catch::Contains("matrix point flavor=b"));
  }
  std::string table = summary_table(r);
  CHECK_THAT(table, Catch::Contains("FAILED"));
}

TEST_CASE("only: --only picks points by matrix value or resolved version", "[matrix]") {
  TempDir tmp;
  Planned planned = plan_in(tmp.path(), "stack: mx\nmatrix:\n  flavor: [a, b, c]\n  size: [s, l]\n"
                                        "layers:\n  - {name: base, copy: [{src: common.txt, dst: /c}]}\n"
                                        "tags: [\"mx:${flavor}-${size}\"]\n");
  const auto& plan = planned.plan;
  REQUIRE(plan.points.size() == 6);
  auto ids = [&](const std::vector<size_t>& idx) {
    std::vector<std::string> out;
    for (size_t i : idx) out.push_back(plan.points[i].point.id());
    return out;
  };
  CHECK(ids(select_points(planned.recipe, plan, {"flavor=b"})) ==
        std::vector<std::string>{"flavor=b size=s", "flavor=b size=l"});
  // Values of one key are alternatives; different keys must all hold.
  CHECK(ids(select_points(planned.recipe, plan, {"flavor=a", "flavor=c", "size=l"})) ==
        std::vector<std::string>{"flavor=a size=l", "flavor=c size=l"});
  CHECK(ids(select_points(planned.recipe, plan, {"stack=mx"})).size() == 6);
  auto usage = [&](std::vector<std::string> only, const std::string& says) {
    try {
      select_points(planned.recipe, plan, only);
      FAIL("no error for --only " + only.front());
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::Usage);
      CHECK_THAT(e.what(), Catch::Contains(says));
    }
  };
  usage({"flavor"}, "KEY=VALUE");
  usage({"colour=red"}, "no matrix point has a value for 'colour'");
  usage({"flavor=z"}, "flavor is one of: a, b, c");
}

TEST_CASE("the summary shows the tests column the verify gate fills", "[matrix]") {
  TempDir tmp;
  Planned planned = plan_in(tmp.path());
  Store store(tmp.path() / "store");
  MatrixResult r = build_matrix(points_of(planned), store, options_for(tmp.path() / "out", 1), null_status());
  REQUIRE_FALSE(r.failure);
  std::string table = summary_table(r);
  CHECK_THAT(table, Catch::StartsWith("POINT"));
  CHECK_THAT(table, Catch::Contains("mx:a"));
  CHECK_THAT(table, Catch::Contains("2 built, 0 reused"));
  CHECK_THAT(table, Catch::Contains("1 built, 1 reused"));
  CHECK_THAT(table, Catch::Contains(manifest(r.points[1]).substr(0, 19)));
  CHECK_THAT(table, Catch::Contains("matrix index: mx-matrix sha256:"));
  CHECK(summary_json(r)["points"][0]["tests"].is_null());
  r.points[0].tests = "3 passed";
  CHECK_THAT(summary_table(r), Catch::Contains("3 passed"));
  CHECK(summary_json(r)["points"][0]["tests"] == "3 passed");
}

TEST_CASE("a scoped status names the point in every line", "[matrix]") {
  test::RecordingStatus rec;
  auto s = scoped_status(rec, "mx:a (flavor=a)");
  int id = s->task_begin("layer base", 10);
  s->task_end(id, "done");
  s->message(Level::Info, "layer base: cached");
  s->event("layer", {{"layer", "base"}});
  CHECK(rec.lines() == std::vector<std::string>{"begin mx:a (flavor=a): layer base 10", "end 1 done",
                                                "message mx:a (flavor=a): layer base: cached",
                                                R"x(event layer {"layer":"base","scope":"mx:a (flavor=a)"})x"});
}

TEST_CASE("memory available: MemAvailable, or a cgroup's limit less its use when lower", "[matrix]") {
  const std::string meminfo = "MemTotal:       24000000 kB\nMemFree:         1000 kB\nMemAvailable:   16000000 kB\n";
  CHECK(available_memory_from(meminfo, "", "") == uint64_t{16000000} * 1024);
  CHECK(available_memory_from(meminfo, "max\n", "123\n") == uint64_t{16000000} * 1024);  // no limit
  CHECK(available_memory_from(meminfo, "8589934592\n", "1073741824\n") == uint64_t{7} << 30);
  CHECK(available_memory_from(meminfo, "1000\n", "2000\n") == uint64_t{0});  // over its limit already
  CHECK(available_memory_from("", "", "") == std::nullopt);
  CHECK(usable_cores() >= 1);
}

TEST_CASE("points at once: -j, fewer when memory does not hold them, said", "[matrix]") {
  MatrixOptions o;
  o.jobs = 8;
  CHECK(points_at_once(o, 3, null_status()) <= 3);  // never more than there are points
  o.memory_per_point = 0;  // no bound
  CHECK(points_at_once(o, 20, null_status()) == 8);
  auto memory = available_memory();
  if (!memory) {
    WARN("SKIPPED: no /proc/meminfo here");
    return;
  }
  o.memory_per_point = *memory / 2 + 1;  // two do not fit
  test::RecordingStatus status;
  CHECK(points_at_once(o, 20, status) == 1);
  REQUIRE(status.messages().size() == 1);
  CHECK_THAT(status.messages()[0], Catch::Matchers::Contains("building 1 point at once, not 8") &&
                                     Catch::Matchers::Contains("--memory-per-point"));
  o.memory_per_point = *memory * 4;  // none fits: still one
  CHECK(points_at_once(o, 20, null_status()) == 1);
  o.jobs = 1;
  CHECK(points_at_once(o, 20, null_status()) == 1);
}
