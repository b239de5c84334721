// The catalog: version grammar, the real layers/ catalog, and the loader's
// errors at exact file:line:col.
#include <catch2/catch.hpp>

#include <unistd.h>
#include <atomic>
#include <fstream>

#include "catalog/catalog.hpp"

using sb::catalog::Catalog;
using sb::catalog::load_catalog;
using sb::catalog::Version;
using sb::catalog::VersionRange;

namespace {

Version V(const char* s) {
  auto v = Version::parse(s);
  REQUIRE(v);
  return *v;
}

bool in(const char* range, const char* version) {
  auto r = VersionRange::parse(range);
  REQUIRE(r);
  return r->contains(V(version));
}

const Catalog& real_catalog() {
  static const Catalog cat = load_catalog(std::string(SB_SOURCE_DIR) + "/layers");
  return cat;
}

// A fresh directory under the system temp dir, removed at scope exit.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    static std::atomic<int> n{0};
    path = std::filesystem::temp_directory_path() /
           ("sb-catalog-test-" + std::to_string(getpid()) + "-" + std::to_string(n++));
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  void write(const std::string& name, const std::string& text) const {
    std::ofstream(path / name) << text;
  }
};

const char* kCuda =
    "component: cuda\n"
    "versions:\n"
    "  - version: \"12.6.3\"\n"
    "    driver_min: \"560.35.05\"\n";

}  // namespace

TEST_CASE("versions compare numerically and match as prefixes", "[catalog][version]") {
  CHECK(V("12.4") < V("12.10"));
  CHECK(V("9.10.2.21") > V("9.5.1.17"));
  CHECK(V("12.6") == V("12.6.0"));
  CHECK(V("2.23.4-1") > V("2.23.4"));
  CHECK(V("22.04").str() == "22.04");  // the text is kept as written
  CHECK(V("12.6.3").matches(V("12.6")));
  CHECK(V("9.5.1").matches(V("9")));
  CHECK_FALSE(V("12.60").matches(V("12.6")));
  CHECK_FALSE(V("12.6").matches(V("12.6.3")));
  CHECK(V("2.23.4-1").matches(V("2.23.4")));
  CHECK_FALSE(V("2.23.4-2").matches(V("2.23.4-1")));
  for (const char* bad : {"", "12.x", "v12", "1..2", "12.", "1.2.3.4.5.6.7", "2.23.4-a", "-1"})
    CHECK_FALSE(Version::parse(bad));
}

TEST_CASE("version ranges", "[catalog][version]") {
  CHECK(in("", "1.0"));
  CHECK(in("*", "13.2.2"));
  CHECK(in("12.6", "12.6.3"));
  CHECK_FALSE(in("12.6", "12.60"));
  CHECK(in(">=12.0,<12.4", "12.3.1"));
  CHECK_FALSE(in(">=12.0,<12.4", "12.4.0"));
  CHECK_FALSE(in(">=12.0,<12.4", "11.8.0"));
  CHECK(in("<=12.3", "12.3.2"));  // bounds compare as prefixes
  CHECK_FALSE(in(">12.3", "12.3.1"));
  CHECK(in(">12.3", "12.4"));
  CHECK(in("12.0 - 12.3", "12.3.1"));
  CHECK_FALSE(in("12.0 - 12.3", "12.4.0"));
  CHECK(in("11.8 || 12.4", "12.4.1"));
  CHECK_FALSE(in("11.8 || 12.4", "12.5.0"));
  CHECK(in("!=12.5", "12.6"));
  CHECK_FALSE(in("!=12.5", "12.5.1"));
  CHECK(in("=2.23.4-1", "2.23.4-1"));

  std::string why;
  CHECK_FALSE(VersionRange::parse(">=abc", &why));
  CHECK(why.find("bad version") != std::string::npos);
  // Without spaces the hyphen reads as a revision, and "12.3" is no number.
  CHECK_FALSE(VersionRange::parse("12.0-12.3", &why));
  CHECK(why.find("revision") != std::string::npos);
  auto list = VersionRange::parse_any_of({"11.8", "12.4"});
  REQUIRE(list);
  CHECK(list->str() == "11.8 || 12.4");
  CHECK_FALSE(VersionRange::parse_any_of({}));
}

