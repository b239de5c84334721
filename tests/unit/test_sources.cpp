// Where components come from: the layer's `from:` (and the resolver keeping
// to versions that exist in that kind of source), `duplicates:` and
// `platform:`, the requests of redist layers, the point's wheel constraints,
// and the lockfile entries of pip and redist layers that `build --locked`
// checks before fetching.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <set>

#include "fakes.hpp"
#include "helpers.hpp"
#include "fetch/apt/config.hpp"
#include "pipeline/apt_layer.hpp"
#include "pipeline/apt_repositories.hpp"
#include "pipeline/layer_kind.hpp"
#include "pipeline/lock.hpp"
#include "pipeline/pip_layer.hpp"
#include "pipeline/redist_layer.hpp"
#include "pip_fixture.hpp"
#include "resolve/lockfile.hpp"
#include "util/process.hpp"

using namespace sb;

namespace {

const fs::path kSource = SB_SOURCE_DIR;

Planned plan_text(const fs::path& dir, const std::string& yaml) {
  test::write(dir / "r.yaml", yaml);
  return plan_recipe(load_recipe(dir / "r.yaml"), PlanOptions{kSource / "layers", {}});
}

std::optional<InputError> recipe_error(const fs::path& dir, const std::string& yaml) {
  test::write(dir / "r.yaml", yaml);
  try {
    load_recipe(dir / "r.yaml");
  } catch (const InputError& e) {
    return e;
  }
  return std::nullopt;
}

const LayerSpec& layer(const Recipe& r, const std::string& name) {
  for (const auto& l : r.layers)
    if (l.name == name) return l;
  throw Error("no layer " + name);
}

std::string dl_recipe(const std::string& cuda, const std::string& dl_extra) {
  return "stack: t\nmatrix:\n  cuda: [\"" + cuda +
         "\"]\nlayers:\n  - {name: cuda, use: cuda, version: \"${cuda}\", components: [cudart, cublas]}\n"
         "  - {name: dl, use: [cudnn, nccl]" +
         dl_extra + "}\n";
}

}  // namespace

TEST_CASE("sources: from duplicates and platform are checked at their place", "[recipe][sources]") {
  TempDir tmp;
  struct Case {
    std::string yaml;
    int line, column;
    const char* message;
  } cases[] = {
      {"stack: t\nlayers:\n  - {name: d, use: cudnn, from: wheels}\n", 3, 33, "did you mean 'wheel'"},
      {"stack: t\nlayers:\n  - {name: d, use: [cudnn, nccl], from: source}\n", 3, 35, "applies to one component"},
      {"stack: t\nlayers:\n  - {name: w, pip: [x], duplicates: higher}\n", 3, 37, "'duplicates' is report, lower, upper or error"},
      {"stack: t\nlayers:\n  - {name: c, use: nccl, from: apt, pip: [x]}\n", 3, 37,
       "installs Debian packages and installs Python wheels"},
      // One installer per layer: each of these left a part of the layer unbuilt.
      {"stack: t\nlayers:\n  - {name: t, apt: [git], pip: [six]}\n", 3, 27,
       "layer 't' installs Debian packages and installs Python wheels"},
      {"stack: t\nlayers:\n  - {name: o, use: [debian, cuda]}\n", 3, 15, "names the OS and other components"},
      {"stack: t\nlayers:\n  - {name: c, use: cuda, apt: [git]}\n", 3, 15,
       "installs Debian packages and installs NVIDIA's redist archives"},
      {"stack: t\nlayers:\n  - {name: c, use: cuda, from: wheel, apt: [git]}\n", 3, 26,
       "installs Debian packages and installs Python wheels"},
      {"stack: t\nlayers:\n  - {name: c, use: cuda, build: {run: make}}\n", 3, 26,
       "installs NVIDIA's redist archives of its 'use:' components and runs build steps"},
      {"stack: t\nlayers:\n  - {name: s, pip: [six], build: {run: make}}\n", 3, 27,
       "installs Python wheels and runs build steps"},
      {"stack: t\nplatform: {glibc: \"2.x\"}\nlayers:\n  - {name: w, pip: [x]}\n", 2, 19,
       "platform.glibc is a version such as 2.39"},
      {"stack: t\nplatform: {pyton: \"3.12\"}\nlayers:\n  - {name: w, pip: [x]}\n", 2, 12, "did you mean 'python'"},
  };
  for (const auto& c : cases) {
    auto e = recipe_error(tmp.path(), c.yaml);
    INFO(c.yaml);
    REQUIRE(e);
    INFO(e->render());
    CHECK(e->location().line == c.line);
    CHECK(e->location().column == c.column);
    CHECK_THAT(e->message(), Catch::Contains(c.message));
  }
  test::write(tmp.path() / "ok.yaml",
              "stack: t\nplatform: {python: \"3.11\", glibc: \"2.36\"}\nlayers:\n"
              "  - {name: d, use: [cudnn, nccl], from: redist}\n  - {name: w, pip: [x], duplicates: lower}\n");
  Recipe r = load_recipe(tmp.path() / "ok.yaml");
  CHECK(r.platform.python == "3.11");
  CHECK(r.platform.glibc == "2.36");
  CHECK(layer(r, "d").from == "redist");
  CHECK(layer(r, "w").duplicates == "lower");
  CHECK(is_redist_layer(layer(r, "d")));
  CHECK(is_pip_layer(layer(r, "w")));
  // A use:d component built from source by steps is one installer: the steps.
  fs::create_directories(tmp.path() / "src");
  test::write(tmp.path() / "built.yaml",
              "stack: t\nlayers:\n  - {name: os, use: debian}\n"
              "  - {name: a, use: pytorch, source: {path: src}, build: {run: make}}\n"
              "  - {name: b, use: pytorch, from: source, build: {run: make}}\n");
  Recipe built = load_recipe(tmp.path() / "built.yaml");
  CHECK(layer(built, "a").from_source());
  CHECK_FALSE(is_redist_layer(layer(built, "a")));
  CHECK(layer(built, "b").from_source());
}

