// The driver check before GPU tests (verify/driver_check.hpp) and the facts
// it reads from the driver's own libraries (verify/driver_query.hpp).
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "helpers.hpp"
#include "util/error.hpp"
#include "verify/driver_check.hpp"
#include "verify/driver_query.hpp"
#include "verify/gpu.hpp"

using namespace sb;
using namespace sb::verify;

namespace {

// Sets environment variables for one test case; the old values come back after.
class ScopedEnv {
 public:
  void set(const char* name, const char* value) {
    if (!saved_.count(name)) {
      const char* old = std::getenv(name);
      saved_[name] = old ? std::optional<std::string>(old) : std::nullopt;
    }
    if (value)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ~ScopedEnv() {
    for (const auto& [name, old] : saved_) {
      if (old)
        ::setenv(name.c_str(), old->c_str(), 1);
      else
        ::unsetenv(name.c_str());
    }
  }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

Truth eval(const std::string& expression, const HostProperties& host) {
  return evaluate({"NVIDIA_REQUIRE_CUDA", expression}, host);
}

// What NVIDIA's CUDA 12.8 images (and stackbuild's, through
// ${nvidia_require_cuda}) carry: the release, or a listed branch under CUDA
// compatibility.
const std::string kRequire128 =
    "cuda>=12.8 brand=tesla,driver>=470,driver<471 brand=unknown,driver>=470,driver<471 "
    "brand=tesla,driver>=535,driver<536 brand=nvidia,driver>=535,driver<536 "
    "brand=tesla,driver>=550,driver<551 brand=nvidia,driver>=550,driver<551";

// A host with one GPU and what its driver says of itself.
GpuInjection host(const std::string& driver, const std::string& cuda, const std::string& brand,
                  const std::string& arch = "9.0") {
  GpuInjection g;
  g.source = "discovered";
  g.driver_version = driver;
  g.cuda_version = cuda;
  GpuDevice d;
  d.uuid = "GPU-aaaa";
  d.model = "NVIDIA H100 80GB HBM3";
  d.brand = brand;
  d.arch = arch;
  g.gpus.push_back(d);
  return g;
}

// A host on driver 550.54.15 with one GPU whose libcuda and NVML are the
// fake driver library (its soname libcuda.so.1, as the driver's).
void fake_host(const fs::path& root) {
  test::write(root / "proc/driver/nvidia/version",
              "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  x\n");
  test::write(root / "proc/driver/nvidia/gpus/0000:3b:00.0/information",
              "Model: \t\t NVIDIA H100 80GB HBM3\nGPU UUID: \t GPU-aaaa\nDevice Minor: \t 0\n");
  for (const char* n : {"dev/nvidia0", "dev/nvidiactl", "dev/nvidia-uvm"})
    test::write(root / n, "");
  const fs::path lib = root / "usr/lib" / multiarch_tuple();
  fs::create_directories(lib);
  fs::copy_file(SB_FAKE_NVIDIA_DRIVER, lib / "libcuda.so.550.54.15");
  fs::copy_file(SB_FAKE_NVIDIA_DRIVER, lib / "libnvidia-ml.so.550.54.15");
}

std::string refusal(const GpuInjection& g, const ImageDriverNeeds& needs) {
  try {
    check_driver(g, needs);
  } catch (const Error& e) {
    return e.what();
  }
  return "accepted";
}

}  // namespace

TEST_CASE("NVIDIA_REQUIRE_* reads as the container toolkit reads it", "[verify][gpu][require]") {
  const HostProperties h535{"12.2", "535.104.05", "9.0", "tesla"};
  // Space-separated terms are ORed, comma-separated factors ANDed.
  CHECK(eval("cuda>=12.2", h535) == Truth::True);
  CHECK(eval("cuda>=12.8", h535) == Truth::False);
  CHECK(eval(kRequire128, h535) == Truth::True);  // through brand=tesla,driver>=535,driver<536
  CHECK(eval(kRequire128, {"12.2", "535.104.05", "9.0", "geforce"}) == Truth::False);
  CHECK(eval(kRequire128, {"12.4", "550.54.15", "9.0", "nvidia"}) == Truth::True);
  CHECK(eval(kRequire128, {"12.6", "560.35.05", "9.0", "tesla"}) == Truth::False);  // no 560 branch
  CHECK(eval(kRequire128, {"12.8", "570.124.06", "9.0", "geforce"}) == Truth::True);
  // Versions compare as numbers, every operator; brands as strings.
  CHECK(eval("cuda>12.9", {"12.10", "", "", ""}) == Truth::True);
  CHECK(eval("driver<=535.104.05", h535) == Truth::True);
  CHECK(eval("driver<535.104.05", h535) == Truth::False);
  CHECK(eval("driver=535.104.5", h535) == Truth::True);
  CHECK(eval("arch!=9.0", h535) == Truth::False);
  CHECK(eval("arch>=8.0,arch<10.0", h535) == Truth::True);
  CHECK(eval("brand=tesla", h535) == Truth::True);
  CHECK(eval("brand!=tesla", h535) == Truth::False);
  // A property the toolkit does not know is left out; empty terms and factors too.
  CHECK(eval("color=red", h535) == Truth::True);
  CHECK(eval("cuda>=13.0,color=red", h535) == Truth::False);
  CHECK(eval("  cuda>=12.0,,  ", h535) == Truth::True);
  CHECK(eval("", h535) == Truth::True);
  // What this host could not say is unknown, and stays so unless the rest decides.
  const HostProperties no_nvml{"12.2", "535.104.05", "", ""};
  CHECK(eval(kRequire128, no_nvml) == Truth::Unknown);
  CHECK(eval("cuda>=12.0 brand=tesla", no_nvml) == Truth::True);
  CHECK(eval("cuda>=13.0,brand=tesla", no_nvml) == Truth::False);
  CHECK(eval("cuda>=12.8", {"", "535.104.05", "", ""}) == Truth::Unknown);
  // Malformed constraints are errors that name the variable and the factor.
  CHECK_THROWS_WITH(
      eval("cuda", h535),
      "NVIDIA_REQUIRE_CUDA: 'cuda' is not a constraint (PROPERTY OP VALUE, e.g. cuda>=12.8)");
  CHECK_THROWS_WITH(eval(">=12", h535), Catch::Contains("'>=12' is not a constraint"));
  CHECK_THROWS_WITH(eval("cuda>=twelve", h535),
                    "NVIDIA_REQUIRE_CUDA: 'cuda>=twelve': 'twelve' is not a version");
  CHECK_THROWS_WITH(eval("cuda==12.8", h535), Catch::Contains("'=12.8' is not a version"));
  CHECK_THROWS_WITH(eval("driver>=1..2", h535), Catch::Contains("'1..2' is not a version"));
}

TEST_CASE(
    "an image's requirements: every NVIDIA_REQUIRE_*, legacy CUDA_VERSION, NVIDIA_DISABLE_REQUIRE",
    "[verify][gpu][require]") {
  auto names = [](const std::map<std::string, std::string>& env) {
    std::vector<std::string> out;
    for (const auto& r : image_requirements(env)) out.push_back(r.name + "=" + r.expression);
    return out;
  };
  CHECK(names({{"PATH", "/bin"}}).empty());
  CHECK(
      names({{"NVIDIA_REQUIRE_CUDA", "cuda>=12.8"},
             {"NVIDIA_REQUIRE_ARCH", "arch>=8.0"},
             {"NVIDIA_REQUIRE_JETPACK", "csv-mounts=all"},
             {"CUDA_VERSION", "12.8.1"}}) ==
      std::vector<std::string>{"NVIDIA_REQUIRE_ARCH=arch>=8.0", "NVIDIA_REQUIRE_CUDA=cuda>=12.8"});
  // An image of before NVIDIA_REQUIRE_CUDA: its CUDA_VERSION's major.minor.
  CHECK(names({{"CUDA_VERSION", "11.4.3"}}) == std::vector<std::string>{"CUDA_VERSION=cuda>=11.4"});
  CHECK(names({{"CUDA_VERSION", "12"}}) == std::vector<std::string>{"CUDA_VERSION=cuda>=12.0"});
  CHECK(names({{"CUDA_VERSION", "12.8"}, {"NVIDIA_REQUIRE_CUDA", ""}}) ==
        std::vector<std::string>{"NVIDIA_REQUIRE_CUDA=", "CUDA_VERSION=cuda>=12.8"});
  CHECK_THROWS_WITH(names({{"CUDA_VERSION", "twelve"}}),
                    "CUDA_VERSION=twelve in the image config is not a version");
  // NVIDIA_DISABLE_REQUIRE as Go's ParseBool reads it.
  for (const char* yes : {"1", "true", "TRUE", "t"})
    CHECK(names({{"NVIDIA_REQUIRE_CUDA", "cuda>=99.0"}, {"NVIDIA_DISABLE_REQUIRE", yes}}).empty());
  for (const char* no : {"0", "false", "yes", ""})
    CHECK(names({{"NVIDIA_REQUIRE_CUDA", "cuda>=99.0"}, {"NVIDIA_DISABLE_REQUIRE", no}}).size() ==
          1);
}

TEST_CASE("the driver check: the release's floor, or what NVIDIA_REQUIRE_CUDA accepts",
          "[verify][gpu][require]") {
  const std::map<std::string, std::string> env128{{"NVIDIA_REQUIRE_CUDA", kRequire128}};
  const std::string floor128 = "570.124.06";

  SECTION("at or above the floor") {
    auto v = check_driver(host("580.95.05", "13.0", "nvidia"), {floor128, env128, ""});
    CHECK(v.detail ==
          "driver 580.95.05 (CUDA 13.0), 1 GPUs, the image needs 570.124.06; NVIDIA_REQUIRE_CUDA "
          "holds");
    CHECK(v.warnings.empty());
    // No label, no requirement: nothing to check.
    CHECK(check_driver(host("535.104.05", "", ""), {"", {}, ""}).detail ==
          "driver 535.104.05, 1 GPUs");
    // The floor is met, but the image's own requirement refuses the host: the toolkit would not
    // start it.
    CHECK(refusal(host("580.95.05", "13.0", "nvidia"),
                  {floor128, {{"NVIDIA_REQUIRE_CUDA", "cuda>=13.1"}}, ""}) ==
          "the image's NVIDIA_REQUIRE_CUDA (cuda>=13.1) does not accept GPU 0 (CUDA 13.0, driver "
          "580.95.05, "
          "brand nvidia, arch 9.0): the NVIDIA container toolkit would not start this image here "
          "(the image's "
          "NVIDIA_DISABLE_REQUIRE=1 switches that check off)");
    // What could not be read is a warning, not a refusal, above the floor.
    auto unknown = check_driver(host("580.95.05", "", ""),
                                {floor128, {{"NVIDIA_REQUIRE_CUDA", "cuda>=12.8"}}, ""});
    REQUIRE(unknown.warnings.size() == 1);
    CHECK_THAT(unknown.warnings[0],
               Catch::StartsWith("NVIDIA_REQUIRE_CUDA (cuda>=12.8) cannot be checked against GPU 0 "
                                 "(CUDA unknown, driver 580.95.05"));
  }

  SECTION("below the floor, accepted by a branch of NVIDIA_REQUIRE_CUDA") {
    auto minor = check_driver(host("535.104.05", "12.2", "tesla"), {floor128, env128, ""});
    CHECK(minor.detail ==
          "driver 535.104.05 (CUDA 12.2), 1 GPUs, the image needs 570.124.06; NVIDIA_REQUIRE_CUDA "
          "accepts this host");
    REQUIRE(minor.warnings.size() == 1);
    CHECK(minor.warnings[0] ==
          "driver 535.104.05 is older than the 570.124.06 the image needs "
          "(dev.stackbuild.driver_min); its "
          "NVIDIA_REQUIRE_CUDA "
          "(cuda>=12.8 or 6 other terms) accepts this host, so the tests run under CUDA minor "
          "version "
          "compatibility, with the host's libcuda: code that needs a newer driver, and PTX newer "
          "than CUDA 12.2, "
          "fails");
    // With the image's forward-compatibility libcuda of a newer branch, that one is used.
    auto forward =
        check_driver(host("535.104.05", "12.2", "tesla"), {floor128, env128, "570.124.06"});
    REQUIRE(forward.warnings.size() == 1);
    CHECK_THAT(forward.warnings[0],
               Catch::EndsWith(
                   "under CUDA forward compatibility: the image's "
                   "/usr/local/cuda/compat/libcuda.so.570.124.06 is used before the host's libcuda "
                   "(on data-center GPUs only)"));
  }

  SECTION("below the floor, refused") {
    // A GeForce card on 535: no term accepts it.
    CHECK(refusal(host("535.104.05", "12.2", "geforce"), {floor128, env128, ""}) ==
          "the image needs NVIDIA driver 570.124.06 or newer; this host runs 535.104.05, and its "
          "NVIDIA_REQUIRE_CUDA "
          "(cuda>=12.8 or 6 other terms) does not accept GPU 0 (CUDA 12.2, driver 535.104.05, "
          "brand geforce, arch 9.0)");
    // A branch the image does not list.
    CHECK_THAT(refusal(host("560.35.05", "12.6", "tesla"), {floor128, env128, ""}),
               Catch::Contains("does not accept GPU 0 (CUDA 12.6, driver 560.35.05"));
    // Without NVML's brand the branch terms cannot be decided: refused, saying so.
    CHECK_THAT(refusal(host("535.104.05", "12.2", "", ""), {floor128, env128, ""}),
               Catch::Contains(
                   "cannot be checked against GPU 0 (CUDA 12.2, driver 535.104.05, brand unknown, "
                   "arch unknown)"));
    // No requirement and no compat library: the floor alone decides, as before.
    CHECK(refusal(host("550.54.15", "12.4", "tesla"), {"560.35.05", {}, ""}) ==
          "the image needs NVIDIA driver 560.35.05 or newer; this host runs 550.54.15");
    // A compat library that cannot stand in: of the host's own branch, or older than the floor.
    CHECK_THAT(
        refusal(host("570.86.10", "12.8", "tesla"), {"570.124.06", {}, "570.124.06"}),
        Catch::EndsWith(
            "the image's /usr/local/cuda/compat/libcuda.so.570.124.06 cannot stand in (it must be "
            "570.124.06 or newer, of a newer branch than the host's)"));
    CHECK_THAT(refusal(host("535.104.05", "12.2", "tesla"), {"575.51.03", {}, "570.124.06"}),
               Catch::Contains("cannot stand in"));
    // A GPU of several that the requirement refuses is enough.
    GpuInjection two = host("535.104.05", "12.2", "tesla");
    GpuDevice g1 = two.gpus[0];
    g1.index = 1;
    g1.brand = "geforce";
    two.gpus.push_back(g1);
    CHECK_THAT(refusal(two, {floor128, env128, ""}), Catch::Contains("does not accept GPU 1 ("));
  }

  SECTION("below the floor, accepted otherwise") {
    // No requirement to check, and a forward-compatibility libcuda that meets the floor.
    auto fwd = check_driver(host("535.104.05", "12.2", "tesla"), {floor128, {}, "570.124.06"});
    CHECK_THAT(
        fwd.detail,
        Catch::EndsWith("; the image's /usr/local/cuda/compat/libcuda.so.570.124.06 meets it"));
    // NVIDIA_DISABLE_REQUIRE switches the check off, with a warning that says what it lets through.
    auto off = check_driver(
        host("535.104.05", "12.2", "geforce"),
        {floor128, {{"NVIDIA_REQUIRE_CUDA", kRequire128}, {"NVIDIA_DISABLE_REQUIRE", "1"}}, ""});
    CHECK_THAT(off.detail, Catch::EndsWith("(NVIDIA_DISABLE_REQUIRE)"));
    REQUIRE(off.warnings.size() == 1);
    CHECK_THAT(off.warnings[0],
               Catch::StartsWith("driver 535.104.05 is older than the 570.124.06 the image needs "
                                 "(dev.stackbuild.driver_min); NVIDIA_DISABLE_REQUIRE switches"));
  }

  SECTION("below the floor, another CUDA major version") {
    // A CUDA 13.0 image whose requirement lists branch 535, on a CUDA 12.2
    // driver: minor version compatibility does not cross major versions, so
    // only a forward-compatibility libcuda makes it run.
    const std::map<std::string, std::string> env130{
        {"NVIDIA_REQUIRE_CUDA", "cuda>=13.0 brand=tesla,driver>=535,driver<536"}};
    CHECK(refusal(host("535.104.05", "12.2", "tesla"), {"580.65.06", env130, "", "13.0.0"}) ==
          "driver 535.104.05 is older than the 580.65.06 the image needs "
          "(dev.stackbuild.driver_min), "
          "and the image's CUDA 13.0.0 does not run on a CUDA 12.2 driver without "
          "forward-compatibility "
          "libraries of a newer branch (/usr/local/cuda/compat), which it lacks");
    CHECK_THAT(
        refusal(host("535.104.05", "12.2", "tesla"), {"580.65.06", env130, "535.104.05", "13.0.0"}),
        Catch::EndsWith(", which its /usr/local/cuda/compat/libcuda.so.535.104.05 is not"));
    auto forward = check_driver(host("535.104.05", "12.2", "tesla"),
                                {"580.65.06", env130, "580.65.06", "13.0.0"});
    CHECK_THAT(forward.warnings.at(0), Catch::Contains("under CUDA forward compatibility"));
    // Within the major version, minor version compatibility.
    CHECK_THAT(check_driver(host("535.104.05", "12.2", "tesla"), {floor128, env128, "", "12.8.1"})
                   .warnings.at(0),
               Catch::Contains("under CUDA minor version compatibility"));
    // Switched off, it runs with a warning that says it will not work.
    auto off = check_driver(host("535.104.05", "12.2", "tesla"),
                            {"580.65.06", {{"NVIDIA_DISABLE_REQUIRE", "true"}}, "", "13.0.0"});
    CHECK_THAT(off.warnings.at(0),
               Catch::EndsWith("so the tests run as they are, and the image's CUDA 13.0.0 does "
                               "not run on a CUDA 12.2 driver without forward-compatibility "
                               "libraries of a newer branch (/usr/local/cuda/compat)"));
  }

  SECTION("an image's needs come from its labels and environment") {
    auto n = driver_needs(
        {{"dev.stackbuild.driver_min", "570.124.06"}, {"dev.stackbuild.version.cuda", "12.8.1"}},
        {{"CUDA_VERSION", "12.6.3"}}, "570.124.06");
    CHECK(n.driver_min == "570.124.06");
    CHECK(n.cuda == "12.8.1");
    CHECK(n.compat_driver == "570.124.06");
    CHECK(n.env.at("CUDA_VERSION") == "12.6.3");
    CHECK(driver_needs({}, {{"CUDA_VERSION", "12.6.3"}}, "").cuda == "12.6.3");
    CHECK(driver_needs({}, {}, "").driver_min.empty());
  }

  SECTION("a driver version that is not known") {
    GpuInjection g = host("", "", "");
    g.source = "cdi /etc/cdi/x.yaml";
    CHECK_THAT(refusal(g, {"560.35.05", {}, ""}),
               Catch::Contains("this host's driver version is unknown"));
    CHECK_THAT(refusal(g, {"", env128, ""}),
               Catch::StartsWith(
                   "the image needs a driver its NVIDIA_REQUIRE_CUDA accepts, and this host's"));
    CHECK_NOTHROW(check_driver(g, {"", {}, ""}));
  }
}

TEST_CASE("the driver's own libraries say the CUDA version, each GPU's brand and arch",
          "[verify][gpu][require]") {
  TempDir dir;
  fs::path root = dir.path() / "host";
  fake_host(root);
  const fs::path lib = root / "usr/lib" / multiarch_tuple();

  ScopedEnv env;
  env.set("FAKE_CUDA_DRIVER_VERSION", "12040");
  env.set("FAKE_NVML_BRAND", "2");
  env.set("FAKE_NVML_CC", "9.0");
  env.set("FAKE_NVML_UUID", "GPU-aaaa");
  auto g = discover_gpus(root);
  REQUIRE(g);
  CHECK(g->cuda_version == "12.4");
  REQUIRE(g->gpus.size() == 1);
  CHECK(g->gpus[0].brand == "tesla");
  CHECK(g->gpus[0].arch == "9.0");

  // NVML finds the GPU by its UUID: one it does not know has no brand or arch.
  env.set("FAKE_NVML_UUID", "GPU-zzzz");
  g = discover_gpus(root);
  CHECK(g->cuda_version == "12.4");
  CHECK(g->gpus[0].brand.empty());
  CHECK(g->gpus[0].arch.empty());
  env.set("FAKE_NVML_UUID", "GPU-aaaa");

  // A GPU known only by its /dev/nvidiaN node (a sandbox that hides
  // /proc/driver/nvidia/gpus): NVML finds it by index, and names it.
  fs::rename(root / "proc/driver/nvidia/gpus", dir.path() / "gpus");
  env.set("FAKE_NVML_NAME", "NVIDIA H200");
  g = discover_gpus(root);
  REQUIRE(g->gpus.size() == 1);
  CHECK(g->gpus[0].model == "NVIDIA H200");
  CHECK(g->gpus[0].uuid == "GPU-aaaa");
  CHECK(g->gpus[0].brand == "tesla");
  fs::rename(dir.path() / "gpus", root / "proc/driver/nvidia/gpus");
  // Where /proc names it, that name stays.
  CHECK(discover_gpus(root)->gpus[0].model == "NVIDIA H100 80GB HBM3");

  // Brands by the toolkit's names.
  env.set("FAKE_NVML_BRAND", "14");
  CHECK(discover_gpus(root)->gpus[0].brand == "nvidia");
  CHECK(nvml_brand_name(13) == "nvidiartx");
  CHECK(nvml_brand_name(0).empty());
  CHECK(nvml_brand_name(17).empty());
  CHECK(nvml_brand_name(-1).empty());

  // An NVML that crashes costs only its facts; so does one that hangs (killed at the timeout).
  env.set("FAKE_NVML_CRASH", "1");
  g = discover_gpus(root);
  REQUIRE(g);
  CHECK(g->cuda_version == "12.4");  // said before NVML was asked
  CHECK(g->gpus[0].brand.empty());
  env.set("FAKE_NVML_CRASH", nullptr);
  env.set("FAKE_NVML_HANG", "1");
  GpuInjection hung = *g;
  hung.cuda_version.clear();
  auto start = std::chrono::steady_clock::now();
  query_driver(hung, root, std::chrono::milliseconds(300));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  CHECK(hung.cuda_version == "12.4");
  CHECK(hung.gpus[0].brand.empty());
  env.set("FAKE_NVML_HANG", nullptr);

  // A libcuda that will not say: no CUDA version. And files that are no libraries (fake trees):
  // nothing.
  env.set("FAKE_CUDA_DRIVER_VERSION", nullptr);
  CHECK(discover_gpus(root)->cuda_version.empty());
  test::write(lib / "libcuda.so.550.54.15", "not a library");
  fs::remove(lib / "libnvidia-ml.so.550.54.15");
  env.set("FAKE_CUDA_DRIVER_VERSION", "12040");
  g = discover_gpus(root);
  CHECK(g->cuda_version.empty());
  CHECK(g->gpus[0].brand.empty());
}

TEST_CASE("gpu --cdi: the libraries' soname links as the toolkit's hooks, or as mounts",
          "[verify][gpu][cdi]") {
  TempDir dir;
  fs::path root = dir.path() / "host";
  fake_host(root);
  fs::remove(root / "usr/lib" / multiarch_tuple() / "libnvidia-ml.so.550.54.15");
  const std::string lib = std::string("/usr/lib/") + multiarch_tuple();
  auto g = discover_gpus(root);
  REQUIRE(g);
  auto mounts_of = [](const nlohmann::json& spec) {
    std::map<std::string, std::string> out;
    for (const auto& m : spec["containerEdits"]["mounts"]) out[m["containerPath"]] = m["hostPath"];
    return out;
  };

  // No hook program: the library again at its soname and at libcuda.so.
  CHECK(cdi_hook_program(root).empty());
  auto plain = nlohmann::json::parse(to_cdi_json(*g, root));
  auto mounts = mounts_of(plain);
  for (const char* name : {"libcuda.so.550.54.15", "libcuda.so.1", "libcuda.so"})
    CHECK(mounts[lib + "/" + name] == lib + "/libcuda.so.550.54.15");
  CHECK_FALSE(plain["containerEdits"].contains("hooks"));

  // nvidia-ctk (before toolkit 1.17): `nvidia-ctk hook NAME`; read back, stackbuild makes the same
  // links.
  test::write(root / "usr/bin/nvidia-ctk", "#!/bin/sh\n", 0755);
  CHECK(cdi_hook_program(root) == "/usr/bin/nvidia-ctk");
  const std::string spec = to_cdi_json(*g, root);
  auto hooked = nlohmann::json::parse(spec);
  CHECK(mounts_of(hooked).count(lib + "/libcuda.so.1") == 0);
  REQUIRE(hooked["containerEdits"]["hooks"].size() == 2);
  CHECK(hooked["containerEdits"]["hooks"][0]["args"] ==
        nlohmann::json::array({"nvidia-ctk", "hook", "create-symlinks", "--link",
                               "libcuda.so.550.54.15::" + lib + "/libcuda.so.1", "--link",
                               "libcuda.so.1::" + lib + "/libcuda.so"}));
  CHECK(hooked["containerEdits"]["hooks"][1]["args"] ==
        nlohmann::json::array({"nvidia-ctk", "hook", "update-ldcache", "--folder", lib}));
  test::write(root / "etc/cdi/nvidia.json", spec);
  auto back = load_cdi(root);
  REQUIRE(back);
  REQUIRE(back->symlinks.size() == 2);
  CHECK(back->symlinks[0].link == lib + "/libcuda.so.1");
  CHECK(back->symlinks[0].target == "libcuda.so.550.54.15");
  CHECK(back->ldconfig_folders == std::vector<std::string>{lib});
  // nvidia-cdi-hook, where there is one, comes first.
  test::write(root / "usr/local/bin/nvidia-cdi-hook", "#!/bin/sh\n", 0755);
  CHECK(cdi_hook_program(root) == "/usr/local/bin/nvidia-cdi-hook");
  // A file that is not executable is no hook program.
  fs::permissions(root / "usr/local/bin/nvidia-cdi-hook", fs::perms::owner_read);
  fs::permissions(root / "usr/bin/nvidia-ctk", fs::perms::owner_read);
  CHECK(cdi_hook_program(root).empty());
}
