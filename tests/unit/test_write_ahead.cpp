// Layers written ahead (pipeline/layer_writes.hpp): writes run at once up to
// their bound, a write's error reaches the build, and an image built with
// writes ahead is the image built one layer after another, duplicate checks,
// errors and cache records included.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <thread>

#include "fakes.hpp"
#include "helpers.hpp"
#include "pipeline/build.hpp"
#include "pipeline/layer_cache.hpp"
#include "pipeline/layer_writes.hpp"
#include "util/error.hpp"

using namespace sb;

namespace {

// A layer whose size says something: which write made it.
Layer marked(uint64_t mark) {
  Layer l{Digest::of_bytes(""), Digest::of_bytes("")};
  l.size = mark;
  return l;
}

// Waits up to `limit` for `count` to reach `n`; whether it did.
bool wait_for(const std::atomic<int>& count, int n, std::chrono::milliseconds limit) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (count.load() < n) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

PendingLayer::Finish no_finish() {
  return [](const std::vector<Layer>&, const std::vector<std::string>&, const std::vector<Layer>&) {};
}

// Random bytes: a layer that takes gzip a while to write.
std::string noise(size_t n, uint32_t seed) {
  std::string s(n, '\0');
  for (auto& c : s) {
    seed = seed * 1664525u + 1013904223u;
    c = static_cast<char>(seed >> 24);
  }
  return s;
}

// The position of the first line that starts with `prefix`, or lines.size().
size_t line_of(const std::vector<std::string>& lines, const std::string& prefix) {
  for (size_t i = 0; i < lines.size(); ++i)
    if (lines[i].starts_with(prefix)) return i;
  return lines.size();
}

// The line that ends the task begun on line `begin` ("begin LABEL N" is task
// id k when it is the k-th begin), or lines.size().
size_t end_of(const std::vector<std::string>& lines, size_t begin) {
  int id = 0;
  for (size_t i = 0; i <= begin && i < lines.size(); ++i)
    if (lines[i].starts_with("begin ")) ++id;
  return line_of(lines, "end " + std::to_string(id) + " ");
}

}  // namespace

TEST_CASE("layer writes run at once up to their bound and no further", "[write-ahead]") {
  for (size_t bound : {1, 2}) {
    LayerWrites writes(bound);
    std::atomic<int> started{0};
    std::atomic<int> met{0};  // writes that saw the other one running
    auto write = [&](uint64_t mark) {
      return [&, mark] {
        ++started;
        if (wait_for(started, 2, std::chrono::milliseconds(bound == 1 ? 300 : 20000))) ++met;
        return std::vector<Layer>{marked(mark)};
      };
    };
    auto a = writes.start(write(1), no_finish());
    auto b = writes.start(write(2), no_finish());
    CHECK(a->settle({}, {}).front().size == 1);
    CHECK(b->settle({}, {}).front().size == 2);
    CHECK(writes.most_at_once() == bound);
    if (bound == 2) CHECK(met == 2);  // both ran at once
    if (bound == 1) CHECK(met == 1);  // the second began after the first ended (and saw the count at 2 at once)
  }
}

TEST_CASE("settling a layer throws its write's error and does not finish it", "[write-ahead]") {
  LayerWrites writes(2);
  bool finished = false;
  auto p = writes.start([]() -> std::vector<Layer> { throw Error("the disk is full"); },
                        [&](const std::vector<Layer>&, const std::vector<std::string>&, const std::vector<Layer>&) {
                          finished = true;
                        });
  CHECK_THROWS_WITH(p->settle({}, {}), Catch::Contains("the disk is full"));
  CHECK_FALSE(finished);
  // The slot came back: another write runs.
  auto q = writes.start([] { return std::vector<Layer>{marked(7)}; }, no_finish());
  CHECK(q->settle({}, {}).front().size == 7);
}

