// `keep_source:` on a `use:` layer installed from packages (NGC's /opt/pytorch
// beside the wheels): which layers keep a source beside their packages, the
// recipe errors at their place, ${vars} in keep_source and source.git/ref,
// `extends:` adding keep_source, and what the kept source is at a point
// (the catalog record's, or the layer's own `source:`).
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "helpers.hpp"
#include "pipeline/plan.hpp"
#include "pipeline/source_tree.hpp"
#include "recipe/recipe.hpp"
#include "resolve/plan.hpp"

using namespace sb;

namespace {

const fs::path kSource = SB_SOURCE_DIR;

const char* const kHead = "stack: t\nlayers:\n";  // the layer under test is on line 3

std::optional<InputError> error_of(const fs::path& dir, const std::string& yaml,
                                   bool plan = false) {
  test::write(dir / "r.yaml", yaml);
  try {
    Recipe r = load_recipe(dir / "r.yaml");
    if (plan) {
      Planned p = plan_recipe(r, PlanOptions{kSource / "layers", {}});
      for (const auto& point : p.plan.points)
        if (point.stack) resolve::instantiate(p.recipe, point);
    }
  } catch (const InputError& e) {
    return e;
  }
  return std::nullopt;
}

// The recipe planned against the shipped catalog, at its first point.
struct AtPoint {
  Planned planned;
  Recipe recipe;
  std::map<std::string, std::string> vars;
  PointInputs in;  // with the plan's catalog
};
AtPoint at_point(const fs::path& dir, const std::string& yaml, size_t point = 0) {
  test::write(dir / "r.yaml", yaml);
  Planned p = plan_recipe(load_recipe(dir / "r.yaml"), PlanOptions{kSource / "layers", {}});
  REQUIRE(p.plan.points.size() > point);
  REQUIRE(p.plan.points[point].stack);
  Recipe r = resolve::instantiate(p.recipe, p.plan.points[point]);
  auto vars = resolve::point_variables(p.recipe, p.plan.points[point]);
  PointInputs in = point_inputs(p.plan.points[point], p.catalog);
  return {std::move(p), std::move(r), std::move(vars), std::move(in)};
}

const std::string kTorch = "  - {name: torch, use: pytorch, version: \"2.7.0\", from: wheel";

}  // namespace

TEST_CASE("keep_source on a use: layer keeps the source beside its packages",
          "[recipe][source][keep]") {
  TempDir tmp;
  test::write(tmp.path() / "fix.patch", "");
  test::write(tmp.path() / "r.yaml",
              std::string(kHead) + kTorch + ", keep_source: /opt/pytorch, patches: [fix.patch]}\n" +
                  "  - {name: os, use: debian, keep_source: /usr/src/debian}\n" +
                  "  - {name: built, use: pytorch, from: source, keep_source: /opt/b, "
                  "build: {run: make}}\n" +
                  "  - {name: mine, use: pytorch, from: wheel, keep_source: /opt/m, "
                  "source: {git: \"file:///r\", ref: v1}}\n");
  Recipe r = load_recipe(tmp.path() / "r.yaml");
  REQUIRE(r.layers.size() == 4);
  CHECK(r.layers[0].keeps_source_beside());
  CHECK_FALSE(r.layers[0].from_source());  // the wheels are installed, nothing is compiled
  CHECK(r.layers[0].patches.size() == 1);
  CHECK(r.layers[1].keeps_source_beside());        // any use: layer; the catalog says at build time
  CHECK_FALSE(r.layers[2].keeps_source_beside());  // from: source keeps the tree its steps compile
  CHECK(r.layers[2].from_source());
  CHECK(r.layers[3].keeps_source_beside());  // its own source: overrides the catalog's
  CHECK_FALSE(r.layers[3].from_source());
  CHECK(r.layers[3].source.git == "file:///r");
}

