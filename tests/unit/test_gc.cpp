// stackbuild gc: what is garbage, LRU eviction, blobs shared between records,
// the store's use lock, and the bounded cache of unpacked roots.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <set>

#include <catch2/catch.hpp>

#include "helpers.hpp"
#include "store/gc.hpp"
#include "util/error.hpp"
#include "verify/unpacked.hpp"

using namespace sb;
using gc::Item;
using gc::Kind;

namespace {

Digest dg(char c) { return Digest::parse("sha256:" + std::string(64, c)); }

Item blob(char c, uint64_t bytes, std::vector<Digest> refs = {}) {
  Item it;
  it.kind = Kind::Blob;
  it.path = "blobs/sha256/" + dg(c).hex();
  it.bytes = bytes;
  it.digest = dg(c);
  it.refs = std::move(refs);
  return it;
}

Item record(const std::string& name, int64_t used, std::vector<Digest> needs, std::vector<Digest> refs = {}) {
  Item it;
  it.kind = Kind::Record;
  it.path = "refs/layer/" + name;
  it.bytes = 10;
  it.used = used;
  it.needs = needs;
  it.refs = refs.empty() ? needs : refs;
  return it;
}

Item other(Kind k, const std::string& path, uint64_t bytes, int64_t used = 0) {
  Item it;
  it.kind = k;
  it.path = path;
  it.bytes = bytes;
  it.used = used;
  return it;
}

// path -> why, for what a plan removes.
std::map<std::string, gc::Why> removed(const gc::Scan& s, const gc::Plan& p) {
  std::map<std::string, gc::Why> out;
  for (const auto& r : p.remove) out.emplace(s.items[r.item].path, r.why);
  return out;
}

std::vector<std::string> removed_paths(const gc::Scan& s, const gc::Plan& p) {
  std::vector<std::string> out;
  for (const auto& r : p.remove) out.push_back(s.items[r.item].path);
  return out;
}

}  // namespace

TEST_CASE("gc finds the digests a text names and what each record kind needs", "[gc]") {
  std::string a = std::string(64, 'a'), b = std::string(64, 'b');
  auto d = gc::digests_in("{\"digest\":\"sha256:" + a + "\",\"diff_id\":\"sha256:" + b + "\",\"x\":\"sha256:" + a +
                          "\",\"short\":\"sha256:abc\",\"long\":\"sha256:" + a + "0\"}");
  CHECK(d == std::vector<Digest>{dg('a'), dg('b')});  // sorted, once each; a 65th hex digit is no digest

  Item layer;
  gc::read_record("layer", "{\"digest\":\"sha256:" + a + "\",\"diff_id\":\"sha256:" + b + "\"}", layer);
  CHECK(layer.needs == std::vector<Digest>{dg('a')});  // the diff_id is no blob of the store
  CHECK(layer.refs == std::vector<Digest>{dg('a'), dg('b')});
  CHECK_FALSE(layer.corrupt);

  Item parts;
  gc::read_record("layer-parts", "[{\"digest\":\"sha256:" + a + "\"},{\"digest\":\"sha256:" + b + "\"}]", parts);
  CHECK(parts.needs == std::vector<Digest>{dg('a'), dg('b')});

  Item url;
  gc::read_record("url", "sha256:" + a, url);
  CHECK(url.needs == std::vector<Digest>{dg('a')});
  Item base;
  gc::read_record("base-manifest", "{\"manifest\":\"sha256:" + b + "\"}", base);
  CHECK(base.needs == std::vector<Digest>{dg('b')});
  Item download;
  gc::read_record("download", "{\"blob\":\"sha256:" + a + "\",\"url\":\"file:///x\"}", download);
  CHECK(download.needs == std::vector<Digest>{dg('a')});

  Item bad;
  gc::read_record("layer", "{not json", bad);
  CHECK(bad.corrupt);
  Item bad_digest;
  gc::read_record("url", "sha256:XYZ", bad_digest);
  CHECK(bad_digest.corrupt);
  Item unknown;  // a kind gc does not know: keeps what it names, never dangling
  gc::read_record("apt-state", "Package: x\nsha256:" + a + "\n", unknown);
  CHECK_FALSE(unknown.corrupt);
  CHECK(unknown.needs.empty());
  CHECK(unknown.refs == std::vector<Digest>{dg('a')});
}

