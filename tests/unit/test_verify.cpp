#include <catch2/catch.hpp>
#include <cstring>

#include "helpers.hpp"
#include "verify/elf.hpp"
#include "verify/fatbin.hpp"
#include "verify/gpu.hpp"
#include "verify/report.hpp"
#include "verify/static_checks.hpp"

using namespace sb;
using namespace sb::verify;

namespace {

// A fake host with an NVIDIA driver: two driver versions side by side, two GPUs.
fs::path fake_driver_host(const fs::path& root, bool missing_gpu1_node = false) {
  test::write(root / "proc/driver/nvidia/version",
              "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\n"
              "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n");
  test::write(root / "proc/driver/nvidia/gpus/0000:3b:00.0/information",
              "Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 95\nGPU UUID: \t GPU-aaaa\nDevice Minor: \t 0\n");
  test::write(root / "proc/driver/nvidia/gpus/0000:86:00.0/information",
              "Model: \t\t NVIDIA H100 80GB HBM3\nGPU UUID: \t GPU-bbbb\nDevice Minor: \t 1\n");
  for (const char* n : {"dev/nvidia0", "dev/nvidiactl", "dev/nvidia-uvm", "dev/nvidia-uvm-tools"})
    test::write(root / n, "");
  if (!missing_gpu1_node) test::write(root / "dev/nvidia1", "");
  for (const char* lib : {"libcuda.so.550.54.15", "libcuda.so.535.104.05", "libnvidia-ml.so.550.54.15",
                          "libnvidia-ptxjitcompiler.so.550.54.15", "libnvidia-ml.so.535.104.05"})
    test::write(root / "usr/lib/x86_64-linux-gnu" / lib, "elf");
  test::write(root / "usr/local/nvidia/lib64/libnvidia-nvvm.so.550.54.15", "elf");
  test::write(root / "usr/bin/nvidia-smi", "#!", 0755);
  test::write(root / "lib/firmware/nvidia/550.54.15/gsp_ga10x.bin", "fw");
  test::write(root / "lib/firmware/nvidia/535.104.05/gsp_ga10x.bin", "old fw");
  return root;
}

std::vector<std::string> containers(const GpuInjection& g) {
  std::vector<std::string> out;
  for (const auto& m : g.mounts) out.push_back(m.container_path);
  return out;
}

}  // namespace

TEST_CASE("GPU discovery finds the running driver's files only", "[verify][gpu]") {
  TempDir dir;
  fs::path root = fake_driver_host(dir.path() / "host");
  auto g = discover_gpus(root);
  REQUIRE(g);
  CHECK(g->driver_version == "550.54.15");
  REQUIRE(g->gpus.size() == 2);
  CHECK(g->gpus[1].uuid == "GPU-bbbb");
  CHECK(g->gpus[0].model == "NVIDIA H100 80GB HBM3");
  auto c = containers(*g);
  CHECK(std::count(c.begin(), c.end(), "/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15") == 1);
  CHECK(std::count(c.begin(), c.end(), "/usr/lib/x86_64-linux-gnu/libnvidia-nvvm.so.550.54.15") == 1);
  CHECK(std::count(c.begin(), c.end(), "/usr/bin/nvidia-smi") == 1);
  CHECK(std::count(c.begin(), c.end(), "/lib/firmware/nvidia/550.54.15/gsp_ga10x.bin") == 1);
  for (const auto& p : c) CHECK(p.find("535.104.05") == std::string::npos);
  CHECK(g->device_nodes == std::vector<std::string>{"/dev/nvidia0", "/dev/nvidia1", "/dev/nvidiactl",
                                                     "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"});
  CHECK(g->warnings.empty());
}

