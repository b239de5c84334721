// The layer budget: a layer over it is split by component, deterministically,
// into parts that each carry their parent directories; a copy layer over the
// recipe's layer_budget becomes several image layers, cached as a whole.
#include <catch2/catch.hpp>

#include <set>

#include "helpers.hpp"
#include "layer/split.hpp"
#include "pipeline/build.hpp"
#include "util/error.hpp"

using namespace sb;

namespace {

TarEntry dir() {
  TarEntry e;
  e.type = TarEntry::Type::Dir;
  e.mode = 0755;
  return e;
}
TarEntry file(uint64_t size) {
  TarEntry e;
  e.size = size;
  return e;
}
TarEntry hardlink(const std::string& target) {
  TarEntry e;
  e.type = TarEntry::Type::Hardlink;
  e.link = target;
  return e;
}

// pkgs/<name>/... belongs to <name>; anything else to its top-level path.
std::string by_package(const std::string& path) {
  if (path.rfind("pkgs/", 0) == 0) {
    auto rest = path.substr(5);
    return rest.substr(0, rest.find('/'));
  }
  return top_level_group(path);
}

std::vector<std::string> keys(const EntryMap& m) {
  std::vector<std::string> out;
  for (const auto& [k, v] : m) out.push_back(k);
  return out;
}

}  // namespace

TEST_CASE("a layer within the budget stays one part", "[split]") {
  EntryMap m{{"a", file(10)}, {"b", dir()}, {"b/c", file(20)}};
  auto parts = split_entries(m, 30, top_level_group);
  REQUIRE(parts.size() == 1);
  CHECK(keys(parts[0]) == keys(m));
  CHECK(split_entries(m, 0, top_level_group).size() == 1);  // 0: no budget
}

TEST_CASE("a layer over the budget is packed by component in sorted order", "[split]") {
  EntryMap m{{"pkgs", dir()},           {"pkgs/zeta", dir()},         {"pkgs/zeta/z.so", file(40)},
             {"pkgs/alpha", dir()},     {"pkgs/alpha/a.so", file(30)}, {"pkgs/alpha/a.py", file(5)},
             {"pkgs/beta", dir()},      {"pkgs/beta/b.so", file(30)},  {"pkgs/beta/link", hardlink("pkgs/alpha/a.so")},
             {"pkgs/huge", dir()},      {"pkgs/huge/h.bin", file(500)}, {"pkgs/empty", dir()},
             {"etc", dir()},            {"etc/conf", file(1)}};
  // Groups in order: alpha 35 (with beta's hardlink to a.so), beta 30, empty 0, etc 1, huge 500, zeta 40.
  auto parts = split_entries(m, 60, by_package);
  REQUIRE(parts.size() == 4);
  CHECK(keys(parts[0]) == std::vector<std::string>{"pkgs", "pkgs/alpha", "pkgs/alpha/a.py", "pkgs/alpha/a.so",
                                                   "pkgs/beta", "pkgs/beta/link"});
  CHECK(keys(parts[1]) ==
        std::vector<std::string>{"etc", "etc/conf", "pkgs", "pkgs/beta", "pkgs/beta/b.so", "pkgs/empty"});
  CHECK(keys(parts[2]) == std::vector<std::string>{"pkgs", "pkgs/huge", "pkgs/huge/h.bin"});  // alone: over budget
  CHECK(keys(parts[3]) == std::vector<std::string>{"pkgs", "pkgs/zeta", "pkgs/zeta/z.so"});

  // Every entry is in some part, unchanged; the same input gives the same parts.
  std::set<std::string> seen;
  for (const auto& p : parts)
    for (const auto& [k, e] : p) {
      seen.insert(k);
      CHECK(e.size == m.at(k).size);
      CHECK(e.type == m.at(k).type);
    }
  CHECK(seen.size() == m.size());
  auto again = split_entries(m, 60, by_package);
  REQUIRE(again.size() == parts.size());
  for (size_t i = 0; i < parts.size(); ++i) CHECK(keys(again[i]) == keys(parts[i]));
}

