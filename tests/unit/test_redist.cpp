// NVIDIA redist manifests and archives: parsing (new and old manifests,
// cuDNN's CUDA variants), selection, and a fixture mirror on 127.0.0.1 with
// archives in NVIDIA's layout made from this machine's /usr/local/cuda when
// it has one.
#include <catch2/catch.hpp>

#include <archive.h>
#include <archive_entry.h>

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "helpers.hpp"
#include "http_server.hpp"
#include "fetch/redist/install.hpp"
#include "tar_fixture.hpp"
#include "util/status.hpp"

using namespace sb;
using namespace sb::redist;

namespace {

struct Member {
  std::string name, data, link;
};

std::string make_tar_xz(const std::vector<Member>& members) {
  std::string out;
  archive* a = archive_write_new();
  archive_write_set_format_pax_restricted(a);
  archive_write_add_filter_xz(a);
  archive_write_open(a, &out, nullptr,
                     [](archive*, void* o, const void* b, size_t n) -> la_ssize_t {
                       static_cast<std::string*>(o)->append(static_cast<const char*>(b), n);
                       return static_cast<la_ssize_t>(n);
                     },
                     nullptr);
  for (const auto& m : members) {
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, m.name.c_str());
    if (!m.link.empty()) {
      archive_entry_set_filetype(e, AE_IFLNK);
      archive_entry_set_symlink(e, m.link.c_str());
      archive_entry_set_perm(e, 0777);
    } else {
      archive_entry_set_filetype(e, AE_IFREG);
      archive_entry_set_perm(e, 0644);
      archive_entry_set_size(e, static_cast<la_int64_t>(m.data.size()));
    }
    archive_write_header(a, e);
    if (m.link.empty()) archive_write_data(a, m.data.data(), m.data.size());
    archive_entry_free(e);
  }
  archive_write_close(a);
  archive_write_free(a);
  return out;
}

// A real file of the machine's CUDA when there is one, else stand-in bytes.
std::string cuda_file(const std::string& rel, size_t fallback) {
  fs::path p = fs::path("/usr/local/cuda") / rel;
  std::error_code ec;
  if (fs::is_regular_file(p, ec) && fs::file_size(p) < (8u << 20)) return read_file(p);
  return std::string(fallback, 'C');
}

struct Mirror {
  std::map<std::string, std::string> files;  // path below /compute/ -> bytes
  test::HttpServer server{[this](const test::HttpRequest& r) {
    auto it = files.find(r.path.substr(std::string("/compute/").size()));
    if (!r.path.starts_with("/compute/") || it == files.end()) return test::http_response(404, "no");
    return test::http_response(200, it->second);
  }};
  nlohmann::json manifest = {{"release_date", "2024-04-15"}, {"release_label", "12.4.1"}, {"release_product", "cuda"}};

  void add(const std::string& comp, const std::string& version, const std::string& platform,
           const std::vector<Member>& members) {
    std::string top = comp + "-" + platform + "-" + version + "-archive";
    std::vector<Member> ms;
    for (auto m : members) {
      m.name = top + "/" + m.name;
      ms.push_back(m);
    }
    std::string blob = make_tar_xz(ms);
    std::string rel = comp + "/" + platform + "/" + top + ".tar.xz";
    files["cuda/redist/" + rel] = blob;
    manifest[comp]["name"] = comp;
    manifest[comp]["license"] = "CUDA Toolkit";
    manifest[comp]["version"] = version;
    manifest[comp][platform] = {{"relative_path", rel}, {"sha256", Digest::of_bytes(blob).hex()},
                                {"md5", "0"}, {"size", std::to_string(blob.size())}};
  }
  void publish() { files["cuda/redist/redistrib_12.4.1.json"] = manifest.dump(); }
  std::string base() { return server.url("/compute"); }
};

// A fetcher that tries once and prints nothing.
struct QuietFetcher {
  FILE* devnull = fopen("/dev/null", "w");
  std::unique_ptr<Status> status = make_status(StatusMode::Plain, devnull);
  std::unique_ptr<fetch::Fetcher> fetcher;
  explicit QuietFetcher(const Store& store) {
    fetch::FetchOptions fo;
    fo.retry.attempts = 1;
    fetcher = fetch::make_fetcher(store, fo, *status);
  }
  ~QuietFetcher() {
    fetcher.reset();
    status.reset();
    fclose(devnull);
  }
};

}  // namespace