TEST_CASE("a settled layer finishes with the complete layers below it", "[write-ahead]") {
  LayerWrites writes(1);
  std::vector<std::string> seen;
  auto p = writes.start([] { return std::vector<Layer>{marked(3), marked(4)}; },
                        [&](const std::vector<Layer>& below, const std::vector<std::string>& names,
                            const std::vector<Layer>& parts) {
                          seen = names;
                          CHECK(below.size() == 2);
                          CHECK(parts.size() == 2);
                        });
  auto parts = p->settle({marked(1), marked(2)}, {"os", "tools"});
  CHECK(parts.size() == 2);
  CHECK(seen == std::vector<std::string>{"os", "tools"});
}

TEST_CASE("an image built with layers written ahead is the image built one layer after another",
          "[write-ahead]") {
  TempDir tmp;
  test::write(tmp.path() / "big" / "blob.bin", noise(48 << 20, 1));
  test::write(tmp.path() / "small" / "a.txt", "a\n");
  test::write(tmp.path() / "more" / "b.txt", std::string(5000, 'b'));
  test::write(tmp.path() / "r.yaml",
              "stack: wa\nsource_date_epoch: 1700000000\n"
              "layers:\n  - {name: big, copy: [{src: big/, dst: /opt/big/}]}\n"
              "  - {name: small, copy: [{src: small/, dst: /opt/small/}]}\n"
              "  - {name: more, copy: [{src: more/, dst: /opt/more/}]}\n");
  Recipe r = load_recipe(tmp.path() / "r.yaml");

  auto build = [&](size_t ahead, const std::string& store_name, test::RecordingStatus& status) {
    Store store(tmp.path() / store_name);
    BuildOptions o;
    o.write_ahead = ahead;
    return build_image(r, store, o, status);
  };
  test::RecordingStatus one_by_one, ahead;
  BuildResult a = build(0, "store-0", one_by_one);
  BuildResult b = build(2, "store-2", ahead);
  REQUIRE(a.layers.size() == 3);
  REQUIRE(b.layers.size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    CHECK(b.layers[i].layer.digest == a.layers[i].layer.digest);
    CHECK(b.layers[i].layer.diff_id == a.layers[i].layer.diff_id);
    CHECK_FALSE(b.layers[i].pending);
  }
  CHECK(b.images.front().image.manifest.digest == a.images.front().image.manifest.digest);

  // One after another, `small` begins after `big` ends; ahead, `small` is
  // staged and written while `big` is still being compressed (48 MiB of
  // noise against one small file).
  auto order = [](const test::RecordingStatus& s) {
    auto lines = s.lines();
    size_t big = line_of(lines, "begin compress layer big ");
    size_t small = line_of(lines, "begin compress layer small ");
    REQUIRE(big < lines.size());
    REQUIRE(small < lines.size());
    return std::pair<size_t, size_t>{end_of(lines, big), small};
  };
  auto [big_end, small_begin] = order(one_by_one);
  CHECK(big_end < small_begin);
  auto [big_end2, small_begin2] = order(ahead);
  CHECK(small_begin2 < big_end2);

  // Every layer was recorded: a second build takes all three from the cache.
  test::RecordingStatus again;
  BuildResult c = build(2, "store-2", again);
  for (const auto& l : c.layers) CHECK(l.cached);
  CHECK(c.images.front().image.manifest.digest == a.images.front().image.manifest.digest);
}

