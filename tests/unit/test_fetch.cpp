// The fetcher against a loopback HTTP server: retries, resumed transfers,
// truncated bodies and wrong digests (a clear error, nothing in the store).
#include <catch2/catch.hpp>

#include <atomic>
#include <map>
#include <mutex>

#include "fetch/fetcher.hpp"
#include "fakes.hpp"
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

namespace {

// Sets environment variables for the life of the object, then puts back what was there.
struct ScopedEnv {
  std::map<std::string, std::optional<std::string>> saved;
  explicit ScopedEnv(const std::map<std::string, std::string>& vars) {
    for (const char* k : {"http_proxy", "HTTP_PROXY", "https_proxy", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY"}) {
      const char* v = getenv(k);
      saved[k] = v ? std::optional<std::string>(v) : std::nullopt;
      unsetenv(k);
    }
    for (const auto& [k, v] : vars) setenv(k.c_str(), v.c_str(), 1);
  }
  ~ScopedEnv() {
    for (const auto& [k, v] : saved)
      if (v) setenv(k.c_str(), v->c_str(), 1);
      else unsetenv(k.c_str());
  }
};

}  // namespace

TEST_CASE("fetch: progress goes through the status interface from begin to end", "[fetch]") {
  std::atomic<int> flaky{0};
  test::HttpServer server([&](const test::HttpRequest& r) {
    if (r.path == "/b" && flaky++ == 0) return http_response(503, "busy");
    return http_response(200, std::string(r.path == "/a" ? 3000 : 5000, 'd'));
  });
  TempDir dir;
  Store store(dir.path());
  test::RecordingStatus st;
  auto f = fetch::make_fetcher(store, quick(), st);
  std::vector<fetch::FetchItem> items = {
      {server.url("/a"), Digest::of_bytes(std::string(3000, 'd')), 3000, ""},
      {server.url("/b"), Digest::of_bytes(std::string(5000, 'd')), 5000, "b.deb"}};
  f->fetch(items);
  auto log = st.lines();  // with no "bad progress": never another task, never backwards
  REQUIRE(log.size() == 3);
  CHECK(log[0] == "begin fetch 2 files 8000");
  CHECK(log[1].rfind("message fetch b.deb: ", 0) == 0);  // the retry, said once
  CHECK(log[1].find("503") != std::string::npos);
  CHECK(log[2] == "end 1 2 downloaded, 0 from the store");
  CHECK(st.progress(1) == 8000);
  // From the store: the same task shape, all of it "from the store", and no
  // bytes counted (what the task counts is downloaded, so its rate is a
  // download rate).
  st.clear();
  f->fetch_one(items[0]);
  CHECK(st.lines() == std::vector<std::string>{"begin fetch a 0", "end 2 0 downloaded, 1 from the store"});
  CHECK(st.progress(2) == 0);
  // A failure ends the task, saying so.
  st.clear();
  CHECK_THROWS(f->fetch_one({server.url("/a"), Digest::of_bytes("other"), std::nullopt, "x"}));
  CHECK(st.lines().back() == "end 3 1 failed");
}

TEST_CASE("fetch: http_proxy is honoured and no_proxy bypasses it", "[fetch]") {
  std::vector<std::string> proxied;
  std::mutex m;
  test::HttpServer origin([](const test::HttpRequest&) { return http_response(200, "from the origin"); });
  test::HttpServer proxy([&](const test::HttpRequest& r) {
    std::lock_guard g(m);
    proxied.push_back(r.path);  // a forward proxy gets the absolute URL
    return http_response(200, "from the proxy");
  });
  TempDir dir;
  Store store(dir.path());
  auto f = fetch::make_fetcher(store, quick(), null_status());
  {
    ScopedEnv env({{"http_proxy", proxy.url()}});
    auto got = f->fetch_one({origin.url("/file"), std::nullopt, std::nullopt, ""});
    CHECK(store.read(got.digest) == "from the proxy");
    CHECK(proxied == std::vector<std::string>{origin.url("/file")});
  }
  {
    ScopedEnv env({{"http_proxy", proxy.url()}, {"no_proxy", "127.0.0.1"}});
    auto got = f->fetch_one({origin.url("/file2"), std::nullopt, std::nullopt, ""});
    CHECK(store.read(got.digest) == "from the origin");
    CHECK(proxied.size() == 1);
  }
}