TEST_CASE("gc with no limit removes only garbage", "[gc]") {
  gc::Scan s;
  s.items = {other(Kind::Root, "roots/r1", 5000),
             other(Kind::Rootfs, "rootfs/c1", 3000),
             other(Kind::Temp, "tmp/partial-x", 200),
             other(Kind::Lock, "locks/layer-x", 0),
             record("kept", 100, {dg('a')}),
             record("dangling", 100, {dg('f')}),  // its blob is gone
             record("corrupt", 100, {}),
             blob('a', 1000),
             blob('b', 700),  // named by nothing
             other(Kind::Cache, "cache/pip", 400, 1),
             other(Kind::Log, "logs/app.log", 50, 1),
             other(Kind::Builtin, "builtin-tests/k", 60, 1)};
  s.items[6].corrupt = true;
  s.other_bytes = 4;
  gc::Options o;
  o.now = 1000000;
  gc::Plan p = gc::plan(s, o);
  auto r = removed(s, p);
  CHECK(r == std::map<std::string, gc::Why>{{"roots/r1", gc::Why::Unpacked},
                                            {"rootfs/c1", gc::Why::Unpacked},
                                            {"tmp/partial-x", gc::Why::Temporary},
                                            {"locks/layer-x", gc::Why::Temporary},
                                            {"refs/layer/dangling", gc::Why::Dangling},
                                            {"refs/layer/corrupt", gc::Why::Dangling},
                                            {"blobs/sha256/" + dg('b').hex(), gc::Why::Unreferenced}});
  CHECK(p.before == 5000 + 3000 + 200 + 30 + 1000 + 700 + 400 + 50 + 60 + 4);
  CHECK(p.after == 10 + 1000 + 400 + 50 + 60 + 4);
  // Records go first, then blobs: a gc cut short never leaves a record without its blob.
  auto paths = removed_paths(s, p);
  CHECK(paths[0].rfind("refs/", 0) == 0);
  CHECK(paths[1].rfind("refs/", 0) == 0);
  CHECK(paths[2].rfind("blobs/", 0) == 0);

  SECTION("--roots removes the unpacked roots alone") {
    o.roots_only = true;
    auto only = removed(s, gc::plan(s, o));
    CHECK(only.size() == 2);
    CHECK(only.count("roots/r1"));
    CHECK(only.count("rootfs/c1"));
  }
  SECTION("--all removes everything") {
    o.all = true;
    gc::Plan everything = gc::plan(s, o);
    CHECK(everything.remove.size() == s.items.size());
    CHECK(everything.after == 4);  // only what gc does not own
  }
}

TEST_CASE("gc follows a manifest blob to the blobs it names", "[gc]") {
  gc::Scan s;
  // base-manifest record -> manifest blob e -> config c and layer d; f is named by nothing.
  s.items = {record("base", 5, {dg('e')}), blob('e', 10, {dg('c'), dg('d')}), blob('c', 10), blob('d', 500),
             blob('f', 40)};
  gc::Options o;
  auto r = removed(s, gc::plan(s, o));
  CHECK(r == std::map<std::string, gc::Why>{{"blobs/sha256/" + dg('f').hex(), gc::Why::Unreferenced}});
  SECTION("without its record, the whole image is garbage") {
    s.items.erase(s.items.begin());
    CHECK(gc::plan(s, o).remove.size() == 4);
  }
}