TEST_CASE("sources: the resolver picks versions that exist in the layer's kind of source", "[plan][sources]") {
  TempDir tmp;
  auto chosen = [&](const std::string& yaml, const char* component) {
    Planned p = plan_text(tmp.path(), yaml);
    REQUIRE(p.plan.points.size() == 1);
    INFO((p.plan.points[0].conflict ? p.plan.points[0].conflict->str() : ""));
    REQUIRE(p.plan.points[0].stack);
    const auto& s = *p.plan.points[0].stack;
    std::string b = s.builds.count(component) ? " " + s.builds.at(component) : "";
    return s.versions.at(component) + b;
  };
  // Redist by default: NCCL's tarball build for the point's CUDA, not the newer wheel-only 2.28.9.
  CHECK(chosen(dl_recipe("12.4", ""), "nccl") == "2.21.5-1 cuda12.4");
  CHECK(chosen(dl_recipe("12.6", ""), "nccl") == "2.23.4-1 cuda12.6");
  CHECK(chosen(dl_recipe("12.4", ", from: redist"), "nccl") == "2.21.5-1 cuda12.4");
  // Wheels: the newest NCCL and cuDNN wheels that fit CUDA 12.4.
  CHECK(chosen(dl_recipe("12.4", ", from: wheel"), "nccl") == "2.28.9 cu12");
  CHECK(chosen(dl_recipe("12.4", ", from: wheel"), "cudnn") == "9.10.2.21 cuda12");
  // apt: the libnccl2 build for 12.4.
  CHECK(chosen(dl_recipe("12.4", ", from: apt"), "nccl") == "2.21.5-1 cuda12.4");
  // A component without redist records (python) is not held to redist.
  CHECK(chosen("stack: t\nlayers:\n  - {name: p, use: python, version: \"3.12\"}\n", "python") == "3.12");

  Planned none = plan_text(tmp.path(), "stack: t\nlayers:\n  - {name: n, use: nccl, version: \"2.28.9\"}\n");
  REQUIRE(none.plan.points.size() == 1);
  REQUIRE(none.plan.points[0].conflict);
  CHECK_THAT(none.plan.points[0].conflict->summary, Catch::Contains("with a redist source"));
}

