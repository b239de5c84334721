#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <mutex>

#include "helpers.hpp"
#include "http_server.hpp"
#include "registry/auth.hpp"
#include "registry/pull.hpp"
#include "registry/reference.hpp"
#include "registry/session.hpp"

using namespace sb;
using namespace sb::registry;
using test::http_response;

TEST_CASE("registry: references name the registry - repository - tag and digest", "[registry]") {
  auto r = Reference::parse("127.0.0.1:5000/team/app:1.0");
  CHECK(r.registry == "127.0.0.1:5000");
  CHECK(r.repository == "team/app");
  CHECK(r.tag == "1.0");
  CHECK(r.selector() == "1.0");
  auto h = Reference::parse("debian");
  CHECK(h.registry == "registry-1.docker.io");
  CHECK(h.repository == "library/debian");
  CHECK(h.selector() == "latest");
  std::string d = "sha256:" + std::string(64, 'a');
  auto p = Reference::parse("localhost/x@" + d);
  CHECK(p.registry == "localhost");
  REQUIRE(p.digest);
  CHECK(p.selector() == d);
  CHECK_THROWS_AS(Reference::parse("ghcr.io/UPPER/case"), Error);
  CHECK_THROWS_AS(Reference::parse("ghcr.io/a@sha256:12"), Error);
  CHECK(is_local("127.0.0.1:5000"));
  CHECK_FALSE(is_local("ghcr.io"));
  CHECK(listed("reg.lan:5000", {"reg.lan"}));
}

TEST_CASE("registry: WWW-Authenticate challenges and error bodies", "[registry]") {
  auto c = parse_challenge(R"(Bearer realm="https://auth.io/token",service="reg",scope="repository:a:pull,push")");
  REQUIRE(c);
  CHECK(c->scheme == "bearer");
  CHECK(c->params["realm"] == "https://auth.io/token");
  CHECK(c->params["scope"] == "repository:a:pull,push");
  CHECK(parse_challenge("Basic realm=\"x\"")->scheme == "basic");
  http::Response r{.status = 403,
                   .body = R"({"errors":[{"code":"DENIED","message":"requested access to the resource is denied"}]})"};
  CHECK(describe_error(r) == "403 denied: requested access to the resource is denied");
  CHECK(describe_error(http::Response{.status = 502, .body = "<html>"}) == "502 bad gateway");
  CHECK(base64_decode(base64_encode("user:pa:ss")) == "user:pa:ss");
  CHECK(base64_encode("ab") == "YWI=");
}

TEST_CASE("registry: credentials from --creds - the environment - docker config and a helper", "[registry]") {
  TempDir home;
  CredentialOptions o;
  o.env = {{"HOME", home.path().string()}, {"PATH", (home.path() / "bin").string() + ":/usr/bin:/bin"}};
  CHECK_FALSE(find_credentials("reg.io", "", o));
  test::write(home.path() / ".docker/config.json",
              R"({"auths":{"https://reg.io/v1/":{"auth":")" + base64_encode("bob:hunter2") + R"("}}})");
  auto c = find_credentials("reg.io", "", o);
  REQUIRE(c);
  CHECK(c->username == "bob");
  CHECK(c->password == "hunter2");
  CHECK(c->source == "~/.docker/config.json");
  test::write(home.path() / "bin/docker-credential-fake",
              "#!/bin/sh\nread s\n[ \"$s\" = other.io ] || { echo 'credentials not found'; exit 1; }\n"
              "echo '{\"Username\":\"eve\",\"Secret\":\"s3\"}'\n",
              0755);
  test::write(home.path() / ".docker/config.json", R"({"credHelpers":{"other.io":"fake"}})");
  c = find_credentials("other.io", "", o);
  REQUIRE(c);
  CHECK(c->username == "eve");
  CHECK(c->source == "docker-credential-fake");
  o.env["STACKBUILD_REGISTRY_USER"] = "ci";
  o.env["STACKBUILD_REGISTRY_PASSWORD"] = "pw";
  CHECK(find_credentials("other.io", "", o)->username == "ci");
  o.creds = "flag:pw";
  CHECK(find_credentials("other.io", "", o)->username == "flag");
  o.creds = "nocolon";
  CHECK_THROWS_AS(find_credentials("other.io", "", o), Error);
}

// A fake registry with a token server: tokens are good for `good` requests,
// then the registry answers 401 again, as it does when a token expires.
TEST_CASE("registry: the bearer flow gets a token with the push scope and renews it on a 401", "[registry]") {
  int tokens = 0, served = 0;
  std::string last_scope, last_auth;
  test::HttpServer server([&](const test::HttpRequest& r) -> std::string {
    if (r.path.rfind("/token", 0) == 0) {
      ++tokens;
      last_scope = r.path;
      last_auth = r.headers.count("authorization") ? r.headers.at("authorization") : "";
      return http_response(200, R"({"token":"t)" + std::to_string(tokens) + R"(","expires_in":300})");
    }
    std::string want = "Bearer t" + std::to_string(tokens);
    bool ok = r.headers.count("authorization") && r.headers.at("authorization") == want && served < 2;
    if (!ok || r.path == "/v2/") {
      served = 0;
      return http_response(401, R"({"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]})",
                           "WWW-Authenticate: Bearer realm=\"http://127.0.0.1:" +
                               std::string(r.headers.at("host")).substr(10) + "/token\",service=\"reg\"\r\n");
    }
    ++served;
    return http_response(200, "ok");
  });
  std::string host = server.url("").substr(7);
  SessionOptions o;
  o.plain_http = true;
  o.credentials.creds = "alice:pw";
  o.retry.sleep = [](double) {};
  {  // The realm is plain http: no credentials go there unless the registry is marked insecure.
    Session s(host, "push to " + host + "/app", o, null_status());
    auto c = s.make_client();
    CHECK_THROWS_WITH(s.send(*c, {.url = s.url("/v2/app/blobs/x")}),
                      Catch::Contains("token realm http://127.0.0.1:") && Catch::Contains("--insecure-registry"));
    CHECK(tokens == 0);
  }
  o.insecure = {host};
  Session s(host, "push to " + host + "/app", o, null_status());
  s.add_scope("app", "pull,push");
  auto c = s.make_client();
  for (int i = 0; i < 5; ++i) CHECK(s.send(*c, {.url = s.url("/v2/app/blobs/x")}).status == 200);
  CHECK(tokens >= 3);  // the first, then one each time the registry refused the old one
  CHECK(last_scope.find("scope=repository%3Aapp%3Apull%2Cpush") != std::string::npos);
  CHECK(last_scope.find("service=reg") != std::string::npos);
  CHECK(last_auth == "Basic " + base64_encode("alice:pw"));
}