TEST_CASE("redist: manifests parse with and without the newer keys and with cuDNN variants", "[redist]") {
  std::string cudnn = R"({"release_date": "2024-04-01", "release_label": "9.1.0", "release_product": "cudnn",
    "cudnn": {"name": "NVIDIA CUDA Deep Neural Network library", "license": "cudnn", "version": "9.1.0.70",
      "cuda_variant": ["11", "12"],
      "linux-x86_64": {
        "cuda11": {"relative_path": "cudnn/linux-x86_64/cudnn-linux-x86_64-9.1.0.70_cuda11-archive.tar.xz",
                   "sha256": ")" + std::string(64, 'a') + R"(", "md5": "x", "size": "100"},
        "cuda12": {"relative_path": "cudnn/linux-x86_64/cudnn-linux-x86_64-9.1.0.70_cuda12-archive.tar.xz",
                   "sha256": ")" + std::string(64, 'b') + R"(", "md5": "y", "size": "200"}}}})";
  Manifest m = parse_manifest(cudnn, "cudnn.json");
  CHECK(m.release_product == "cudnn");
  CHECK(m.components.at("cudnn").cuda_variants == std::vector<std::string>{"11", "12"});
  auto s = select(m, {"cudnn"}, "linux-x86_64", 12);
  REQUIRE(s.size() == 1);
  CHECK(s[0].variant == "cuda12");
  CHECK(s[0].artifact.size == 200);
  CHECK_THROWS_WITH(select(m, {"cudnn"}, "linux-x86_64", 13), Catch::Contains("no build for CUDA 13"));
  CHECK_THROWS_WITH(select(m, {"cudnn"}, "linux-sbsa", 12), Catch::Contains("has no linux-sbsa archive"));

  // An old manifest: no release_* keys, no license.
  std::string old = R"({"cuda_cudart": {"name": "CUDA Runtime", "version": "11.4.43",
    "linux-x86_64": {"relative_path": "cuda_cudart/linux-x86_64/cuda_cudart-linux-x86_64-11.4.43-archive.tar.xz",
                     "sha256": ")" + std::string(64, 'c') + R"(", "md5": "z", "size": "1234"}}})";
  Manifest o = parse_manifest(old, "old.json");
  CHECK(o.release_label.empty());
  CHECK(select(o, {"cudart"}, "linux-x86_64", 11)[0].component == "cuda_cudart");
  CHECK_THROWS_WITH(select(o, {"cudartt"}, "linux-x86_64", 11), Catch::Contains("did you mean 'cudart'"));
  std::string bad_size = old;
  bad_size.replace(bad_size.find("\"1234\""), 6, "\"12k\"");
  CHECK_THROWS_WITH(parse_manifest(bad_size, "old.json"), Catch::Contains("size '12k' is not a number"));
  CHECK_THROWS_WITH(parse_manifest("[1]", "x.json"), Catch::Contains("not a JSON object"));
  // Found by fuzz_registry: a release_* field that is not a string escaped as nlohmann's type_error.
  CHECK_THROWS_WITH(parse_manifest(R"({"release_date": {"name": "x"}})", "y.json"),
                    Catch::Equals("redist manifest y.json: 'release_date' is not a string"));
  CHECK_THROWS_WITH(parse_manifest(R"({"release_label": 9})", "y.json"), Catch::Contains("'release_label' is not a"));
  CHECK(platform_for("arm64") == "linux-sbsa");
}

