// Plans of recipes against the real catalog: valid points, each kind of
// conflict, the lockfile (stale detection, no half-written lock), and golden
// `plan --json` outputs for recipes/.
#include <catch2/catch.hpp>

#include <tuple>

#include "fetch/apt/install.hpp"
#include "fetch/apt/sources.hpp"
#include "helpers.hpp"
#include "fetch/pip/resolver.hpp"
#include "pipeline/lock.hpp"
#include "pipeline/plan.hpp"
#include "resolve/lockfile.hpp"

using namespace sb;

namespace {

const fs::path kSource = SB_SOURCE_DIR;

Planned plan_text(const fs::path& dir, const std::string& yaml, std::vector<std::string> sets = {}) {
  test::write(dir / "r.yaml", yaml);
  return plan_recipe(load_recipe(dir / "r.yaml"), PlanOptions{kSource / "layers", std::move(sets)});
}

bool has(const std::vector<std::string>& lines, const std::string& text) {
  for (const auto& l : lines)
    if (l.find(text) != std::string::npos) return true;
  return false;
}

const std::string kFramework =
    "stack: t\nmatrix:\n  cuda: [\"12.4\", \"12.6\", \"12.8\"]\n  pytorch: [\"2.6\"]\n"
    "layers:\n  - {name: cuda, use: cuda, version: \"${cuda}\"}\n"
    "  - {name: fw, use: pytorch, version: \"${pytorch}\"}\n"
    "tags: [\"t:${pytorch}-cuda${cuda}-py${python}\"]\n";

}  // namespace

TEST_CASE("valid points resolve - unsatisfiable ones stay in the plan", "[plan]") {
  TempDir tmp;
  Planned p = plan_text(tmp.path(), kFramework);
  const auto& pts = p.plan.points;
  REQUIRE(pts.size() == 3);
  REQUIRE(pts[0].stack);
  CHECK(pts[0].stack->versions.at("cuda") == "12.4.1");
  CHECK(pts[0].stack->versions.at("cudnn") == "9.1.0.70");
  CHECK(pts[0].stack->builds.at("pytorch") == "cu124");
  CHECK(pts[0].tags == std::vector<std::string>{"t:2.6-cuda12.4-py3.13"});
  REQUIRE(pts[1].stack);
  CHECK(pts[1].stack->versions.at("cudnn") == "9.5.1.17");
  CHECK(pts[1].stack->driver_min == "560.35.05");
  // PyTorch 2.6 has no CUDA 12.8 build: listed with reasons, not dropped.
  CHECK_FALSE(pts[2].stack);
  REQUIRE(pts[2].conflict);
  CHECK(pts[2].point.id() == "cuda=12.8 pytorch=2.6");
  CHECK(pts[2].conflict->summary == "no pytorch 2.6 version works with cuda 12.8");
  CHECK(has(pts[2].conflict->reasons, "layers/pytorch.yaml:"));
  CHECK(has(pts[2].conflict->reasons, "cuda 12.8 asked at " + (tmp.path() / "r.yaml").string() + ":3:"));
  CHECK(pts[2].tags.empty());
  CHECK(p.plan.unsatisfiable() == 1);
  CHECK_THAT(unsatisfiable_report(p.plan), Catch::StartsWith("1 of 3 matrix points are unsatisfiable:"));

  nlohmann::json j = p.plan;
  CHECK(j["summary"]["unsatisfiable"] == 1);
  CHECK(j["points"][2]["unsatisfiable"]["summary"] == "no pytorch 2.6 version works with cuda 12.8");
}

TEST_CASE("each kind of conflict - through a recipe", "[plan][conflict]") {
  TempDir tmp;
  struct Case {
    const char* name;
    std::string yaml;
    const char* summary;  // a part of the conflict's summary
    const char* reason;   // a part of one reason
  };
  const Case cases[] = {
      {"cuDNN against CUDA", "stack: t\nmatrix:\n  cuda: [\"12.6\"]\n  cudnn: [\"9.0\"]\nlayers:\n  - {name: l, use: [cuda, cudnn]}\n",
       "cudnn", "requires cuda 12.0 - 12.3"},
      {"framework against Python", "stack: t\nmatrix:\n  pytorch: [\"2.6\"]\n  python: [\"3.14\"]\nlayers:\n  - {name: f, use: pytorch}\n",
       "python", "python 3.14 asked at"},
      {"arch against CUDA", "stack: t\nmatrix:\n  cuda: [\"13.0\"]\n  arch: [[\"7.0\"]]\nlayers:\n  - {name: c, use: cuda}\n",
       "", "arch 7.0 asked at"},
      {"a version the catalog lacks", "stack: t\nmatrix:\n  cuda: [\"12.7\"]\nlayers:\n  - {name: c, use: cuda}\n",
       "12.7", "cuda 12.7 asked at"},
      {"an OS alias against Python", "stack: t\nmatrix:\n  python: [\"3.14\"]\nlayers:\n  - {name: os, use: debian, version: bookworm}\n  - {name: f, use: tensorflow}\n",
       "", "asked at"},
  };
  for (const auto& c : cases) {
    SECTION(c.name) {
      Planned p = plan_text(tmp.path(), c.yaml);
      REQUIRE(p.plan.points.size() == 1);
      const auto& pt = p.plan.points[0];
      REQUIRE_FALSE(pt.stack);
      REQUIRE(pt.conflict);
      INFO(pt.conflict->str());
      CHECK_THAT(pt.conflict->summary, Catch::Contains(c.summary));
      CHECK(has(pt.conflict->reasons, c.reason));
    }
  }
}

