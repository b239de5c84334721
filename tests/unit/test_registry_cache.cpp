// The build cache in a registry (pipeline/registry_cache.hpp), the parts that
// need no registry: the references, which records travel with a layer, and
// the diff_id check a fetched blob goes through, the points' own tags and the
// tag lists they are found by (against a fake server). The registry round trips are
// in tests/integration/test_registry_cache.sh.
#include <catch2/catch.hpp>

#include "archive/extract.hpp"
#include "helpers.hpp"
#include "http_server.hpp"
#include "layer/tree.hpp"
#include "layer/write.hpp"
#include "pipeline/apt_layer.hpp"
#include "pipeline/build.hpp"
#include "pipeline/duplicate_libraries.hpp"
#include "pipeline/registry_cache.hpp"
#include "pipeline/source_tree.hpp"
#include "registry/tags.hpp"
#include "util/error.hpp"

using namespace sb;

namespace {
// The key of the apt kind's "apt-state" record (apt_layer.cpp), written out
// here: caches already in registries hold records under it.
Digest apt_state_key(const Digest& diff_id) { return KeyHasher().field("diff_id", diff_id.str()).finish(); }
}  // namespace

TEST_CASE("a cache reference takes the tag buildcache when it names none, and never a digest", "[cache]") {
  auto r = cache_reference("127.0.0.1:5000/team/cache", "--cache-to");
  CHECK(r.registry == "127.0.0.1:5000");
  CHECK(r.repository == "team/cache");
  CHECK(r.tag == "buildcache");
  CHECK(cache_reference("127.0.0.1:5000/team/cache:cuda12", "--cache").tag == "cuda12");
  try {
    cache_reference("127.0.0.1:5000/team/cache@sha256:" + std::string(64, 'a'), "--cache-from");
    FAIL("a digest was taken");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Usage);
    CHECK(std::string(e.what()).find("--cache-from") != std::string::npos);
  }
  CHECK_THROWS_AS(cache_reference("Not A Reference!", "--cache"), Error);
}

TEST_CASE("a cached layer's entry holds its parts and the records a hit reads", "[cache]") {
  TempDir dir;
  Store store(dir.path() / "store");
  test::write(dir.path() / "tree/a.txt", "a\n");
  ScanOptions so;
  so.source_date_epoch = 1000;
  EntryMap entries;
  scan_tree(dir.path() / "tree", "", so, entries);
  Layer one = write_layer(entries, store, LayerOptions{});
  const Digest key = Digest::of_bytes("a layer's key");

  LayerReport report{"app", one, false, 0, {}, key};
  LayerReport base{"base #1", one, true, 0, {}, {}};  // a base image's layer: no key, not in the cache
  SECTION("without records, only the layer") {
    auto e = cache_entries({base, report}, store);
    REQUIRE(e.size() == 1);
    CHECK(e[0].key == key);
    CHECK(e[0].parts.size() == 1);
    CHECK(e[0].records.empty());
  }
  SECTION("with its dpkg state and duplicate findings, both; another layer's are not taken") {
    store.put_record("apt-state", apt_state_key(one.diff_id), R"({"status": []})");
    store.put_record("duplicate-libraries", findings_key(key), "[]");
    store.put_record("duplicate-libraries", findings_key(Digest::of_bytes("another key")), "[]");
    auto e = cache_entries({report}, store);
    REQUIRE(e.size() == 1);
    REQUIRE(e[0].records.size() == 2);
    auto wanted = companion_records(key, e[0].parts);
    for (const auto& r : e[0].records)
      CHECK(std::find(wanted.begin(), wanted.end(), std::make_pair(r.kind, r.key)) != wanted.end());
  }
  SECTION("with the commit its git source was fetched at, that too") {
    source::SourceLock git{"git", "", std::nullopt, std::string(40, 'a'), "", std::nullopt, {}, Digest::of_bytes("")};
    record_source_commit(store, key, git);
    git.commit = "v1.0";
    record_source_commit(store, key, git);  // no commit: nothing recorded
    auto e = cache_entries({report}, store);
    REQUIRE(e.size() == 1);
    REQUIRE(e[0].records.size() == 1);
    CHECK(e[0].records[0].kind == kSourceCommitRecord);
    CHECK(e[0].records[0].key == source_commit_key(key));
    CHECK(recorded_source_commit(store, key) == R"({"commit":")" + std::string(40, 'a') + R"("})");
    CHECK(recorded_source_commit(store, Digest::of_bytes("another key")).empty());
  }
  SECTION("a split layer's parts, in order; its dpkg state is the last part's") {
    test::write(dir.path() / "tree2/b.txt", "b\n");
    EntryMap more;
    scan_tree(dir.path() / "tree2", "", so, more);
    Layer two = write_layer(more, store, LayerOptions{});
    LayerReport split{"app", one, false, 0, {two}, key};
    auto e = cache_entries({split}, store);
    REQUIRE(e.size() == 1);
    REQUIRE(e[0].parts.size() == 2);
    CHECK(e[0].parts[1].digest == two.digest);
    auto wanted = companion_records(key, e[0].parts);
    CHECK(std::find(wanted.begin(), wanted.end(), std::make_pair(std::string("apt-state"), apt_state_key(two.diff_id))) !=
          wanted.end());
  }
}