TEST_CASE("redist: a fixture mirror unpacks into /usr/local/cuda-X.Y", "[redist]") {
  Mirror mirror;
  std::string so = cuda_file("lib64/libcudart.so.13", 2048);
  mirror.add("cuda_cudart", "12.4.127", "linux-x86_64",
             {{"include/cuda_runtime_api.h", cuda_file("include/cuda_runtime_api.h", 512), ""},
              {"lib/libcudart.so.12.4.127", so, ""},
              {"lib/libcudart.so.12", "", "libcudart.so.12.4.127"},
              {"LICENSE", "license text\n", ""}});
  mirror.add("cuda_nvcc", "12.4.131", "linux-x86_64", {{"bin/nvcc.profile", "TOP = $(_HERE_)/..\n", ""}});
  mirror.add("libcublas", "12.4.5.8", "linux-sbsa", {{"lib/libcublas.so.12", "x", ""}});
  mirror.publish();
  TempDir dir{fs::temp_directory_path()};
  Store store(dir.path() / "store");
  QuietFetcher quiet(store);
  fetch::Fetcher* fetcher = quiet.fetcher.get();
  fs::path root = dir.path() / "root";

  auto got = install_components(mirror.base(), "cuda", "12.4.1", {"nvcc"}, "linux-x86_64", "12.4", root, store,
                                *fetcher);
  CHECK(got.size() == 2);  // nvcc brings the runtime
  fs::path cuda = root / "usr/local/cuda-12.4";
  CHECK(test::slurp(cuda / "lib64/libcudart.so.12.4.127") == so);
  CHECK(fs::read_symlink(cuda / "lib64/libcudart.so.12") == "libcudart.so.12.4.127");
  CHECK(fs::exists(cuda / "include/cuda_runtime_api.h"));
  CHECK(fs::exists(cuda / "bin/nvcc.profile"));
  CHECK(test::slurp(cuda / "share/doc/cuda_cudart/LICENSE") == "license text\n");
  CHECK(fs::read_symlink(root / "usr/local/cuda") == "cuda-12.4");
  CHECK(test::slurp(root / "etc/ld.so.conf.d/000_cuda-12.4.conf") == "/usr/local/cuda-12.4/lib64\n");
  // The toolkit's record of itself, as NVIDIA's installer writes it: the release and each component.
  auto vj = nlohmann::json::parse(test::slurp(cuda / "version.json"));
  CHECK(vj["cuda"]["name"] == "CUDA SDK");
  CHECK(vj["cuda"]["version"] == "12.4.1");
  CHECK(vj["cuda_cudart"]["version"] == "12.4.127");
  CHECK(vj.size() == 3);  // cuda, cuda_cudart, cuda_nvcc
  CHECK(vj.contains("cuda_nvcc"));
  CHECK_THROWS_WITH(install_components(mirror.base(), "cuda", "12.4.1", {"cublas"}, "linux-x86_64", "12.4",
                                       dir.path() / "r2", store, *fetcher),
                    Catch::Contains("libcublas 12.4.5.8 has no linux-x86_64 archive"));

  // A manifest whose size or sha256 is wrong: an error, and nothing more in the store.
  auto blobs = [&] {
    size_t n = 0;
    for (auto& e : fs::recursive_directory_iterator(dir.path() / "store/blobs")) n += e.is_regular_file();
    return n;
  };
  for (const char* key : {"size", "sha256"}) {
    Mirror bad;
    bad.add("cuda_cudart", "12.4.127", "linux-x86_64", {{"lib/libcudart.so.12", "different bytes", ""}});
    if (std::string(key) == "size") bad.manifest["cuda_cudart"]["linux-x86_64"]["size"] = "3";
    else bad.manifest["cuda_cudart"]["linux-x86_64"]["sha256"] = std::string(64, '0');
    bad.publish();
    size_t before = blobs();
    INFO(key);
    CHECK_THROWS_WITH(install_components(bad.base(), "cuda", "12.4.1", {"cudart"}, "linux-x86_64", "12.4",
                                         dir.path() / "r3", store, *fetcher),
                      Catch::Contains("cuda_cudart-linux-x86_64-12.4.127-archive.tar.xz"));
    CHECK(blobs() == before + 1);  // the (unpinned) manifest only
  }
}

