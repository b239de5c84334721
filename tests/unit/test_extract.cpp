#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <map>

#include "archive/extract.hpp"
#include "helpers.hpp"
#include "tar_fixture.hpp"

using namespace sb;
using test::RawEntry;

namespace {

// A base directory with the target and, beside it, things a hostile layer
// would like to reach. snapshot() records everything outside the target.
struct Sandbox {
  TempDir base;
  fs::path target = base.path() / "target";
  fs::path outside = base.path() / "outside";
  Sandbox() {
    fs::create_directories(target);
    test::write(outside / "secret", "secret", 0600);
    fs::create_directories(outside / "dir");
    ::chmod((outside / "dir").c_str(), 0700);
  }
  std::map<std::string, std::string> snapshot() const {
    std::map<std::string, std::string> out;
    for (auto it = fs::recursive_directory_iterator(base.path()); it != fs::recursive_directory_iterator(); ++it) {
      if (it->path() == target) {
        it.disable_recursion_pending();
        continue;
      }
      struct stat st;
      ::lstat(it->path().c_str(), &st);
      std::string v = std::to_string(st.st_mode);
      if (S_ISREG(st.st_mode)) v += ":" + read_file(it->path());
      out[it->path().string()] = v;
    }
    return out;
  }
  void apply(const std::vector<std::vector<RawEntry>>& layers, ExtractOptions o = {}, bool gzip = false,
             bool gnu = false) {
    ExtractStats stats;
    TempDir dir;  // away from base, which must stay as it was
    std::vector<fs::path> blobs;
    for (const auto& l : layers) {
      blobs.push_back(dir.path() / ("layer" + std::to_string(blobs.size()) + ".tar"));
      test::make_tar(blobs.back(), l, gzip, gnu);
    }
    extract_layers(blobs, target, o, stats);
  }
};

// Refused as extract_layer() refuses, and as extract_layers() does with
// later layers inflated ahead (gzip) or opened ahead (plain tar).
void expect_refused(const std::vector<std::vector<RawEntry>>& layers, const std::string& why,
                    ExtractOptions o = {}, bool gzip = false) {
  for (int ahead : {0, 3}) {
    Sandbox sb;
    auto before = sb.snapshot();
    o.layers_ahead = ahead;
    CHECK_THROWS_WITH(sb.apply(layers, o, gzip), Catch::Contains(why));
    CHECK(sb.snapshot() == before);
  }
}

}  // namespace

