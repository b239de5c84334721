#include <catch2/catch.hpp>

#include "helpers.hpp"
#include "http_server.hpp"
#include "registry/auth.hpp"
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
  CHECK_FALSE(find_credentials("reg.io", o));
  test::write(home.path() / ".docker/config.json",
              R"({"auths":{"https://reg.io/v1/":{"auth":")" + base64_encode("bob:hunter2") + R"("}}})");
  auto c = find_credentials("reg.io", o);
  REQUIRE(c);
  CHECK(c->username == "bob");
  CHECK(c->password == "hunter2");
  CHECK(c->source == "~/.docker/config.json");
  test::write(home.path() / "bin/docker-credential-fake",
              "#!/bin/sh\nread s\n[ \"$s\" = other.io ] || { echo 'credentials not found'; exit 1; }\n"
              "echo '{\"Username\":\"eve\",\"Secret\":\"s3\"}'\n",
              0755);
  test::write(home.path() / ".docker/config.json", R"({"credHelpers":{"other.io":"fake"}})");
  c = find_credentials("other.io", o);
  REQUIRE(c);
  CHECK(c->username == "eve");
  CHECK(c->source == "docker-credential-fake");
  o.env["STACKBUILD_REGISTRY_USER"] = "ci";
  o.env["STACKBUILD_REGISTRY_PASSWORD"] = "pw";
  CHECK(find_credentials("other.io", o)->username == "ci");
  o.creds = "flag:pw";
  CHECK(find_credentials("other.io", o)->username == "flag");
  o.creds = "nocolon";
  CHECK_THROWS_AS(find_credentials("other.io", o), Error);
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
  Session s(host, "push to " + host + "/app", o, null_status());
  s.add_scope("app", "pull,push");
  auto c = s.make_client();
  for (int i = 0; i < 5; ++i) CHECK(s.send(*c, {.url = s.url("/v2/app/blobs/x")}).status == 200);
  CHECK(tokens >= 3);  // the first, then one each time the registry refused the old one
  CHECK(last_scope.find("scope=repository%3Aapp%3Apull%2Cpush") != std::string::npos);
  CHECK(last_scope.find("service=reg") != std::string::npos);
  CHECK(last_auth == "Basic " + base64_encode("alice:pw"));
}