TEST_CASE("registry: transfers at once fit the limit on open files with their sockets and files", "[registry]") {
  // Each transfer: a socket, curl's socketpair, a blob or store file, a record and its directory.
  CHECK(kDescriptorsPerTransfer == 6);
  CHECK(connections_within(48, 6, 256) == (48 - 6 - kDescriptorReserve) / 6);
  CHECK(connections_within(48, 6, 2) == 2);      // never more than asked for
  CHECK(connections_within(24, 6, 256) == 1);    // at least one, however tight
  CHECK(connections_within(8, 20, 8) == 1);
  CHECK(connections_within(1 << 20, 10, 256) == 256);
  CHECK(connections_within(100, 10, 0) == 1);
  // The bound holds: n transfers and what is open already stay under the limit.
  for (long limit : {32L, 48L, 64L, 100L, 1024L}) {
    int n = connections_within(limit, 8, 256);
    if (n > 1) CHECK(8 + kDescriptorReserve + n * kDescriptorsPerTransfer <= limit);
  }
}

namespace {
std::string probe_base(const std::string& registry, SessionOptions o) {
  o.retry.attempts = 2;
  o.retry.sleep = [](double) {};
  Session s(registry, "pull from " + registry + "/app", o, null_status());
  return s.url("/v2/");
}
}  // namespace