TEST_CASE("a matrix value is overridden with --set", "[plan]") {
  TempDir tmp;
  Planned p = plan_text(tmp.path(), kFramework, {"cuda=12.6", "arch=8.0,9.0"});
  REQUIRE(p.plan.points.size() == 1);
  REQUIRE(p.plan.points[0].stack);
  CHECK(p.plan.points[0].stack->versions.at("cuda") == "12.6.3");
  CHECK(p.plan.points[0].stack->arch == std::vector<std::string>{"8.0", "9.0"});
  CHECK_THROWS_WITH(plan_text(tmp.path(), kFramework, {"pytroch=2.6"}), Catch::Contains("did you mean 'pytorch'"));
}

TEST_CASE("plan: a --set of a key only include: entries give chooses those entries, or sets it in every one", "[plan]") {
  // As recipes/pytorch.yaml: each include: entry is a whole point. A --set of
  // one of their keys made an axis of it, and so a half-defined point
  // ("undefined variable '${pytorch}' at point cuda=12.8").
  const std::string recipe = "stack: fw\nmatrix:\n  include:\n"
                             "    - {cuda: \"12.6\", pytorch: \"2.7.0\", arch: [\"8.0\", \"9.0\"]}\n"
                             "    - {cuda: \"12.8\", pytorch: \"2.8.0\", arch: [\"8.0\", \"9.0\"]}\n"
                             "layers:\n  - {name: fw, use: pytorch, version: \"${pytorch}\", from: wheel}\n"
                             "tags: [\"fw:${pytorch}-cuda${cuda}\"]\n";
  TempDir tmp;
  auto ids = [](const Planned& p) {
    std::vector<std::string> out;
    for (const auto& x : p.plan.points) out.push_back(x.point.id());
    return out;
  };
  SECTION("a value an entry has chooses it") {
    Planned p = plan_text(tmp.path(), recipe, {"cuda=12.8"});
    CHECK(ids(p) == std::vector<std::string>{"cuda=12.8 pytorch=2.8.0 arch=8.0;9.0"});
    REQUIRE(p.plan.points[0].stack);
  }
  SECTION("two keys of one entry choose it once") {
    Planned p = plan_text(tmp.path(), recipe, {"cuda=12.6", "pytorch=2.7.0"});
    CHECK(ids(p) == std::vector<std::string>{"cuda=12.6 pytorch=2.7.0 arch=8.0;9.0"});
  }
  SECTION("a value no entry has is set in every entry") {
    Planned p = plan_text(tmp.path(), recipe, {"arch=9.0"});
    CHECK(ids(p) == std::vector<std::string>{"cuda=12.6 pytorch=2.7.0 arch=9.0", "cuda=12.8 pytorch=2.8.0 arch=9.0"});
  }
  SECTION("chosen, then set: the resolver says whether the point works") {
    Planned p = plan_text(tmp.path(), recipe, {"cuda=12.8", "pytorch=2.6.0"});
    REQUIRE(p.plan.points.size() == 1);
    CHECK(p.plan.points[0].point.id() == "cuda=12.8 pytorch=2.6.0 arch=8.0;9.0");
  }
}

