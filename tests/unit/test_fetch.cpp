// The fetcher against a loopback HTTP server: retries, resumed transfers,
// truncated bodies and wrong digests (a clear error, nothing in the store).
#include <catch2/catch.hpp>

#include "fetch/fetcher.hpp"
#include "helpers.hpp"
#include "http_server.hpp"

using namespace sb;
using test::http_response;

namespace {

fetch::FetchOptions quick() {
  fetch::FetchOptions o;
  o.retry.attempts = 3;
  o.retry.sleep = [](double) {};
  o.jobs = 2;
  return o;
}

size_t blobs(const Store& s) {
  size_t n = 0;
  for (auto& e : fs::directory_iterator(s.root() / "blobs/sha256")) n += e.is_regular_file() ? 1 : 0;
  return n;
}

}  // namespace

TEST_CASE("fetch: files arrive in parallel checked by sha256 and come from the store the second time", "[fetch]") {
  test::HttpServer server([](const test::HttpRequest& r) { return http_response(200, "body of " + r.path); });
  TempDir dir;
  Store store(dir.path());
  auto f = fetch::make_fetcher(store, quick(), null_status());
  std::vector<fetch::FetchItem> items;
  for (const char* p : {"/a", "/b", "/c"})
    items.push_back({server.url(p), Digest::of_bytes(std::string("body of ") + p), std::nullopt, ""});
  auto got = f->fetch(items);
  CHECK(store.read(got[1].digest) == "body of /b");
  CHECK_FALSE(got[0].cached);
  int before = server.requests();
  CHECK(f->fetch(items)[2].cached);
  CHECK(server.requests() == before);
}

TEST_CASE("fetch: a sha256 mismatch is an error naming the URL and nothing enters the store", "[fetch]") {
  test::HttpServer server([](const test::HttpRequest&) { return http_response(200, "tampered"); });
  TempDir dir;
  Store store(dir.path());
  auto f = fetch::make_fetcher(store, quick(), null_status());
  Digest want = Digest::of_bytes("original");
  CHECK_THROWS_WITH(f->fetch_one({server.url("/x.deb"), want, std::nullopt, ""}),
                    Catch::Contains("sha256 mismatch for " + server.url("/x.deb")) && Catch::Contains(want.str()));
  CHECK(blobs(store) == 0);
}

TEST_CASE("fetch: a truncated download resumes with Range and completes", "[fetch]") {
  const std::string body(100000, 'x');
  std::vector<std::string> ranges;
  test::HttpServer server([&](const test::HttpRequest& r) {
    auto it = r.headers.find("range");
    if (it == r.headers.end()) {  // claims the whole body, sends half, hangs up
      ranges.push_back("");
      return "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" +
             body.substr(0, 50000);
    }
    ranges.push_back(it->second);
    size_t from = std::stoul(it->second.substr(6));
    return "HTTP/1.1 206 Partial\r\nContent-Length: " + std::to_string(body.size() - from) +
           "\r\nConnection: close\r\n\r\n" + body.substr(from);
  });
  TempDir dir;
  Store store(dir.path());
  auto f = fetch::make_fetcher(store, quick(), null_status());
  auto got = f->fetch_one({server.url("/big"), Digest::of_bytes(body), body.size(), ""});
  CHECK(store.read(got.digest) == body);
  REQUIRE(ranges.size() == 2);
  CHECK(ranges[1] == "bytes=50000-");
}

TEST_CASE("fetch: a download that stays truncated is a clear error and leaves nothing", "[fetch]") {
  test::HttpServer server([](const test::HttpRequest&) {
    return std::string("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\nConnection: close\r\n\r\nshort");
  });
  TempDir dir;
  Store store(dir.path());
  auto f = fetch::make_fetcher(store, quick(), null_status());
  fetch::FetchItem item{server.url("/t.deb"), Digest::of_bytes(std::string(1000, 'y')), 1000, ""};
  CHECK_THROWS_WITH(f->fetch_one(item), Catch::Contains(server.url("/t.deb")) && Catch::Contains("1000 bytes"));
  CHECK(blobs(store) == 0);
  // A server that closes early without a length: the size check catches it.
  test::HttpServer liar([](const test::HttpRequest&) {
    return std::string("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nshort");
  });
  item.url = liar.url("/t.deb");
  CHECK_THROWS_WITH(f->fetch_one(item), Catch::Contains("truncated download") && Catch::Contains("got 5 of 1000"));
  CHECK(blobs(store) == 0);
}

TEST_CASE("fetch: HTTP errors name the URL and status and 503 is retried", "[fetch]") {
  int calls = 0;
  test::HttpServer server([&](const test::HttpRequest& r) {
    if (r.path == "/flaky") return ++calls < 3 ? http_response(503, "busy") : http_response(200, "ok");
    return http_response(404, "no such file");
  });
  TempDir dir;
  Store store(dir.path());
  auto f = fetch::make_fetcher(store, quick(), null_status());
  CHECK(store.read(f->fetch_one({server.url("/flaky"), Digest::of_bytes("ok"), std::nullopt, ""}).digest) == "ok");
  CHECK(calls == 3);
  try {
    f->fetch_one({server.url("/gone"), Digest::of_bytes("x"), std::nullopt, ""});
    FAIL("no error");
  } catch (const fetch::FetchError& e) {
    CHECK(e.status() == 404);
    CHECK(std::string(e.what()).find("GET " + server.url("/gone") + ": HTTP 404") != std::string::npos);
  }
}

TEST_CASE("fetch: offline uses only the store", "[fetch]") {
  TempDir dir;
  Store store(dir.path());
  Digest have = store.put("cached");
  auto o = quick();
  o.offline = true;
  auto f = fetch::make_fetcher(store, o, null_status());
  CHECK(f->fetch_one({"http://127.0.0.1:9/x", have, std::nullopt, ""}).cached);
  CHECK_THROWS_WITH(f->fetch_one({"http://127.0.0.1:9/y", Digest::of_bytes("y"), std::nullopt, ""}),
                    Catch::Contains("offline: http://127.0.0.1:9/y is not in the store"));
}
