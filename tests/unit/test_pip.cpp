// PEP 440 versions and specifiers, PEP 508 requirements and markers, wheel
// tags: tables checked against what packaging/pip decide.
#include <catch2/catch.hpp>

#include "fetch/pip/requirement.hpp"
#include "fetch/pip/tags.hpp"
#include "fetch/pip/version.hpp"
#include "util/error.hpp"

using namespace sb;
using namespace sb::pip;

TEST_CASE("pip: PEP 440 versions sort as packaging sorts them", "[pip]") {
  // Each is strictly less than the next (the PEP's own example order, plus locals).
  std::vector<std::string> ordered = {
      "1.0.dev456", "1.0a1", "1.0a2.dev456", "1.0a12.dev456", "1.0a12", "1.0b1.dev456", "1.0b2",
      "1.0b2.post345.dev456", "1.0b2.post345", "1.0rc1.dev456", "1.0rc1", "1.0", "1.0+abc.5", "1.0+abc.7",
      "1.0+5", "1.0.post456.dev34", "1.0.post456", "1.0.15", "1.1.dev1", "2!0.1"};
  for (size_t i = 0; i + 1 < ordered.size(); ++i) {
    INFO(ordered[i] << " < " << ordered[i + 1]);
    CHECK(Version::parse(ordered[i]) < Version::parse(ordered[i + 1]));
  }
  CHECK(Version::parse("1.0") == Version::parse("1.0.0"));
  CHECK(Version::parse("1.0RC1").str() == "1.0rc1");
  CHECK(Version::parse("v1.0-1").str() == "1.0.post1");
  CHECK(Version::parse("1.0.0-alpha.3").str() == "1.0.0a3");
  CHECK(Version::parse("2.6.0+cu124").local == std::vector<std::string>{"cu124"});
  CHECK_FALSE(Version::try_parse("1.0-foo"));
  CHECK_FALSE(Version::try_parse("latest"));
  CHECK_THROWS_WITH(Version::parse("x1"), Catch::Contains("not a PEP 440 version"));
  // A number past int64 makes no version here, rather than an exception
  // from the standard library (found by the fuzzer).
  CHECK_FALSE(Version::try_parse("1.0-" + std::string(40, '7')));
  CHECK_FALSE(Version::try_parse("99999999999999999999.0"));
  CHECK(Version::try_parse("9223372036854775807.0"));
  // Numeric local segments compare as numbers of any length.
  CHECK(Version::parse("1.0+99999999999999999999") > Version::parse("1.0+9999999999999999999"));
  CHECK(Version::parse("1.0+007") == Version::parse("1.0+7"));
}

TEST_CASE("pip: specifiers match as PEP 440 says", "[pip]") {
  struct Row {
    const char* spec;
    const char* version;
    bool match;
  };
  std::vector<Row> rows = {
      {"==1.0", "1.0", true},          {"==1.0", "1.0.0", true},        {"==1.0", "1.0+local", true},
      {"==1.0+local", "1.0", false},   {"==1.*", "1.4.2", true},        {"==1.*", "2.0", false},
      {"==1.4.*", "1.4", true},        {"!=1.4.*", "1.4.5", false},     {"!=1.4.*", "1.5", true},
      {"!=2.0", "2.0", false},         {"~=2.2", "2.3", true},          {"~=2.2", "3.0", false},
      {"~=1.4.5", "1.4.9", true},      {"~=1.4.5", "1.5.0", false},     {"~=1.4.5", "1.4.4", false},
      {">=1.0", "1.0", true},          {"<2.0", "2.0rc1", false},       {"<2.0rc2", "2.0rc1", true},
      {">1.7", "1.7.post1", false},    {">1.7.post1", "1.7.post2", true}, {">1.7", "1.7.1", true},
      {">1.7", "1.7+local", false},    {"<=2.0", "2.0+x", true},        {"===1.0", "1.0", true},
      {">=12.1,<13", "12.4.5.8", true}, {">=12.1,<13", "13.0", false},  {"", "5", true},
      {">=2.0b1", "2.0b2", true},      {">=1.0", "2.0a1", false},       {"==2.6.0", "2.6.0+cu124", true},
  };
  for (const auto& r : rows) {
    INFO(r.spec << " vs " << r.version);
    CHECK(SpecifierSet::parse(r.spec).contains(Version::parse(r.version)) == r.match);
  }
  CHECK(SpecifierSet::parse(">=1.0").contains(Version::parse("2.0a1"), true));
  CHECK_THROWS_WITH(SpecifierSet::parse(">=1.*"), Catch::Contains("only == and !="));
  CHECK_THROWS_WITH(SpecifierSet::parse("~=1"), Catch::Contains("two release parts"));
  CHECK_THROWS_WITH(SpecifierSet::parse("1.0"), Catch::Contains("no version operator"));
}

