// Duplicate libraries across layers (pipeline/duplicate_libraries.hpp): what
// counts as the same library, what the layers below show after whiteouts,
// and what each policy does to the entries of the layer being written.
#include <catch2/catch.hpp>

#include "helpers.hpp"
#include "layer/write.hpp"
#include "pipeline/duplicate_libraries.hpp"
#include "util/error.hpp"

using namespace sb;

namespace {

// Enough of an ELF file for the magic check (read_elf refuses it: the soname comes from the name).
TarEntry fake_elf(const fs::path& host, size_t bytes) {
  std::string data =
      "\x7f"
      "ELF";
  data.resize(bytes, '\0');
  test::write(host, data);
  TarEntry e;
  e.size = bytes;
  e.source = host;
  return e;
}

TarEntry text_file(const fs::path& host, const std::string& text) {
  test::write(host, text);
  TarEntry e;
  e.size = text.size();
  e.source = host;
  return e;
}

TarEntry symlink(const std::string& to) {
  TarEntry e;
  e.type = TarEntry::Type::Symlink;
  e.mode = 0777;
  e.link = to;
  return e;
}

const std::string kCuda = "usr/local/cuda-12.6/lib64/";
const std::string kSite = "usr/local/lib/python3.12/dist-packages/";

}  // namespace

TEST_CASE("duplicate libraries: a library's soname family and version come from its name",
          "[duplicates]") {
  auto n = library_name("libcublas.so.12.6.4.1");
  REQUIRE(n);
  CHECK(n->soname == "libcublas.so.12");
  CHECK(n->version == "12.6.4.1");
  CHECK(library_name("libcublas.so.12")->soname == "libcublas.so.12");
  CHECK(library_name("libcublas.so.12")->version.empty());
  CHECK(library_name("libtorch.so")->soname == "libtorch.so");
  CHECK(library_name("libnvrtc-builtins.so.12.6")->soname == "libnvrtc-builtins.so.12");
  CHECK_FALSE(library_name("libfoo.so.txt"));
  CHECK_FALSE(library_name("libfoo.so.1."));
  CHECK_FALSE(library_name("foo.so.1"));
  CHECK_FALSE(library_name("lib.so.1"));
  CHECK(compare_library_versions("12.6.4.1", "12.6.4.1") == 0);
  CHECK(compare_library_versions("9.1.0", "9.1.0.70") == 0);
  CHECK(compare_library_versions("12.4.5.8", "12.6.4.1") == -1);
  CHECK(compare_library_versions("12.10", "12.9") == 1);
  CHECK_FALSE(compare_library_versions("", "12.6"));
  CHECK(parse_duplicate_policy("", "x") == DuplicatePolicy::Report);
  CHECK(parse_duplicate_policy("upper", "x") == DuplicatePolicy::Upper);
  CHECK_THROWS_WITH(
      parse_duplicate_policy("higher", "STACKBUILD_DUPLICATE_LIBRARIES"),
      Catch::Contains(
          "STACKBUILD_DUPLICATE_LIBRARIES is report, lower, upper or error, not 'higher'"));
}