TEST_CASE("sources: redist layers request the point's manifests and NCCL's tarball", "[redist][sources]") {
  TempDir tmp;
  Planned p = plan_text(tmp.path(), dl_recipe("12.4", ""));
  REQUIRE(p.plan.points[0].stack);
  Recipe r = resolve::instantiate(p.recipe, p.plan.points[0]);
  auto vars = resolve::point_variables(p.recipe, p.plan.points[0]);
  PointInputs in = point_inputs(p.plan.points[0], p.catalog);
  CHECK(vars.at("cuda") == "12.4");            // the matrix value...
  CHECK(in.versions.at("cuda") == "12.4.1");   // ...and the record the point chose

  auto cuda = redist_requests(layer(r, "cuda"), vars, in);
  REQUIRE(cuda.size() == 1);
  CHECK(cuda[0].product == "cuda");
  CHECK(cuda[0].manifest_version == "12.4.1");
  CHECK(cuda[0].components == std::vector<std::string>{"cudart", "cublas"});

  auto dl = redist_requests(layer(r, "dl"), vars, in);
  REQUIRE(dl.size() == 2);
  CHECK(dl[0].product == "cudnn");
  std::string cudnn = in.versions.at("cudnn");  // its manifest is named by the first three parts
  CHECK(dl[0].manifest_version == cudnn.substr(0, cudnn.find('.', cudnn.find('.', cudnn.find('.') + 1) + 1)));
  CHECK(dl[0].manifest_version.size() >= 5);
  CHECK(dl[0].components == std::vector<std::string>{"cudnn"});
  CHECK(dl[1].product == "nccl");
  CHECK(dl[1].manifest_version.empty());
  CHECK(dl[1].archive == "redist/nccl/v2.21.5/nccl_2.21.5-1+cuda12.4_{arch}.txz");
  CHECK(dl[1].components == std::vector<std::string>{"nccl"});

  // A record without redist data is a clear error naming the layer and the way out.
  PointInputs wheel_only = in;
  wheel_only.versions["nccl"] = "2.28.9";
  wheel_only.builds["nccl"] = "cu12";
  wheel_only.records.erase("nccl");  // the plan's choice, as point_inputs() would have found it
  for (const auto& rec : p.catalog->find("nccl")->records)
    if (rec.version.str() == "2.28.9" && rec.build == "cu12") wheel_only.records["nccl"] = &rec;
  REQUIRE(wheel_only.records.count("nccl"));
  CHECK_THROWS_WITH(redist_requests(layer(r, "dl"), vars, wheel_only),
                    Catch::Contains("no NVIDIA redist archive for nccl 2.28.9") && Catch::Contains("from: wheel"));
}

TEST_CASE("sources: layers take their records from the plan's catalog, not one beside the recipe",
          "[redist][sources][catalog]") {
  // --catalog names a catalog elsewhere; beside the recipe is a decoy whose
  // record of the same version names another manifest and an unsafe git source.
  TempDir tmp;
  const std::string component = "component: gizmo\nversions:\n  - {version: \"1.0\", sources: {redist: "
                                "{product: gizmo, manifest_version: \"";
  test::write(tmp.path() / "elsewhere" / "gizmo.yaml",
              component + "1.0.0\"}, git: {url: \"https://example.invalid/gizmo\", ref: v1.0}}}\n");
  test::write(tmp.path() / "r" / "layers" / "gizmo.yaml",
              component + "9.9.9\"}, git: {url: \"--upload-pack=touch /tmp/x\", ref: v1.0}}}\n");
  test::write(tmp.path() / "r" / "r.yaml",
              "stack: t\nlayers:\n  - {name: g, use: gizmo, version: \"1.0\", keep_source: /opt/gizmo}\n");
  Recipe recipe = load_recipe(tmp.path() / "r" / "r.yaml");
  auto requested = [&](const Planned& p) {
    REQUIRE(p.plan.points.size() == 1);
    REQUIRE(p.plan.points[0].stack);
    auto vars = resolve::point_variables(p.recipe, p.plan.points[0]);
    auto got = redist_requests(p.recipe.layers[0], vars, point_inputs(p.plan.points[0], p.catalog));
    REQUIRE(got.size() == 1);
    return got[0].manifest_version;
  };
  CHECK(requested(plan_recipe(recipe, PlanOptions{tmp.path() / "elsewhere", {}})) == "1.0.0");
  setenv("STACKBUILD_CATALOG", (tmp.path() / "elsewhere").c_str(), 1);
  struct Unset {
    ~Unset() { unsetenv("STACKBUILD_CATALOG"); }
  } unset;
  CHECK(requested(plan_recipe(recipe, PlanOptions{})) == "1.0.0");
  unsetenv("STACKBUILD_CATALOG");
  // The decoy, found beside the recipe, is the one planned with when nothing
  // else is named; its git source is refused then, before anything runs git.
  CHECK_THROWS_WITH(plan_recipe(recipe, PlanOptions{}), Catch::Contains("begins with '-'"));
}