TEST_CASE("a blob's diff_id and size are read from the blob, for every compression", "[cache]") {
  TempDir dir;
  Store store(dir.path() / "store");
  std::string data(100000, 'x');
  data += "tail";  // appended in place: GCC 12 misreads operator+ on a temporary here (-Wstringop-overflow)
  test::write(dir.path() / "tree/data.bin", data);
  ScanOptions so;
  so.source_date_epoch = 1000;
  EntryMap entries;
  scan_tree(dir.path() / "tree", "", so, entries);
  for (Compression c : {Compression::Gzip, Compression::Zstd, Compression::None}) {
    LayerOptions o;
    o.compression = c;
    Layer l = write_layer(entries, store, o);
    UncompressedDigest u = uncompressed_digest(store.blob_path(l.digest));
    CHECK(u.diff_id == l.diff_id);
    CHECK(u.size == l.uncompressed_size);
  }
  test::write(dir.path() / "garbage", std::string("\x1f\x8b\x08\x00 not really gzip", 20));
  CHECK_THROWS_AS(uncompressed_digest(dir.path() / "garbage"), Error);
}

TEST_CASE("a point's cache tag: the cache tag, '--' and 16 hex digits of its stack and point",
          "[cache]") {
  // sha256("cc\0flavor=a") starts e0fa280c3d22baf5 (python3: hashlib.sha256(b"cc\0flavor=a")).
  CHECK(point_tag("ci", "cc", "flavor=a") == "ci--e0fa280c3d22baf5");
  CHECK(point_tag("buildcache", "cc", "") == "buildcache--0dbfa82561bc599f");
  // Delimited: the stack and the point cannot trade characters.
  CHECK(point_tag("ci", "cc", "flavor=a") != point_tag("ci", "ccf", "lavor=a"));
  CHECK(point_tag("ci", "cc", "flavor=a") != point_tag("ci", "cc", "flavor=b"));
  CHECK(point_tag("ci", "cc", "flavor=a") != point_tag("ci", "dd", "flavor=a"));
  // A tag of 128 characters is cut: the point's tag is a tag too.
  const std::string longest = "T" + std::string(127, 'x');
  const std::string t = point_tag(longest, "cc", "flavor=a");
  CHECK(t.size() == 128);
  CHECK(registry::valid_tag(t));
  CHECK(t.ends_with("--e0fa280c3d22baf5"));
  CHECK(is_point_tag(longest, t));

  CHECK(is_point_tag("ci", "ci--e0fa280c3d22baf5"));
  CHECK_FALSE(is_point_tag("ci", "ci"));
  CHECK_FALSE(is_point_tag("ci", "ci--e0fa280c3d22baf"));    // 15 digits
  CHECK_FALSE(is_point_tag("ci", "ci--e0fa280c3d22baf5a"));  // 17
  CHECK_FALSE(is_point_tag("ci", "ci--E0FA280C3D22BAF5"));   // not as written
  CHECK_FALSE(is_point_tag("ci", "cx--e0fa280c3d22baf5"));
  // Another cache's points: the cache "ci--x" is not read as points of "ci".
  CHECK_FALSE(is_point_tag("ci", point_tag("ci--x", "cc", "flavor=a")));
  CHECK_FALSE(is_point_tag("ci--x", point_tag("ci", "cc", "flavor=a")));
}

