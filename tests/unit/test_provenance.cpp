// build --provenance (pipeline/provenance.hpp, image/provenance.hpp): the
// in-toto statement of a fixture point built offline (an apt layer and a
// pip layer, the fakes of offline_fixture.hpp) names its image by digest
// and every input by digest: the recipe, the lockfile, the catalog, the
// Debian package and the wheel, also when every layer comes from the
// cache; the run's SBOM as a byproduct; the dates of the clock handed in.
// And what the statement's parts say of source trees and URLs.
#include <catch2/catch.hpp>

#include <chrono>

#include <nlohmann/json.hpp>

#include "fakes.hpp"
#include "helpers.hpp"
#include "image/layout.hpp"
#include "image/provenance.hpp"
#include "offline_fixture.hpp"
#include "pipeline/lock.hpp"
#include "pipeline/provenance.hpp"
#include "pipeline/run_build.hpp"
#include "util/version.hpp"

using namespace sb;
using namespace sb::test::offline;
using json = nlohmann::json;

namespace {

const fs::path kCatalog = fs::path(SB_SOURCE_DIR) / "layers";

struct Offline {
  Served served;
  TempDir dir;
  test::RecordingFetcher fetcher{served.files};
  test::RecordingStatus status;
  Services services{[this] { return Store(dir.path() / "store"); }, [](const verify::VerifyReport&) {}};

  Offline() {
    fetcher.serve_dir(served.tmp.path() / "repo", kApt);
    test::write(dir.path() / "r.yaml", kRecipe);
    services.build.make_fetcher = fetcher.factory();
    services.build.index = std::make_shared<test::IndexTransport>(served.wheels);
    services.build.now = ticking_clock();
    services.build.date = [] { return std::chrono::system_clock::time_point(std::chrono::seconds(1700000000)); };
  }

  BuildRequest request(const std::string& out) {
    BuildRequest rq;
    rq.recipe = load_recipe(dir.path() / "r.yaml");
    rq.plan.catalog = kCatalog;
    rq.only = {"flavor=1.0"};
    rq.matrix.build.output = dir.path() / out;
    rq.provenance = true;
    return rq;
  }

  void lock() {
    Store store(dir.path() / "store");
    lock_recipe(plan_recipe(load_recipe(dir.path() / "r.yaml"), PlanOptions{kCatalog, {}}), store, {}, status,
                services.build);
  }
};

// The statement kept in `layout` beside `image`, as its bytes.
std::string layout_statement_text(const fs::path& layout, const Digest& image) {
  for (const auto& a : layout_referrers(layout, image))
    if (a.artifact_type == provenance::kMediaType) return read_file(a.file);
  FAIL("no provenance beside " + image.str());
  return "";
}
json layout_statement(const fs::path& layout, const Digest& image) {
  return json::parse(layout_statement_text(layout, image));
}

// The resolvedDependency named `name` (there must be exactly one).
json dependency(const json& statement, const std::string& name) {
  json found;
  int n = 0;
  for (const auto& d : statement["predicate"]["buildDefinition"]["resolvedDependencies"])
    if (d.value("name", "") == name) found = d, ++n;
  INFO(name);
  REQUIRE(n == 1);
  return found;
}

int count_kind(const json& statement, const std::string& kind) {
  int n = 0;
  for (const auto& d : statement["predicate"]["buildDefinition"]["resolvedDependencies"])
    if (d.contains("annotations") && d["annotations"].value("kind", "") == kind) ++n;
  return n;
}

}  // namespace