TEST_CASE("gc --max-size evicts least recently used records and the blobs only they name", "[gc]") {
  gc::Scan s;
  // Three layers: old (t=1), middle (t=2), new (t=3); blob e is shared by old and new.
  s.items = {record("old", 1, {dg('1')}, {dg('1'), dg('e')}), record("middle", 2, {dg('2')}),
             record("new", 3, {dg('3')}, {dg('3'), dg('e')}), blob('1', 1000), blob('2', 1000), blob('3', 1000),
             blob('e', 5000)};
  gc::Options o;
  // 30 (records) + 8000 (blobs). Evicting "old" frees 10 + 1000 (e is still named by "new"),
  // "middle" 10 + 1000 more: 6010.
  o.max_size = 6100;
  gc::Plan p = gc::plan(s, o);
  auto r = removed(s, p);
  CHECK(r == std::map<std::string, gc::Why>{{"refs/layer/old", gc::Why::LeastRecent},
                                            {"blobs/sha256/" + dg('1').hex(), gc::Why::LeastRecent},
                                            {"refs/layer/middle", gc::Why::LeastRecent},
                                            {"blobs/sha256/" + dg('2').hex(), gc::Why::LeastRecent}});
  CHECK(p.after == 10 + 1000 + 5000);

  SECTION("the shared blob goes with the last record naming it") {
    o.max_size = 100;
    gc::Plan all = gc::plan(s, o);
    CHECK(all.remove.size() == s.items.size());
    CHECK(all.after == 0);
  }
  SECTION("a limit the store fits removes nothing") {
    o.max_size = 8030;
    CHECK(gc::plan(s, o).remove.empty());
  }
  SECTION("a touched record is evicted last") {
    s.items[0].used = 10;  // "old" was just read
    auto r2 = removed(s, gc::plan(s, o));
    CHECK(r2.count("refs/layer/middle"));
    CHECK(r2.count("refs/layer/new"));
    CHECK_FALSE(r2.count("refs/layer/old"));
  }
}

TEST_CASE("gc --older-than evicts what was not used for that long", "[gc]") {
  gc::Scan s;
  s.items = {record("stale", 100, {dg('a')}), record("fresh", 990, {dg('b')}), blob('a', 10), blob('b', 10),
             other(Kind::Cache, "cache/ccache", 100, 100), other(Kind::Log, "logs/new.log", 5, 995)};
  gc::Options o;
  o.now = 1000;
  o.older_than = 500;
  auto r = removed(s, gc::plan(s, o));
  CHECK(r == std::map<std::string, gc::Why>{{"refs/layer/stale", gc::Why::Old},
                                            {"cache/ccache", gc::Why::Old},
                                            {"blobs/sha256/" + dg('a').hex(), gc::Why::Unreferenced}});
}