TEST_CASE("GPU selection by index and UUID - missing nodes are warnings", "[verify][gpu]") {
  TempDir dir;
  fs::path root = fake_driver_host(dir.path() / "host", true);
  auto one = discover_gpus(root, "GPU-aaaa");
  REQUIRE(one->gpus.size() == 1);
  CHECK(one->gpus[0].minor == 0);
  auto both = discover_gpus(root, "all");
  REQUIRE(both->warnings.size() == 1);
  CHECK_THAT(both->warnings[0], Catch::Contains("/dev/nvidia1 is missing"));
  CHECK(discover_gpus(root, "none")->gpus.empty());
  CHECK_THROWS_WITH(discover_gpus(root, "7"), Catch::Contains("no GPU '7'"));
  CHECK_FALSE(discover_gpus(dir.path() / "no-driver"));
}

TEST_CASE("a CDI spec wins over discovery and a written spec reads back", "[verify][gpu][cdi]") {
  TempDir dir;
  fs::path root = fake_driver_host(dir.path() / "host");
  auto found = discover_gpus(root);
  std::string spec = to_cdi_json(*found);
  CHECK_THAT(spec, Catch::Contains("\"cdiVersion\": \"0.6.0\""));
  CHECK_THAT(spec, Catch::Contains("\"kind\": \"nvidia.com/gpu\""));
  CHECK_FALSE(load_cdi(root));
  test::write(root / "etc/cdi/nvidia.json", spec);
  auto cdi = load_cdi(root, "1");
  REQUIRE(cdi);
  CHECK(cdi->source == "cdi /etc/cdi/nvidia.json");
  CHECK(cdi->driver_version == "550.54.15");
  REQUIRE(cdi->gpus.size() == 1);
  CHECK(std::count(cdi->device_nodes.begin(), cdi->device_nodes.end(), "/dev/nvidia1") == 1);
  CHECK(std::count(cdi->device_nodes.begin(), cdi->device_nodes.end(), "/dev/nvidia0") == 0);
  CHECK(containers(*cdi) == containers(*found));
}

TEST_CASE("the driver requirement is checked against the host driver", "[verify][gpu]") {
  GpuInjection g;
  g.driver_version = "550.54.15";
  CHECK_NOTHROW(check_driver(g, "550.54.14"));
  CHECK_NOTHROW(check_driver(g, "525.60.13"));
  CHECK_THROWS_WITH(check_driver(g, "560.35.05"), Catch::Contains("needs NVIDIA driver 560.35.05 or newer") &&
                                                      Catch::Contains("550.54.15"));
  CHECK(compare_versions("12.10", "12.9") > 0);
}

TEST_CASE("fat binaries: SASS and PTX entries - what runs where", "[verify][cuda]") {
  // A container with an sm_80 cubin and compute_90 PTX, as nvcc writes them.
  std::string sec(16 + 64 + 8 + 80 + 8, '\0');
  auto put32 = [&](size_t off, uint32_t v) { std::memcpy(&sec[off], &v, 4); };
  auto put16 = [&](size_t off, uint16_t v) { std::memcpy(&sec[off], &v, 2); };
  put32(0, 0xBA55ED50);
  put16(4, 1);
  put16(6, 16);
  uint64_t size = 64 + 8 + 80 + 8;
  std::memcpy(&sec[8], &size, 8);
  put16(16, 2), put32(20, 64), put32(24, 8), put32(16 + 28, 80);                    // ELF sm_80
  put16(16 + 72, 1), put32(16 + 72 + 4, 80), put32(16 + 72 + 8, 8), put32(16 + 72 + 28, 90);  // PTX 90
  GpuCode code = parse_fatbin(sec);
  CHECK(code.sass == std::set<int>{80});
  CHECK(code.ptx == std::set<int>{90});
  CHECK(runs_on(code, 80));
  CHECK(runs_on(code, 86));   // sm_80 SASS runs on 8.6
  CHECK_FALSE(runs_on(code, 75));
  CHECK(runs_on(code, 90));   // PTX compiled by the driver
  CHECK(runs_on(code, 100));
  CHECK(sm_number("8.6") == 86);
  CHECK_THROWS_WITH(sm_number("86"), Catch::Contains("bad compute capability"));
  sec[0] = 'x';
  CHECK_THROWS_WITH(parse_fatbin(sec), Catch::Contains("bad magic"));
}