TEST_CASE("build --provenance: a point's statement names its image and every input by digest",
          "[provenance][services]") {
  if (!have_dpkg_deb()) {
    WARN("SKIPPED: dpkg-deb is not installed");
    return;
  }
  IndexSetting index;
  Offline f;
  f.lock();
  BuildRequest rq = f.request("out");
  rq.locked = true;
  rq.sbom = true;
  BuildOutcome out = run_build(rq, f.services, f.status);
  REQUIRE(out.built.points.size() == 1);
  const Image& image = out.built.points[0].built->images.at(0).image;
  REQUIRE(out.provenance.size() == 1);
  REQUIRE(out.provenance[0].size() == 1);
  const std::string text = layout_statement_text(rq.matrix.build.output, image.manifest.digest);
  CHECK(text == out.provenance[0][0].document);  // what the layout keeps is what a push sends
  json s = json::parse(text);

  // The statement and its subject: the image, by its tag and manifest digest.
  CHECK(s["_type"] == "https://in-toto.io/Statement/v1");
  CHECK(s["predicateType"] == "https://slsa.dev/provenance/v1");
  CHECK(s["subject"] == json::parse(R"([{"name": "svc:1.0", "digest": {"sha256": ")" + image.manifest.digest.hex() +
                                    R"("}}])"));
  CHECK_NOTHROW(provenance::check_statement_of(out.provenance[0][0].document, image.manifest.digest));

  // What was asked.
  const json& build = s["predicate"]["buildDefinition"];
  CHECK(build["buildType"] == provenance::kBuildType);
  const json& params = build["externalParameters"];
  CHECK(params["recipe"] == (f.dir.path() / "r.yaml").string());
  CHECK(params["point"] == "flavor=1.0");
  CHECK(params["matrix"] == json{{"flavor", "1.0"}});
  CHECK(params["only"] == json::array({"flavor=1.0"}));
  CHECK(params["locked"] == true);
  CHECK(params["sourceDateEpoch"] == 1700000000);
  CHECK(params["catalog"] == kCatalog.string());
  CHECK(build["internalParameters"]["stackbuildVersion"] == kStackbuildVersion);

  // What it was built from, each by digest.
  CHECK(dependency(s, (f.dir.path() / "r.yaml").string())["digest"]["sha256"] ==
        Digest::of_file(f.dir.path() / "r.yaml").hex());
  CHECK(dependency(s, (f.dir.path() / "r.yaml.lock").string())["digest"]["sha256"] ==
        Digest::of_file(f.dir.path() / "r.yaml.lock").hex());
  int catalog_files = 0;
  for (const auto& e : fs::directory_iterator(kCatalog)) catalog_files += e.path().extension() == ".yaml";
  CHECK(count_kind(s, "catalog") == catalog_files);
  json deb = dependency(s, "hello_1.0_amd64.deb");
  CHECK(deb["digest"]["sha256"] == Digest::of_file(f.served.tmp.path() / "repo/pool/hello_1.0_amd64.deb").hex());
  CHECK(deb["uri"] == "pkg:deb/debian/hello@1.0?arch=amd64");
  CHECK(deb["downloadLocation"] == kApt + "/pool/hello_1.0_amd64.deb");
  CHECK(deb["annotations"] == json{{"kind", "apt"}, {"layer", "os"}});
  json wheel = dependency(s, Served::wheel("1.0"));
  CHECK(wheel["digest"]["sha256"] == f.served.wheels.sha(Served::wheel("1.0")).hex());
  CHECK(wheel["uri"] == "pkg:pypi/greet@1.0");
  CHECK(wheel["annotations"] == json{{"kind", "pip"}, {"layer", "wheels"}});
  CHECK(count_kind(s, "apt") == 1);
  CHECK(count_kind(s, "pip") == 1);  // greet 1.0's point has greet 1.0 only
  for (const auto& d : build["resolvedDependencies"]) {
    INFO(d.dump());
    CHECK(d["digest"].size() >= 1);
  }

  // This run: the builder, one invocation, the dates of the clock handed in,
  // the SBOM made beside the image.
  const json& run = s["predicate"]["runDetails"];
  CHECK(run["builder"]["id"] == provenance::kLocalBuilderId);
  CHECK(run["metadata"]["startedOn"] == "2023-11-14T22:13:20Z");
  CHECK(run["metadata"]["finishedOn"] == "2023-11-14T22:13:20Z");
  CHECK(run["metadata"]["invocationId"].get<std::string>().size() == std::string("urn:uuid:").size() + 36);
  REQUIRE(run["byproducts"].size() == 1);
  CHECK(run["byproducts"][0]["digest"]["sha256"] == Digest::of_bytes(out.sboms.at(0).at(0).document).hex());
  CHECK(run["byproducts"][0]["mediaType"] == "application/spdx+json");

  // Built again, unlocked, in the same store: every layer from the cache,
  // and the packages and wheels are named all the same; no lockfile now.
  test::RecordingStatus again_status;
  BuildRequest again = f.request("again");
  BuildOutcome second = run_build(again, f.services, again_status);
  CHECK(second.built.points[0].layers_built == 0);
  json t = layout_statement(again.matrix.build.output, image.manifest.digest);
  CHECK(dependency(t, "hello_1.0_amd64.deb")["digest"] == deb["digest"]);
  CHECK(dependency(t, Served::wheel("1.0"))["digest"] == wheel["digest"]);
  CHECK(count_kind(t, "lockfile") == 0);
  CHECK(t["predicate"]["buildDefinition"]["externalParameters"]["locked"] == false);
  CHECK(t["predicate"]["runDetails"]["metadata"]["invocationId"] != run["metadata"]["invocationId"]);
}