TEST_CASE("extractor refuses hostile layers and writes nothing outside the target", "[extract]") {
  SECTION("traversal") { expect_refused({{{"../outside/evil", 'f', "x"}}}, "'..' component"); }
  SECTION("traversal in the middle") { expect_refused({{{"a/../../outside/evil", 'f', "x"}}}, "'..' component"); }
  SECTION("absolute path") { expect_refused({{{"/tmp/evil", 'f', "x"}}}, "absolute path"); }
  SECTION("write through a symlink that leaves the root") {
    expect_refused({{{"esc", 'l', "../outside"}, {"esc/evil", 'f', "x"}}}, "leads out of the root");
  }
  SECTION("write through a symlink placed by a lower layer") {
    expect_refused({{{"up", 'l', ".."}}, {{"up/outside/evil", 'f', "x"}}}, "leads out of the root");
  }
  SECTION("symlink chains that climb out") {
    expect_refused({{{"a", 'l', "b/.."}, {"b", 'l', "c/../.."}, {"c", 'd'}, {"a/x", 'f', "x"}}},
                   "leads out of the root");
  }
  SECTION("hardlink to a path outside") {
    expect_refused({{{"hl", 'h', "../outside/secret"}}}, "'..' component");
  }
  SECTION("hardlink through an escaping symlink") {
    expect_refused({{{"esc", 'l', "../outside"}, {"hl", 'h', "esc/secret"}}}, "leads out of the root");
  }
  SECTION("hardlink to nothing") { expect_refused({{{"hl", 'h', "missing"}}}, "does not exist"); }
  SECTION("whiteout of ..") { expect_refused({{{"a", 'd'}}, {{"a/.wh...", 'f', ""}}}, "whiteout of '..'"); }
  SECTION("bare whiteout") { expect_refused({{{"a/.wh.", 'f', ""}}}, "whiteout names nothing"); }
  SECTION("duplicate entries") {
    expect_refused({{{"f", 'f', "one"}, {"f", 'f', "two"}}}, "appears twice");
  }
  SECTION("device nodes unless allowed") { expect_refused({{{"null", 'c'}}}, "device nodes are not allowed"); }
  SECTION("tar bomb past the size limit") {
    ExtractOptions o;
    o.max_bytes = 1 << 20;
    expect_refused({{{"big", 'f', "", 0644, 8 << 20}}}, "size limit", o);
  }
  SECTION("gzip bomb past the size limit") {
    ExtractOptions o;
    o.max_bytes = 4 << 20;
    expect_refused({{{"a", 'f', "", 0644, 3 << 20}, {"b", 'f', "", 0644, 3 << 20}}}, "size limit", o, true);
  }
  SECTION("too many entries") {
    ExtractOptions o;
    o.max_entries = 3;
    expect_refused({{{"a", 'f'}, {"b", 'f'}, {"c", 'f'}, {"d", 'f'}}}, "entries", o);
  }
}

TEST_CASE("extractor resolves symlinks inside the image root", "[extract]") {
  Sandbox sb;
  auto before = sb.snapshot();
  // An absolute symlink means the image's /etc, not the host's.
  sb.apply({{{"etc", 'd', "", 0755}, {"link", 'l', "/etc"}, {"usr", 'd'}, {"usr/lib", 'd'}, {"lib", 'l', "usr/lib"}},
            {{"link/passwd", 'f', "image"}, {"lib/libx.so", 'f', "x"}}});
  CHECK(read_file(sb.target / "etc" / "passwd") == "image");
  CHECK(read_file(sb.target / "usr" / "lib" / "libx.so") == "x");
  CHECK(fs::is_symlink(sb.target / "lib"));
  CHECK(sb.snapshot() == before);
}

TEST_CASE("a path resolves anew after an entry of the layer changed a directory on it", "[extract]") {
  // Files of one directory in a row share its resolution; an entry that
  // replaces the directory (or a link to one) in between must end that.
  SECTION("a symlink replaces the directory: the next file goes where the link leads") {
    Sandbox sb;
    sb.apply({{{"a", 'd'}, {"b", 'd'}},
              {{"a/f1", 'f', "1"}, {"a", 'l', "b"}, {"a/f2", 'f', "2"}, {"a/f3", 'f', "3"}}});
    CHECK(fs::is_symlink(sb.target / "a"));
    CHECK(read_file(sb.target / "b" / "f2") == "2");
    CHECK(read_file(sb.target / "b" / "f3") == "3");
    CHECK_FALSE(fs::exists(sb.target / "b" / "f1"));  // it went with the directory
  }
  SECTION("a directory replaces the symlink: the next file goes into it and not where the link led") {
    Sandbox sb;
    sb.apply({{{"b", 'd'}, {"a", 'l', "b"}},
              {{"a/f1", 'f', "1"}, {"a", 'd'}, {"a/f2", 'f', "2"}}});
    CHECK(fs::is_directory(fs::symlink_status(sb.target / "a")));
    CHECK(read_file(sb.target / "a" / "f2") == "2");
    CHECK_FALSE(fs::exists(sb.target / "b" / "f2"));
    CHECK(read_file(sb.target / "b" / "f1") == "1");
  }
  SECTION("a whiteout removes the directory: the next file makes it anew") {
    Sandbox sb;
    sb.apply({{{"a", 'd'}, {"b", 'l', "a"}}, {{"b/f1", 'f', "1"}, {".wh.a", 'f', ""}, {"b/f2", 'f', "2"}}});
    CHECK(read_file(sb.target / "a" / "f2") == "2");
    CHECK_FALSE(fs::exists(sb.target / "a" / "f1"));
  }
  SECTION("a link that leaves the root replaces the directory: the next file is refused") {
    expect_refused({{{"a", 'd'}}, {{"a/f1", 'f', "1"}, {"a", 'l', "../outside"}, {"a/f2", 'f', "2"}}},
                   "leads out of the root");
  }
}