TEST_CASE("duplicate libraries: the layers below are listed as whiteouts and links leave them",
          "[duplicates]") {
  TempDir dir;
  Store store(dir.path() / "store");
  const fs::path h = dir.path() / "host";
  EntryMap cuda;
  cuda[kCuda + "libcublas.so.12.6.4.1"] = fake_elf(h / "cublas", 100);
  cuda[kCuda + "libcublas.so.12"] = symlink("libcublas.so.12.6.4.1");
  // CUDA ships link-time libraries under lib64/stubs/ (no code, never loaded): not a second copy.
  cuda[kCuda + "stubs/libcublas.so"] = fake_elf(h / "link-time-libcublas", 10);
  cuda["usr/lib/x86_64-linux-gnu/libc.so"] =
      text_file(h / "libc.so", "GROUP ( libc.so.6 )\n");  // a linker script
  EntryMap wheels;
  wheels[kSite + "nvidia/cudnn/lib/libcudnn.so.9"] = fake_elf(h / "cudnn", 50);
  wheels[kSite + "nvidia_cudnn_cu12-9.1.0.70.dist-info/RECORD"] =
      text_file(h / "RECORD",
                "nvidia/cudnn/lib/libcudnn.so.9,sha256=x,50\nnvidia_cudnn_cu12-9.1.0.70.dist-info/"
                "RECORD,,\n");
  // torch bundles libgomp: the wheel's version is not the library's.
  wheels[kSite + "torch/lib/libgomp.so.1"] = fake_elf(h / "gomp", 30);
  wheels[kSite + "torch-2.7.0.dist-info/RECORD"] =
      text_file(h / "RECORD-torch", "torch/lib/libgomp.so.1,sha256=x,30\n");
  EntryMap gone;
  gone[kSite + "nvidia/cudnn/lib/.wh.libcudnn.so.9"] = text_file(h / "empty", "");
  std::vector<Layer> layers = {write_layer(cuda, store, LayerOptions{}),
                               write_layer(wheels, store, LayerOptions{}),
                               write_layer(gone, store, LayerOptions{})};

  auto two = visible_libraries(store, {layers[0], layers[1]}, {"cuda", "wheels"});
  REQUIRE(two.size() == 3);
  CHECK(two[0].layer == "cuda");
  CHECK(two[0].path == kCuda + "libcublas.so.12.6.4.1");
  CHECK(two[0].soname == "libcublas.so.12");
  CHECK(two[0].version == "12.6.4.1");
  CHECK(two[0].version_from == "file name");
  CHECK(two[0].bytes == 100);
  CHECK(two[1].layer == "wheels");
  CHECK(two[1].version == "9.1.0.70");
  CHECK(two[1].version_from == "wheel nvidia-cudnn-cu12 9.1.0.70");
  CHECK(two[2].soname == "libgomp.so.1");
  CHECK(two[2].version.empty());
  CHECK(two[2].version_from.empty());
  // The whiteout in the third layer removes the wheel's copy; listings come back from the store the
  // same.
  auto three = visible_libraries(store, layers, {"cuda", "wheels", "gone"});
  REQUIRE(three.size() == 2);
  CHECK(three[0].path == kCuda + "libcublas.so.12.6.4.1");
  CHECK(library_listing(store, layers[0]).copies.size() == 1);
}

