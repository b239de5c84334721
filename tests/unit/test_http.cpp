#include <csignal>

#include <catch2/catch.hpp>

#include "helpers.hpp"
#include "http_server.hpp"
#include "util/http.hpp"

using namespace sb;
using test::http_response;

TEST_CASE("http: GET collects the body and lower-cases header names", "[http]") {
  test::HttpServer server([](const test::HttpRequest& r) {
    return http_response(200, "hello " + r.path, "Docker-Content-Digest: sha256:abc\r\n");
  });
  http::Client client;
  auto resp = client.perform({.url = server.url("/v2/")});
  CHECK(resp.status == 200);
  CHECK(resp.body == "hello /v2/");
  CHECK(resp.header("docker-content-digest") == "sha256:abc");
}

TEST_CASE("http: only a 2xx body streams - an error body is kept for the message", "[http]") {
  test::HttpServer server([](const test::HttpRequest& r) {
    return r.path == "/ok" ? http_response(200, "data") : http_response(404, "{\"errors\":[]}");
  });
  http::Client client;
  std::string streamed;
  http::Request req{.url = server.url("/ok")};
  req.on_data = [&](const char* d, size_t n) { streamed.append(d, n); };
  CHECK(client.perform(req).body.empty());
  CHECK(streamed == "data");
  streamed.clear();
  req.url = server.url("/missing");
  auto resp = client.perform(req);
  CHECK(resp.status == 404);
  CHECK(streamed.empty());
  CHECK(resp.body == "{\"errors\":[]}");
}

TEST_CASE("http: a body from a file range goes up exactly", "[http]") {
  std::string got;
  test::HttpServer server([&](const test::HttpRequest& r) {
    got = r.method + " " + r.body;
    return http_response(201, "");
  });
  TempDir dir;
  test::write(dir.path() / "blob", "0123456789");
  http::Client client;
  http::Request req{.method = "PATCH", .url = server.url("/upload")};
  req.body_file = dir.path() / "blob";
  req.body_offset = 3;
  req.body_length = 4;
  CHECK(client.perform(req).status == 201);
  CHECK(got == "PATCH 3456");
}

TEST_CASE("http: retries transient statuses with backoff and honours Retry-After", "[http]") {
  int n = 0;
  test::HttpServer server([&](const test::HttpRequest&) {
    ++n;
    if (n == 1) return http_response(503, "busy");
    if (n == 2) return http_response(429, "slow down", "Retry-After: 7\r\n");
    return http_response(200, "done");
  });
  http::Client client;
  std::vector<double> slept;
  std::vector<std::string> why;
  http::RetryPolicy policy;
  policy.sleep = [&](double s) { slept.push_back(s); };
  auto resp = http::with_retries(policy, [&] { return client.perform({.url = server.url()}); },
                                 [&](const std::string& w) { why.push_back(w); });
  CHECK(resp.status == 200);
  CHECK(resp.body == "done");
  REQUIRE(slept.size() == 2);
  CHECK(slept[0] >= policy.base_seconds / 2);
  CHECK(slept[0] <= policy.base_seconds);
  CHECK(slept[1] == 7);
  CHECK_THAT(why[1], Catch::StartsWith("HTTP 429"));

  policy.attempts = 2;
  n = 0;
  CHECK(http::with_retries(policy, [&] { return client.perform({.url = server.url()}); }).status == 429);
}

TEST_CASE("http: transport failures are HttpErrors that say whether to retry", "[http]") {
  int port;
  {
    test::HttpServer gone([](const test::HttpRequest&) { return std::string(); });
    port = std::stoi(gone.url().substr(gone.url().rfind(':') + 1));
  }
  http::Client client;
  http::RetryPolicy policy;
  int sleeps = 0;
  policy.sleep = [&](double) { ++sleeps; };
  std::string url = "http://127.0.0.1:" + std::to_string(port) + "/";
  try {
    http::with_retries(policy, [&] { return client.perform({.url = url}); });
    FAIL("no error");
  } catch (const http::HttpError& e) {
    CHECK(e.transient());
    CHECK_THAT(std::string(e.what()), Catch::Contains(url));
  }
  CHECK(sleeps == policy.attempts - 1);
  try {
    client.perform({.url = "ftp://127.0.0.1/x"});
    FAIL("no error");
  } catch (const http::HttpError& e) {
    CHECK_FALSE(e.transient());
  }
  test::HttpServer drop([](const test::HttpRequest&) { return std::string(); });
  CHECK_THROWS_AS(client.perform({.url = drop.url()}), http::HttpError);
}

// A hostile server's endless body (DESIGN.md, "Trust boundary"): a capped
// request stops at the cap, whether the length is announced or not, and the
// error names the cap and its setting.
TEST_CASE("http: a body past max_body is refused at the cap, announced or streamed", "[http][hostile]") {
  auto old = ::signal(SIGPIPE, SIG_IGN);  // the server writes on after the client hangs up
  const std::string big(8 << 20, 'a');
  test::HttpServer server([&](const test::HttpRequest& r) {
    if (r.path == "/small") return http_response(200, std::string(1 << 20, 'b'));
    if (r.path == "/announced") return http_response(200, big);
    return "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n" + big;  // no length
  });
  http::Client client;
  const SizeLimit cap{1 << 20, "STACKBUILD_TEST_MAX"};
  CHECK(client.perform({.url = server.url("/small"), .max_body = cap}).body.size() == 1 << 20);
  for (const char* path : {"/announced", "/streamed"}) {
    INFO(path);
    uint64_t streamed = 0;
    http::Request req{.url = server.url(path), .max_body = cap};
    if (std::string(path) == "/streamed") req.on_data = [&](const char*, size_t n) { streamed += n; };
    CHECK_THROWS_WITH(client.perform(req),
                      Catch::Contains(std::string("GET ") + server.url(path) +
                                      ": the answer is larger than the 1.0 MiB cap (STACKBUILD_TEST_MAX raises it)"));
    CHECK(streamed <= cap.bytes);
  }
  ::signal(SIGPIPE, old);
}

// A Route's login (apt's auth.conf, a pip index's user) goes to the URL's
// host only: libcurl follows the redirect without it to another port or host
// (CURLOPT_UNRESTRICTED_AUTH is never set; libcurl since 7.83 compares ports
// and schemes too).
TEST_CASE("http: a route's login is not sent on a redirect to another origin", "[http][hostile]") {
  std::string seen_other = "none";
  test::HttpServer other([&](const test::HttpRequest& r) {
    seen_other = r.headers.count("authorization") ? r.headers.at("authorization") : "-";
    return http_response(200, "moved here");
  });
  std::string seen_first;
  test::HttpServer first([&](const test::HttpRequest& r) {
    seen_first = r.headers.count("authorization") ? r.headers.at("authorization") : "-";
    return http_response(302, "", "Location: " + other.url("/elsewhere") + "\r\n");
  });
  http::ClientOptions o;
  o.route = [](const std::string&) {
    http::Route r;
    r.username = "alice";
    r.password = "SENTINEL-PASSWORD-8472";
    return r;
  };
  http::Client client(o);
  auto resp = client.perform({.url = first.url("/file")});
  CHECK(resp.body == "moved here");
  CHECK(seen_first.starts_with("Basic "));
  CHECK(seen_other == "-");
}