TEST_CASE("static check: every needed library resolves inside the image", "[verify][static]") {
  auto info = read_elf("/bin/true");
  REQUIRE(info);
  REQUIRE(std::find(info->needed.begin(), info->needed.end(), "libc.so.6") != info->needed.end());
  TempDir dir;
  fs::path root = dir.path() / "root";
  fs::create_directories(root / "usr/bin");
  fs::create_directories(root / "usr/lib/x86_64-linux-gnu");
  fs::create_directories(root / "lib64");
  fs::copy_file("/bin/true", root / "usr/bin/true");
  fs::copy_file(fs::canonical("/lib/x86_64-linux-gnu/libc.so.6"), root / "usr/lib/x86_64-linux-gnu/libc.so.6");
  fs::copy_file(fs::canonical(info->interpreter), root / "usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2");
  fs::create_symlink("usr/lib", root / "lib");  // merged /usr, as Debian has it
  fs::create_symlink("/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", root / "lib64/ld-linux-x86-64.so.2");
  // A driver library need is excepted: the host brings it.
  ImageRoot image(root);
  TestResult ok = check_libraries(image, {});
  INFO(summary_table(VerifyReport{"x", {ok}}));
  CHECK(ok.outcome == Outcome::Passed);

  fs::remove(root / "usr/lib/x86_64-linux-gnu/libc.so.6");
  TestResult bad = check_libraries(image, {});
  CHECK(bad.outcome == Outcome::Failed);
  CHECK(std::count(bad.details.begin(), bad.details.end(), "/usr/bin/true: needs libc.so.6, which is not in the image") == 1);
  CHECK(is_driver_library("libcuda.so.1"));
  CHECK(is_driver_library("libnvidia-ml.so.1"));
  CHECK_FALSE(is_driver_library("libcudart.so.12"));
}

TEST_CASE("static check: versions in the image against the expected ones", "[verify][static]") {
  TempDir dir;
  fs::path root = dir.path() / "root";
  test::write(root / "usr/local/cuda-12.6/version.json", R"({"cuda": {"name": "CUDA SDK", "version": "12.6.3"}})");
  fs::create_symlink("cuda-12.6", root / "usr/local/cuda");
  test::write(root / "usr/include/cudnn_version.h",
              "#define CUDNN_MAJOR 9\n#define CUDNN_MINOR 5\n#define CUDNN_PATCHLEVEL 1\n");
  ImageRoot image(root);
  CHECK(image_versions(image) == std::map<std::string, std::string>{{"cuda", "12.6.3"}, {"cudnn", "9.5.1"}});
  CHECK(check_versions(image, {{"cuda", "12.6"}, {"cudnn", "9.5.1.17"}}).outcome == Outcome::Passed);
  auto bad = check_versions(image, {{"cuda", "12.4.1"}});
  CHECK(bad.outcome == Outcome::Failed);
  CHECK(bad.details == std::vector<std::string>{"cuda: the image has 12.6.3, the lockfile says 12.4.1"});
  CHECK(check_versions(image, {{"nccl", "2.21"}}).outcome == Outcome::Skipped);
}

TEST_CASE("reports: GPU tests skipped are never counted as passed - JUnit marks them", "[verify][report]") {
  VerifyReport r{"img:1", {{"static: a", "static", Outcome::Passed, "", {}, 0.5},
                           {"gpu: b", "gpu", Outcome::Skipped, "no NVIDIA GPU on this host", {}, 0},
                           {"static: c", "static", Outcome::Failed, "2 gaps", {"x", "y"}, 0.1}}};
  CHECK(r.count(Outcome::Passed) == 1);
  CHECK_FALSE(r.ok());
  std::string xml = junit_xml(r);
  CHECK_THAT(xml, Catch::Contains("tests=\"3\" failures=\"1\" skipped=\"1\""));
  CHECK_THAT(xml, Catch::Contains("<skipped message=\"no NVIDIA GPU on this host\"/>"));
  CHECK_THAT(xml, Catch::Contains("<failure message=\"2 gaps\">x\ny\n</failure>"));
  CHECK_THAT(summary_table(r), Catch::EndsWith("1 passed, 1 failed, 1 skipped\n"));
}