TEST_CASE("a Link header's next page", "[cache][registry]") {
  CHECK(registry::next_link(R"(</v2/a/tags/list?n=2&last=b>; rel="next")") ==
        "/v2/a/tags/list?n=2&last=b");
  CHECK(registry::next_link(R"(</v2/a/tags/list?n=2&last=b>; rel=next)") ==
        "/v2/a/tags/list?n=2&last=b");
  CHECK(registry::next_link(
            R"(<http://h/first>; rel="prev", <http://h/x?a=1,2;b>; REL="next last")") ==
        "http://h/x?a=1,2;b");
  CHECK(registry::next_link(R"(</v2/a/tags/list?n=2>; rel="prev")").empty());
  CHECK(registry::next_link("").empty());
  CHECK(registry::next_link("</v2/a/tags/list; rel=\"next\"").empty());  // no closing bracket
}

namespace {
// A registry's tag list, its pages as `pages` gives them by the request's path and query.
struct TagServer {
  std::function<std::string(const std::string&)> pages;
  std::vector<std::string> asked;
  std::mutex mu;
  test::HttpServer server{[this](const test::HttpRequest& r) {
    {
      std::lock_guard lk(mu);
      asked.push_back(r.path);
    }
    if (r.path == "/v2/") return test::http_response(200, "{}");
    return pages(r.path);
  }};
  std::string host() const { return server.url("").substr(7); }
  std::optional<registry::TagListing> list(size_t max_tags = 100, size_t page = 2) {
    registry::SessionOptions o;
    o.plain_http = true;
    o.retry.attempts = 1;
    o.retry.sleep = [](double) {};
    registry::Session s(host(), "cache from " + host() + "/team/cache", o, null_status());
    auto c = s.make_client();
    return registry::list_tags(s, *c, "team/cache", max_tags, page);
  }
};
std::string json_page(const std::string& tags, const std::string& link = "") {
  return test::http_response(
      200, R"({"name":"team/cache","tags":)" + tags + "}",
      "Content-Type: application/json\r\n" + (link.empty() ? "" : "Link: " + link + "\r\n"));
}
}  // namespace