TEST_CASE("redist: hostile archives are refused", "[redist]") {
  TempDir dir{fs::temp_directory_path()};
  fs::path root = dir.path() / "root";
  auto attempt = [&](const std::vector<Member>& ms) {
    fs::path f = dir.path() / "a.tar.xz";
    test::write(f, make_tar_xz(ms));
    install_archive(f, "a.tar.xz", "x", "12.4", root);
  };
  CHECK_THROWS_WITH(attempt({{"top/../../etc/passwd", "x", ""}}), Catch::Contains("a.tar.xz: refusing archive entry"));
  CHECK_THROWS_WITH(attempt({{"top/lib/evil", "", "/etc"}}), Catch::Contains("leaves the archive"));
  CHECK_THROWS_WITH(attempt({{"top/lib/up", "", "../../../../.."}}), Catch::Contains("leaves the archive"));
  CHECK_THROWS_WITH(attempt({{"top/include", "", "."}, {"top/include/x.h", "y", ""}}),
                    Catch::Contains("goes through a non-directory"));
  CHECK_FALSE(fs::exists(dir.path() / "etc"));
}

// A link that resolves inside when made, through a name that is not there
// yet and then "..": that name, made later as a link to ".", takes it one
// level up for each such pair, out of the tree (the fuzz seed
// redist_install/seed-late-link reaches /tmp that way). Refused when made;
// ".." over a directory that is there still works.
TEST_CASE("redist: a link may not climb past a name that is not there yet", "[redist][hostile]") {
  TempDir dir{fs::temp_directory_path()};
  fs::path root = dir.path() / "root";
  auto attempt = [&](const std::vector<Member>& ms) {
    fs::path f = dir.path() / "a.tar.xz";
    test::write(f, make_tar_xz(ms));
    install_archive(f, "a.tar.xz", "x", "12.4", root);
  };
  CHECK_THROWS_WITH(attempt({{"top/x", "", "y/z/../../tmp"}, {"top/z/f", "f", ""}, {"top/y", "", "."}}),
                    Catch::Contains("leaves the archive"));
  CHECK_FALSE(fs::exists(fs::symlink_status(root / "usr/local/cuda-12.4/x")));
  fs::remove_all(root);
  attempt({{"top/lib/libx.so.1", "x", ""}, {"top/include/x", "", "../lib64/libx.so.1"}});
  CHECK(read_file(root / "usr/local/cuda-12.4/include/x") == "x");
}

TEST_CASE("redist: install_archive says what it wrote, so a layer can be split by component", "[redist]") {
  TempDir dir{fs::temp_directory_path()};
  fs::path root = dir.path() / "root";
  fs::path a = dir.path() / "x.tar.xz", b = dir.path() / "y.tar.xz";
  test::write(a, make_tar_xz({{"x-archive/lib/libx.so.1", "x", ""},
                              {"x-archive/lib/libx.so", "", "libx.so.1"},
                              {"x-archive/LICENSE", "lx", ""}}));
  test::write(b, make_tar_xz({{"y-archive/include/y.h", "y", ""}}));
  std::vector<std::string> wx, wy;
  CHECK(install_archive(a, "x.tar.xz", "libx", "12.4", root, &wx) == 3);
  install_archive(b, "y.tar.xz", "liby", "12.4", root, &wy);
  std::sort(wx.begin(), wx.end());
  CHECK(wx == std::vector<std::string>{"usr/local/cuda-12.4/lib64/libx.so", "usr/local/cuda-12.4/lib64/libx.so.1",
                                       "usr/local/cuda-12.4/share/doc/libx/LICENSE"});
  CHECK(wy == std::vector<std::string>{"usr/local/cuda-12.4/include/y.h"});
  for (const auto& p : wx) CHECK(fs::exists(fs::symlink_status(root / p)));
}

