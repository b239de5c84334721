// The build driver (pipeline/run_build.hpp): the steps run in the pipeline's
// order, each reported once; a request the points refuse fails before the
// store is opened; a failed point still gets its summary before the error;
// --verify runs the gate and shows each report; pushes and caches go through
// the registry transport it is handed (a fake registry in memory).
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>

#include <nlohmann/json.hpp>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include "fakes.hpp"
#include "helpers.hpp"
#include "pipeline/lock.hpp"
#include "pipeline/registry_cache.hpp"
#include "pipeline/run_build.hpp"
#include "registry/pull.hpp"
#include "registry/sign.hpp"

using namespace sb;

namespace {

const fs::path kSource = SB_SOURCE_DIR;

const std::string& kRecipe = test::kFlavorMatrix;

// The steps a run reported, in order.
std::vector<std::string> steps(const test::RecordingStatus& rec) {
  std::vector<std::string> out;
  for (const auto& f : rec.events("step")) out.push_back(f.at("step").get<std::string>());
  return out;
}

// The keys of its results, in order.
std::vector<std::string> result_keys(const test::RecordingStatus& rec) {
  std::vector<std::string> out;
  for (const auto& r : rec.results()) out.push_back(r.substr(0, r.find('=')));
  return out;
}

struct Fixture {
  TempDir tmp;
  int stores_opened = 0;
  std::vector<std::string> shown;  // the reports the gate showed, by image
  Services services{[this] {
                      ++stores_opened;
                      return Store(tmp.path() / "store");
                    },
                    [this](const verify::VerifyReport& r) { shown.push_back(r.image); }};

  BuildRequest request(const std::string& yaml = kRecipe) {
    test::write_flavor_matrix(tmp.path(), yaml);
    BuildRequest rq;
    rq.recipe = load_recipe(tmp.path() / "r.yaml");
    rq.plan.catalog = kSource / "layers";
    rq.matrix.build.output = tmp.path() / "out";
    return rq;
  }
};

}  // namespace

TEST_CASE("run_build runs the steps in the pipeline's order, each once", "[driver]") {
  Fixture f;
  test::RecordingStatus rec;
  // A clock that moves 1 s each time it is read: the steps are timed by it.
  auto ticks = std::make_shared<int64_t>(0);
  f.services.build.now = [ticks] { return std::chrono::steady_clock::time_point(std::chrono::seconds(++*ticks)); };
  BuildOutcome out = run_build(f.request(), f.services, rec);
  CHECK(steps(rec) == std::vector<std::string>{"plan", "select", "build", "write", "verify", "reports", "summary",
                                               "cache", "results", "sbom", "provenance", "push", "record"});
  for (const auto& e : rec.events("step")) {
    const double s = e.at("seconds").get<double>();
    CHECK((s >= 1 && s == std::floor(s)));  // whole ticks of the clock Services handed in
  }
  CHECK(out.built.points.at(0).seconds >= 1);  // and so are the points, which it reached
  REQUIRE(out.built.points.size() == 2);
  CHECK_FALSE(out.built.failure);
  REQUIRE(out.built.index);
  CHECK(out.built.index->ref == "mx-matrix");  // more than one point: the index, under its default ref
  CHECK(fs::exists(f.tmp.path() / "out" / "index.json"));
  CHECK(f.stores_opened == 1);
  CHECK(f.shown.empty());  // no push, no --verify: no gate
  CHECK(rec.events("summary").size() == 1);
  auto keys = result_keys(rec);
  CHECK(std::find(keys.begin(), keys.end(), "mx:a") != keys.end());
  CHECK(keys.back() == "output");
}

TEST_CASE("run_build refuses what the points cannot take before it opens the store", "[driver]") {
  Fixture f;
  test::RecordingStatus rec;
  SECTION("--tag with several points") {
    BuildRequest rq = f.request();
    rq.matrix.build.tags = {"one:1"};
    CHECK_THROWS_WITH(run_build(rq, f.services, rec), Catch::Contains("--tag names one image"));
  }
  SECTION("--sbom into a docker archive") {
    BuildRequest rq = f.request();
    rq.sbom = true;
    rq.matrix.build.format = OutputFormat::DockerArchive;
    CHECK_THROWS_WITH(run_build(rq, f.services, rec), Catch::Contains("--sbom goes into an OCI layout"));
  }
  SECTION("--provenance into a docker archive") {
    BuildRequest rq = f.request();
    rq.provenance = true;
    rq.matrix.build.format = OutputFormat::DockerArchive;
    CHECK_THROWS_WITH(run_build(rq, f.services, rec), Catch::Contains("--provenance goes into an OCI layout"));
  }
  SECTION("--only a value no point has") {
    BuildRequest rq = f.request();
    rq.only = {"flavor=z"};
    CHECK_THROWS_WITH(run_build(rq, f.services, rec), Catch::Contains("flavor is one of: a, b"));
  }
  CHECK(f.stores_opened == 0);
  CHECK_FALSE(fs::exists(f.tmp.path() / "out"));
}