TEST_CASE("duplicate libraries: each policy and the version rule", "[duplicates]") {
  TempDir dir;
  const fs::path h = dir.path() / "host";
  LibraryCopy lower{
      "cuda", kCuda + "libcublas.so.12.6.4.1", "libcublas.so.12", "12.6.4.1", "file name", 100};
  auto upper_entries = [&](const std::string& version) {
    EntryMap e;
    e[kSite + "nvidia/cublas/lib/libcublas.so.12"] = fake_elf(h / "cublas", 200);
    e[kSite + "nvidia/cublas/lib/libcublasLt.so"] = text_file(h / "notelf", "not ELF");
    e[kSite + "nvidia_cublas_cu12-" + version + ".dist-info/RECORD"] =
        text_file(h / ("RECORD-" + version), "nvidia/cublas/lib/libcublas.so.12,sha256=x,200\n");
    return e;
  };

  EntryMap e = upper_entries("12.6.4.1");
  auto upper = entry_libraries("torch", e);
  REQUIRE(upper.size() == 1);  // libcublasLt.so is not ELF
  CHECK(upper[0].version == "12.6.4.1");
  CHECK(upper[0].version_from == "wheel nvidia-cublas-cu12 12.6.4.1");
  auto dups = find_duplicates({lower}, upper);
  REQUIRE(dups.size() == 1);
  CHECK_THAT(describe(dups[0]),
             Catch::Contains("libcublas.so.12 twice: /" + kSite +
                             "nvidia/cublas/lib/libcublas.so.12 in layer torch"));
  CHECK_THAT(describe(dups[0]),
             Catch::Contains("/" + kCuda +
                             "libcublas.so.12.6.4.1 in layer cuda (12.6.4.1 from the file name"));
  CHECK_THAT(duplicate_outcome(dups[0]), Catch::Contains("`duplicates: lower` would save 200 B"));
  // The same path in both is an overwrite, not a second copy.
  LibraryCopy same = lower;
  same.path = upper[0].path;
  CHECK(find_duplicates({same}, upper).empty());

  SECTION("report changes nothing") {
    EntryMap before = e;
    apply_duplicate_policy(DuplicatePolicy::Report, "torch", dups, e);
    CHECK(e.size() == before.size());
    CHECK(e.at(upper[0].path).type == TarEntry::Type::File);
    CHECK_THAT(duplicate_summary(dups), Catch::Contains("1 second copy") &&
                                            Catch::Contains("0 B saved") &&
                                            Catch::Contains("200 B still stored twice"));
  }
  SECTION("lower makes the upper copy a link to the lower one") {
    apply_duplicate_policy(DuplicatePolicy::Lower, "torch", dups, e);
    const TarEntry& link = e.at(upper[0].path);
    CHECK(link.type == TarEntry::Type::Symlink);
    CHECK(link.link == "/" + kCuda + "libcublas.so.12.6.4.1");
    CHECK(link.size == 0);
    CHECK(dups[0].saved == 200);
    CHECK_THAT(duplicate_summary(dups),
               Catch::Contains("200 B saved") && Catch::Contains("0 B still stored twice"));
  }
  SECTION("upper adds a link at the lower path, and saves nothing") {
    apply_duplicate_policy(DuplicatePolicy::Upper, "torch", dups, e);
    CHECK(e.at(upper[0].path).type == TarEntry::Type::File);
    const TarEntry& link = e.at(lower.path);
    CHECK(link.type == TarEntry::Type::Symlink);
    CHECK(link.link == "/" + upper[0].path);
    CHECK(dups[0].saved == 0);
    CHECK_THAT(dups[0].action, Catch::Contains("saves nothing: layer cuda still holds its bytes"));
  }
  SECTION("error fails, naming both copies") {
    CHECK_THROWS_WITH(apply_duplicate_policy(DuplicatePolicy::Error, "torch", dups, e),
                      Catch::Contains("duplicates policy is error") &&
                          Catch::Contains(kCuda + "libcublas.so.12.6.4.1") &&
                          Catch::Contains(upper[0].path));
  }
  SECTION("lower is refused over an older lower copy, upper over an older upper copy") {
    EntryMap newer = upper_entries("12.8.3.14");
    auto nd = find_duplicates({lower}, entry_libraries("torch", newer));
    REQUIRE(nd.size() == 1);
    CHECK_THAT(duplicate_outcome(nd[0]), Catch::Contains("lower copy is older"));
    CHECK_THROWS_WITH(
        apply_duplicate_policy(DuplicatePolicy::Lower, "torch", nd, newer),
        Catch::Contains("a link to the older /" + kCuda + "libcublas.so.12.6.4.1 (12.6.4.1"));
    CHECK(newer.at(upper[0].path).type == TarEntry::Type::File);  // refused before anything changed
    apply_duplicate_policy(DuplicatePolicy::Upper, "torch", nd, newer);
    CHECK(newer.at(lower.path).link == "/" + upper[0].path);

    EntryMap older = upper_entries("12.4.5.8");
    auto od = find_duplicates({lower}, entry_libraries("torch", older));
    CHECK_THROWS_WITH(apply_duplicate_policy(DuplicatePolicy::Upper, "torch", od, older),
                      Catch::Contains("duplicates: upper would make /" + kCuda +
                                      "libcublas.so.12.6.4.1 (12.6.4.1"));
    apply_duplicate_policy(DuplicatePolicy::Lower, "torch", od, older);
    CHECK(older.at(upper[0].path).type == TarEntry::Type::Symlink);
  }
}