// A crafted redist archive against the host: symlink chains that a lexical
// check lets through (a link at depth 4 climbing 4 levels to the archive's
// root, then a link through it climbing 4 more, out of the staging root),
// then a file written, a hardlink copied and a directory chmod-ed through
// them. Beside the staging root, a "host" directory (0700) with a secret
// file (0600) that nothing may read into the tree or change.
TEST_CASE("redist: archives never read, write or chmod through links out of the root", "[redist][hostile]") {
  TempDir dir{fs::temp_directory_path()};
  fs::path root = dir.path() / "root";  // usr/local/cuda-12.4 is 4 levels below dir
  test::HostCanary host(dir.path() / "host");
  const std::string before = host.state();
  auto leaked = [&] { return host.copies_in(root); };
  auto host_state = [&] { return host.state(); };
  auto attempt = [&](const std::vector<test::RawEntry>& entries) {
    fs::remove_all(root);
    fs::path f = dir.path() / "evil.tar.gz";
    test::make_tar(f, entries, true);
    install_archive(f, "evil.tar.gz", "x", "12.4", root);
  };
  const std::string t = "x-linux-x86_64-1.0-archive/";
  // up -> the archive's root; out -> up/../../../../host: lexically d/host, really dir/host.
  const std::vector<test::RawEntry> chain = {{t + "d/d/d/d/up", 'l', "../../../.."},
                                             {t + "d/d/d/d/out", 'l', "up/../../../../host"}};
  // The same place, by a chain no check at link time can see: `late` is made
  // after the links through it, and then climbs from depth 5 to the root.
  const std::string w = t + "s/t/u/v/w/";
  const std::vector<test::RawEntry> late = {{w + "F", 'l', "late/../../../../host/secret"},
                                            {w + "D", 'l', "late/../../../../host"},
                                            {w + "late", 'l', "../../../../.."}};
  auto with = [](std::vector<test::RawEntry> a, const std::vector<test::RawEntry>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };

  SECTION("a file written through the chain") {
    CHECK_THROWS_WITH(attempt(with(chain, {{t + "d/d/d/d/out/planted", 'f', "x"}})), Catch::Contains("evil.tar.gz"));
  }
  SECTION("a hardlink to a symlink to the host file") {
    CHECK_THROWS_WITH(attempt(with(chain, {{t + "s", 'l', "d/d/d/d/out/secret"}, {t + "stolen", 'h', t + "s"}})),
                      Catch::Contains("evil.tar.gz"));
  }
  SECTION("a hardlink to a symlink to the host file, by the late chain") {
    CHECK_THROWS_WITH(attempt(with(late, {{t + "stolen", 'h', w + "F"}})), Catch::Contains("evil.tar.gz"));
  }
  SECTION("a directory entry chmod-ing the host directory through the chain") {
    CHECK_THROWS_WITH(attempt(with(chain, {{t + "h", 'l', "d/d/d/d/out"}, {t + "h", 'd', "", 0777}})),
                      Catch::Contains("evil.tar.gz"));
  }
  SECTION("a directory entry chmod-ing the host directory by the late chain") {
    CHECK_THROWS_WITH(attempt(with(late, {{w + "D", 'd', "", 0777}})), Catch::Contains("evil.tar.gz"));
  }
  SECTION("a file written by the late chain") {
    CHECK_THROWS_WITH(attempt(with(late, {{w + "D/planted", 'f', "x"}})), Catch::Contains("evil.tar.gz"));
  }
  CHECK(leaked() == 0);
  CHECK(host_state() == before);
}

// A mirror's manifest is fetched with nothing pinning its size (its sha256 is
// recorded after): a hostile one must stop at the cap, naming its setting,
// and leave nothing in the store. Real ones are a few hundred KiB.
TEST_CASE("redist: a manifest past its cap is refused as it arrives", "[redist][hostile][limits]") {
  Mirror mirror;
  mirror.add("cuda_nvcc", "12.4.131", "linux-x86_64", {{"bin/nvcc.profile", "x\n", ""}});
  mirror.manifest["padding"] = std::string(64 << 10, ' ');  // 64 KiB of it
  mirror.publish();
  TempDir dir{fs::temp_directory_path()};
  Store store(dir.path() / "store");
  QuietFetcher quiet(store);
  fetch::Fetcher* fetcher = quiet.fetcher.get();
  setenv("STACKBUILD_REDIST_MAX_MANIFEST", "16KiB", 1);
  CHECK_THROWS_WITH(install_components(mirror.base(), "cuda", "12.4.1", {"nvcc"}, "linux-x86_64", "12.4",
                                       dir.path() / "root", store, *fetcher),
                    Catch::Contains("cap (STACKBUILD_REDIST_MAX_MANIFEST raises it)"));
  unsetenv("STACKBUILD_REDIST_MAX_MANIFEST");
  size_t blobs = 0;
  if (fs::exists(dir.path() / "store/blobs"))
    for (auto& e : fs::recursive_directory_iterator(dir.path() / "store/blobs")) blobs += e.is_regular_file();
  CHECK(blobs == 0);
}