TEST_CASE("registry: a local registry that does not speak TLS is reached over plain http", "[registry]") {
  auto ok = [](const test::HttpRequest&) { return http_response(200, "{}"); };
  SECTION("the https handshake gets a plain HTTP answer") {
    test::HttpServer server(ok, {.answer_tls_with_400 = true});
    std::string reg = "127.0.0.1:" + std::to_string(server.port());
    CHECK(probe_base(reg, {}) == "http://" + reg + "/v2/");
    CHECK(server.tls_hellos() == 1);
  }
  SECTION("the https handshake gets no answer in time") {
    test::HttpServer server(ok);  // waits for an HTTP request; a ClientHello is not one
    std::string reg = "127.0.0.1:" + std::to_string(server.port());
    SessionOptions o;
    o.probe_timeout_seconds = 1;
    auto start = std::chrono::steady_clock::now();
    CHECK(probe_base(reg, o) == "http://" + reg + "/v2/");
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(8));
  }
  SECTION("the https connection is refused: plain http is tried too, and both failures are told") {
    int port;
    { test::HttpServer gone(ok); port = gone.port(); }  // a port nothing listens on now
    std::string reg = "localhost:" + std::to_string(port);
    CHECK_THROWS_WITH(probe_base(reg, {}), Catch::Contains("answers neither https (") &&
                                               Catch::Contains("nor plain http (GET http://localhost:"));
  }
}

TEST_CASE("registry: other registries stay on https unless listed with --insecure-registry", "[registry]") {
  test::HttpServer server([](const test::HttpRequest&) { return http_response(200, "{}"); },
                          {.address = "127.0.0.2", .answer_tls_with_400 = true});
  std::string reg = "127.0.0.2:" + std::to_string(server.port());
  REQUIRE_FALSE(is_local(reg));
  CHECK_THROWS_WITH(probe_base(reg, {}), Catch::Contains("plain http is tried only for localhost and --insecure-registry"));
  CHECK(server.requests() == 0);  // no plain HTTP request was sent
  SessionOptions o;
  o.insecure = {"127.0.0.2"};
  CHECK(probe_base(reg, o) == "http://" + reg + "/v2/");
  CHECK(server.requests() == 1);
}

namespace {

// A registry that serves `docs` (path -> media type and bytes) on 127.0.0.1,
// and a store to pull from it into.
struct DocumentRegistry {
  std::map<std::string, std::pair<std::string, std::string>> docs;
  std::function<void(const std::string& path)> on_get = [](const std::string&) {};
  test::HttpServer server{[this](const test::HttpRequest& r) {
    if (r.path == "/v2/") return http_response(200, "{}");
    auto it = docs.find(r.path);
    if (it == docs.end()) return http_response(404, R"({"errors":[{"code":"MANIFEST_UNKNOWN"}]})");
    on_get(r.path);
    return http_response(200, r.method == "HEAD" ? "" : it->second.second,
                         "Content-Type: " + it->second.first + "\r\n");
  }};
  TempDir dir;
  Store store{dir.path() / "store"};
  FILE* devnull = fopen("/dev/null", "w");
  std::unique_ptr<Status> status = make_status(StatusMode::Plain, devnull);
  PullOptions options = [] {
    PullOptions o;
    o.session.check_policy = false;
    o.session.plain_http = true;  // no https probe (the server answers none)
    return o;
  }();
  ~DocumentRegistry() { fclose(devnull); }

  PullResult pull(const std::string& tag) {
    return pull_image(Reference::parse("127.0.0.1:" + std::to_string(server.port()) + "/r:" + tag),
                      store, options, *status);
  }
};

}  // namespace