TEST_CASE(
    "the tags of a cache's repository: pages followed on the same registry, hostile answers "
    "refused",
    "[cache][registry][hostile]") {
  TagServer t;
  SECTION("pages as the Link headers lead, with n= asked for") {
    t.pages = [](const std::string& p) {
      if (p == "/v2/team/cache/tags/list?n=2")
        return json_page(R"(["ci","ci--e0fa280c3d22baf5"])",
                         R"(</v2/team/cache/tags/list?n=2&last=ci--e0fa280c3d22baf5>; rel="next")");
      if (p == "/v2/team/cache/tags/list?n=2&last=ci--e0fa280c3d22baf5")
        return json_page(R"(["v1"])");
      return test::http_response(404, "{}");
    };
    auto l = t.list();
    REQUIRE(l);
    CHECK(l->tags == std::vector<std::string>{"ci", "ci--e0fa280c3d22baf5", "v1"});
    CHECK_FALSE(l->truncated);
    CHECK(t.asked.size() == 3);  // /v2/ and two pages
  }
  SECTION("an absolute link to the same registry is followed; the listing stops at the bound") {
    t.pages = [&](const std::string& p) {
      if (p == "/v2/team/cache/tags/list?n=2")
        return json_page(R"(["a","b"])", "<" + t.server.url("/v2/team/cache/tags/list?n=2&last=b") +
                                             ">; rel=\"next\"");
      return json_page(R"(["c","d"])", R"(</v2/team/cache/tags/list?n=2&last=d>; rel="next")");
    };
    auto l = t.list(3);
    REQUIRE(l);
    CHECK(l->tags == std::vector<std::string>{"a", "b", "c"});
    CHECK(l->truncated);
  }
  SECTION("a registry that lists no tags, or not to us: nothing, and no error") {
    for (int status : {401, 403, 404, 405, 501}) {
      t.pages = [status](const std::string&) { return test::http_response(status, "{}"); };
      CHECK_FALSE(t.list());
    }
    // A redirect is not followed: the listing stays on this registry.
    t.pages = [](const std::string&) {
      return test::http_response(302, "", "Location: http://127.0.0.2:1/x\r\n");
    };
    CHECK_FALSE(t.list());
  }
  SECTION("names that are not tags are left out and counted") {
    t.pages = [](const std::string&) {
      return json_page(R"(["ok", "../../etc", "-x", 7, "a?b", "ci--e0fa280c3d22baf5"])");
    };
    auto l = t.list();
    REQUIRE(l);
    CHECK(l->tags == std::vector<std::string>{"ok", "ci--e0fa280c3d22baf5"});
    CHECK(l->not_tags == 4);
    CHECK(l->first_not_tag == R"("../../etc")");
  }
  SECTION("an answer that is not a tag list is an error naming it") {
    t.pages = [](const std::string&) { return test::http_response(200, "<html>hello</html>"); };
    CHECK_THROWS_WITH(t.list(), Catch::Contains("cache from ") && Catch::Contains("is not JSON"));
    t.pages = [](const std::string&) { return test::http_response(200, R"({"tags":"ci"})"); };
    CHECK_THROWS_WITH(t.list(), Catch::Contains("is not a tag list"));
    t.pages = [](const std::string&) { return test::http_response(200, R"(["ci"])"); };
    CHECK_THROWS_WITH(t.list(), Catch::Contains("is not a tag list"));
  }
  SECTION("an answer over the cap is an error naming the cap") {
    setenv("STACKBUILD_REGISTRY_MAX_DOCUMENT", "1000", 1);
    t.pages = [](const std::string&) { return json_page("[\"" + std::string(2000, 'a') + "\"]"); };
    CHECK_THROWS_WITH(t.list(), Catch::Contains("STACKBUILD_REGISTRY_MAX_DOCUMENT"));
    unsetenv("STACKBUILD_REGISTRY_MAX_DOCUMENT");
  }
  SECTION("a next page on another host, or elsewhere on this one, is never fetched") {
    std::atomic<int> elsewhere{0};
    test::HttpServer other(
        [&](const test::HttpRequest&) {
          ++elsewhere;
          return json_page(R"(["evil"])");
        },
        {.address = "127.0.0.2"});
    for (const std::string& link :
         {other.url("/v2/team/cache/tags/list?n=2&last=b"), std::string("/v2/other/tags/list?n=2"),
          std::string("/v2/team/cache/tags/listx"),
          std::string("//127.0.0.2:1/v2/team/cache/tags/list"),
          t.server.url("/v2/team/cache/tags/list").replace(0, 7, "https://")}) {
      t.pages = [link](const std::string&) {
        return json_page(R"(["a","b"])", "<" + link + ">; rel=\"next\"");
      };
      CHECK_THROWS_WITH(t.list(), Catch::Contains("not following it"));
    }
    CHECK(elsewhere == 0);
  }
  SECTION("links in a circle, or pages that add nothing, end in an error") {
    t.pages = [](const std::string&) {
      return json_page(R"(["a","b"])", R"(</v2/team/cache/tags/list?n=2>; rel="next")");
    };
    CHECK_THROWS_WITH(t.list(), Catch::Contains("links back"));
    int n = 0;
    t.pages = [&n](const std::string&) {
      return json_page(R"(["a"])", "</v2/team/cache/tags/list?n=2&last=" + std::to_string(++n) +
                                       ">; rel=\"next\"");
    };
    CHECK_THROWS_WITH(t.list(), Catch::Contains("added no tag"));
  }
}