namespace {
// Files queued ahead of the ones a test is about, so that the writer threads
// are still busy with these when the extractor reaches the entries after
// them (a file's bytes, or its creation were that moved to them, may lag).
std::vector<RawEntry> backlog(std::vector<RawEntry> entries) {
  std::vector<RawEntry> out{{"backlog", 'd'}};
  for (int i = 0; i < 24; ++i) out.push_back({"backlog/f" + std::to_string(i), 'f', std::string(1 << 20, 'b')});
  out.insert(out.end(), entries.begin(), entries.end());
  return out;
}
}  // namespace

TEST_CASE("entries of one layer that reach a file of the same layer see it written", "[extract]") {
  // Whatever a later entry of the layer does at a file of the layer (by its
  // own path, or through a link to its directory) happens as if the file had
  // been written whole at its turn, whatever the writer threads still hold.
  SECTION("a second file at the same place through a link to its directory wins") {
    Sandbox sb;
    sb.apply({{{"x", 'd'}, {"l", 'l', "x"}}, backlog({{"x/d", 'f', "first"}, {"l/d", 'f', "second"}})});
    CHECK(read_file(sb.target / "x" / "d") == "second");
  }
  SECTION("a directory at the place of a file made before it replaces the file") {
    Sandbox sb;
    sb.apply({{{"x", 'd'}, {"l", 'l', "x"}}, backlog({{"x/d", 'f', "file"}, {"l/d", 'd'}, {"l/d/in", 'f', "in"}})});
    CHECK(read_file(sb.target / "x" / "d" / "in") == "in");
  }
  SECTION("a symlink at the place of a file made before it replaces the file") {
    Sandbox sb;
    sb.apply({{{"x", 'd'}, {"l", 'l', "x"}}, backlog({{"x/d", 'f', "file"}, {"l/d", 'l', "elsewhere"}})});
    CHECK(fs::read_symlink(sb.target / "x" / "d") == "elsewhere");
  }
  SECTION("a hardlink to a file of the layer made just before it") {
    Sandbox sb;
    std::vector<RawEntry> layer = backlog({{"x", 'd'}});
    for (int i = 0; i < 50; ++i) layer.push_back({"x/f" + std::to_string(i), 'f', std::string(70000, 'a' + i % 26)});
    layer.push_back({"x/hard", 'h', "x/f49"});
    layer.push_back({"l", 'l', "x"});
    layer.push_back({"x/hard2", 'h', "l/f48"});
    sb.apply({layer});
    CHECK(read_file(sb.target / "x" / "hard") == std::string(70000, 'a' + 49 % 26));
    CHECK(read_file(sb.target / "x" / "hard2") == std::string(70000, 'a' + 48 % 26));
  }
  SECTION("an opaque marker reached through a link removes the file made before it there") {
    Sandbox sb;
    sb.apply({{{"x", 'd'}, {"l", 'l', "x"}, {"x/old", 'f', "old"}},
              backlog({{"x/new", 'f', "new"}, {"l/.wh..wh..opq", 'f', ""}, {"l/after", 'f', "after"}})});
    CHECK_FALSE(fs::exists(sb.target / "x" / "old"));
    CHECK_FALSE(fs::exists(sb.target / "x" / "new"));
    CHECK(read_file(sb.target / "x" / "after") == "after");
  }
  SECTION("a whiteout reached through a link removes the file made before it there") {
    Sandbox sb;
    sb.apply({{{"x", 'd'}, {"l", 'l', "x"}}, backlog({{"x/f", 'f', "f"}, {"l/.wh.f", 'f', ""}})});
    CHECK_FALSE(fs::exists(sb.target / "x" / "f"));
  }
  SECTION("a file under a file of the layer is refused as under any file") {
    expect_refused({backlog({{"f", 'f', "file"}, {"f/under", 'f', "x"}})}, "is not a directory");
    expect_refused({{{"x", 'd'}, {"l", 'l', "x"}}, backlog({{"x/f", 'f', "file"}, {"l/f/under", 'f', "x"}})},
                   "is not a directory");
  }
  SECTION("a file under a directory that replaced earlier files of the layer") {
    Sandbox sb;
    sb.apply({{{"d", 'd'}, {"d/sub", 'd'}}, backlog({{"d/sub/a", 'f', "a"}, {"d", 'f', "now a file"}})});
    CHECK(read_file(sb.target / "d") == "now a file");
  }
}

