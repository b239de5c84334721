// The recipe language: every validation error at its file:line:col, extends
// chains and cycles, variable errors, matrix include/exclude and --set.
#include <catch2/catch.hpp>

#include "helpers.hpp"
#include "pipeline/plan.hpp"
#include "recipe/recipe.hpp"
#include "recipe/variables.hpp"
#include "resolve/matrix.hpp"

using namespace sb;

namespace {

const char* const kHead = "stack: t\n";  // line 1 of most cases

struct ErrorCase {
  const char* name;
  std::string yaml;
  int line, column;
  const char* message;  // a part of the message
};

// Loads `yaml` as dir/recipe.yaml (with extra files) and returns the error.
std::optional<InputError> load_error(const fs::path& dir, const std::string& yaml, bool with_plan = false) {
  test::write(dir / "recipe.yaml", yaml);
  try {
    Recipe r = load_recipe(dir / "recipe.yaml");
    if (with_plan) plan_recipe(r, PlanOptions{fs::path(SB_SOURCE_DIR) / "layers", {}});
  } catch (const InputError& e) {
    return e;
  }
  return std::nullopt;
}

std::string ids(const std::vector<resolve::Point>& points) {
  std::string s;
  for (const auto& p : points) s += p.id() + "|";
  return s;
}

}  // namespace

TEST_CASE("every recipe validation error names its place", "[recipe][errors]") {
  TempDir tmp;
  const std::string copy = "layers:\n  - {name: a, copy: [{src: f, dst: /f}]}\n";
  const ErrorCase cases[] = {
      {"not UTF-8", std::string(kHead) + "tags: [\"caf\xe9\"]\n", 2, 12, "not UTF-8 text: byte 0xE9"},
      {"a surrogate is not UTF-8", std::string(kHead) + "tags: [\"\xed\xa0\x80\"]\n", 2, 9, "not UTF-8 text: byte 0xED"},
      // Found by fuzz_recipe: yaml-cpp took a NUL for an escape and made bytes that are not UTF-8 of what followed.
      {"a NUL in a key", std::string(kHead) + "config: {env: {AB" + std::string(1, '\0') + "C: x}}\n", 2, 18,
       "control character 0x00 here"},
      {"a form feed", std::string(kHead) + "tags: [\"a\fb\"]\n", 2, 10, "control character 0x0C here"},
      {"unknown top-level key", std::string(kHead) + "layrs: []\n", 2, 1,
       "unknown key 'layrs' in the recipe (did you mean 'layers'?)"},
      {"unknown layer key", std::string(kHead) + "layers:\n  - {name: os, use: debian, packagess: [git]}\n", 3, 29,
       "unknown key 'packagess' in a layer (did you mean 'packages'?)"},
      {"wrong type", std::string(kHead) + copy + "tags: {a: b}\n", 4, 7, "expected a list for 'tags', got a map"},
      {"from: a typo", std::string(kHead) + "layers:\n  - {name: f, use: pytorch, from: sauce}\n", 3, 35,
       "did you mean 'source'"},
      {"version without use", std::string(kHead) + "layers:\n  - {name: a, apt: [git], version: \"1\"}\n", 3, 27,
       "'version' needs 'use:'"},
      {"copy and use together", std::string(kHead) + "layers:\n  - {name: a, copy: [{src: f, dst: /f}], use: cuda}\n",
       3, 42, "copies files and has 'use'"},
      {"a layer with nothing", std::string(kHead) + "layers:\n  - {name: a, comment: x}\n", 3, 6, "has nothing in it"},
      {"flat arch list", std::string(kHead) + "matrix:\n  arch: [\"8.0\", \"9.0\"]\n" + copy, 3, 9,
       "matrix.arch is a list of arch lists"},
      {"bad compute capability", std::string(kHead) + "matrix:\n  arch: [[\"8\"]]\n" + copy, 3, 11,
       "bad compute capability '8'"},
      {"exclude of an unknown key",
       std::string(kHead) + "matrix:\n  cuda: [\"12.4\"]\n  exclude: [{cdua: \"12.4\"}]\n" + copy, 4, 14,
       "not a matrix key (did you mean 'cuda'?)"},
      {"exclude of a value not in the matrix",
       std::string(kHead) + "matrix:\n  cuda: [\"12.4\"]\n  exclude: [{cuda: \"12.5\"}]\n" + copy, 4, 14,
       "exclude value cuda='12.5' is not in matrix.cuda"},
      {"unterminated variable", std::string(kHead) + copy + "tags: [\"t:${cuda\"]\n", 4, 8,
       "unterminated variable reference"},
      {"keep_source with build steps and no source",
       std::string(kHead) + "layers:\n  - {name: f, use: pytorch, keep_source: /opt/src, build: {run: make}}\n", 3, 29,
       "keep_source needs 'from: source'"},
      {"a layer name twice", std::string(kHead) + "layers:\n  - {name: a, apt: [x]}\n  - {name: a, apt: [y]}\n", 4, 12,
       "layer name 'a' is used twice"},
      {"version for several components",
       std::string(kHead) + "layers:\n  - {name: d, use: [cudnn, nccl], version: \"9\"}\n", 3, 35,
       "applies to one component"},
      {"a missing patch",
       std::string(kHead) + "layers:\n  - {name: f, use: pytorch, from: source, patches: [no.patch]}\n", 3, 53,
       "patch 'no.patch' not found"},
      {"a variable in a matrix value", std::string(kHead) + "matrix:\n  cuda: [\"${x}\"]\n" + copy, 3, 10,
       "matrix values cannot use variables"},
      {"no stack", "layers:\n  - {name: a, apt: [git]}\n", 1, 1, "missing key 'stack'"},
      {"a duplicate key", std::string(kHead) + copy + "stack: u\n", 4, 1, "duplicate key 'stack'"},
      {"an empty arch list", std::string(kHead) + "matrix:\n  arch: [[]]\n" + copy, 3, 10, "an arch list is empty"},
  };
  for (const auto& c : cases) {
    SECTION(c.name) {
      auto e = load_error(tmp.path(), c.yaml);
      REQUIRE(e);
      INFO(e->render());
      CHECK(e->location().file == (tmp.path() / "recipe.yaml").string());
      CHECK(e->location().line == c.line);
      CHECK(e->location().column == c.column);
      CHECK_THAT(e->message(), Catch::Contains(c.message));
      CHECK_THAT(e->render(), Catch::Contains("^"));  // the line is quoted, with a caret
    }
  }
}