TEST_CASE("the lockfile: stable text - stale detection - never half-written", "[plan][lock]") {
  TempDir tmp;
  Planned p = plan_text(tmp.path(), kFramework);
  fs::path lock = write_lock(p);
  CHECK(lock == tmp.path() / "r.yaml.lock");
  std::string text = test::slurp(lock);
  CHECK(text == resolve::render_lock(p.plan));
  CHECK(text.back() == '\n');
  CHECK_THAT(text, Catch::Contains("\n  \"lockfile_version\": 1,\n"));
  CHECK(resolve::lock_changes(text, lock.string(), p.plan).empty());
  CHECK_NOTHROW(check_lock(p));

  SECTION("a changed version is named: point, component, old -> new") {
    std::string stale = text;
    auto at = stale.find("\"9.5.1.17\"");
    REQUIRE(at != std::string::npos);
    stale.replace(at, 10, "\"9.5.0.50\"");
    test::write(lock, stale);
    auto changes = resolve::lock_changes(stale, lock.string(), p.plan);
    REQUIRE(changes.size() == 1);
    CHECK(changes[0] == "point cuda=12.6 pytorch=2.6: cudnn 9.5.0.50 -> 9.5.1.17");
    try {
      check_lock(p);
      FAIL("a stale lock passed");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::Input);
      CHECK_THAT(e.what(), Catch::Contains("is stale (1 change)"));
    }
  }
  SECTION("points added to and gone from the matrix") {
    Planned q = plan_text(tmp.path(), kFramework, {"cuda=12.4"});
    auto changes = resolve::lock_changes(text, lock.string(), q.plan);
    CHECK(has(changes, "point cuda=12.6 pytorch=2.6: in the lock, no longer in the matrix"));
    CHECK(has(changes, "point cuda=12.8 pytorch=2.6: in the lock, no longer in the matrix"));
    auto back = resolve::lock_changes(resolve::render_lock(q.plan), lock.string(), p.plan);
    CHECK(has(back, "point cuda=12.6 pytorch=2.6: not in the lock (new in the matrix)"));
  }
  SECTION("a missing lock and a corrupt one are refused") {
    fs::remove(lock);
    CHECK_THROWS_WITH(check_lock(p), Catch::Contains("there is no lockfile"));
    test::write(lock, "{\"lockfile_version\": 1, \"points\": [");
    CHECK_THROWS_AS(check_lock(p), InputError);
  }
  SECTION("a lockfile of the wrong shape is refused, naming the field, not read as unchanged") {
    // Each edit used to be read as "no change", or to end in a bare JSON
    // error with exit 1 that named neither the lockfile nor the field.
    const nlohmann::json five = 5, list = nlohmann::json::array({1});
    const std::vector<std::tuple<std::string, nlohmann::json, std::string>> edits = {
        {"/stack", five, "stack is 5, not a string"},
        {"/points/0/resolved/versions", list, "points[0].resolved.versions is [1], not an object"},
        {"/points/1/resolved/versions/cudnn", five,
         "points[1].resolved.versions.cudnn is 5, not a string"},
        {"/points/0/resolved/builds", list, "points[0].resolved.builds is [1], not an object"},
        {"/points/0/resolved/driver_min", five, "points[0].resolved.driver_min is 5, not a string"},
        {"/points/0/resolved/arch", five, "points[0].resolved.arch is 5, not a list of strings"},
        {"/points/0/matrix/cuda", five,
         "points[0].matrix.cuda is 5, not a string or a list of strings"},
        {"/points/2", five, "points[2] is 5, not an object"},
        {"/points/0/resolved", five, "points[0].resolved is 5, not an object"},
    };
    for (const auto& [pointer, value, message] : edits) {
      CAPTURE(pointer);
      nlohmann::json j = nlohmann::json::parse(text);
      j[nlohmann::json::json_pointer(pointer)] = value;
      test::write(lock, j.dump(2));
      try {
        check_lock(p);
        FAIL("a malformed lockfile was accepted");
      } catch (const InputError& e) {
        CHECK(e.kind() == ErrorKind::Input);
        CHECK(e.location().file == lock.string());
        CHECK_THAT(e.message(), Catch::Contains("a malformed lockfile: " + message));
      }
    }
    nlohmann::json j = nlohmann::json::parse(text);
    SECTION("two points with one matrix") {
      j["points"][2]["matrix"] = j["points"][0]["matrix"];
      test::write(lock, j.dump(2));
      CHECK_THROWS_WITH(check_lock(p), Catch::Contains("points[2] has the matrix of points[0]"));
    }
    SECTION("a point both resolved and unsatisfiable") {
      j["points"][1]["unsatisfiable"] = "no";
      test::write(lock, j.dump(2));
      CHECK_THROWS_WITH(check_lock(p),
                        Catch::Contains("points[1] has both of resolved and unsatisfiable"));
    }
  }
  SECTION("a recipe error leaves the lock as it was, and no temp file") {
    test::write(tmp.path() / "r.yaml", kFramework + "layrs: []\n");
    auto lock_cli = [&] { write_lock(plan_recipe(load_recipe(tmp.path() / "r.yaml"), PlanOptions{kSource / "layers", {}})); };
    CHECK_THROWS_AS(lock_cli(), InputError);
    test::write(tmp.path() / "r.yaml", kFramework + "config: {env: {X: \"${nope}\"}}\n");
    CHECK_THROWS_AS(lock_cli(), InputError);
    CHECK(test::slurp(lock) == text);
    size_t files = 0;
    for (const auto& e : fs::directory_iterator(tmp.path())) files += e.is_regular_file() ? 1 : 0;
    CHECK(files == 2);  // r.yaml and r.yaml.lock
  }
}