TEST_CASE("gc scans a real store and removes what the plan says", "[gc]") {
  TempDir dir;
  fs::path root = dir.path() / "store";
  {
    Store store(root);
    Digest kept = store.put("layer bytes");
    Digest orphan = store.put("an orphan");
    Digest gone = Digest::of_bytes("never stored");
    std::string manifest = "{\"layers\":[{\"digest\":\"" + store.put("base layer").str() + "\"}]}";
    Digest m = store.put(manifest);
    store.put_record("layer", Digest::of_bytes("k1"), "{\"digest\":\"" + kept.str() + "\"}");
    store.put_record("url", Digest::of_bytes("k2"), gone.str());
    store.put_record("base-manifest", Digest::of_bytes("k3"), "{\"manifest\":\"" + m.str() + "\"}");
    fs::create_directories(root / "roots" / std::string(64, 'c') / "usr" / "bin");
    test::write(root / "roots" / std::string(64, 'c') / "usr" / "bin" / "tool", std::string(10000, 'x'));
    fs::permissions(root / "roots" / std::string(64, 'c') / "usr", fs::perms::owner_read | fs::perms::owner_exec);
    test::write(root / "tmp" / "partial-x", "half");
    test::write(root / "refs" / "layer" / (std::string(64, 'd') + ".tmp-abc"), "half a record");
    (void)orphan;
  }
  auto store = Store::open_exclusive(root, false);
  REQUIRE(store);
  gc::Scan s = gc::scan(*store);
  gc::Plan p = gc::plan(s, gc::Options{});
  std::set<std::string> paths;
  for (const auto& r : p.remove) paths.insert(s.items[r.item].path);
  CHECK(paths == std::set<std::string>{"roots/" + std::string(64, 'c'), "tmp/partial-x",
                                       "refs/layer/" + std::string(64, 'd') + ".tmp-abc",
                                       "refs/url/" + Digest::of_bytes("k2").hex(),
                                       "blobs/sha256/" + Digest::of_bytes("an orphan").hex()});
  CHECK(p.before > p.after);
  gc::apply(*store, s, p);
  CHECK_FALSE(fs::exists(root / "roots" / std::string(64, 'c')));
  CHECK(fs::is_empty(root / "roots"));
  CHECK(fs::is_empty(root / "tmp"));
  CHECK(store->has(Digest::of_bytes("layer bytes")));
  CHECK(store->has(Digest::of_bytes("base layer")));  // through the manifest
  CHECK_FALSE(store->has(Digest::of_bytes("an orphan")));
  CHECK(store->get_record("layer", Digest::of_bytes("k1")));
  CHECK_FALSE(store->get_record("url", Digest::of_bytes("k2")));
  // A second gc finds nothing more.
  gc::Scan again = gc::scan(*store);
  CHECK(gc::plan(again, gc::Options{}).remove.empty());
}

TEST_CASE("Reading a record marks it used", "[gc]") {
  TempDir dir;
  Store store(dir.path());
  Digest key = Digest::of_bytes("k");
  store.put_record("layer", key, "{}");
  fs::path p = dir.path() / "refs" / "layer" / key.hex();
  struct timespec old[2] = {{1000, 0}, {1000, 0}};
  REQUIRE(::utimensat(AT_FDCWD, p.c_str(), old, 0) == 0);
  struct stat st;
  REQUIRE(store.get_record("layer", key));
  REQUIRE(::stat(p.c_str(), &st) == 0);
  CHECK(st.st_mtime > 1000000000);
  REQUIRE(::utimensat(AT_FDCWD, p.c_str(), old, 0) == 0);
  CHECK(store.touch_record("layer", key));
  REQUIRE(::stat(p.c_str(), &st) == 0);
  CHECK(st.st_mtime > 1000000000);
  CHECK_FALSE(store.touch_record("layer", Digest::of_bytes("absent")));
}