TEST_CASE("pip: requirements parse with extras specifiers and markers", "[pip]") {
  auto r = Requirement::parse("JAX[CUDA12, tpu] >=0.4.30 ; python_version >= \"3.10\"");
  CHECK(r.name == "JAX");
  CHECK(r.key == "jax");
  CHECK(r.extras == std::set<std::string>{"cuda12", "tpu"});
  CHECK(r.specifier.str() == ">=0.4.30");
  CHECK(r.marker.str() == "python_version >= \"3.10\"");
  CHECK(Requirement::parse("foo (>=1.0,<2)").specifier.str() == ">=1.0,<2");
  CHECK(Requirement::parse("Nvidia_CUDNN.cu12==9.1").key == "nvidia-cudnn-cu12");
  CHECK(Requirement::parse("pkg @ https://example.com/pkg.whl").url == "https://example.com/pkg.whl");
  CHECK_THROWS_WITH(Requirement::parse("foo >=1.0 ; python_version >"), Catch::Contains("marker"));
  CHECK_THROWS_WITH(Requirement::parse("[x]"), Catch::Contains("no project name"));
}

TEST_CASE("pip: markers are evaluated for the image and not the host", "[pip]") {
  MarkerEnv env = MarkerEnv::linux_cpython("3.12", "x86_64");
  struct Row {
    const char* marker;
    bool value;
  };
  std::vector<Row> rows = {
      {"platform_system == 'Linux' and platform_machine == 'x86_64'", true},
      {"sys_platform == 'win32'", false},
      {"python_version < '3.13'", true},
      {"python_version >= '3.9' and python_version < '3.12'", false},
      {"python_full_version >= '3.12.0'", true},
      {"platform_machine == 'aarch64' or (sys_platform == 'linux' and python_version > '3.8')", true},
      {"'linux' in sys_platform", true},
      {"'win' not in sys_platform", true},
      {"platform_python_implementation == 'CPython'", true},
      {"python_version == '3.*'", true},
      {"extra == 'cuda12'", false},
  };
  for (const auto& r : rows) {
    INFO(r.marker);
    CHECK(Marker::parse(r.marker).evaluate(env) == r.value);
  }
  // Extras: compared normalised; an and with a platform check.
  auto m = Marker::parse("extra == \"CUDA12\" and platform_system == \"Linux\"");
  CHECK(m.evaluate(env, {"cuda12"}));
  CHECK_FALSE(m.evaluate(env, {"tpu"}));
  CHECK_FALSE(Marker::parse("platform_machine == 'x86_64'").evaluate(MarkerEnv::linux_cpython("3.12", "aarch64")));
  CHECK_THROWS_WITH(Marker::parse("python_verison == '3'"), Catch::Contains("unknown variable 'python_verison'"));
  CHECK_THROWS_WITH(Marker::parse("(os_name == 'posix'"), Catch::Contains("missing ')'"));
}

TEST_CASE("pip: wheel tags follow the image's Python glibc and arch", "[pip]") {
  Target t;
  t.python = "3.12";
  t.libc_version = "2.28";
  TagPriority p(t);
  CHECK(p.rank("cp312", "cp312", "manylinux_2_28_x86_64"));
  CHECK(p.rank("cp312", "cp312", "manylinux2014_x86_64"));
  CHECK(p.rank("cp312", "cp312", "manylinux1_x86_64"));
  CHECK_FALSE(p.rank("cp312", "cp312", "manylinux_2_34_x86_64"));  // needs a newer glibc
  CHECK_FALSE(p.rank("cp311", "cp311", "manylinux_2_17_x86_64"));  // another Python's ABI
  CHECK_FALSE(p.rank("cp312", "cp312", "manylinux_2_17_aarch64"));
  CHECK_FALSE(p.rank("cp312", "cp312", "musllinux_1_2_x86_64"));
  CHECK(p.rank("cp39", "abi3", "manylinux_2_17_x86_64"));
  CHECK(p.rank("py3", "none", "any"));
  // Preference: the newest glibc floor, own ABI over abi3 over pure Python.
  CHECK(*p.rank("cp312", "cp312", "manylinux_2_28_x86_64") < *p.rank("cp312", "cp312", "manylinux_2_17_x86_64"));
  CHECK(*p.rank("cp312", "cp312", "manylinux_2_17_x86_64") < *p.rank("cp312", "abi3", "manylinux_2_28_x86_64"));
  CHECK(*p.rank("cp312", "abi3", "manylinux_2_17_x86_64") < *p.rank("py3", "none", "any"));

  auto w = WheelName::parse("nvidia_cudnn_cu12-9.1.0.70-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl");
  REQUIRE(w);
  CHECK(w->version == "9.1.0.70");
  CHECK(w->best_rank(p) == p.rank("py3", "none", "manylinux_2_17_x86_64"));
  CHECK_FALSE(WheelName::parse("torch-2.6.0-cp312-cp312-win_amd64.whl")->best_rank(p));
  CHECK_FALSE(WheelName::parse("torch-2.6.0.tar.gz"));

  Target arm = Target::for_distro("ubuntu", "3.12", "2.39", "arm64");
  CHECK(arm.machine == "aarch64");
  CHECK(arm.site() == "/usr/local/lib/python3.12/dist-packages");
  CHECK(TagPriority(arm).rank("cp312", "cp312", "manylinux_2_17_aarch64"));
  Target musl;
  musl.libc = "musl";
  musl.libc_version = "1.2";
  CHECK(TagPriority(musl).rank("cp312", "cp312", "musllinux_1_1_x86_64"));
  CHECK_FALSE(TagPriority(musl).rank("cp312", "cp312", "manylinux_2_17_x86_64"));
}