TEST_CASE("a lockfile's pins are read strictly, naming the item", "[plan][lock]") {
  const std::string sha(64, 'a');
  nlohmann::json wheel = {{"name", "torchy"},
                          {"version", "2.0"},
                          {"filename", "torchy-2.0-py3-none-any.whl"},
                          {"url", "http://127.0.0.1/torchy-2.0-py3-none-any.whl"},
                          {"sha256", sha},
                          {"size", 781}};
  nlohmann::json entry = {{"wheels", {wheel, wheel}}};
  REQUIRE(pinned_list<pip::PinnedWheel>(entry, "wheels").size() == 2);
  auto refused = [&](const char* key, const nlohmann::json& entry) -> std::string {
    try {
      if (std::string(key) == "wheels")
        pinned_list<pip::PinnedWheel>(entry, key);
      else if (std::string(key) == "packages")
        pinned_list<apt::LockedPackage>(entry, key);
      else
        pinned_list<apt::Repository>(entry, key);
    } catch (const Error& e) {
      return e.what();
    }
    return "accepted";
  };
  auto with = [&](const char* field, const nlohmann::json& value) {
    nlohmann::json e = entry;
    e["wheels"][1][field] = value;
    return e;
  };
  // Before, -5 became 18446744073709551611 bytes, 1.5 became 1, and a name
  // that is no wheel's failed only when the layer was installed.
  CHECK(refused("wheels", with("size", -5)) == "wheels[1]: size is -5, not a size in bytes");
  CHECK(refused("wheels", with("size", 1.5)) == "wheels[1]: size is 1.5, not a size in bytes");
  CHECK(refused("wheels", with("filename", "../../etc/passwd")) ==
        "wheels[1]: filename '../../etc/passwd' is not a wheel file name");
  CHECK_THAT(refused("wheels", with("sha256", "abc")), Catch::StartsWith("wheels[1]: bad digest"));
  CHECK_THAT(refused("wheels", with("url", 5)),
             Catch::StartsWith("wheels[1]: [json.exception.type_error.302]"));
  CHECK(refused("wheels", {{"wheels", 5}}) == "the entry has no wheels list");
  CHECK(refused("wheels", nlohmann::json::array()) == "the entry has no wheels list");

  nlohmann::json package = {{"name", "zlib1g"},        {"version", "1:1.2.13"},
                            {"architecture", "amd64"}, {"url", "http://127.0.0.1/z.deb"},
                            {"sha256", sha},           {"size", 90}};
  CHECK(refused("packages", {{"packages", {package}}}) == "accepted");
  package["sha256"] = "12";
  CHECK_THAT(refused("packages", {{"packages", {package}}}),
             Catch::StartsWith("packages[0]: bad digest"));
  package["sha256"] = sha;
  package["size"] = -1;
  CHECK(refused("packages", {{"packages", {package}}}) ==
        "packages[0]: size is -1, not a size in bytes");
  CHECK_THAT(refused("repositories", {{"repositories", {{{"uri", 5}}}}}),
             Catch::StartsWith("repositories[0]: [json.exception"));
}

TEST_CASE("golden plan --json for every recipe in recipes/ and example in examples/", "[plan][golden]") {
  size_t seen = 0;
  for (const char* dir : {"recipes", "examples"})
    for (const auto& e : fs::directory_iterator(kSource / dir)) {
      if (e.path().extension() != ".yaml") continue;
      ++seen;
      const std::string name = std::string(dir) + "/" + e.path().filename().string();
      SECTION(name) {
        Planned p = plan_recipe(load_recipe(e.path()), PlanOptions{});
        CHECK(p.plan.unsatisfiable() == 0);  // every shipped recipe and example resolves cleanly
        p.plan.recipe = name;                 // the golden file must not depend on the checkout's path
        std::string actual = nlohmann::json(p.plan).dump(2) + "\n";
        std::string expected;
        // recipes/X.yaml -> plan/X.json (as before); examples/X.yaml -> plan/examples/X.json
        const std::string golden = std::string(dir) == "recipes" ? "plan/" + e.path().stem().string() + ".json"
                                                                  : "plan/examples/" + e.path().stem().string() + ".json";
        test::check_golden(golden, actual, expected);
        CHECK(actual == expected);
      }
    }
  CHECK(seen >= 8);
}