TEST_CASE("sources: the point's pinned wheels become pip constraints", "[pip][sources]") {
  TempDir tmp;
  Planned p = plan_text(tmp.path(), "stack: t\nmatrix:\n  cuda: [\"12.4\"]\n  cudnn: [\"9.1.0.70\"]\nlayers:\n"
                                    "  - {name: c, use: [cuda, cublas, cudnn]}\n  - {name: w, pip: [torch]}\n");
  REQUIRE(p.plan.points[0].stack);
  Recipe r = resolve::instantiate(p.recipe, p.plan.points[0]);
  PointInputs in = point_inputs(p.plan.points[0], p.catalog);
  auto cs = pip_constraints(in);
  std::map<std::string, std::string> by;
  for (const auto& [req, who] : cs) by[req] = who;
  CHECK(by.at("nvidia-cublas-cu12==12.4.*") == "the point's cublas 12.4");
  std::string cudnn = "nvidia-cudnn-cu12==" + in.versions.at("cudnn");
  CHECK(by.at(cudnn) == "the point's cudnn " + in.versions.at("cudnn"));
  for (const auto& [req, who] : cs) CHECK(req.find("==") != std::string::npos);  // only pins, never bare names
  CHECK(pip_constraints(PointInputs{}).empty());  // no plan, no constraints
}

TEST_CASE("sources: a pip layer's target comes from platform and its absence names the key", "[pip][sources]") {
  TempDir tmp;
  test::write(tmp.path() / "a.yaml",
              "stack: t\nplatform: {python: \"3.11\", glibc: \"2.36\"}\nlayers:\n  - {name: w, pip: [x]}\n");
  pip::Target t = pip_target(load_recipe(tmp.path() / "a.yaml"), {}, PointInputs{});
  CHECK(t.python == "3.11");
  CHECK(t.libc_version == "2.36");
  // ${python} of the point wins over platform.python.
  CHECK(pip_target(load_recipe(tmp.path() / "a.yaml"), {{"python", "3.12"}}, PointInputs{}).python == "3.12");
  test::write(tmp.path() / "b.yaml", "stack: t\nlayers:\n  - {name: w, pip: [x]}\n");
  try {
    pip_target(load_recipe(tmp.path() / "b.yaml"), {{"python", "3.12"}}, PointInputs{});
    FAIL("a target without a glibc");
  } catch (const InputError& e) {
    CHECK_THAT(e.render(), Catch::Contains("which glibc") && Catch::Contains("platform: {glibc"));
    CHECK(e.location().file == (tmp.path() / "b.yaml").string());
  }
}

TEST_CASE("sources: each kind that pins its inputs names its own lock section", "[lock][sources]") {
  // lock.cpp writes and checks one section per registered kind: two kinds
  // with one name would overwrite each other's pins, and "source" and
  // "base" are lock.cpp's and base_image.cpp's own.
  std::set<std::string> sections;
  for (const LayerKind* kind : layer_kinds()) {
    const char* section = kind->lock_section();
    if (!section) continue;
    INFO(kind->name());
    CHECK(sections.insert(section).second);
    CHECK(std::string(section) != "source");
    CHECK(std::string(section) != "base");
  }
  CHECK(sections == std::set<std::string>{"apt", "pip", "redist"});
  CHECK(step_layer_kind().lock_section() == nullptr);  // steps and copies fetch nothing to pin
  CHECK(copy_layer_kind().lock_section() == nullptr);
}