TEST_CASE("a hardlink whose target is in another group stays with the target", "[split]") {
  EntryMap m{{"a", dir()}, {"a/f", file(60)}, {"z", dir()}, {"z/l", hardlink("a/f")}, {"z/g", file(60)}};
  auto parts = split_entries(m, 100, top_level_group);
  REQUIRE(parts.size() == 2);
  CHECK(keys(parts[0]) == std::vector<std::string>{"a", "a/f", "z", "z/l"});
  CHECK(keys(parts[1]) == std::vector<std::string>{"z", "z/g"});
}

TEST_CASE("sizes are read as humans write them", "[split]") {
  CHECK(parse_bytes("1000000") == 1000000u);
  CHECK(parse_bytes("8GiB") == (8ull << 30));
  CHECK(parse_bytes("8G") == (8ull << 30));
  CHECK(parse_bytes("500MB") == (500ull << 20));
  CHECK(parse_bytes("1.5K") == 1536u);
  CHECK(parse_bytes("0") == 0u);
  CHECK_FALSE(parse_bytes(""));
  CHECK_FALSE(parse_bytes("lots"));
  CHECK_FALSE(parse_bytes("-1"));
  CHECK_FALSE(parse_bytes("8 GiB"));
  CHECK_FALSE(parse_bytes("8Q"));
}

TEST_CASE("a copy layer over layer_budget becomes several image layers, cached as a whole", "[split]") {
  TempDir tmp;
  test::write(tmp.path() / "tree" / "bin" / "tool", std::string(3000, 'b'));
  test::write(tmp.path() / "tree" / "lib" / "big.so", std::string(5000, 'l'));
  test::write(tmp.path() / "tree" / "share" / "doc.txt", std::string(1000, 'd'));
  test::write(tmp.path() / "r.yaml",
              "stack: sp\nsource_date_epoch: 1700000000\nlayer_budget: 4500\n"
              "layers:\n  - {name: base, copy: [{src: tree/, dst: /}]}\n"
              "  - {name: top, copy: [{src: tree/share, dst: /opt/share}]}\n");
  Recipe r = load_recipe(tmp.path() / "r.yaml");
  REQUIRE(r.layer_budget == 4500u);
  Store store(tmp.path() / "store");
  BuildOptions o;
  BuildResult a = build_image(r, store, o, null_status());
  REQUIRE(a.layers.size() == 2);
  // bin 3000 | lib 5000 (alone, over the budget) | share 1000
  CHECK(a.layers[0].more.size() == 2);
  CHECK_FALSE(a.layers[0].cached);
  CHECK(a.layers[1].more.empty());
  const Image& img = a.images.front().image;
  REQUIRE(img.layers.size() == 4);
  CHECK_THAT(img.config_json, Catch::Contains("stackbuild: layer 'base' (copy, part 2 of 3)"));

  BuildResult b = build_image(r, store, o, null_status());
  CHECK(b.layers[0].cached);
  CHECK(b.layers[1].cached);
  CHECK(b.images.front().image.manifest.digest == img.manifest.digest);

  // --layer-budget 0 turns splitting off: one layer, another image.
  o.layer_budget = 0;
  BuildResult c = build_image(r, store, o, null_status());
  CHECK(c.layers[0].more.empty());
  CHECK(c.images.front().image.layers.size() == 2);

  // A bad layer_budget is an error at its place.
  test::write(tmp.path() / "bad.yaml", "stack: sp\nlayer_budget: huge\nlayers:\n  - {name: a, copy: [{src: tree, dst: /t}]}\n");
  try {
    load_recipe(tmp.path() / "bad.yaml");
    FAIL("no error for layer_budget: huge");
  } catch (const InputError& e) {
    CHECK(e.location().line == 2);
    CHECK_THAT(e.what(), Catch::Contains("layer_budget wants a size"));
  }
}