TEST_CASE("plan: matrix key platform sets each point's architecture, ${platform} and ${arch_name}", "[plan][platform]") {
  TempDir tmp;
  const std::string yaml =
      "stack: t\nmatrix:\n  flavor: [a]\n  platform: [linux/amd64, linux/arm64]\n  include:\n"
      "    - {flavor: b, platform: linux/arm64}\n"
      "layers:\n  - {name: files, copy: [{src: f, dst: /f}]}\n"
      "config: {env: {PLATFORM: \"${platform}\"}}\n"
      "tags: [\"t:${flavor}-${arch_name}\"]\n";
  test::write(tmp.path() / "f", "x");
  Planned p = plan_text(tmp.path(), yaml);
  REQUIRE(p.plan.points.size() == 3);
  std::vector<std::string> archs, envs;
  for (const auto& pt : p.plan.points) {
    REQUIRE(pt.stack);
    Recipe r = resolve::instantiate(p.recipe, pt);
    archs.push_back(r.architecture);
    for (const auto& [k, v] : r.config.env)
      if (k == "PLATFORM") envs.push_back(v.value);
    CHECK(resolve::point_variables(p.recipe, pt).at("arch_name") == r.architecture);
  }
  CHECK(archs == std::vector<std::string>{"amd64", "arm64", "arm64"});
  CHECK(envs == std::vector<std::string>{"linux/amd64", "linux/arm64", "linux/arm64"});
  CHECK(p.plan.points[1].tags.front() == "t:a-arm64");
  CHECK(p.plan.points[2].point.id() == "flavor=b platform=linux/arm64");

  // Without the key: the recipe's architecture.
  Planned one = plan_text(tmp.path(), "stack: t\narchitecture: arm64\nlayers:\n  - {name: files, copy: [{src: f, dst: /f}]}\n"
                                      "tags: [\"t:${arch_name}\"]\n");
  REQUIRE(one.plan.points.size() == 1);
  CHECK(one.plan.points[0].tags == std::vector<std::string>{"t:arm64"});

  // --set platform= chooses one.
  Planned set = plan_text(tmp.path(), yaml, {"platform=linux/arm64"});
  for (const auto& pt : set.plan.points) CHECK(resolve::instantiate(set.recipe, pt).architecture == "arm64");
  CHECK_THROWS_WITH(plan_text(tmp.path(), yaml, {"platform=linux/riscv64"}),
                    Catch::Contains("not a platform stackbuild builds for"));
}

TEST_CASE("plan: a platform stackbuild does not build for is refused at its line", "[plan][platform]") {
  TempDir tmp;
  test::write(tmp.path() / "f", "x");
  const char* bad[] = {"linux/riscv64", "linux/arm64/v8", "windows/amd64", "arm64", "linux/amd64 ", "linux/arm64;rm -rf /",
                       "../../etc", ""};
  for (const char* v : bad) {
    INFO(v);
    std::string yaml = "stack: t\nmatrix:\n  platform: [linux/amd64, \"" + std::string(v) +
                       "\"]\nlayers:\n  - {name: files, copy: [{src: f, dst: /f}]}\n";
    try {
      plan_text(tmp.path(), yaml);
      FAIL("accepted");
    } catch (const InputError& e) {
      CHECK(e.location().line == 3);
      CHECK_THAT(e.render(), Catch::Contains("r.yaml:3:") && Catch::Contains("linux/amd64 or linux/arm64"));
    }
  }
  // In an include: entry too, and the top-level architecture.
  CHECK_THROWS_WITH(plan_text(tmp.path(), "stack: t\nmatrix:\n  include:\n    - {platform: linux/s390x}\n"
                                          "layers:\n  - {name: files, copy: [{src: f, dst: /f}]}\n"),
                    Catch::Contains("linux/s390x"));
  CHECK_THROWS_WITH(plan_text(tmp.path(), "stack: t\narchitecture: x86_64\nlayers:\n  - {name: files, copy: [{src: f, dst: /f}]}\n"),
                    Catch::Contains("r.yaml:2:") && Catch::Contains("architecture 'x86_64' is not one stackbuild builds for"));
}
