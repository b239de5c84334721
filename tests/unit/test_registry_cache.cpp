// The build cache in a registry (pipeline/registry_cache.hpp), the parts that
// need no registry: the references, which records travel with a layer, and
// the diff_id check a fetched blob goes through. The registry round trips are
// in tests/integration/test_registry_cache.sh.
#include <catch2/catch.hpp>

#include "archive/extract.hpp"
#include "helpers.hpp"
#include "layer/tree.hpp"
#include "layer/write.hpp"
#include "pipeline/apt_layer.hpp"
#include "pipeline/build.hpp"
#include "pipeline/duplicate_libraries.hpp"
#include "pipeline/registry_cache.hpp"
#include "pipeline/source_tree.hpp"
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