TEST_CASE("keep_source mistakes are at their place", "[recipe][errors][keep]") {
  TempDir tmp;
  test::write(tmp.path() / "x.patch", "");
  const struct {
    const char* name;
    std::string yaml;
    int line, column;
    const char* message;
  } cases[] = {
      {"patches on a wheel layer without keep_source",
       std::string(kHead) + kTorch + ", patches: [x.patch]}\n", 3, 64,
       "patches needs 'from: source'"},
      {"the image root", std::string(kHead) + kTorch + ", keep_source: /}\n", 3, 77,
       "'keep_source' must be a directory below the image root"},
      {"a path with ..", std::string(kHead) + kTorch + ", keep_source: /opt/../etc}\n", 3, 77,
       "without '..'"},
      {"a relative path", std::string(kHead) + kTorch + ", keep_source: opt/x}\n", 3, 77,
       "'keep_source' must be an absolute path"},
      {"source: and from: wheel without keep_source",
       std::string(kHead) + kTorch + ", source: {git: \"file:///r\", ref: v1}}\n", 3, 64,
       "has 'source:' and 'from: wheel'"},
      {"keep_source on two components",
       std::string(kHead) + "  - {name: d, use: [cudnn, nccl], keep_source: /opt/d}\n", 3, 35,
       "'keep_source' applies to one component"},
      {"a bad variable in keep_source",
       std::string(kHead) + kTorch + ", keep_source: \"/opt/${x\"}\n", 3, 77,
       "unterminated variable reference"},
      {"a bad variable in source.ref",
       std::string(kHead) + kTorch + ", keep_source: /opt/p, source: {git: g, ref: \"${}\"}}\n", 3,
       107, "empty variable reference"},
  };
  for (const auto& c : cases) {
    SECTION(c.name) {
      auto e = error_of(tmp.path(), c.yaml);
      REQUIRE(e);
      INFO(e->render());
      CHECK(e->location().file == (tmp.path() / "r.yaml").string());
      CHECK(e->location().line == c.line);
      CHECK(e->location().column == c.column);
      CHECK_THAT(e->message(), Catch::Contains(c.message));
    }
  }
  SECTION("an undefined variable in keep_source, at the key, when planned") {
    auto e = error_of(tmp.path(),
                      std::string(kHead) + kTorch + ", keep_source: \"/opt/${pytroch}\"}\n", true);
    REQUIRE(e);
    INFO(e->render());
    CHECK(e->location().line == 3);
    CHECK(e->location().column == 64);
    CHECK_THAT(e->message(),
               Catch::Contains("undefined variable '${pytroch}' (did you mean '${pytorch}'?)"));
  }
}