TEST_CASE("run_build gives the summary of a failed point, then its error, and writes nothing", "[driver]") {
  Fixture f;
  test::RecordingStatus rec;
  BuildRequest rq = f.request();
  fs::remove(f.tmp.path() / "b.txt");  // point flavor=b cannot copy its file
  try {
    run_build(rq, f.services, rec);
    FAIL("the build did not fail");
  } catch (const Error& e) {
    CHECK_THAT(e.render(), Catch::Contains("matrix point flavor=b"));
  }
  CHECK(steps(rec) == std::vector<std::string>{"plan", "select", "build", "write", "verify", "reports", "summary"});
  CHECK(rec.events("summary").size() == 1);
  CHECK_FALSE(fs::exists(f.tmp.path() / "out"));
}

TEST_CASE("run_build pushes through the registry transport Services hand in, and the images pull back",
          "[driver][services]") {
  Fixture f;
  test::RecordingStatus rec;
  auto registry = std::make_shared<test::FakeRegistry>();
  registry->require_basic("ci", "s3cret");
  f.services.build.registry = registry;
  BuildRequest rq = f.request();
  rq.push_to = {"fake.test/mx"};
  rq.gate.skip = true;  // --no-verify: the gate is not what this tests
  rq.registry.session.credentials.creds = "ci:s3cret";
  BuildOutcome out = run_build(rq, f.services, rec);

  // Every image under its ref name, and the matrix index under its own.
  REQUIRE(out.built.points.size() == 2);
  for (const auto& p : out.built.points)
    for (const auto& img : p.built->images) {
      std::string tag = img.tag.substr(img.tag.find(':') + 1);
      CHECK(registry->tag_digest("mx", tag) == img.image.manifest.digest.str());
    }
  REQUIRE(out.built.index);
  CHECK(registry->tag_digest("mx", "mx-matrix") == out.built.index->digest.str());
  CHECK(registry->count("POST /v2/mx/blobs/uploads/") > 0);

  // A pull into an empty store, through the same transport, gives the same image.
  Store other(f.tmp.path() / "other");
  registry::PullOptions po;
  po.session.transport = registry;
  po.session.check_policy = false;
  po.session.credentials.creds = "ci:s3cret";
  auto pulled = registry::pull_image(registry::Reference::parse("fake.test/mx:a"), other, po, rec);
  const auto& a = out.built.points.at(0).built->images.at(0).image;
  CHECK(pulled.image.manifest.digest == a.manifest.digest);
  for (const auto& l : a.layers) CHECK(other.has(l.digest));

  // Without the credentials the registry answers 401, and the push says so.
  Fixture g;
  g.services.build.registry = registry;
  BuildRequest anonymous = g.request();
  anonymous.push_to = {"fake.test/mx"};
  anonymous.gate.skip = true;
  CHECK_THROWS_WITH(run_build(anonymous, g.services, rec), Catch::Contains("401"));
}

TEST_CASE("run_build exports a registry cache through the transport, and a fresh store builds from it",
          "[driver][services]") {
  auto registry = std::make_shared<test::FakeRegistry>();
  const auto cache = registry::Reference::parse("fake.test/cache:mx");
  Fixture first;
  test::RecordingStatus rec;
  first.services.build.registry = registry;
  BuildRequest rq = first.request();
  rq.cache_to = {cache};
  BuildOutcome built = run_build(rq, first.services, rec);
  REQUIRE(registry->tag_digest("cache", "mx"));

  Fixture second;  // an empty store: each layer comes from the cache, none is built
  second.services.build.registry = registry;
  BuildRequest again = second.request();
  again.cache_from = {cache};
  rec.clear();
  BuildOutcome out = run_build(again, second.services, rec);
  REQUIRE(out.built.points.size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    CHECK(out.built.points[i].built->images.at(0).image.manifest.digest ==
          built.built.points[i].built->images.at(0).image.manifest.digest);
    for (const auto& l : out.built.points[i].built->layers) CHECK(l.cached);
  }
  CHECK(registry->count("GET /v2/cache/blobs/") > 0);
}