TEST_CASE("a control character is quoted as '?' - the caret under it and the rest of the message kept", "[recipe][errors]") {
  TempDir tmp;
  auto e = load_error(tmp.path(), std::string(kHead) + "tags: [\"a" + std::string(1, '\0') + "b\"]\r\n");
  REQUIRE(e);
  // A NUL printed as it is would end the message at the quoted line.
  CHECK_THAT(e->render(), Catch::EndsWith("\n    tags: [\"a?b\"]\n             ^\n  remove it; inside a double-quoted "
                                          "string, write it as an escape such as \"\\x00\""));
}

TEST_CASE("errors only the catalog can reveal are at their place too", "[recipe][errors][variables]") {
  TempDir tmp;
  const std::string base = "stack: t\nmatrix:\n  cuda: [\"12.6\"]\nlayers:\n  - {name: c, use: cuda, version: \"${cuda}\"}\n";
  const ErrorCase cases[] = {
      {"an undefined variable with a near miss", base + "tags: [\"t:${cdua}\"]\n", 6, 8,
       "undefined variable '${cdua}' (did you mean '${cuda}'?)"},
      {"a version using a resolved value",
       base + "  - {name: d, use: cudnn, version: \"${cudnn}\"}\n", 6, 36,
       "a version cannot use '${cudnn}'"},
      {"a matrix key nothing uses", "stack: t\nmatrix:\n  cdua: [\"12.6\"]\nlayers:\n  - {name: c, use: cuda}\n", 3, 3,
       "matrix key 'cdua' is not a catalog component, and no ${cdua} uses it (did you mean 'cuda'?)"},
      {"an unknown component in use:", "stack: t\nlayers:\n  - {name: f, use: pytroch}\n", 3, 15,
       "uses 'pytroch', which is not in the catalog (did you mean 'pytorch'?)"},
      {"a variable with no value at a point", base + "tags: [\"t:${cudnn}\"]\n", 6, 8,
       "undefined variable '${cudnn}'"},
      {"two points with one tag", "stack: t\nmatrix:\n  cuda: [\"12.4\", \"12.6\"]\nlayers:\n  - {name: c, use: cuda}\n"
                                  "tags: [\"t:1\"]\n", 6, 8, "tag 't:1' names two matrix points"},
      {"a bad version in the matrix", "stack: t\nmatrix:\n  cuda: [\"twelve\"]\nlayers:\n  - {name: c, use: cuda}\n", 3,
       10, "twelve"},
  };
  for (const auto& c : cases) {
    SECTION(c.name) {
      auto e = load_error(tmp.path(), c.yaml, true);
      REQUIRE(e);
      INFO(e->render());
      CHECK(e->location().line == c.line);
      CHECK(e->location().column == c.column);
      CHECK_THAT(e->message(), Catch::Contains(c.message));
    }
  }
}