TEST_CASE("a statement is checked against the image it is shown for", "[provenance]") {
  provenance::Provenance p{{"x:1"}, Digest::of_bytes("image"), {}, {}, {}, {}};
  const std::string text = provenance::statement_json(p);
  CHECK_NOTHROW(provenance::check_statement_of(text, Digest::of_bytes("image")));
  CHECK_THROWS_WITH(provenance::check_statement_of(text, Digest::of_bytes("another")),
                    Catch::Contains("not of sha256:") && Catch::Contains("x:1@" + Digest::of_bytes("image").str()));
  json tampered = json::parse(text);
  tampered["predicateType"] = "https://slsa.dev/provenance/v0.2";
  CHECK_THROWS_WITH(provenance::check_statement_of(tampered.dump(), Digest::of_bytes("image")),
                    Catch::Contains("predicateType"));
  CHECK_THROWS_WITH(provenance::check_statement_of("{\"_type\": \"x\"}", Digest::of_bytes("image")),
                    Catch::Contains("not an in-toto statement"));
}

TEST_CASE("provenance: source trees, patches and URLs as the statement names them", "[provenance]") {
  const std::string commit(40, 'a');
  auto git = source_inputs("fw", json{{"component", "pytorch"}, {"version", "2.7.0"}, {"git", "https://u:pw@git.invalid/pt"},
                                      {"ref", "v2.7.0"}, {"commit", commit},
                                      {"patches", {{{"path", "fix.patch"}, {"sha256", std::string(64, 'b')}}}},
                                      {"built", true}}
                                     .dump());
  REQUIRE(git.size() == 2);
  CHECK(json(git[0]) == json{{"name", "pytorch 2.7.0"},
                             {"uri", "git+https://git.invalid/pt@v2.7.0"},
                             {"digest", {{"gitCommit", commit}}},
                             {"annotations", {{"kind", "source"}, {"layer", "fw"}}}});
  CHECK(json(git[1]) == json{{"name", "fix.patch"},
                             {"digest", {{"sha256", std::string(64, 'b')}}},
                             {"annotations", {{"kind", "patch"}, {"layer", "fw"}}}});
  auto archive = source_inputs("fw", R"({"archive": "https://x.invalid/a.tar.gz", "sha256": ")" +
                                         std::string(64, 'c') + R"(", "built": true})");
  REQUIRE(archive.size() == 1);
  CHECK(archive[0].uri == "https://x.invalid/a.tar.gz");
  CHECK(archive[0].digest == std::map<std::string, std::string>{{"sha256", std::string(64, 'c')}});
  auto local = source_inputs("mine", R"({"local": "sha256:)" + std::string(64, 'd') + R"(", "built": true})");
  REQUIRE(local.size() == 1);
  CHECK(local[0].uri.empty());  // never the host's path
  CHECK(local[0].digest == std::map<std::string, std::string>{{"stackbuildTree", std::string(64, 'd')}});
  CHECK(source_inputs("x", "not json").empty());
  CHECK(source_inputs("x", R"({"recipe's own label": 1})").empty());

  CHECK(provenance::without_login("https://user:s3cret@deb.invalid/debian/pool/a.deb") ==
        "https://deb.invalid/debian/pool/a.deb");
  CHECK(provenance::without_login("https://files.invalid/a.whl#sha256=00") == "https://files.invalid/a.whl");
  CHECK(provenance::without_login("https://files.invalid/a@b.whl") == "https://files.invalid/a@b.whl");
}