TEST_CASE("gc cannot take a store another process uses, and a store waits for gc", "[gc]") {
  TempDir dir;
  std::optional<Store> user(std::in_place, dir.path());
  pid_t child = fork();
  if (child == 0) {
    // Another process: refused while the parent's Store lives.
    bool refused = !Store::open_exclusive(dir.path(), false);
    std::vector<long> users = Store::users(dir.path());
    bool named = std::find(users.begin(), users.end(), static_cast<long>(getppid())) != users.end();
    _exit(refused && named ? 0 : 1);
  }
  int status = 0;
  waitpid(child, &status, 0);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  user.reset();
  auto gc_store = Store::open_exclusive(dir.path(), false);
  REQUIRE(gc_store);
  // While gc holds it, opening the store calls on_wait, then blocks until gc is done.
  fs::path marker = dir.path() / "marker";
  child = fork();
  if (child == 0) {
    bool waited = false;
    Store s(dir.path(), [&](const std::vector<long>&) { waited = true; });
    _exit(waited && fs::exists(marker) ? 0 : 1);
  }
  usleep(200 * 1000);
  test::write(marker, "gc finished first");
  gc_store.reset();
  waitpid(child, &status, 0);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("lock_holders reads the holders of one file from /proc/locks", "[gc]") {
  std::string text =
      "1: FLOCK  ADVISORY  READ  4242 08:01:1234 0 EOF\n"
      "2: FLOCK  ADVISORY  READ  4343 08:01:1234 0 EOF\n"
      "2: -> FLOCK  ADVISORY  WRITE 4444 08:01:1234 0 EOF\n"
      "3: FLOCK  ADVISORY  WRITE 99 08:01:9999 0 EOF\n"
      "4: POSIX  ADVISORY  WRITE 77 08:01:1234 0 EOF\n"
      "5: FLOCK  ADVISORY  WRITE 55 fd:0a:1234 0 EOF\n";
  CHECK(lock_holders_in(text, 8, 1, 1234) == std::vector<long>{4242, 4343});
  CHECK(lock_holders_in(text, 0xfd, 0x0a, 1234) == std::vector<long>{55});
  CHECK(lock_holders_in("garbage\n\n", 8, 1, 1234).empty());
}

TEST_CASE("Unpacked roots stay bounded and a root in use is never evicted", "[gc]") {
  TempDir dir;
  Store store(dir.path());
  auto make_root = [&](char c, int64_t mtime) {
    fs::path p = dir.path() / "roots" / std::string(64, c);
    fs::create_directories(p / "etc");
    test::write(p / "etc" / "f", "x");
    struct timespec t[2] = {{mtime, 0}, {mtime, 0}};
    REQUIRE(::utimensat(AT_FDCWD, p.c_str(), t, 0) == 0);
  };
  make_root('a', 1000);
  make_root('b', 2000);
  make_root('c', 3000);
  make_root('d', 4000);
  // 'a' (the oldest) is in use by someone.
  FileLock in_use(dir.path() / "locks" / ("root-use-" + std::string(64, 'a')), LockKind::Shared);
  CHECK(verify::evict_roots(store, 1, std::string(64, 'b')) == 1);  // keeps d (newest) and b (except); a in use
  std::set<std::string> left;
  for (const auto& e : fs::directory_iterator(dir.path() / "roots")) left.insert(e.path().filename().string());
  CHECK(left == std::set<std::string>{std::string(64, 'a'), std::string(64, 'b'), std::string(64, 'd')});
  CHECK(fs::is_empty(dir.path() / "tmp"));
}

TEST_CASE("Unpacked roots stay within a byte budget - newest first - the new one always kept", "[gc]") {
  TempDir dir;
  Store store(dir.path());
  auto make_root = [&](char c, int64_t mtime, const char* bytes) {
    fs::path p = dir.path() / "roots" / std::string(64, c);
    fs::create_directories(p);
    if (bytes) test::write(dir.path() / "roots" / (".size-" + std::string(64, c)), bytes);
    struct timespec t[2] = {{mtime, 0}, {mtime, 0}};
    REQUIRE(::utimensat(AT_FDCWD, p.c_str(), t, 0) == 0);
  };
  make_root('a', 1000, "6");
  make_root('b', 2000, nullptr);  // no record: counts as 0
  make_root('c', 3000, "6");
  make_root('d', 4000, "9");  // just unpacked: kept whatever its size
  auto left = [&] {
    std::set<std::string> out;
    for (const auto& e : fs::directory_iterator(dir.path() / "roots")) out.insert(e.path().filename().string().substr(0, 7));
    return out;
  };
  // 9 (d) + 6 (c) = 15 fits in 16; b counts 0; a would make 21.
  CHECK(verify::evict_roots(store, 4, std::string(64, 'd'), 16) == 1);
  CHECK(left() == std::set<std::string>{"bbbbbbb", "ccccccc", "ddddddd", ".size-c", ".size-d"});
  // A budget smaller than the new root alone keeps only it.
  CHECK(verify::evict_roots(store, 4, std::string(64, 'd'), 5) == 2);
  CHECK(left() == std::set<std::string>{"ddddddd", ".size-d"});
}