TEST_CASE("sources: build --locked refuses a missing or stale pip or redist entry", "[plan][lock][sources]") {
  TempDir tmp;
  std::string text = "stack: t\nplatform: {python: \"3.12\", glibc: \"2.39\"}\nmatrix:\n  cuda: [\"12.4\"]\nlayers:\n"
                     "  - {name: cuda, use: cuda, version: \"${cuda}\", components: [cudart]}\n"
                     "  - {name: w, pip: [torchy]}\n";
  Planned p = plan_text(tmp.path(), text);
  const auto& point = p.plan.points[0];
  REQUIRE(point.stack);
  Recipe r = resolve::instantiate(p.recipe, point);
  auto vars = resolve::point_variables(p.recipe, point);
  PointInputs in = point_inputs(point, p.catalog);

  auto entries = [&](const std::vector<std::string>& reqs, const std::vector<std::string>& components) {
    nlohmann::json cons = nlohmann::json::array();
    for (const auto& [c, who] : pip_constraints(in)) cons.push_back(c);
    nlohmann::json pip = {{"w", {{"target", pip_target(r, vars, in).describe()}, {"requirements", reqs},
                                 {"constraints", cons}, {"wheels", nlohmann::json::array()}}}};
    nlohmann::json archive = {{"component", "cuda_cudart"}, {"url", "http://127.0.0.1:1/a.tar.xz"},
                              {"sha256", std::string(64, 'a')}, {"size", 10}};
    nlohmann::json redist = {
        {"cuda",
         {{"cuda", "12.4"},
          {"requests", {{{"product", "cuda"}, {"manifest_version", "12.4.1"}, {"components", components}}}},
          {"archives", {archive}}}}};
    return std::vector<nlohmann::json>{{{"pip", pip}, {"redist", redist}}};
  };
  write_lock(p, entries({"torchy"}, {"cudart"}));
  PointInputs ok = locked_point_inputs(p, point);
  nlohmann::json lock = nlohmann::json::parse(ok.lock);
  CHECK(lock["pip"].contains("w"));
  CHECK(lock["redist"]["cuda"]["archives"][0]["component"] == "cuda_cudart");
  CHECK(ok.versions == in.versions);

  auto refused = [&](const std::vector<nlohmann::json>& extras, const std::string& what) {
    write_lock(p, extras);
    try {
      locked_point_inputs(p, point);
      FAIL("accepted: " + what);
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::Input);
      CHECK_THAT(e.what(), Catch::Contains(what));
      CHECK_THAT(e.what(), Catch::Contains("run 'stackbuild lock"));
    }
  };
  refused(entries({"torchy==1.0"}, {"cudart"}), "layer 'w'");
  refused(entries({"torchy==1.0"}, {"cudart"}), "requirements [\"torchy==1.0\"] -> [\"torchy\"]");
  refused(entries({"torchy"}, {"cudart", "nvcc"}), "layer 'cuda'");
  refused(entries({"torchy"}, {"cudart", "nvcc"}), "requests");
  auto no_pip = entries({"torchy"}, {"cudart"});
  no_pip[0].erase("pip");
  refused(no_pip, "layer 'w'");
  refused(no_pip, "the lockfile pins no pip files for it");
  auto bad_sha = entries({"torchy"}, {"cudart"});
  bad_sha[0]["redist"]["cuda"]["archives"][0]["sha256"] = "";
  refused(bad_sha, "has no sha256 in the lockfile");
}