TEST_CASE("a directory entry replaces a symlink instead of chmod-ing through it", "[extract]") {
  Sandbox sb;
  auto before = sb.snapshot();
  std::string out = fs::relative(sb.outside / "dir", sb.target).string();
  sb.apply({{{"d", 'l', "/" + out}}, {{"d", 'd', "", 0777}}});
  CHECK(fs::is_directory(fs::symlink_status(sb.target / "d")));
  CHECK(sb.snapshot() == before);
}

TEST_CASE("whiteouts and opaque directories hide lower layers", "[extract]") {
  Sandbox sb;
  sb.apply({{{"a", 'd'}, {"a/keep", 'f', "k"}, {"a/gone", 'f', "g"}, {"b", 'd'}, {"b/old", 'f', "o"}},
            {{"a/.wh.gone", 'f', ""}, {"b/.wh..wh..opq", 'f', ""}, {"b/new", 'f', "n"}}});
  CHECK(fs::exists(sb.target / "a" / "keep"));
  CHECK_FALSE(fs::exists(sb.target / "a" / "gone"));
  CHECK_FALSE(fs::exists(sb.target / "a" / ".wh.gone"));
  CHECK_FALSE(fs::exists(sb.target / "b" / "old"));
  CHECK(read_file(sb.target / "b" / "new") == "n");
  CHECK_FALSE(fs::exists(sb.target / "b" / ".wh..wh..opq"));
}

TEST_CASE("names that are not UTF-8 come out as the bytes archived", "[extract]") {
  // Paths on Linux are bytes; a base image may hold names in Latin-1.
  for (bool gnu : {false, true}) {
    CAPTURE(gnu);
    Sandbox sb;
    sb.apply({{{"d\xe9", 'd', "", 0755},
               {"d\xe9/t\xffx", 'f', "data", 0755},
               {"d\xe9/hard", 'h', "d\xe9/t\xffx"},
               {"d\xe9/sym", 'l', "t\xffx"},
               {"d\xe9/gone\xfe", 'f', "x"}},
              {{"d\xe9/.wh.gone\xfe", 'f', ""}}},
             {}, false, gnu);
    fs::path dir = sb.target / "d\xe9";
    CHECK(read_file(dir / "t\xffx") == "data");
    struct stat a, b;
    REQUIRE(::stat((dir / "t\xffx").c_str(), &a) == 0);
    REQUIRE(::stat((dir / "hard").c_str(), &b) == 0);
    CHECK(a.st_ino == b.st_ino);
    CHECK(fs::read_symlink(dir / "sym") == "t\xffx");
    CHECK_FALSE(fs::exists(fs::symlink_status(dir / "gone\xfe")));
  }
}