TEST_CASE("extends: a chain merges - nearest wins - cycles and bad parents are errors", "[recipe][extends]") {
  TempDir tmp;
  const fs::path d = tmp.path();
  test::write(d / "base/grand.yaml",
              "stack: grand\nrelease: \"1\"\nmatrix:\n  cuda: [\"12.4\", \"12.6\"]\n"
              "layers:\n  - {name: os, use: ubuntu}\n  - {name: cuda, use: cuda, version: \"${cuda}\"}\n"
              "  - {name: files, copy: [{src: f, dst: /f}]}\n"
              "config:\n  env: {A: \"1\", B: \"2\"}\ntags: [\"g:${cuda}\"]\n");
  test::write(d / "base/parent.yaml",
              "extends: grand.yaml\nstack: parent\nmatrix:\n  pytorch: [\"2.6\"]\n"
              "layers:\n  - {name: fw, use: pytorch, version: \"${pytorch}\", from: source}\n");
  test::write(d / "fork/p.patch", "--- a\n+++ b\n");
  test::write(d / "fork/child.yaml",
              "extends: ../base/parent.yaml\nstack: child\nmatrix:\n  cuda: [\"12.6\"]\n"
              "layers:\n  - {name: fw, patches: [p.patch]}\n  - {name: extra, pip: [einops]}\n"
              "config:\n  env: {B: \"3\", C: \"4\"}\n");
  Recipe r = load_recipe(d / "fork/child.yaml");
  CHECK(r.stack == "child");
  CHECK(r.release == "1");
  REQUIRE(r.extends_chain.size() == 2);
  REQUIRE(r.layers.size() == 5);
  CHECK(r.layers[3].name == "fw");
  CHECK(r.layers[3].from == "source");        // from the parent
  REQUIRE(r.layers[3].patches.size() == 1);   // added by the child
  CHECK(r.layers[3].patches[0].file == d / "fork/p.patch");
  CHECK(r.layers[2].copy[0].base == d / "base");  // copy sources stay relative to their own recipe
  CHECK(r.layers[4].name == "extra");
  REQUIRE(r.matrix.axes.size() == 2);
  CHECK(r.matrix.axes[0].values.size() == 1);  // cuda: the child's list
  REQUIRE(r.config.env.size() == 3);
  CHECK(r.config.env[1].second.value == "3");
  CHECK(r.tags == std::vector<std::string>{"g:${cuda}"});

  SECTION("a cycle names the chain, at the extends that closes it") {
    test::write(d / "a.yaml", "extends: b.yaml\nstack: a\n");
    test::write(d / "b.yaml", "stack: b\nextends: a.yaml\n");
    try {
      load_recipe(d / "a.yaml");
      FAIL("no error");
    } catch (const InputError& e) {
      CHECK(e.message() == "extends cycle: a.yaml -> b.yaml -> a.yaml");
      CHECK(e.location().file == (d / "b.yaml").string());
      CHECK(e.location().line == 2);
      CHECK(e.location().column == 10);
    }
  }
  SECTION("a recipe extending itself") {
    test::write(d / "self.yaml", "extends: ./self.yaml\nstack: s\n");
    CHECK_THROWS_WITH(load_recipe(d / "self.yaml"), Catch::Contains("extends cycle: self.yaml -> self.yaml"));
  }
  SECTION("a missing parent is an error at the extends") {
    auto e = load_error(d, "extends: nowhere.yaml\nstack: x\n");
    REQUIRE(e);
    CHECK(e->location().line == 1);
    CHECK_THAT(e->message(), Catch::Contains("cannot read the parent recipe 'nowhere.yaml'"));
  }
  SECTION("an error in a parent is reported in the parent's file") {
    test::write(d / "bad.yaml", "stack: b\nlayers:\n  - {name: a, aptt: [x]}\n");
    auto e = load_error(d, "extends: bad.yaml\n");
    REQUIRE(e);
    CHECK(e->location().file == (d / "bad.yaml").string());
    CHECK(e->location().line == 3);
    CHECK_THAT(e->render(), Catch::Contains("while reading 'bad.yaml'"));
  }
  SECTION("replace: true drops the parent's layer") {
    test::write(d / "r.yaml", "extends: base/parent.yaml\nlayers:\n  - {name: fw, replace: true, pip: [torch]}\n");
    Recipe rr = load_recipe(d / "r.yaml");
    CHECK(rr.layers[3].use.empty());
    CHECK(rr.layers[3].pip == std::vector<std::string>{"torch"});
  }
  SECTION("below: a new layer goes under the named one, not on top") {
    test::write(d / "b.yaml", "extends: base/parent.yaml\nlayers:\n"
                              "  - {name: toolkit, below: fw, use: cuda, components: [nvcc]}\n"
                              "  - {name: headers, below: toolkit, apt: [libnccl-dev]}\n"
                              "  - {name: top, pip: [einops]}\n");
    Recipe rb = load_recipe(d / "b.yaml");
    std::string order;
    for (const auto& l : rb.layers) order += l.name + " ";
    CHECK(order == "os cuda files headers toolkit fw top ");
    CHECK(rb.layers[4].below.empty());  // placed: nothing left for validation to refuse
  }
  SECTION("below: an unknown layer - a layer the parent has - no extends are errors at the key") {
    auto e = load_error(d, "extends: base/parent.yaml\nlayers:\n  - {name: tk, below: fww, apt: [make]}\n");
    REQUIRE(e);
    CHECK(e->location().line == 3);
    CHECK_THAT(e->message(), Catch::Contains("no layer 'fww' to go below") && Catch::Contains("did you mean 'fw'"));
    e = load_error(d, "extends: base/parent.yaml\nlayers:\n  - {name: cuda, below: fw, components: [nvcc]}\n");
    REQUIRE(e);
    CHECK(e->location().line == 3);
    CHECK_THAT(e->message(), Catch::Contains("'below' places a new layer"));
    e = load_error(d, "stack: s\nlayers:\n  - {name: a, apt: [make]}\n  - {name: b, below: a, apt: [g++]}\n");
    REQUIRE(e);
    CHECK(e->location().line == 4);
    CHECK_THAT(e->message(), Catch::Contains("this recipe extends none"));
  }
}