TEST_CASE("the real catalog loads with every component", "[catalog]") {
  const Catalog& cat = real_catalog();
  CHECK(cat.component_names() == std::vector<std::string>{"cublas", "cuda", "cudnn", "jax", "nccl", "os",
                                                          "python", "pytorch", "tensorflow"});
  const auto* cuda = cat.find("cuda", "12.6.3");
  REQUIRE(cuda);
  CHECK(cuda->driver_min == "560.35.05");
  CHECK(cuda->where.line > 0);
  CHECK(cuda->where.file.ends_with("cuda.yaml"));
  REQUIRE(cat.find("cuda", "11.8.0"));
  CHECK(cat.find("cuda", "11.8.0")->driver_min == "520.61.05");
  CHECK_FALSE(cat.find("cuda", "12.7.0"));  // Table 3 has no 12.7

  // Records come newest first.
  const auto& records = cat.find("cuda")->records;
  CHECK(records.front().version.str() == "13.2.2");
  for (size_t i = 1; i < records.size(); ++i) CHECK(records[i - 1].version >= records[i].version);

  // Every fact-based record cites where it was read.
  for (const char* name : {"cuda", "cudnn", "nccl", "pytorch", "tensorflow", "jax", "cublas", "os"})
    for (const auto& r : cat.find(name)->records) {
      INFO(r.label());
      CHECK_FALSE(r.cite.empty());
      for (const auto& req : r.requirements) CHECK(req.target >= 0);
    }

  const auto* torch = cat.find("pytorch", "2.6.0", "cu126");
  REQUIRE(torch);
  std::map<std::string, std::string> req;
  for (const auto& q : torch->requirements) req[q.component] = q.range.str();
  CHECK(req["cuda"] == "12.6");
  CHECK(req["cudnn"] == "9.5.1.17");
  CHECK(req["python"] == ">=3.9,<=3.13");
  // The Python index carries one CUDA build of 2.6.0 (cu124); cu126 is on PyTorch's own index.
  CHECK(torch->sources.pip.empty());
  const auto* pypi = cat.find("pytorch", "2.6.0", "cu124");
  REQUIRE(pypi);
  CHECK(pypi->sources.pip == std::vector<std::string>{"torch==2.6.0"});

  const auto* cudnn = cat.find("cudnn", "9.5.1.17", "cuda12");
  REQUIRE(cudnn);
  CHECK(cudnn->sources.pip == std::vector<std::string>{"nvidia-cudnn-cu12==9.5.1.17"});
  CHECK(cudnn->driver_min == "525.60.13");

  auto json = nlohmann::json(cat);
  CHECK(json["cuda"]["records"][0]["version"] == "13.2.2");
}

TEST_CASE("compute capabilities per CUDA release", "[catalog][arch]") {
  const Catalog& cat = real_catalog();
  auto can = [&](const char* cuda, const char* arch) {
    const auto* r = cat.find("cuda", cuda);
    REQUIRE(r);
    REQUIRE(r->arch_mask);
    int bit = cat.arch_index(arch);
    REQUIRE(bit >= 0);
    return (*r->arch_mask >> bit & 1) != 0;
  };
  CHECK(can("12.9.1", "7.0"));
  CHECK_FALSE(can("13.0.0", "7.0"));  // removed in CUDA 13
  CHECK(can("13.0.0", "7.5"));
  CHECK(can("11.8.0", "3.5"));
  CHECK_FALSE(can("12.0.0", "3.5"));
  CHECK_FALSE(can("12.6.3", "10.0"));  // Blackwell from 12.8
  CHECK(can("12.8.0", "10.0"));
  CHECK(can("12.9.0", "10.1"));
  CHECK_FALSE(can("13.0.0", "10.1"));  // renamed 11.0
  CHECK(can("13.0.0", "11.0"));

  // cuDNN lists what it runs on; "9.0" covers "9.0a".
  const auto* cudnn = cat.find("cudnn", "9.17.0", "cuda12");
  REQUIRE(cudnn);
  CHECK_FALSE(*cudnn->arch_mask >> cat.arch_index("7.0") & 1);
  CHECK(*cudnn->arch_mask >> cat.arch_index("9.0a") & 1);
}