TEST_CASE("keep_source: the catalog record's source at the point, or the layer's own",
          "[pipeline][source][keep]") {
  TempDir tmp;
  SECTION("the catalog's git source of the point's pytorch, ${vars} expanded in keep_source") {
    AtPoint p = at_point(tmp.path(),
                         "stack: t\nmatrix:\n  pytorch: [\"2.7.0\"]\nlayers:\n"
                         "  - {name: torch, use: pytorch, version: \"${pytorch}\", from: wheel, "
                         "keep_source: \"/opt/pytorch-${pytorch}\"}\n");
    const LayerSpec& l = p.recipe.layers[0];
    CHECK(l.keep_source == "/opt/pytorch-2.7.0");
    auto src = kept_source(l, p.vars, p.in);
    REQUIRE(src);
    CHECK(src->spec.kind == source::SourceSpec::Kind::Git);
    CHECK(src->spec.url == "https://github.com/pytorch/pytorch");
    CHECK(src->spec.ref == "v2.7.0");
    CHECK(src->image_path == "/opt/pytorch-2.7.0");
    CHECK(src->kept);
    CHECK_THAT(src->what, Catch::Contains("catalog: pytorch 2.7.0"));
    CHECK_FALSE(layer_source(l, p.vars, p.in));  // nothing is compiled
  }
  SECTION("the layer's own source: wins, with ${pytorch} in its ref; patches change the identity") {
    const std::string yaml =
        "stack: t\nmatrix:\n  pytorch: [\"2.7.0\"]\nlayers:\n"
        "  - {name: torch, use: pytorch, version: \"${pytorch}\", from: wheel, "
        "keep_source: /opt/pytorch, source: {git: \"file:///mirror/pytorch\", ref: "
        "\"v${pytorch}\"}";
    AtPoint p = at_point(tmp.path(), yaml + "}\n");
    auto src = kept_source(p.recipe.layers[0], p.vars, p.in);
    REQUIRE(src);
    CHECK(src->spec.url == "file:///mirror/pytorch");
    CHECK(src->spec.ref == "v2.7.0");
    test::write(tmp.path() / "fix.patch", "--- a/x\n+++ b/x\n");
    AtPoint q = at_point(tmp.path(), yaml + ", patches: [fix.patch]}\n");
    auto patched = kept_source(q.recipe.layers[0], q.vars, q.in);
    REQUIRE(patched);
    CHECK(patched->spec.patches.size() == 1);
    CHECK(patched->identity != src->identity);
    AtPoint again = at_point(tmp.path(), yaml + "}\n");
    CHECK(kept_source(again.recipe.layers[0], again.vars, again.in)->identity == src->identity);

    // The image label that tells the SBOM what was kept: the component and
    // its version, the repository and ref (no commit: a tag is not pinned),
    // each patch by path and sha256, where it is kept; no host path.
    auto label = nlohmann::json::parse(source_label(q.recipe.layers[0], *patched, q.vars, false));
    CHECK(label["component"] == "pytorch");
    CHECK(label["version"] == "2.7.0");
    CHECK(label["git"] == "file:///mirror/pytorch");
    CHECK(label["ref"] == "v2.7.0");
    CHECK_FALSE(label.contains("commit"));
    CHECK(label["path"] == "/opt/pytorch");
    CHECK(label["built"] == false);
    REQUIRE(label["patches"].size() == 1);
    CHECK(label["patches"][0]["path"] == "fix.patch");
    CHECK(label["patches"][0]["sha256"] == Digest::of_file(tmp.path() / "fix.patch").hex());
    CHECK(label.dump().find(tmp.path().string()) == std::string::npos);
    // Once fetched, the commit the tag named then (the layer's record).
    auto fetched = nlohmann::json::parse(
        source_label(q.recipe.layers[0], *patched, q.vars, false,
                     nlohmann::json{{"commit", std::string(40, 'c')}}.dump()));
    CHECK(fetched["ref"] == "v2.7.0");
    CHECK(fetched["commit"] == std::string(40, 'c'));
  }
  SECTION("the label of a layer compiled from a local directory or a pinned archive") {
    fs::create_directories(tmp.path() / "src");
    test::write(tmp.path() / "src" / "a.c", "int main(){}\n");
    AtPoint p = at_point(
        tmp.path(),
        "stack: t\nlayers:\n"
        "  - {name: tool, source: {path: src}, build: {run: make}}\n"
        "  - {name: lib, source: {url: \"https://example.invalid/lib-1.0.tar.gz\", sha256: " +
            std::string(64, 'a') +
            "}, build: {run: make}}\n"
            "  - {name: git, source: {git: \"file:///r\", ref: " +
            std::string(40, 'b') + "}, keep_source: /opt/git, build: {run: make}}\n");
    auto local = layer_source(p.recipe.layers[0], p.vars, p.in);
    REQUIRE(local);
    auto l = nlohmann::json::parse(source_label(p.recipe.layers[0], *local, p.vars, true));
    CHECK(l["local"] == local->local_tree->str());
    CHECK(l["built"] == true);
    CHECK_FALSE(l.contains("path"));  // bound from outside while the steps ran: not in the image
    CHECK_FALSE(l.contains("component"));  // no use:
    CHECK(l.dump().find(tmp.path().string()) == std::string::npos);
    auto archive = layer_source(p.recipe.layers[1], p.vars, p.in);
    REQUIRE(archive);
    auto a = nlohmann::json::parse(source_label(p.recipe.layers[1], *archive, p.vars, true));
    CHECK(a["archive"] == "https://example.invalid/lib-1.0.tar.gz");
    CHECK(a["sha256"] == std::string(64, 'a'));
    auto git = layer_source(p.recipe.layers[2], p.vars, p.in);
    REQUIRE(git);
    auto g = nlohmann::json::parse(source_label(p.recipe.layers[2], *git, p.vars, true));
    CHECK(g["commit"] == std::string(40, 'b'));  // a commit as ref is pinned
    CHECK(g["path"] == "/opt/git");
  }
  SECTION("a record without a source is an error at the keep_source key") {
    AtPoint p = at_point(tmp.path(),
                         "stack: t\nlayers:\n"
                         "  - {name: dnn, use: cudnn, version: \"9.10.2.21\", from: wheel,\n"
                         "     keep_source: /opt/cudnn}\n");
    try {
      kept_source(p.recipe.layers[0], p.vars, p.in);
      FAIL("no error");
    } catch (const InputError& e) {
      INFO(e.render());
      CHECK(e.location().file == (tmp.path() / "r.yaml").string());
      CHECK(e.location().line == 4);
      CHECK(e.location().column == 6);
      CHECK_THAT(e.message(),
                 Catch::Contains("layer 'dnn': 'keep_source': the catalog names no source"));
      CHECK_THAT(e.message(), Catch::Contains("cudnn 9.10.2.21"));
    }
  }
}