TEST_CASE("writers of one cache whose index loses a point still leave it under its own tag",
          "[driver][services][cache]") {
  auto registry = std::make_shared<test::FakeRegistry>();
  const auto cache = registry::Reference::parse("fake.test/cache:mx");
  test::RecordingStatus rec;
  // Point a, then point b, each from an empty store of its own; then the index as a
  // concurrent writer of a alone leaves it (read before b's write, put after it).
  std::vector<Digest> images;
  std::string index_a;
  for (const char* point : {"flavor=a", "flavor=b"}) {
    Fixture f;
    f.services.build.registry = registry;
    BuildRequest rq = f.request();
    rq.only = {point};
    rq.cache_to = {cache};
    rq.gate.skip = true;
    BuildOutcome out = run_build(rq, f.services, rec);
    images.push_back(out.built.points.at(0).built->images.at(0).image.manifest.digest);
    if (index_a.empty()) index_a = registry->manifest("cache", "mx").value();
  }
  for (const char* point : {"flavor=a", "flavor=b"})
    CHECK(registry->tag_digest("cache", point_tag("mx", "mx", point)));
  http::Request put{
      .method = "PUT", .url = "https://fake.test/v2/cache/manifests/mx", .body = index_a};
  put.headers.push_back(std::string("Content-Type: ") + kMediaTypeIndex);
  REQUIRE(registry->perform(put).status == 201);

  auto fresh = [&](BuildOutcome& out) {
    Fixture f;
    f.services.build.registry = registry;
    BuildRequest rq = f.request();
    rq.cache_from = {cache};
    rq.gate.skip = true;
    rec.clear();
    out = run_build(rq, f.services, rec);
    REQUIRE(out.built.points.size() == 2);
    for (size_t i = 0; i < 2; ++i)
      CHECK(out.built.points[i].built->images.at(0).image.manifest.digest == images[i]);
  };
  auto said = [&](const std::string& text) {
    for (const auto& m : rec.messages())
      if (m.find(text) != std::string::npos) return true;
    return false;
  };
  SECTION("a reader that lists tags takes every layer of both points from the cache") {
    BuildOutcome out;
    fresh(out);
    for (const auto& p : out.built.points)
      for (const auto& l : p.built->layers) CHECK(l.cached);
    CHECK(said("3 layers of 2 points (2 from their own tags)"));
  }
  SECTION("a registry that refuses tags/list: the index alone, point b built again, no warning") {
    registry->refuse_tag_list(404);
    BuildOutcome out;
    fresh(out);
    for (const auto& l : out.built.points[0].built->layers) CHECK(l.cached);
    CHECK_FALSE(out.built.points[1].built->layers.back().cached);
    CHECK(said("2 layers of 1 point (0 from their own tags)"));
    CHECK_FALSE(said("reading only the index"));
    CHECK_FALSE(said("left out"));
  }
}

TEST_CASE("lock and build --locked take a base image through the registry transport", "[driver][services]") {
  auto registry = std::make_shared<test::FakeRegistry>();
  Fixture pushed;  // the base: point a of the flavor matrix, pushed to the fake
  test::RecordingStatus rec;
  pushed.services.build.registry = registry;
  BuildRequest rq = pushed.request();
  rq.only = {"flavor=a"};
  rq.push_to = {"fake.test/base"};
  rq.gate.skip = true;
  BuildOutcome base = run_build(rq, pushed.services, rec);
  const Digest base_digest = base.built.points.at(0).built->images.at(0).image.manifest.digest;

  Fixture f;
  f.services.build.registry = registry;
  test::write(f.tmp.path() / "app.txt", "the app\n");
  test::write(f.tmp.path() / "app.yaml",
              "stack: app\nsource_date_epoch: 1700000000\nfrom: fake.test/base:a\n"
              "layers:\n  - {name: app, copy: [{src: app.txt, dst: /app.txt}]}\ntags: [\"app:1\"]\n");
  Planned planned = plan_recipe(load_recipe(f.tmp.path() / "app.yaml"), PlanOptions{kSource / "layers", {}});
  Store store(f.tmp.path() / "store");
  fs::path lock = lock_recipe(planned, store, {}, rec, f.services.build).path;
  auto pinned = nlohmann::json::parse(read_file(lock));
  CHECK(pinned.dump().find(base_digest.str()) != std::string::npos);

  BuildRequest app;
  app.recipe = load_recipe(f.tmp.path() / "app.yaml");
  app.plan.catalog = kSource / "layers";
  app.locked = true;
  app.matrix.build.output = f.tmp.path() / "out";
  app.matrix.build.base.session.check_policy = false;
  BuildOutcome out = run_build(app, f.services, rec);
  const auto& image = out.built.points.at(0).built->images.at(0).image;
  const auto& below = base.built.points.at(0).built->images.at(0).image;
  REQUIRE(image.layers.size() == below.layers.size() + 1);  // the base's layers, then the app's
  for (size_t i = 0; i < below.layers.size(); ++i) CHECK(image.layers[i].digest == below.layers[i].digest);
  CHECK(registry->count("GET /v2/base/manifests/" + base_digest.str()) > 0);  // --locked: by the pinned digest
}

