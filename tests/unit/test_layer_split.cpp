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

TEST_CASE("only an empty directory is a group: directories above one come with it", "[split]") {
  // var and var/cache hold nothing but the empty var/cache/apt/partial: no group of their own.
  EntryMap m{{"var", dir()}, {"var/cache", dir()}, {"var/cache/apt", dir()}, {"var/cache/apt/partial", dir()},
             {"a", file(10)}};
  std::vector<std::vector<std::string>> groups;
  auto parts = split_entries(m, 5, [](const std::string& p) { return p.starts_with("var/cache/apt") ? "apt" : p; },
                             &groups);
  CHECK(groups == std::vector<std::vector<std::string>>{{"a"}, {"apt"}});
  REQUIRE(parts.size() == 2);
  CHECK(keys(parts[1]) == std::vector<std::string>{"var", "var/cache", "var/cache/apt", "var/cache/apt/partial"});
}

TEST_CASE("a hardlink whose target is in another group stays with the target", "[split]") {
  EntryMap m{{"a", dir()}, {"a/f", file(60)}, {"z", dir()}, {"z/l", hardlink("a/f")}, {"z/g", file(60)}};
  auto parts = split_entries(m, 100, top_level_group);
  REQUIRE(parts.size() == 2);
  CHECK(keys(parts[0]) == std::vector<std::string>{"a", "a/f", "z", "z/l"});
  CHECK(keys(parts[1]) == std::vector<std::string>{"z", "z/g"});
}

TarEntry whiteout() {
  TarEntry e;
  e.mode = 0;
  return e;
}

TEST_CASE("whiteout and opaque marker paths are recognised", "[split]") {
  CHECK(whiteout_target("a/b/.wh.c") == "a/b/c");
  CHECK(whiteout_target(".wh.top") == "top");
  CHECK(whiteout_target("a/.wh..wh..opq") == "");
  CHECK(whiteout_target("a/b.wh.c") == "");
  CHECK(whiteout_target("a/c") == "");
  CHECK(opaque_dir("a/b/.wh..wh..opq") == "a/b");
  CHECK(opaque_dir(".wh..wh..opq") == ".");
  CHECK(opaque_dir("a/x.wh..wh..opq") == "");
  CHECK(opaque_dir("a/.wh.b") == "");
}

TEST_CASE("group_by_owner takes the owner map, else the fallback", "[split]") {
  GroupFn g = group_by_owner({{"usr/lib/libcudnn.so", "cudnn"}, {"usr/include/nccl.h", "nccl"}},
                             [](const std::string& p) { return "~" + top_level_group(p); });
  CHECK(g("usr/lib/libcudnn.so") == "cudnn");
  CHECK(g("usr/include/nccl.h") == "nccl");
  CHECK(g("usr/local/cuda") == "~usr");
  CHECK(g("etc/ld.so.conf.d/x.conf") == "~etc");
}

TEST_CASE("a whiteout goes with the path it hides: a top-level whiteout with that path's group", "[split]") {
  // ".wh.opt" hides /opt below, and this layer makes opt again: both in group "opt".
  EntryMap m{{".wh.opt", whiteout()}, {"opt", dir()}, {"opt/new", file(50)}, {"srv", dir()}, {"srv/s", file(50)},
             {"bin", dir()}, {"bin/.wh.gone", whiteout()}, {"bin/tool", file(50)}};
  std::vector<std::vector<std::string>> groups;
  auto parts = split_entries(m, 60, top_level_group, &groups);
  REQUIRE(parts.size() == 3);
  CHECK(keys(parts[0]) == std::vector<std::string>{"bin", "bin/.wh.gone", "bin/tool"});
  CHECK(keys(parts[1]) == std::vector<std::string>{".wh.opt", "opt", "opt/new"});
  CHECK(keys(parts[2]) == std::vector<std::string>{"srv", "srv/s"});
  CHECK(groups == std::vector<std::vector<std::string>>{{"bin"}, {"opt"}, {"srv"}});
}

TEST_CASE("an opaque marker and everything under its directory share a part", "[split]") {
  // pkgs/alpha is opaque and holds files of groups alpha and zeta: they are one group,
  // named by the smaller, and no later part holds anything under pkgs/alpha.
  EntryMap m{{"pkgs", dir()},
             {"pkgs/alpha", dir()},
             {"pkgs/alpha/.wh..wh..opq", whiteout()},
             {"pkgs/alpha/a", file(40)},
             {"pkgs/alpha/z", file(40)},
             {"pkgs/beta", dir()},
             {"pkgs/beta/b", file(40)}};
  auto owner = [](const std::string& p) { return p == "pkgs/alpha/z" ? std::string("zeta") : by_package(p); };
  std::vector<std::vector<std::string>> groups;
  auto parts = split_entries(m, 50, owner, &groups);
  REQUIRE(parts.size() == 2);
  CHECK(keys(parts[0]) ==
        std::vector<std::string>{"pkgs", "pkgs/alpha", "pkgs/alpha/.wh..wh..opq", "pkgs/alpha/a", "pkgs/alpha/z"});
  CHECK(keys(parts[1]) == std::vector<std::string>{"pkgs", "pkgs/beta", "pkgs/beta/b"});
  CHECK(groups[0] == std::vector<std::string>{"alpha", "zeta"});
  // Without the marker the three groups pack apart.
  m.erase("pkgs/alpha/.wh..wh..opq");
  CHECK(split_entries(m, 50, owner).size() == 3);
}

TEST_CASE("a whiteout of a directory ties the groups of what this layer puts under it", "[split]") {
  // "d" was a directory below; this layer whites it out and makes d/x (group x) and d/y (group y) again.
  EntryMap m{{".wh.d", whiteout()}, {"d", dir()}, {"d/x", file(30)}, {"d/y", file(30)}, {"e", file(30)}};
  auto g = [](const std::string& p) { return p == "d/x" ? std::string("x") : p == "d/y" ? std::string("y") : p; };
  auto parts = split_entries(m, 40, g);
  // Groups: d (the whiteout), x, y tied as "d"; e alone.
  REQUIRE(parts.size() == 2);
  CHECK(keys(parts[0]) == std::vector<std::string>{".wh.d", "d", "d/x", "d/y"});
  CHECK(keys(parts[1]) == std::vector<std::string>{"e"});
  // Stacked, no part hides what another part of the split holds.
  for (size_t i = 0; i < parts.size(); ++i)
    for (const auto& [p, e] : parts[i]) {
      std::string hidden = whiteout_target(p), emptied = opaque_dir(p);
      for (size_t j = 0; j < parts.size(); ++j) {
        if (j == i) continue;
        for (const auto& [q, f] : parts[j]) {
          if (f.type == TarEntry::Type::Dir) continue;  // parent directories repeat, unchanged
          CHECK_FALSE((!hidden.empty() && (q == hidden || q.starts_with(hidden + "/"))));
          CHECK_FALSE((!emptied.empty() && q.starts_with(emptied + "/")));
        }
      }
    }
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