TEST_CASE("a duplicate library refused by `duplicates: error` fails the build written ahead too",
          "[write-ahead]") {
  TempDir tmp;
  std::string elf = "\x7f" "ELF";
  elf.resize(4096, '\0');
  test::write(tmp.path() / "a" / "libfoo.so.1", elf);
  test::write(tmp.path() / "b" / "libfoo.so.1", elf + "b");
  test::write(tmp.path() / "r.yaml",
              "stack: dup\nsource_date_epoch: 1700000000\n"
              "layers:\n  - {name: lower, copy: [{src: a/, dst: /opt/a/lib/}]}\n"
              "  - {name: upper, duplicates: error, copy: [{src: b/, dst: /opt/b/lib/}]}\n"
              "  - {name: top, copy: [{src: a/, dst: /opt/c/}]}\n");
  Recipe r = load_recipe(tmp.path() / "r.yaml");
  for (size_t ahead : {0, 2}) {
    Store store(tmp.path() / ("store-" + std::to_string(ahead)));
    BuildOptions o;
    o.write_ahead = ahead;
    for (int round = 0; round < 2; ++round) {  // the refused layer is never recorded: refused again
      try {
        build_image(r, store, o, null_status());
        FAIL("a duplicate with duplicates: error built, write-ahead " << ahead);
      } catch (const Error& e) {
        CHECK_THAT(e.what(), Catch::Contains("layer upper holds 1 shared library that a lower layer already has"));
        CHECK_THAT(e.what(), Catch::Contains("its duplicates policy is error"));
      }
    }
    // The layer below it was recorded, as it is one layer after another.
    test::RecordingStatus status;
    test::write(tmp.path() / "ok.yaml",
                "stack: dup\nsource_date_epoch: 1700000000\n"
                "layers:\n  - {name: lower, copy: [{src: a/, dst: /opt/a/lib/}]}\n");
    BuildResult ok = build_image(load_recipe(tmp.path() / "ok.yaml"), store, o, status);
    CHECK(ok.layers.front().cached);
  }
}

TEST_CASE("a layer that fails above layers still being written leaves those recorded", "[write-ahead]") {
  TempDir tmp;
  test::write(tmp.path() / "big" / "blob.bin", noise(8 << 20, 2));
  test::write(tmp.path() / "r.yaml",
              "stack: fail\nsource_date_epoch: 1700000000\n"
              "layers:\n  - {name: big, copy: [{src: big/, dst: /opt/big/}]}\n"
              "  - {name: broken, copy: [{src: missing/, dst: /opt/x/}]}\n");
  Recipe r = load_recipe(tmp.path() / "r.yaml");
  Store store(tmp.path() / "store");
  BuildOptions o;
  o.write_ahead = 2;
  CHECK_THROWS_WITH(build_image(r, store, o, null_status()), Catch::Contains("copy source 'missing/' does not exist"));
  test::write(tmp.path() / "missing" / "x.txt", "x\n");
  BuildResult b = build_image(r, store, o, null_status());
  CHECK(b.layers.front().cached);
  CHECK_FALSE(b.layers.back().cached);
}

TEST_CASE("a layer whose duplicates policy rewrites it waits for the layers below", "[write-ahead]") {
  TempDir tmp;
  std::string elf = "\x7f" "ELF";
  elf.resize(4096, '\0');
  test::write(tmp.path() / "big" / "blob.bin", noise(8 << 20, 3));
  test::write(tmp.path() / "a" / "libfoo.so.1", elf);
  test::write(tmp.path() / "b" / "libfoo.so.1", elf + "b");
  test::write(tmp.path() / "r.yaml",
              "stack: dup\nsource_date_epoch: 1700000000\n"
              "layers:\n  - {name: lower, copy: [{src: a/, dst: /opt/a/lib/}, {src: big/, dst: /opt/big/}]}\n"
              "  - {name: upper, duplicates: lower, copy: [{src: b/, dst: /opt/b/lib/}]}\n");
  Recipe r = load_recipe(tmp.path() / "r.yaml");
  std::vector<Digest> images;
  for (size_t ahead : {0, 2}) {
    Store store(tmp.path() / ("store-" + std::to_string(ahead)));
    BuildOptions o;
    o.write_ahead = ahead;
    test::RecordingStatus status;
    BuildResult b = build_image(r, store, o, status);
    images.push_back(b.images.front().image.manifest.digest);
    // The upper copy became a link to the lower one.
    CHECK(b.layers.back().layer.uncompressed_size < 4096);
  }
  CHECK(images[0] == images[1]);
}