namespace {

bool have_tool(const char* tool) {
  ProcessSpec s;
  s.argv = {"sh", "-c", std::string("command -v ") + tool};
  s.env = {{"PATH", "/usr/bin:/bin"}};
  s.capture_stdout = true;
  return run_process(s).exit_status == 0;
}

void run_tool(std::vector<std::string> argv, const fs::path& gnupg = {}) {
  ProcessSpec s;
  s.argv = std::move(argv);
  s.env = {{"PATH", "/usr/bin:/bin"}, {"LC_ALL", "C"}};
  if (!gnupg.empty()) s.env["GNUPGHOME"] = gnupg.string();
  s.capture_stdout = true;
  s.merge_stderr = true;
  auto r = run_process(s);
  if (r.exit_status != 0) throw Error(s.argv[0] + " failed: " + r.output);
}

// A signed one-package repository (file://) holding NCCL's apt packages as
// NVIDIA names them, and the .list naming it.
fs::path nccl_repository(const fs::path& dir) {
  std::string packages;
  for (const char* v : {"2.21.5-1+cuda12.4", "2.23.4-1+cuda12.6", "2.27.3-1+cuda12.9"}) {
    fs::path src = dir / ("src-" + std::string(v));
    test::write(src / "DEBIAN/control", std::string("Package: libnccl2\nVersion: ") + v +
                                            "\nArchitecture: amd64\nMaintainer: T <t@example.invalid>\n"
                                            "Description: test package\n");
    test::write(src / "usr/lib/x86_64-linux-gnu/libnccl.so.2", v);
    fs::path deb = dir / "repo/pool" / (std::string("libnccl2_") + v + "_amd64.deb");
    fs::create_directories(deb.parent_path());
    run_tool({"dpkg-deb", "--root-owner-group", "-Zgzip", "--build", src.string(), deb.string()});
    packages += std::string("Package: libnccl2\nVersion: ") + v + "\nArchitecture: amd64\nFilename: pool/" +
                deb.filename().string() + "\nSize: " + std::to_string(fs::file_size(deb)) +
                "\nSHA256: " + Digest::of_file(deb).hex() + "\n\n";
  }
  fs::path dist = dir / "repo/dists/test";
  test::write(dist / "main/binary-amd64/Packages", packages);
  std::string rel = "Origin: Test\nSuite: test\nCodename: test\nComponents: main\nArchitectures: amd64\nSHA256:\n";
  rel += " " + Digest::of_file(dist / "main/binary-amd64/Packages").hex() + " " +
         std::to_string(fs::file_size(dist / "main/binary-amd64/Packages")) + " main/binary-amd64/Packages\n";
  test::write(dist / "Release", rel);
  fs::path gnupg = dir / "gnupg";
  fs::create_directories(gnupg);
  fs::permissions(gnupg, fs::perms::owner_all);
  run_tool({"gpg", "--batch", "--passphrase", "", "--quick-gen-key", "Repo <repo@example.invalid>", "ed25519", "sign",
            "never"},
           gnupg);
  run_tool({"gpg", "--batch", "--output", (dir / "key.gpg").string(), "--export"}, gnupg);
  run_tool({"gpg", "--batch", "--clearsign", "--output", (dist / "InRelease").string(), (dist / "Release").string()},
           gnupg);
  test::write(dir / "test.list", "deb [signed-by=" + (dir / "key.gpg").string() + "] file://" +
                                     (dir / "repo").string() + " test main\n");
  return dir / "test.list";
}

}  // namespace

TEST_CASE("sources: from: apt installs the apt package of the point's record", "[apt][sources]") {
  for (const char* t : {"gpg", "gpgv", "dpkg-deb"})
    if (!have_tool(t)) {
      WARN("SKIPPED: " << t << " is not installed");
      return;
    }
  TempDir tmp;
  fs::path list = nccl_repository(tmp.path() / "apt");
  setenv("STACKBUILD_APT_SOURCES", list.c_str(), 1);
  struct Unset {
    ~Unset() { unsetenv("STACKBUILD_APT_SOURCES"); }
  } unset;
  Planned p = plan_text(tmp.path(), "stack: t\nmatrix:\n  cuda: [\"12.6\"]\n  os: [trixie]\nlayers:\n"
                                    "  - {name: nccl, use: nccl, from: apt}\n");
  REQUIRE(p.plan.points[0].stack);
  CHECK(p.plan.points[0].stack->versions.at("nccl") == "2.23.4-1");
  Recipe r = resolve::instantiate(p.recipe, p.plan.points[0]);
  CHECK(is_apt_layer(layer(r, "nccl")));
  TempDir sd;
  Store store(sd.path());
  auto vars = resolve::point_variables(p.recipe, p.plan.points[0]);
  PointInputs in = point_inputs(p.plan.points[0], p.catalog);
  const LayerKind& apt = layer_kind_of(layer(r, "nccl"));
  REQUIRE(apt.lock_section() == std::string("apt"));
  auto lock = apt.lock(LockContext{r, vars, in, BuildServices{}}, store, null_status());
  REQUIRE(lock["nccl"]["packages"].size() == 1);
  CHECK(lock["nccl"]["packages"][0]["name"] == "libnccl2");
  CHECK(lock["nccl"]["packages"][0]["version"] == "2.23.4-1+cuda12.6");  // the record's pin, not the newest
}