TEST_CASE("matrix expansion: product order - exclude - include - --set", "[recipe][matrix]") {
  TempDir tmp;
  test::write(tmp.path() / "m.yaml",
              "stack: m\nmatrix:\n  cuda: [\"12.4\", \"12.6\"]\n  pytorch: [\"2.5\", \"2.6\"]\n"
              "  exclude: [{cuda: \"12.6\", pytorch: \"2.5\"}]\n"
              "  include: [{cuda: \"12.8\", pytorch: \"2.7\"}, {pytorch: \"2.4\"}, {cuda: \"12.4\", pytorch: \"2.6\"}]\n"
              "layers:\n  - {name: fw, use: pytorch}\n");
  Recipe r = load_recipe(tmp.path() / "m.yaml");
  CHECK(ids(resolve::expand_matrix(r.matrix)) ==
        "cuda=12.4 pytorch=2.5|cuda=12.4 pytorch=2.6|cuda=12.6 pytorch=2.6|cuda=12.8 pytorch=2.7|"
        "cuda=12.4 pytorch=2.4|cuda=12.6 pytorch=2.4|");

  Matrix m = r.matrix;
  resolve::apply_overrides(m, {{"cuda", "12.6"}, {"arch", "8.0,9.0"}}, {"arch"});
  // The set value replaces the list; the exclude of 12.6/2.5 still holds;
  // includes naming another cuda are dropped; the new arch axis joins all.
  CHECK(ids(resolve::expand_matrix(m)) == "cuda=12.6 pytorch=2.6 arch=8.0;9.0|cuda=12.6 pytorch=2.4 arch=8.0;9.0|");
  CHECK_THROWS_WITH(resolve::apply_overrides(m, {{"cdua", "1"}}, {"cuda"}), Catch::Contains("did you mean 'cuda'"));
  CHECK_THROWS_AS(resolve::parse_override("cuda"), Error);
  CHECK_THROWS_WITH(resolve::apply_overrides(m, {{"arch", "8"}}, {}), Catch::Contains("bad compute capability"));

  Matrix none;
  CHECK(ids(resolve::expand_matrix(none)) == "(no matrix)|");
}