TEST_CASE("a refused name that is not UTF-8 is shown in hex", "[extract]") {
  expect_refused({{{"../\xffx", 'f', "x"}}}, "refusing layer entry '../\\xFFx': path has a '..' component");
}

TEST_CASE("files - modes - symlinks and hardlinks come out as archived", "[extract]") {
  Sandbox sb;
  sb.apply({{{"bin", 'd', "", 0755}, {"bin/tool", 'f', "#!/bin/sh\n", 0755}, {"bin/alias", 'h', "bin/tool"},
             {"bin/link", 'l', "tool"}, {"secret", 'f', "s", 0600}}});
  struct stat a, b;
  ::stat((sb.target / "bin/tool").c_str(), &a);
  ::stat((sb.target / "bin/alias").c_str(), &b);
  CHECK(a.st_ino == b.st_ino);
  CHECK((a.st_mode & 07777) == 0755);
  CHECK(fs::read_symlink(sb.target / "bin/link") == "tool");
  ::stat((sb.target / "secret").c_str(), &a);
  CHECK((a.st_mode & 07777) == 0600);
  CHECK(a.st_mtime == 1000);
}

namespace {

// Every path below `root` with its type, mode, link target and contents,
// and a file's time (a directory's is the time it was last changed when no
// layer names it).
std::map<std::string, std::string> tree_of(const fs::path& root) {
  std::map<std::string, std::string> out;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
    struct stat st;
    ::lstat(it->path().c_str(), &st);
    std::string v = std::to_string(st.st_mode);
    if (!S_ISDIR(st.st_mode)) v += " " + std::to_string(st.st_mtime);
    if (S_ISREG(st.st_mode)) v += ":" + read_file(it->path());
    if (S_ISLNK(st.st_mode)) v += "->" + fs::read_symlink(it->path()).string();
    out[fs::relative(it->path(), root).string()] = v;
  }
  return out;
}

// Four gzip layers: files, many small files, a large one, then whiteouts
// and replacements of what the layers below put there.
std::vector<fs::path> layered_image(const fs::path& dir) {
  std::vector<std::vector<RawEntry>> layers(4);
  layers[0] = {{"etc", 'd'}, {"etc/a", 'f', "a"}, {"lib", 'd'}, {"lib/x", 'f', "x0"}, {"opt", 'd'}};
  layers[1] = {{"opt/many", 'd'}};
  for (int i = 0; i < 300; ++i) layers[1].push_back({"opt/many/f" + std::to_string(i), 'f', std::to_string(i)});
  std::string big;
  for (int i = 0; big.size() < (6u << 20); ++i) big += std::to_string(i * 2654435761u) + "\n";
  layers[2] = {{"lib/x", 'f', "x2"}, {"lib/big", 'f', big}, {"lib/link", 'l', "big"}};
  layers[3] = {{"opt/many/.wh.f7", 'f', ""}, {"etc/.wh..wh..opq", 'f', ""}, {"etc/b", 'f', "b"},
               {"lib/big", 'f', "small now"}};
  std::vector<fs::path> blobs;
  for (const auto& l : layers) {
    blobs.push_back(dir / ("layer" + std::to_string(blobs.size()) + ".tar.gz"));
    test::make_tar(blobs.back(), l, true);
  }
  return blobs;
}

}  // namespace

TEST_CASE("extract_layers with layers inflated ahead gives the tree of one layer at a time", "[extract]") {
  TempDir dir;
  std::vector<fs::path> blobs = layered_image(dir.path());
  fs::path one = dir.path() / "one", ahead = dir.path() / "ahead";
  fs::create_directories(one);
  fs::create_directories(ahead);
  ExtractStats s1, s2;
  for (const auto& b : blobs) extract_layer(b, one, {}, s1);
  ExtractOptions o;
  o.layers_ahead = 3;
  extract_layers(blobs, ahead, o, s2);
  CHECK(tree_of(one) == tree_of(ahead));
  CHECK(s1.entries == s2.entries);
  CHECK(s1.bytes == s2.bytes);
  CHECK(read_file(ahead / "lib" / "x") == "x2");
  CHECK_FALSE(fs::exists(ahead / "opt" / "many" / "f7"));
  CHECK_FALSE(fs::exists(ahead / "etc" / "a"));
}