TEST_CASE("recipes/pytorch-ngc.yaml is pytorch.yaml with the source kept at /opt/pytorch",
          "[recipe][keep]") {
  Recipe ngc = load_recipe(kSource / "recipes" / "pytorch-ngc.yaml");
  Recipe plain = load_recipe(kSource / "recipes" / "pytorch.yaml");
  REQUIRE(ngc.layers.size() == plain.layers.size());
  for (size_t i = 0; i < ngc.layers.size(); ++i) {
    INFO(ngc.layers[i].name);
    CHECK(ngc.layers[i].name == plain.layers[i].name);
    CHECK(ngc.layers[i].keeps_source_beside() == (ngc.layers[i].name == "pytorch"));
    CHECK_FALSE(plain.layers[i].keeps_source_beside());
  }
  CHECK(ngc.layers[2].keep_source == "/opt/pytorch");
  CHECK(ngc.layers[2].from == "wheel");
  CHECK(ngc.stack != plain.stack);  // its tags do not overwrite pytorch.yaml's images
}

TEST_CASE("a catalog record's Debian source package, and its label", "[recipe][source][debian]") {
  TempDir tmp;
  fs::copy(kSource / "layers", tmp.path() / "layers", fs::copy_options::recursive);
  test::write(tmp.path() / "layers" / "torchvision.yaml",
              "component: torchvision\ndescription: TorchVision\nversions:\n"
              "  - version: \"0.21.0\"\n    sources: {debian: {name: pytorch-vision, suite: trixie}}\n");
  test::write(tmp.path() / "r.yaml", std::string(kHead) +
                                         "  - {name: tv, use: torchvision, version: \"0.21.0\", from: source, "
                                         "keep_source: /opt/torchvision, build: {run: make}}\n");
  Planned p = plan_recipe(load_recipe(tmp.path() / "r.yaml"), PlanOptions{tmp.path() / "layers", {}});
  REQUIRE(p.plan.points.size() == 1);
  REQUIRE(p.plan.points[0].stack);
  Recipe r = resolve::instantiate(p.recipe, p.plan.points[0]);
  auto vars = resolve::point_variables(p.recipe, p.plan.points[0]);
  PointInputs in = point_inputs(p.plan.points[0], p.catalog);
  auto s = layer_source(r.layers[0], vars, in);
  REQUIRE(s);
  CHECK(s->spec.kind == source::SourceSpec::Kind::Debian);
  CHECK(s->spec.debian.name == "pytorch-vision");
  CHECK(s->spec.debian.suite == "trixie");
  CHECK(s->spec.debian.version.empty());  // the suite's newest; the lockfile pins it
  CHECK_THAT(s->what, Catch::Contains("Debian source pytorch-vision (trixie)"));
  CHECK_FALSE(has_git_source(r.layers[0], vars, in));
  // Before it was fetched: the package and suite; after, its version, .dsc and files.
  auto before = nlohmann::json::parse(source_label(r.layers[0], *s, vars, true));
  CHECK(before["debian"] == nlohmann::json{{"package", "pytorch-vision"}, {"suite", "trixie"}});
  source::DebianSource got;
  got.name = "pytorch-vision", got.version = "0.21.0-3", got.suite = "trixie", got.format = "3.0 (quilt)";
  got.directory = "pool/main/p/pytorch-vision";
  got.dsc = {"pytorch-vision_0.21.0-3.dsc", Digest::of_bytes("dsc"), 3};
  got.files = {{"pytorch-vision_0.21.0.orig.tar.gz", Digest::of_bytes("orig"), 4}};
  auto after = nlohmann::json::parse(
      source_label(r.layers[0], *s, vars, true, nlohmann::json{{"debian", got}}.dump()));
  CHECK(after["debian"]["version"] == "0.21.0-3");
  CHECK(after["debian"]["dsc"]["sha256"] == Digest::of_bytes("dsc").hex());
  CHECK(after["debian"]["files"][0]["name"] == "pytorch-vision_0.21.0.orig.tar.gz");
  CHECK(after["path"] == "/opt/torchvision");
  // A record that does not read is no record.
  CHECK_NOTHROW(check_source_commit_record(nlohmann::json{{"debian", got}}.dump()));
  CHECK_THROWS(check_source_commit_record(R"({"debian": {"debian": "x"}})"));
  // The catalog refuses a name that is none.
  test::write(tmp.path() / "layers" / "torchvision.yaml",
              "component: torchvision\ndescription: TorchVision\nversions:\n"
              "  - version: \"0.21.0\"\n    sources: {debian: {name: \"../x\"}}\n");
  CHECK_THROWS_WITH(plan_recipe(load_recipe(tmp.path() / "r.yaml"), PlanOptions{tmp.path() / "layers", {}}),
                    Catch::Contains("is a Debian source package name"));
}