TEST_CASE("variables: syntax - escapes and to_json of copy layers", "[recipe][variables]") {
  TempDir tmp;
  test::write(tmp.path() / "v.yaml",
              "stack: v\nlayers:\n  - name: b\n    build: {run: [\"echo $${HOME} $HOME ${stack}\"]}\n");
  Recipe r = load_recipe(tmp.path() / "v.yaml");
  resolve::PlanPoint p;
  p.stack = resolve::ResolvedStack{};
  Recipe i = resolve::instantiate(r, p);
  CHECK(i.layers[0].build.run[0].value == "echo ${HOME} $HOME v");

  // apt, pip and packages items are expanded per point; an unknown name is an error at its key.
  test::write(tmp.path() / "p.yaml",
              "stack: p\nrelease: \"26.11\"\nlayers:\n  - {name: os, use: debian, packages: [\"x-${release}\"]}\n"
              "  - {name: t, apt: [\"tool-${stack}\", \"$${literal}\"]}\n"
              "  - {name: w, pip: [\"pkg==${release}.*\"]}\n");
  Recipe pr = load_recipe(tmp.path() / "p.yaml");
  Recipe pi = resolve::instantiate(pr, p);
  CHECK(pi.layers[0].packages == std::vector<std::string>{"x-26.11"});
  CHECK(pi.layers[1].apt == std::vector<std::string>{"tool-p", "${literal}"});
  CHECK(pi.layers[2].pip == std::vector<std::string>{"pkg==26.11.*"});
  CHECK(variable_uses(pr).size() == 3);

  // Labels and annotations are expanded too (an image's version annotation from the matrix).
  test::write(tmp.path() / "a.yaml",
              "stack: a\nrelease: \"26.11\"\nlayers:\n  - {name: b, copy: [{src: f, dst: /f}]}\n"
              "config:\n  labels: {org.example.release: \"${release}\", plain: \"$${x}\"}\n"
              "annotations: {version: \"${stack}-${release}\", title: T}\n");
  Recipe ar = load_recipe(tmp.path() / "a.yaml");
  CHECK(variable_uses(ar).size() == 3);
  Recipe ai = resolve::instantiate(ar, p);
  CHECK(ai.config.labels.at("org.example.release") == "26.11");
  CHECK(ai.config.labels.at("plain") == "${x}");
  CHECK(ai.annotations.at("version") == "a-26.11");
  CHECK(ai.annotations.at("title") == "T");
  test::write(tmp.path() / "bad.yaml", "stack: b\nlayers:\n  - {name: w, pip: [\"pkg==${stak}\"]}\n");
  try {
    resolve::instantiate(load_recipe(tmp.path() / "bad.yaml"), p);
    FAIL("an undefined variable in pip: was accepted");
  } catch (const InputError& e) {
    CHECK_THAT(e.message(), Catch::Contains("undefined variable '${stak}'") && Catch::Contains("did you mean '${stack}'"));
    CHECK(e.location().line == 3);
    CHECK(e.location().column == 15);
  }

  // A copy layer's JSON is its cache key: no new fields may appear in it.
  test::write(tmp.path() / "c.yaml", "stack: c\nlayers:\n  - {name: a, copy: [{src: f, dst: /f, mode: \"0600\"}]}\n");
  nlohmann::json j = load_recipe(tmp.path() / "c.yaml").layers[0];
  CHECK(j.dump() == R"({"copy":[{"dst":"/f","mode":384,"src":"f"}],"name":"a","preserve_modes":false})");
}