TEST_CASE("loader errors point at file:line:col", "[catalog][errors]") {
  struct Case {
    const char* name;
    std::string file;  // written as <name>.yaml next to a valid cuda.yaml
    int line, column;
    const char* message;
  };
  const Case cases[] = {
      {"unknown key",
       "component: cudnn\nversions:\n  - version: \"9.5.1\"\n    driver_mn: \"525\"\n", 4, 5,
       "unknown key 'driver_mn' in a version record (did you mean 'driver_min'?)"},
      {"unknown top-level key", "component: cudnn\nversion:\n  - version: \"9.5.1\"\n", 2, 1,
       "unknown key 'version' in a component file (did you mean 'versions'?)"},
      {"wrong type", "component: cudnn\nversions:\n  - version: \"9.5.1\"\n    requires: [cuda]\n",
       4, 15, "expected a map for 'requires', got a list"},
      {"bad version", "component: cudnn\nversions:\n  - version: \"9.x\"\n", 3, 14,
       "bad version '9.x'"},
      {"unknown component",
       "component: cudnn\nversions:\n  - version: \"9.5.1\"\n    requires: {cudaa: \"12\"}\n", 4,
       16, "unknown component 'cudaa' (did you mean 'cuda'?)"},
      {"bad range",
       "component: cudnn\nversions:\n  - version: \"9.5.1\"\n    requires:\n      cuda: "
       "\">=12.0,<<12.4\"\n",
       5, 13, "bad version range '>=12.0,<<12.4'"},
      {"bad arch",
       "component: cudnn\nversions:\n  - version: \"9.5.1\"\n    compute_capability: [\"8.0\", "
       "sm_90]\n",
       4, 33, "bad compute capability 'sm_90'"},
      {"missing version", "component: cudnn\nversions:\n  - build: cuda12\n", 3, 5,
       "missing key 'version' in a version record"},
      {"duplicate", "component: cudnn\nversions:\n  - version: \"9.5.1\"\n  - version: \"9.5.1\"\n",
       4, 5, "duplicate record cudnn 9.5.1"},
      {"name mismatch", "component: cudnn8\nversions: []\n", 1, 12,
       "component 'cudnn8' in a file named 'cudnn.yaml'"},
      {"yaml syntax", "component: cudnn\nversions:\n  - {version: \"9.5.1\"\n", 4, 1, ""},
  };
  for (const auto& c : cases) {
    SECTION(c.name) {
      TempDir dir;
      dir.write("cuda.yaml", kCuda);
      dir.write("cudnn.yaml", c.file);
      try {
        load_catalog(dir.path);
        FAIL("no error for: " << c.name);
      } catch (const sb::InputError& e) {
        INFO(e.render());
        CHECK(e.location().file == (dir.path / "cudnn.yaml").string());
        CHECK(e.location().line == c.line);
        CHECK(e.location().column == c.column);
        CHECK(e.message().find(c.message) != std::string::npos);
        CHECK(std::string(e.what()).starts_with(e.location().str() + ": "));
      }
    }
  }
}

TEST_CASE("a minimal catalog loads and links requirements", "[catalog]") {
  TempDir dir;
  dir.write("cuda.yaml", kCuda);
  dir.write("cudnn.yaml",
            "component: cudnn\n"
            "citations:\n  m: &m \"support matrix\"\n"
            "versions:\n"
            "  - {version: \"9.5.1\", build: cuda12, requires: {cuda: [\"12.4\", \"12.6\"]}, cite: "
            "*m}\n");
  dir.write("README.md", "not a catalog file");
  Catalog cat = load_catalog(dir.path);
  REQUIRE(cat.components.size() == 2);
  const auto* r = cat.find("cudnn", "9.5.1", "cuda12");
  REQUIRE(r);
  CHECK(r->cite == std::vector<std::string>{"support matrix"});
  REQUIRE(r->requirements.size() == 1);
  CHECK(r->requirements[0].target == cat.index_of("cuda"));
  CHECK(r->requirements[0].range.contains(V("12.6.3")));
  CHECK_FALSE(r->requirements[0].range.contains(V("12.5.1")));
  CHECK(r->requirements[0].where.line == 5);
  CHECK_THROWS_AS(load_catalog(dir.path / "missing"), sb::Error);
}

// The catalog is parsed once per process while its files stay the same; an
// edited, added or removed file is read again (a fork of the catalog edited
// between two builds of one process, as the tests do).
TEST_CASE("a catalog read again sees edited added and removed files", "[catalog]") {
  TempDir dir;
  dir.write("cuda.yaml", kCuda);
  CHECK(load_catalog(dir.path).find("cuda")->records.size() == 1);
  CHECK(load_catalog(dir.path).find("cuda")->records.size() == 1);  // the same files: the same catalog
  dir.write("cuda.yaml", std::string(kCuda) + "  - version: \"12.8.1\"\n    driver_min: \"570.124.06\"\n");
  CHECK(load_catalog(dir.path).find("cuda")->records.size() == 2);
  dir.write("nccl.yaml", "component: nccl\nversions:\n  - {version: \"2.26.2\", build: cuda12}\n");
  CHECK(load_catalog(dir.path).find("nccl"));
  std::filesystem::remove(dir.path / "nccl.yaml");
  CHECK_FALSE(load_catalog(dir.path).find("nccl"));
  dir.write("cuda.yaml", "component: cuda\nversions: [oops\n");
  CHECK_THROWS_AS(load_catalog(dir.path), sb::InputError);
}