namespace {

// A new key pair in `dir`: NAME.pem (private, EC P-256) and NAME.pub.
void make_key(const fs::path& dir, const std::string& name) {
  EVP_PKEY* k = EVP_EC_gen("P-256");
  REQUIRE(k);
  FILE* priv = fopen((dir / (name + ".pem")).c_str(), "w");
  FILE* pub = fopen((dir / (name + ".pub")).c_str(), "w");
  REQUIRE((priv && pub));
  CHECK(PEM_write_PrivateKey(priv, k, nullptr, nullptr, 0, nullptr, nullptr) == 1);
  CHECK(PEM_write_PUBKEY(pub, k) == 1);
  fclose(priv);
  fclose(pub);
  EVP_PKEY_free(k);
}

}  // namespace

TEST_CASE("sign and verify images in the registry (sigstore format), offline", "[sign][services]") {
  Fixture f;
  test::RecordingStatus rec;
  auto fake = std::make_shared<test::FakeRegistry>();
  f.services.build.registry = fake;
  BuildRequest rq = f.request();
  rq.push_to = {"fake.test/mx"};
  rq.gate.skip = true;
  BuildOutcome out = run_build(rq, f.services, rec);
  make_key(f.tmp.path(), "a");
  make_key(f.tmp.path(), "b");
  registry::PushOptions po;
  po.session.transport = fake;
  const fs::path a = f.tmp.path() / "a.pem", a_pub = f.tmp.path() / "a.pub";
  const fs::path b = f.tmp.path() / "b.pem", b_pub = f.tmp.path() / "b.pub";

  auto signed_a = registry::sign_image(registry::Reference::parse("fake.test/mx:a"), a, po, rec);
  const Digest image_a = out.built.points.at(0).built->images.at(0).image.manifest.digest;
  CHECK(signed_a.manifest == image_a);
  CHECK(signed_a.identity == "fake.test/mx:a");
  CHECK(signed_a.tag == "sha256-" + image_a.hex() + ".sig");
  REQUIRE(fake->tag_digest("mx", signed_a.tag));

  auto ok = registry::verify_image(registry::Reference::parse("fake.test/mx:a"), a_pub, po.session, rec);
  CHECK(ok.identity == "fake.test/mx:a");
  CHECK(ok.signatures == 1);
  // By digest too: the signature names the repository.
  CHECK_NOTHROW(registry::verify_image(registry::Reference::parse("fake.test/mx@" + image_a.str()), a_pub, po.session, rec));
  // Another key: refused, saying why.
  CHECK_THROWS_WITH(registry::verify_image(registry::Reference::parse("fake.test/mx:a"), b_pub, po.session, rec),
                    Catch::Contains("no signature of " + image_a.str() + " verifies") && Catch::Contains("not signed by"));
  // An image nobody signed.
  CHECK_THROWS_WITH(registry::verify_image(registry::Reference::parse("fake.test/mx:b"), a_pub, po.session, rec),
                    Catch::Contains("has no signature"));
  // A second signature joins the first; each key verifies its own.
  registry::sign_image(registry::Reference::parse("fake.test/mx:a"), b, po, rec);
  CHECK(registry::verify_image(registry::Reference::parse("fake.test/mx:a"), b_pub, po.session, rec).signatures == 2);
  CHECK_NOTHROW(registry::verify_image(registry::Reference::parse("fake.test/mx:a"), a_pub, po.session, rec));
  // The payload of one image is no signature of another, nor of another repository.
  const std::string payload = registry::sigstore_payload("fake.test/mx:a", image_a);
  const std::string sig = registry::sign_payload(payload, a);
  CHECK(registry::payload_verifies(payload, sig, a_pub));
  CHECK_FALSE(registry::payload_verifies(payload + " ", sig, a_pub));
  CHECK_FALSE(registry::payload_verifies(payload, sig, b_pub));
  // The matrix index signs and verifies as an image does.
  registry::sign_image(registry::Reference::parse("fake.test/mx:mx-matrix"), a, po, rec);
  CHECK(registry::verify_image(registry::Reference::parse("fake.test/mx:mx-matrix"), a_pub, po.session, rec).manifest ==
        out.built.index->digest);
  // A file that is no key is said as such.
  test::write(f.tmp.path() / "junk.pem", "not a key\n");
  CHECK_THROWS_WITH(registry::sign_image(registry::Reference::parse("fake.test/mx:a"), f.tmp.path() / "junk.pem", po, rec),
                    Catch::Contains("not a PEM private key"));
}