TEST_CASE("source: and configure: keys - and their mistakes at their place", "[recipe][errors][source]") {
  TempDir tmp;
  fs::create_directories(tmp.path() / "src");
  const std::string head = std::string(kHead) + "layers:\n  - {name: b, copy: [{src: src/, dst: /}]}\n";
  const std::string run = ", build: {run: make}}\n";
  const ErrorCase cases[] = {
      {"two kinds of source", head + "  - {name: f, source: {path: src, git: x}" + run, 4, 23,
       "'source' names one non-empty of path, url, git or debian"},
      {"a Debian source and a git one", head + "  - {name: f, source: {debian: hello, git: x}" + run, 4, 23,
       "'source' names one non-empty of path, url, git or debian"},
      {"a Debian source name that is none", head + "  - {name: f, source: {debian: \"Hello World\"}" + run, 4, 32,
       "source.debian is a Debian source package name"},
      {"a Debian source name like an option", head + "  - {name: f, source: {debian: -x}" + run, 4, 32,
       "source.debian is a Debian source package name"},
      {"a version without debian", head + "  - {name: f, source: {path: src, version: \"1.0\"}" + run, 4, 44,
       "source.version goes with source.debian"},
      {"a suite that is a path", head + "  - {name: f, source: {debian: hello, suite: a/b}" + run, 4, 46,
       "source.suite is one word"},
      {"an archive without sha256", head + "  - {name: f, source: {url: \"https://x/a.tgz\"}" + run, 4, 23,
       "source.url needs its sha256"},
      {"a short sha256", head + "  - {name: f, source: {url: u, sha256: abc}" + run, 4, 40,
       "source.sha256 is 64 lowercase hex digits"},
      {"git without a ref", head + "  - {name: f, source: {git: \"file:///r\"}" + run, 4, 23,
       "source.git needs a ref"},
      {"a ref without git", head + "  - {name: f, source: {path: src, ref: v1}" + run, 4, 40,
       "source.ref goes with source.git"},
      {"an unknown source key", head + "  - {name: f, source: {path: src, tag: v1}" + run, 4, 35,
       "unknown key 'tag'"},
      {"a missing source directory", head + "  - {name: f, source: {path: nowhere}" + run, 4, 23,
       "source.path 'nowhere' is not a directory"},
      {"a source without build steps", head + "  - {name: f, source: {path: src}}\n", 4, 15,
       "is built from source and has no 'build:' steps"},
      {"a source with apt packages", head + "  - {name: f, source: {path: src}, apt: [x], build: {run: make}}\n", 4,
       36, "builds from 'source:' and installs packages"},
      {"source with from: wheel", head + "  - {name: f, source: {path: src}, from: wheel" + run, 4, 15,
       "has 'source:' and 'from: wheel'"},
      {"a copy layer with source", std::string(kHead) + "layers:\n  - {name: b, copy: [{src: src/, dst: /}], source: {path: src}}\n",
       3, 44, "copies files and has 'source'"},
      {"configure on a build layer", head + "  - {name: f, configure: true, build: {run: make}}\n", 4, 15,
       "'configure' runs dpkg --configure -a"},
      {"configure not a bool", head + "  - {name: f, apt: [x], configure: yes please}\n", 4, 36, "'configure'"},
  };
  for (const auto& c : cases) {
    SECTION(c.name) {
      auto e = load_error(tmp.path(), c.yaml);
      REQUIRE(e);
      INFO(e->render());
      CHECK(e->location().line == c.line);
      CHECK(e->location().column == c.column);
      CHECK_THAT(e->message(), Catch::Contains(c.message));
    }
  }
  SECTION("a Debian source: name, version and suite, ${vars} in the version") {
    test::write(tmp.path() / "d.yaml", head + "  - {name: f, source: {debian: pytorch-vision, version: \"${v}-1\", suite: trixie}" + run);
    Recipe r = load_recipe(tmp.path() / "d.yaml");
    const SourceDecl& d = r.layers[1].source;
    CHECK(d.debian == "pytorch-vision");
    CHECK(d.version == "${v}-1");
    CHECK(d.suite == "trixie");
    CHECK(d.given());
    nlohmann::json j = r.layers[1];
    CHECK(j["source"] == nlohmann::json{{"debian", "pytorch-vision"}, {"suite", "trixie"}, {"version", "${v}-1"}});
  }
  SECTION("a valid source layer: keep_source and patches go with source: without use:") {
    test::write(tmp.path() / "fix.patch", "");
    test::write(tmp.path() / "recipe.yaml",
                head + "  - {name: f, source: {path: src}, keep_source: /opt/f, patches: [fix.patch]" + run);
    Recipe r = load_recipe(tmp.path() / "recipe.yaml");
    REQUIRE(r.layers.size() == 2);
    CHECK(r.layers[1].from_source());
    CHECK(r.layers[1].source.path == "src");
    CHECK(r.layers[1].source.base == tmp.path());
    CHECK(r.layers[1].keep_source == "/opt/f");
  }
}

TEST_CASE("the example recipes plan", "[recipe][plan]") {
  for (const char* name : {"examples/minitensor.yaml", "examples/pytorch-research.yaml", "examples/hello.yaml"}) {
    SECTION(name) {
      Recipe r = load_recipe(fs::path(SB_SOURCE_DIR) / name);
      Planned p = plan_recipe(r, PlanOptions{});
      CHECK(p.plan.unsatisfiable() == 0);
      CHECK_FALSE(p.plan.points.empty());
    }
  }
}