TEST_CASE("extract_layers names the layer at fault when a later one read ahead is broken", "[extract]") {
  // Layer 2's gzip data cut short (its reader opens and starts inflating
  // while layers 0 and 1 are extracted, and fails later), or its blob gone
  // (its reader fails to open, then): either way layers 0 and 1 are applied
  // whole, layer 2 is the one named, and layer 3 is never applied.
  for (bool gone : {false, true}) {
    TempDir dir;
    std::vector<fs::path> blobs = layered_image(dir.path());
    if (gone)
      fs::remove(blobs[2]);
    else
      fs::resize_file(blobs[2], fs::file_size(blobs[2]) / 2);
    for (int ahead : {0, 1, 3}) {
      CAPTURE(gone, ahead);
      fs::path target = dir.path() / ("t" + std::to_string(ahead));
      fs::create_directories(target);
      ExtractOptions o;
      o.layers_ahead = ahead;
      ExtractStats stats;
      std::vector<size_t> failed;
      CHECK_THROWS_WITH(extract_layers(blobs, target, o, stats, [&](size_t i) { failed.push_back(i); }),
                        Catch::Contains(blobs[2].string()));
      CHECK(failed == std::vector<size_t>{2});
      CHECK(fs::exists(target / "opt" / "many" / "f299"));
      CHECK_FALSE(fs::exists(target / "etc" / "b"));
    }
  }
}

TEST_CASE("extract_layers lets the caller's check of the failed layer throw instead", "[extract]") {
  TempDir dir;
  std::vector<fs::path> blobs = layered_image(dir.path());
  fs::resize_file(blobs[1], fs::file_size(blobs[1]) / 2);
  fs::path target = dir.path() / "t";
  fs::create_directories(target);
  ExtractOptions o;
  o.layers_ahead = 2;
  ExtractStats stats;
  CHECK_THROWS_WITH(
      extract_layers(blobs, target, o, stats,
                     [&](size_t i) { throw Error("layer " + std::to_string(i) + " is not its digest"); }),
      "layer 1 is not its digest");
}

TEST_CASE("a gzip layer whose damage lies past the tar's end is still refused", "[extract]") {
  // libarchive stops at the tar's end-of-archive blocks; the gzip trailer
  // after them (CRC-32 and length) is checked all the same.
  TempDir dir;
  fs::path blob = dir.path() / "layer.tar.gz";
  test::make_tar(blob, {{"a", 'f', "content"}, {"b", 'f', std::string(100000, 'x')}}, true);
  std::string bytes = read_file(blob);
  SECTION("its trailer cut off") {
    test::write(blob, bytes.substr(0, bytes.size() - 6));
    fs::path target = dir.path() / "t";
    fs::create_directories(target);
    ExtractStats stats;
    CHECK_THROWS_WITH(extract_layer(blob, target, {}, stats), Catch::Contains(blob.string()));
  }
  SECTION("its CRC-32 wrong") {
    bytes[bytes.size() - 8] ^= 0x5a;
    test::write(blob, bytes);
    fs::path target = dir.path() / "t";
    fs::create_directories(target);
    ExtractStats stats;
    CHECK_THROWS_WITH(extract_layer(blob, target, {}, stats), Catch::Contains("CRC"));
  }
  SECTION("whole, it extracts") {
    fs::path target = dir.path() / "t";
    fs::create_directories(target);
    ExtractStats stats;
    extract_layer(blob, target, {}, stats);
    CHECK(read_file(target / "a") == "content");
  }
}