TEST_CASE("build --push --sign: every image and the index pushed is signed", "[sign][driver][services]") {
  Fixture f;
  test::RecordingStatus rec;
  auto fake = std::make_shared<test::FakeRegistry>();
  f.services.build.registry = fake;
  make_key(f.tmp.path(), "k");
  BuildRequest rq = f.request();
  rq.push_to = {"fake.test/mx"};
  rq.gate.skip = true;
  rq.sign_key = f.tmp.path() / "k.pem";
  BuildOutcome out = run_build(rq, f.services, rec);
  registry::SessionOptions so;
  so.transport = fake;
  for (const char* ref : {"fake.test/mx:a", "fake.test/mx:b", "fake.test/mx:mx-matrix"})
    CHECK_NOTHROW(registry::verify_image(registry::Reference::parse(ref), f.tmp.path() / "k.pub", so, rec));
  auto results = result_keys(rec);
  CHECK(std::count_if(results.begin(), results.end(), [](const std::string& k) { return k.starts_with("signed "); }) == 3);
}

TEST_CASE("build --push --provenance --sign: each image's statement is attached to it, and signed",
          "[provenance][sign][driver][services]") {
  Fixture f;
  test::RecordingStatus rec;
  auto fake = std::make_shared<test::FakeRegistry>();
  f.services.build.registry = fake;
  make_key(f.tmp.path(), "k");
  BuildRequest rq = f.request();
  rq.push_to = {"fake.test/mx"};
  rq.gate.skip = true;
  rq.provenance = true;
  rq.builder_id = "https://ci.invalid/runners/7";
  rq.sign_key = f.tmp.path() / "k.pem";
  BuildOutcome out = run_build(rq, f.services, rec);
  REQUIRE(out.provenance.size() == 2);
  registry::SessionOptions so;
  so.transport = fake;
  Store store(f.tmp.path() / "store");
  for (size_t i = 0; i < 2; ++i) {
    const ProvenanceOf& p = out.provenance[i].at(0);
    const std::string ref = std::string("fake.test/mx:") + (i == 0 ? "a" : "b");
    auto listing = registry::list_images(registry::Reference::parse(ref), store, so, rec, {provenance::kMediaType});
    REQUIRE(listing.images.size() == 1);
    CHECK(listing.images[0].manifest.digest == p.image.digest);
    REQUIRE(listing.images[0].artifacts.size() == 1);
    const auto& a = listing.images[0].artifacts[0];
    CHECK(a.file == p.document);  // the statement the layout keeps
    CHECK(a.annotations.at("in-toto.io/predicate-type") == "https://slsa.dev/provenance/v1");
    CHECK(nlohmann::json::parse(a.file)["predicate"]["runDetails"]["builder"]["id"] == "https://ci.invalid/runners/7");
    CHECK_NOTHROW(provenance::check_statement_of(a.file, p.image.digest));
    // The artifact is signed as an image is: by its digest, with the run's key.
    auto v = registry::verify_image(registry::Reference::parse("fake.test/mx@" + a.manifest.str()), f.tmp.path() / "k.pub",
                                    so, rec);
    CHECK(v.manifest == a.manifest);
  }
  auto results = result_keys(rec);
  CHECK(std::count_if(results.begin(), results.end(),
                      [](const std::string& k) { return k.starts_with("signed provenance of "); }) == 2);
}