TEST_CASE("registry: pull from an index takes the platform's image, and refuses several of the very same platform",
          "[registry]") {
  // A registry of three tiny images (a config, no layers) and the indexes below.
  DocumentRegistry reg;
  auto& docs = reg.docs;
  auto image = [&](const std::string& arch) {
    std::string config = R"({"architecture":")" + arch + R"(","os":"linux","rootfs":{"type":"layers","diff_ids":[]}})";
    Digest c = Digest::of_bytes(config);
    docs["/v2/r/blobs/" + c.str()] = {"application/octet-stream", config};
    std::string m = R"({"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":")" +
                    c.str() + R"(","size":)" + std::to_string(config.size()) + R"(},"layers":[]})";
    Digest d = Digest::of_bytes(m);
    docs["/v2/r/manifests/" + d.str()] = {"application/vnd.oci.image.manifest.v1+json", m};
    return std::make_pair(d, m.size());
  };
  auto [a, a_size] = image("amd64");
  auto [b, b_size] = image("amd64-b");
  auto [c, c_size] = image("arm64");
  auto entry = [](const Digest& d, size_t size, const std::string& platform) {
    return R"({"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":")" + d.str() +
           R"(","size":)" + std::to_string(size) + R"(,"platform":)" + platform + "}";
  };
  auto index = [&](const std::string& tag, const std::vector<std::string>& entries) {
    std::string list;
    for (const auto& e : entries) list += (list.empty() ? "" : ",") + e;
    docs["/v2/r/manifests/" + tag] = {
        "application/vnd.oci.image.index.v1+json",
        R"({"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[)" + list + "]}"};
  };
  const std::string amd64 = R"({"os":"linux","architecture":"amd64"})";
  index("matrix", {entry(a, a_size, amd64), entry(b, b_size, amd64)});
  index("twice", {entry(a, a_size, amd64), entry(a, a_size, amd64)});
  index("variants", {entry(c, c_size, R"({"os":"linux","architecture":"arm64","variant":"v8"})"),
                     entry(b, b_size, R"({"os":"linux","architecture":"arm64"})")});
  index("malformed",
        {R"({"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":5,"platform":)" +
         amd64 + "}"});

  CHECK_THROWS_WITH(reg.pull("matrix"), Catch::Contains("lists 2 images for linux/amd64") &&
                                            Catch::Contains(a.str()) && Catch::Contains(b.str()));
  CHECK(reg.pull("twice").image.manifest.digest == a);
  CHECK_THROWS_WITH(reg.pull("malformed"),
                    Catch::Contains("(/manifests/0/digest) type must be string"));
  reg.options.architecture =
      "arm64";  // both entries match; their platforms differ: the first, as always
  CHECK(reg.pull("variants").image.manifest.digest == c);
}

TEST_CASE(
    "registry: pull refuses a config whose diff_ids do not match the layers, before fetching them",
    "[registry]") {
  DocumentRegistry reg;
  std::string layer = "the bytes of one layer";
  Digest ld = Digest::of_bytes(layer);
  reg.docs["/v2/r/blobs/" + ld.str()] = {"application/octet-stream", layer};
  std::atomic<int> layer_gets{0};
  reg.on_get = [&](const std::string& path) { layer_gets += path == "/v2/r/blobs/" + ld.str(); };
  auto image = [&](const std::string& tag, const std::string& config) {
    Digest c = Digest::of_bytes(config);
    reg.docs["/v2/r/blobs/" + c.str()] = {"application/octet-stream", config};
    reg.docs["/v2/r/manifests/" + tag] = {
        "application/vnd.oci.image.manifest.v1+json",
        R"({"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":")" +
            c.str() + R"(","size":)" + std::to_string(config.size()) +
            R"(},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":")" +
            ld.str() + R"(","size":)" + std::to_string(layer.size()) + "}]}"};
    return c;
  };
  Digest none = image(
      "none", R"({"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]}})");
  image("absent", R"({"architecture":"amd64","os":"linux"})");
  image("number",
        R"({"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[5]}})");
  image(
      "short",
      R"({"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":["sha256:12"]}})");
  image("good", R"({"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[")" +
                    ld.str() + R"("]}})");

  CHECK_THROWS_WITH(reg.pull("none"),
                    Catch::Contains("config " + none.str()) &&
                        Catch::Contains("lists 0 diff_ids for 1 layers; refusing it"));
  CHECK_THROWS_WITH(reg.pull("absent"), Catch::Contains("has no rootfs.diff_ids list"));
  CHECK_THROWS_WITH(reg.pull("number"),
                    Catch::Contains("rootfs.diff_ids[0] is a number, not a string"));
  CHECK_THROWS_WITH(reg.pull("short"),
                    Catch::Contains("rootfs.diff_ids[0]: bad digest 'sha256:12'"));
  CHECK(layer_gets == 0);
  CHECK(!reg.store.has(ld));
  // A layer longer than its descriptor says is cut off at that size, not written to the end.
  reg.docs["/v2/r/blobs/" + ld.str()] = {"application/octet-stream", layer + std::string(4 << 20, 'x')};
  CHECK_THROWS_WITH(reg.pull("good"), Catch::Contains("blob " + ld.str() + ": the registry sends more than the " +
                                                      std::to_string(layer.size()) + " bytes its descriptor gives"));
  CHECK(!reg.store.has(ld));
  reg.docs["/v2/r/blobs/" + ld.str()] = {"application/octet-stream", layer};
  layer_gets = 0;
  PullResult good = reg.pull("good");
  REQUIRE(good.image.layers.size() == 1);
  CHECK(good.image.layers[0].diff_id == ld);
  CHECK(layer_gets == 1);
}