TEST_CASE("sources: a wheel's cuBLAS dependency resolves to the point's CUDA minor on a fixture index",
          "[pip][sources]") {
  test::FixtureIndex index;
  test::HttpServer server{[&](const test::HttpRequest& r) { return index.respond(r); }};
  for (const char* v : {"12.4.5.8", "12.6.4.1", "12.8.4.1"})
    index.add({"nvidia-cublas-cu12", v, "py3-none-manylinux2014_x86_64", {}, {}, {}});
  index.add({"torchy", "2.0", "py3-none-any", {"nvidia-cublas-cu12"}, {}, {}});      // any cuBLAS
  index.add({"pinned", "1.0", "py3-none-any", {"nvidia-cublas-cu12==12.8.4.1"}, {}, {}});  // built for 12.8
  TempDir tmp;
  Planned p = plan_text(tmp.path(), "stack: t\nplatform: {python: \"3.12\", glibc: \"2.39\"}\nmatrix:\n"
                                    "  cuda: [\"12.4\"]\nlayers:\n  - {name: c, use: [cuda, cublas]}\n"
                                    "  - {name: w, pip: [torchy]}\n");
  REQUIRE(p.plan.points[0].stack);
  Recipe r = resolve::instantiate(p.recipe, p.plan.points[0]);
  PointInputs in = point_inputs(p.plan.points[0], p.catalog);
  Store store(tmp.path() / "store");
  pip::Target t = pip_target(r, resolve::point_variables(p.recipe, p.plan.points[0]), in);
  auto resolve_ = [&](const std::string& req, const std::vector<std::pair<std::string, std::string>>& cs) {
    std::string got;
    for (const auto& w : pip_resolve({req}, t, server.url("/simple"), false, store, null_status(), cs))
      got += w.key + "==" + w.version + " ";
    return got;
  };
  CHECK(resolve_("torchy", {}) == "nvidia-cublas-cu12==12.8.4.1 torchy==2.0 ");  // unconstrained: the newest
  CHECK(resolve_("torchy", pip_constraints(in)) == "nvidia-cublas-cu12==12.4.5.8 torchy==2.0 ");
  try {  // a wheel built for another cuBLAS than the point's: both sides named
    resolve_("pinned", pip_constraints(in));
    FAIL("a wheel contradicting the point's cuBLAS resolved");
  } catch (const Error& e) {
    CHECK_THAT(e.render(), Catch::Contains("satisfies '==12.4.*,==12.8.4.1'") &&
                               Catch::Contains("asked by pinned 1.0") &&
                               Catch::Contains("'nvidia-cublas-cu12==12.4.*' required by the point's cublas 12.4"));
  }
}

TEST_CASE("sources: {default: true, components} takes the default repositories with those components",
          "[apt][sources]") {
  TempDir tmp;
  test::write(tmp.path() / "debian.sources",
              "Types: deb\nURIs: http://127.0.0.1:9/debian\nSuites: trixie trixie-updates\nComponents: main\n");
  ::setenv("STACKBUILD_APT_SOURCES", (tmp.path() / "debian.sources").c_str(), 1);
  struct Unset {
    ~Unset() { ::unsetenv("STACKBUILD_APT_SOURCES"); }
  } unset;
  test::write(tmp.path() / "r.yaml",
              "stack: t\nlayers:\n  - {name: os, use: debian, version: trixie}\n"
              "  - name: cuda\n    apt: [nvidia-cuda-toolkit]\n"
              "    repositories: [{default: true, components: [main, contrib, non-free]}]\n"
              "  - {name: plain, apt: [git], repositories: [default]}\n");
  Recipe r = load_recipe(tmp.path() / "r.yaml");
  test::RecordingStatus status;
  apt::AptNetwork net(apt::AptConfig{}, {});
  Distro d{"debian", "trixie"};
  auto cuda = layer_repositories(r, layer(r, "cuda"), d, status, net);
  REQUIRE(cuda.size() == 2);
  for (const auto& repo : cuda) {
    CHECK(repo.uri == "http://127.0.0.1:9/debian");
    CHECK(repo.components == std::vector<std::string>{"main", "contrib", "non-free"});
  }
  CHECK(cuda[1].suite == "trixie-updates");
  auto plain = layer_repositories(r, layer(r, "plain"), d, status, net);
  REQUIRE(plain.size() == 2);
  CHECK(plain[0].components == std::vector<std::string>{"main"});
}