// Hostile redirects (DESIGN.md, "Trust boundary"): the registry's
// credentials go to its own origin only. Uploads and blobs sent to another
// origin work without them, and a 401 from there is no challenge to answer.
TEST_CASE("registry: credentials go only to the registry's origin, whatever its redirects say",
          "[registry][hostile]") {
  const std::string basic = "Basic " + base64_encode("alice:pw");
  std::vector<std::string> elsewhere;  // "METHOD PATH AUTHORIZATION" of each request to the other origin
  std::mutex mu;
  test::HttpServer other([&](const test::HttpRequest& r) -> std::string {
    {
      std::lock_guard lk(mu);
      auto auth = r.headers.find("authorization");
      elsewhere.push_back(r.method + " " + r.path + " " + (auth == r.headers.end() ? "-" : auth->second));
    }
    if (r.path.starts_with("/upload")) return http_response(201, "");
    if (r.path == "/blob") return http_response(200, "data");
    // Its own challenge: answering it would send the credentials to a realm it names.
    return http_response(401, R"({"errors":[{"code":"UNAUTHORIZED","message":"who are you"}]})",
                         "WWW-Authenticate: Bearer realm=\"" + other.url("/token") + "\"\r\n");
  });
  test::HttpServer reg([&](const test::HttpRequest& r) -> std::string {
    bool ok = r.headers.count("authorization") && r.headers.at("authorization") == basic;
    if (r.path == "/v2/" || !ok) return http_response(401, "{}", "WWW-Authenticate: Basic realm=\"reg\"\r\n");
    if (r.path == "/v2/app/blobs/uploads/")
      return http_response(202, "", "Location: " + other.url("/upload/1") + "\r\n");
    if (r.path == "/v2/app/blobs/x") return http_response(307, "", "Location: " + other.url("/blob") + "\r\n");
    if (r.path == "/v2/app/blobs/denied") return http_response(307, "", "Location: " + other.url("/deny") + "\r\n");
    if (r.path == "/v2/app/blobs/here") return http_response(307, "", "Location: /v2/app/blobs/x\r\n");
    return http_response(404, "{}");
  });
  std::string host = reg.url("").substr(7);
  SessionOptions o;
  o.plain_http = true;
  o.credentials.creds = "alice:pw";
  o.retry.attempts = 1;
  Session s(host, "push to " + host + "/app", o, null_status());
  auto c = s.make_client();
  auto post = s.send(*c, {.method = "POST", .url = s.url("/v2/app/blobs/uploads/")});
  REQUIRE(post.status == 202);
  CHECK(s.send(*c, {.method = "PUT", .url = s.resolve(post.header("location")) + "?digest=sha256:00", .body = "b"})
            .status == 201);
  CHECK(s.send(*c, {.url = s.url("/v2/app/blobs/x")}).body == "data");
  CHECK(s.send(*c, {.url = s.url("/v2/app/blobs/here")}).body == "data");  // a same-origin hop keeps them
  auto denied = s.send(*c, {.url = s.url("/v2/app/blobs/denied")});
  CHECK(denied.status == 401);
  CHECK_THROWS_WITH(s.fail(denied),
                    Catch::Contains("(from " + http::origin_of(other.url("/")) + ", where a redirect led"));
  std::lock_guard lk(mu);
  CHECK(elsewhere == std::vector<std::string>{"PUT /upload/1?digest=sha256:00 -", "GET /blob -", "GET /blob -",
                                              "GET /deny -"});
}
