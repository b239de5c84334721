// GPU discovery and injection: the driver's files found on a host (faked
// here), CDI specs (read, written, nvidia-ctk's hooks), --gpus selections,
// and where the mounts land in an image. The CUDA code and static checks
// are in test_verify.cpp.
#include <elf.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <nlohmann/json.hpp>
#include <sstream>

#include "helpers.hpp"
#include "util/error.hpp"
#include "util/process.hpp"
#include "verify/driver_check.hpp"
#include "verify/elf.hpp"
#include "verify/fatbin.hpp"
#include "verify/gpu.hpp"
#include "verify/report.hpp"
#include "verify/run_in_image.hpp"
#include "verify/static_checks.hpp"

using namespace sb;
using namespace sb::verify;

namespace {

// The first bytes of a shared library, for this machine or for i386.
std::string elf_header(bool native = true) {
  std::string h(64, '\0');
  std::memcpy(h.data(), ELFMAG, SELFMAG);
  h[EI_CLASS] = native ? ELFCLASS64 : ELFCLASS32;
  h[EI_DATA] = ELFDATA2LSB;
  h[16] = ET_DYN;
#if defined(__aarch64__)
  const uint16_t machine = native ? EM_AARCH64 : EM_ARM;
#else
  const uint16_t machine = native ? EM_X86_64 : EM_386;
#endif
  h[18] = static_cast<char>(machine & 0xff);
  h[19] = static_cast<char>(machine >> 8);
  return h;
}

// A linker cache (glibc's "new" format) listing `paths`, each under its file name.
std::string ld_cache(const std::vector<std::string>& paths) {
  std::string head = "glibc-ld.so.cache1.1";
  std::string strings;
  std::vector<std::pair<uint32_t, uint32_t>> offsets;  // key, value
  const uint32_t base = 48 + 24 * static_cast<uint32_t>(paths.size());
  for (const auto& p : paths) {
    uint32_t value = base + static_cast<uint32_t>(strings.size());
    strings += p + '\0';
    uint32_t key = value + static_cast<uint32_t>(p.rfind('/') + 1);
    offsets.push_back({key, value});
  }
  std::string out = head;
  auto u32 = [&](uint32_t v) { out.append(reinterpret_cast<const char*>(&v), 4); };
  u32(static_cast<uint32_t>(paths.size()));
  u32(static_cast<uint32_t>(strings.size()));
  out.resize(48, '\0');
  for (const auto& [key, value] : offsets) {
    u32(0x0303);  // the flags: not read
    u32(key);
    u32(value);
    out.append(12, '\0');  // osversion, hwcap
  }
  return out + strings;
}

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
    test::write(root / "usr/lib" / multiarch_tuple() / lib, elf_header());
  test::write(root / "usr/local/nvidia/lib64/libnvidia-nvvm.so.550.54.15", elf_header());
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

TEST_CASE("a CDI spec as nvidia-ctk writes it: driver version - UUIDs - a bad selection", "[verify][gpu][cdi]") {
  // nvidia-ctk's spec: devices named by index plus "all", no NVIDIA_DRIVER_VERSION.
  const std::string spec = R"(cdiVersion: 0.5.0
kind: nvidia.com/gpu
devices:
  - name: "0"
    containerEdits: {deviceNodes: [{path: /dev/nvidia0}]}
  - name: "1"
    containerEdits: {deviceNodes: [{path: /dev/nvidia1}]}
  - name: all
    containerEdits: {deviceNodes: [{path: /dev/nvidia0}, {path: /dev/nvidia1}]}
containerEdits:
  env: [NVIDIA_VISIBLE_DEVICES=void]
  deviceNodes: [{path: /dev/nvidiactl}, {path: /dev/nvidia-uvm}]
  mounts:
    - {hostPath: /usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15, containerPath: /usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15, options: [ro, nosuid, nodev, bind]}
)";
  TempDir dir;
  fs::path root = fake_driver_host(dir.path() / "host");
  test::write(root / "var/run/cdi/nvidia.yaml", spec);
  auto all = load_cdi(root);
  REQUIRE(all);
  CHECK(all->driver_version == "550.54.15");  // from /proc: the spec names none
  REQUIRE(all->gpus.size() == 2);
  CHECK(all->gpus[1].uuid == "GPU-bbbb");
  CHECK(all->gpus[1].minor == 1);
  CHECK(all->gpus[1].model == "NVIDIA H100 80GB HBM3");
  auto by_uuid = load_cdi(root, "GPU-bbbb");  // a UUID, where the spec names devices by index
  REQUIRE(by_uuid->gpus.size() == 1);
  CHECK(by_uuid->gpus[0].index == 1);
  CHECK(std::count(by_uuid->device_nodes.begin(), by_uuid->device_nodes.end(), "/dev/nvidia1") == 1);
  CHECK(std::count(by_uuid->device_nodes.begin(), by_uuid->device_nodes.end(), "/dev/nvidia0") == 0);
  CHECK(load_cdi(root, "none")->gpus.empty());
  CHECK_THROWS_WITH(load_cdi(root, "0,7"), Catch::Contains("no device '7' in the CDI spec"));
  CHECK_THROWS_WITH(load_cdi(root, "GPU-cccc"), Catch::Contains("no device 'GPU-cccc'"));
  // Without /proc (a spec made elsewhere): the version of the libcuda.so it mounts.
  fs::remove_all(root / "proc");
  auto no_proc = load_cdi(root);
  REQUIRE(no_proc);
  CHECK(no_proc->driver_version == "550.54.15");
  CHECK(no_proc->gpus.size() == 2);
  CHECK(no_proc->gpus[1].minor == 1);
  CHECK_NOTHROW(check_driver(*no_proc, {"550.54.14", {}, ""}));
  CHECK_THROWS_WITH(check_driver(*no_proc, {"560.35.05", {}, ""}),
                    Catch::Contains("this host runs 550.54.15"));
}

TEST_CASE("a CDI spec: a device with no deviceNodes reads, a bad path is refused where it is",
          "[verify][gpu][cdi]") {
  TempDir dir;
  fs::path root = fake_driver_host(dir.path() / "host");
  auto load = [&](const std::string& spec) {
    test::write(root / "etc/cdi/nvidia.yaml", "cdiVersion: 0.6.0\nkind: nvidia.com/gpu\n" + spec);
    return load_cdi(root);
  };
  // Every containerEdits field is optional; this used to fail with yaml-cpp's
  // bare "invalid node; first invalid key: \"deviceNodes\"".
  auto no_nodes =
      load("devices:\n  - {name: \"0\", containerEdits: {env: [A=1]}}\n  - {name: \"1\"}\n");
  REQUIRE(no_nodes);
  REQUIRE(no_nodes->gpus.size() == 2);
  CHECK(no_nodes->gpus[1].minor == 1);
  CHECK(no_nodes->env == std::vector<std::string>{"A=1"});
  // Nodes this host lacks are left out with a warning; nested ones (nvidia-ctk's /dev/dri) stay.
  test::write(root / "dev/dri/card1", "");
  auto nested = load(
      "devices:\n  - {name: \"0\", containerEdits: {deviceNodes: [{path: /dev/nvidia0}, "
      "{path: /dev/dri/card1}, {path: /dev/dri/renderD128}]}}\n");
  REQUIRE(nested);
  CHECK(nested->device_nodes == std::vector<std::string>{"/dev/nvidia0", "/dev/dri/card1"});
  CHECK(nested->warnings ==
        std::vector<std::string>{
            "/dev/dri/renderD128 (in /etc/cdi/nvidia.yaml) is missing on this host: not injected"});

  auto refused = [&](const std::string& spec) -> std::string {
    try {
      load(spec);
    } catch (const InputError& e) {
      CHECK(e.kind() == ErrorKind::Input);
      return e.location().str() + ": " + e.message();
    }
    return "accepted";
  };
  const std::string file = (root / "etc/cdi/nvidia.yaml").string();
  CHECK(refused("devices:\n  - {name: \"0\", containerEdits: {deviceNodes: [{major: 195}]}}\n") ==
        file + ":4:48: missing 'path' in deviceNodes[0]");
  CHECK(
      refused(
          "devices:\n  - {name: \"0\", containerEdits: {deviceNodes: [{path: dev/nvidia0}]}}\n") ==
      file + ":4:55: 'deviceNodes[0].path' is not an absolute path: 'dev/nvidia0'");
  // A mount's container side is joined to the image's root.
  CHECK(
      refused(
          "devices: [{name: \"0\"}]\ncontainerEdits:\n  mounts: [{hostPath: /usr/lib/libcuda.so.1, "
          "containerPath: /usr/lib/../../etc/passwd}]\n") ==
      file + ":5:61: 'mounts[0].containerPath' contains '..': '/usr/lib/../../etc/passwd'");
  CHECK(refused("devices: [{name: \"0\"}]\ncontainerEdits:\n  mounts: [{containerPath: /x}]\n") ==
        file + ":5:12: missing 'hostPath' in mounts[0]");
  // A device that is not selected is checked too.
  CHECK(
      refused(
          "devices:\n  - {name: \"0\"}\n  - {name: \"1\", containerEdits: {mounts: [{hostPath: x, "
          "containerPath: /x}]}}\n") ==
      file + ":5:54: 'mounts[0].hostPath' is not an absolute path: 'x'");
  CHECK(refused("devices:\n  - {containerEdits: {}}\n") ==
        file + ":4:5: missing 'name' in devices[0]");
  CHECK(refused("devices: [5]\n") == file + ":3:11: expected a map for 'devices[0]', got a string");
}

TEST_CASE("versions compare as dotted numbers", "[verify][gpu]") {
  CHECK(compare_versions("12.10", "12.9") > 0);
  CHECK(compare_versions("535.104.05", "535.104.5") == 0);
  CHECK(compare_versions("550", "550.0.0") == 0);
}

TEST_CASE("GPU discovery: the video libraries when the image's NVIDIA_DRIVER_CAPABILITIES asks",
          "[verify][gpu]") {
  TempDir dir;
  fs::path root = fake_driver_host(dir.path() / "host");
  const fs::path lib = root / "usr/lib" / multiarch_tuple();
  for (const char* name : {"libnvcuvid.so.550.54.15", "libnvidia-encode.so.550.54.15",
                           "libnvidia-opticalflow.so.550.54.15", "libvdpau_nvidia.so.550.54.15",
                           "libnvcuvid.so.535.104.05"})
    test::write(lib / name, elf_header());
  auto video = [&](const std::string& caps) {
    std::vector<std::string> out;
    for (const auto& c : containers(*discover_gpus(root, "all", caps)))
      if (c.find("cuvid") != std::string::npos || c.find("encode") != std::string::npos ||
          c.find("opticalflow") != std::string::npos || c.find("vdpau") != std::string::npos)
        out.push_back(fs::path(c).filename().string());
    std::sort(out.begin(), out.end());
    return out;
  };
  const std::vector<std::string> all{"libnvcuvid.so.550.54.15", "libnvidia-encode.so.550.54.15",
                                     "libnvidia-opticalflow.so.550.54.15",
                                     "libvdpau_nvidia.so.550.54.15"};
  // The toolkit's default, and NVIDIA's CUDA images': compute and utility.
  CHECK(video("").empty());
  CHECK(video("compute,utility").empty());
  // NGC's framework images: compute,utility,video; and all.
  CHECK(video("compute,utility,video") == all);
  CHECK(video(" video ") == all);
  CHECK(video("all") == all);
  // Compute and utility are never left out; graphics and display are said to be.
  auto g = discover_gpus(root, "all", "video");
  std::vector<std::string> with_video = containers(*g);
  CHECK(std::count(with_video.begin(), with_video.end(),
                   std::string("/usr/lib/") + multiarch_tuple() + "/libcuda.so.550.54.15") == 1);
  CHECK(g->warnings.empty());
  auto graphics = discover_gpus(root, "all", "compute,graphics,display");
  CHECK(std::count(graphics->warnings.begin(), graphics->warnings.end(),
                   "NVIDIA_DRIVER_CAPABILITIES=compute,graphics,display: graphics and display are "
                   "not injected "
                   "(stackbuild injects compute, utility and video)") == 1);
  CHECK(discover_gpus(root, "all", "all")->warnings.size() == 1);
}

TEST_CASE("a --gpus value is checked on any host", "[verify][gpu]") {
  for (const char* ok : {"all", "none", "0", "0,1", "GPU-aaaa-bbbb", "1,GPU-aaaa", "MIG-1234"}) {
    CAPTURE(ok);
    CHECK_NOTHROW(check_gpu_selection(ok));
  }
  auto why = [](const std::string& sel) -> std::string {
    try {
      check_gpu_selection(sel);
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::Usage);
      std::string w = e.what();
      return w.substr(w.rfind(": ") + 2);
    }
    return "accepted";
  };
  CHECK(why("") == "it is empty");
  CHECK(why("0,,1") == "an empty item");
  CHECK(why("0,") == "an empty item");
  CHECK(why("0,0") == "'0' twice");
  CHECK(why("all,1") == "'all' stands alone");
  CHECK(why(" 1") == "' 1' is neither an index nor a UUID");
  CHECK(why("0;1") == "'0;1' is neither an index nor a UUID");
}

TEST_CASE("a GPU mount lands where the image's symlinks take it, never outside the root", "[verify][gpu]") {
  TempDir dir;
  fs::path root = dir.path() / "root";
  fs::create_directories(root / "usr/lib/x86_64-linux-gnu");
  fs::create_directories(root / "usr/bin");
  fs::create_symlink("usr/lib", root / "lib");  // merged /usr
  fs::create_symlink("/usr/bin", root / "bin");
  fs::create_symlink("../../../../..", root / "usr/lib/up");
  fs::create_symlink("loop2", root / "usr/lib/loop1");
  fs::create_symlink("loop1", root / "usr/lib/loop2");
  ImageRoot image(root);
  // Before, /lib/firmware/... made a mount point directory /lib over the
  // image's /lib -> usr/lib link, hiding everything the image has in it.
  CHECK(image.mount_path("/lib/firmware/nvidia/550.54.15/gsp_ga10x.bin") ==
        "/usr/lib/firmware/nvidia/550.54.15/gsp_ga10x.bin");
  CHECK(image.mount_path("/lib/x86_64-linux-gnu/libcuda.so.550.54.15") ==
        "/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15");
  CHECK(image.mount_path("/bin/nvidia-smi") == "/usr/bin/nvidia-smi");
  CHECK(image.mount_path("/usr/lib/up/etc/passwd") == "/etc/passwd");  // '..' stops at the root
  CHECK(image.mount_path("/opt/a/../b/c") == "/opt/b/c");              // missing, then '..'
  CHECK(image.mount_path("/usr/lib/loop1/x") == "/usr/lib/loop1/x");   // a loop: the link itself
  CHECK(image.mount_path("/") == "/");
}

TEST_CASE(
    "discovery where /proc/driver/nvidia is not visible: libcuda's version, the /dev/nvidiaN nodes",
    "[verify][gpu]") {
  TempDir dir;
  fs::path root = dir.path() / "host";
  for (const char* n : {"dev/nvidiactl", "dev/nvidia-uvm", "dev/nvidia0", "dev/nvidia2"})
    test::write(root / n, "");
  test::write(root / "usr/local/nvidia/lib64/libcuda.so.550.54.15", elf_header());
  test::write(root / "usr/local/nvidia/lib64/libnvidia-ml.so.550.54.15", elf_header());
  auto g = discover_gpus(root);
  REQUIRE(g);
  CHECK(g->driver_version == "550.54.15");
  REQUIRE(g->gpus.size() == 2);
  CHECK(g->gpus[1].index == 1);
  CHECK(g->gpus[1].minor == 2);
  CHECK(std::count(g->device_nodes.begin(), g->device_nodes.end(), "/dev/nvidia2") == 1);
  CHECK(g->mounts.size() == 2);
  REQUIRE(g->warnings.size() == 1);
  CHECK_THAT(g->warnings[0], Catch::Contains("/proc/driver/nvidia is not visible"));
  // Two driver versions side by side: which one runs cannot be told; no driver.
  test::write(root / "usr/lib/x86_64-linux-gnu/libcuda.so.535.104.05", elf_header());
  CHECK_FALSE(discover_gpus(root));
  // Without /dev/nvidiactl a libcuda.so (a copy in a toolkit or an image) is no driver.
  fs::remove(root / "usr/lib/x86_64-linux-gnu/libcuda.so.535.104.05");
  fs::remove(root / "dev/nvidiactl");
  CHECK_FALSE(discover_gpus(root));
}

TEST_CASE("discovery takes the driver's libraries built for this machine, not its 32-bit ones",
          "[verify][gpu]") {
  // The .run installer adds the 32-bit libraries by default: libcuda.so.550.54.15
  // twice in the linker cache, the i386 one listed first here.
  TempDir dir;
  fs::path root = fake_driver_host(dir.path() / "host");
  const std::string lib64 = std::string("/usr/lib/") + multiarch_tuple() + "/libcuda.so.550.54.15";
  test::write(root / "usr/lib/i386-linux-gnu/libcuda.so.550.54.15", elf_header(false));
  test::write(root / "usr/lib/i386-linux-gnu/libnvidia-ml.so.550.54.15", elf_header(false));
  test::write(root / "etc/ld.so.cache",
              ld_cache({"/usr/lib/i386-linux-gnu/libcuda.so.550.54.15", lib64,
                        "/usr/lib/i386-linux-gnu/libnvidia-ml.so.550.54.15"}));
  auto g = discover_gpus(root);
  REQUIRE(g);
  std::vector<std::string> hosts;
  for (const auto& m : g->mounts) {
    hosts.push_back("/" + m.host_path.string());
    CHECK(m.library == (m.container_path.find(".so.") != std::string::npos));
  }
  CHECK(std::count(hosts.begin(), hosts.end(), lib64) == 1);
  for (const auto& h : hosts) CHECK(h.find("i386") == std::string::npos);
  // libnvidia-ml: the i386 one skipped, the native one from the directories.
  CHECK(std::count(hosts.begin(), hosts.end(),
                   std::string("/usr/lib/") + multiarch_tuple() + "/libnvidia-ml.so.550.54.15") ==
        1);
  CHECK(g->cuda_compat);
  // Where /proc is hidden, only the native libcuda.so says the version.
  fs::remove_all(root / "proc");
  fs::remove(root / "usr/lib" / multiarch_tuple() / "libcuda.so.535.104.05");
  fs::remove(root / lib64.substr(1));
  test::write(root / "usr/lib/i386-linux-gnu/libcuda.so.535.104.05", elf_header(false));
  test::write(root / "usr/local/nvidia/lib64/libcuda.so.550.54.15", elf_header());
  test::write(root / "etc/ld.so.cache",
              ld_cache({"/usr/lib/i386-linux-gnu/libcuda.so.535.104.05"}));
  CHECK(host_driver_version(root) == "550.54.15");
}

TEST_CASE("a CDI spec's nvidia-ctk hooks: links and ldconfig folders read, others warned about",
          "[verify][gpu][cdi]") {
  TempDir dir;
  fs::path root = fake_driver_host(dir.path() / "host");
  const std::string file = (root / "etc/cdi/nvidia.yaml").string();
  auto load = [&](const std::string& edits) {
    test::write(root / "etc/cdi/nvidia.yaml",
                "cdiVersion: 0.6.0\nkind: nvidia.com/gpu\ndevices: [{name: \"0\"}]\n"
                "containerEdits:\n  hooks:\n" +
                    edits);
    return load_cdi(root);
  };
  // As nvidia-ctk 1.16 writes them, and nvidia-cdi-hook (1.17) with --opt=value.
  auto g = load(
      "  - {hookName: createContainer, path: /usr/bin/nvidia-ctk, args: [nvidia-ctk, hook, "
      "create-symlinks, --link, 'libcuda.so.1::/usr/lib/x86_64-linux-gnu/libcuda.so', --link, "
      "'../card1::/dev/dri/by-path/pci-0000:3b:00.0-card']}\n"
      "  - {hookName: createContainer, path: /usr/bin/nvidia-cdi-hook, args: [nvidia-cdi-hook, "
      "update-ldcache, --folder=/usr/lib64, --folder, /usr/lib/x86_64-linux-gnu]}\n"
      "  - {hookName: createContainer, path: /usr/bin/nvidia-cdi-hook, args: [nvidia-cdi-hook, "
      "enable-cuda-compat, --host-driver-version=550.54.15]}\n"
      "  - {hookName: createContainer, path: /usr/bin/nvidia-ctk, args: [nvidia-ctk, hook, chmod, "
      "--mode, '755', --path, /dev/dri]}\n"
      "  - {hookName: createContainer, path: /usr/bin/nvidia-cdi-hook, args: [nvidia-cdi-hook, "
      "disable-device-node-modification]}\n"
      "  - {hookName: poststart, path: /usr/local/bin/report, args: [report, --to, x]}\n");
  REQUIRE(g);
  REQUIRE(g->symlinks.size() == 2);
  CHECK(g->symlinks[0].target == "libcuda.so.1");
  CHECK(g->symlinks[0].link == "/usr/lib/x86_64-linux-gnu/libcuda.so");
  CHECK(g->symlinks[1].target == "../card1");
  CHECK(g->symlinks[1].link == "/dev/dri/by-path/pci-0000:3b:00.0-card");
  CHECK(g->ldconfig_folders == std::vector<std::string>{"/usr/lib64", "/usr/lib/x86_64-linux-gnu"});
  CHECK(g->cuda_compat);
  REQUIRE(g->warnings.size() == 1);
  CHECK(g->warnings[0] ==
        "hook '/usr/local/bin/report --to x' (hooks[5] in " + file + ") is not run");
  // Without the compat hook, no compat.
  CHECK_FALSE(load("  - {hookName: createContainer, path: /bin/true}\n")->cuda_compat);

  auto refused = [&](const std::string& edits) -> std::string {
    try {
      load(edits);
    } catch (const InputError& e) {
      return e.location().str() + ": " + e.message();
    }
    return "accepted";
  };
  CHECK(refused("  - {hookName: createContainer, path: /usr/bin/nvidia-ctk, args: [nvidia-ctk, "
                "hook, create-symlinks, --link, libcuda.so.1]}\n") ==
        file + ":6:5: 'hooks[0]': create-symlinks wants --link TARGET::LINK, not 'libcuda.so.1'");
  CHECK(refused("  - {hookName: createContainer, path: /usr/bin/nvidia-ctk, args: [nvidia-ctk, "
                "hook, create-symlinks, --link, 'libcuda.so.1::../../etc/passwd']}\n") ==
        file + ":6:5: 'hooks[0] --link' is not an absolute path: '../../etc/passwd'");
  CHECK(refused("  - {hookName: createContainer, path: /usr/bin/nvidia-cdi-hook, args: "
                "[nvidia-cdi-hook, update-ldcache, --folder, /usr/../etc]}\n") ==
        file + ":6:5: 'hooks[0] --folder' contains '..': '/usr/../etc'");
  CHECK(refused("  - {hookName: createContainer, args: [x]}\n") ==
        file + ":6:5: missing 'path' in hooks[0]");
}

TEST_CASE("a CDI spec's mount of a file the host lacks is left out with a warning",
          "[verify][gpu][cdi]") {
  // nvidia-ctk lists libraries the open kernel modules' driver does not ship.
  TempDir dir;
  fs::path root = fake_driver_host(dir.path() / "host");
  const std::string lib = std::string("/usr/lib/") + multiarch_tuple();
  test::write(root / "etc/cdi/nvidia.yaml",
              "cdiVersion: 0.6.0\nkind: nvidia.com/gpu\ndevices: [{name: \"0\"}]\n"
              "containerEdits:\n  mounts:\n"
              "    - {hostPath: " +
                  lib + "/libcuda.so.550.54.15, containerPath: " + lib +
                  "/libcuda.so.550.54.15}\n"
                  "    - {hostPath: " +
                  lib + "/libnvidia-tileiras.so.550.54.15, containerPath: " + lib +
                  "/libnvidia-tileiras.so.550.54.15}\n");
  auto g = load_cdi(root);
  REQUIRE(g);
  CHECK(containers(*g) == std::vector<std::string>{lib + "/libcuda.so.550.54.15"});
  CHECK(g->warnings == std::vector<std::string>{
                           lib + "/libnvidia-tileiras.so.550.54.15 (in /etc/cdi/nvidia.yaml) is "
                                 "missing on this host: not mounted"});
}

TEST_CASE("a CDI spec's device node with a hostPath: found, bound and written back from there",
          "[verify][gpu][cdi]") {
  // The GPU operator's driver container: nodes under /run/nvidia/driver/dev.
  TempDir dir;
  fs::path root = fake_driver_host(dir.path() / "host");
  test::write(root / "run/nvidia/driver/dev/nvidia3", "");
  const std::string spec =
      "cdiVersion: 0.6.0\nkind: nvidia.com/gpu\n"
      "devices:\n  - name: \"0\"\n    containerEdits:\n      deviceNodes:\n"
      "        - {path: /dev/nvidia3, hostPath: /run/nvidia/driver/dev/nvidia3}\n"
      "        - {path: /dev/nvidia4, hostPath: /run/nvidia/driver/dev/nvidia4}\n"
      "        - {path: /dev/nvidiactl, hostPath: /dev/nvidiactl}\n";
  test::write(root / "etc/cdi/nvidia.yaml", spec);
  auto g = load_cdi(root);
  REQUIRE(g);
  CHECK(g->device_nodes == std::vector<std::string>{"/dev/nvidia3", "/dev/nvidiactl"});
  CHECK(g->device_host_paths ==
        std::map<std::string, std::string>{{"/dev/nvidia3", "/run/nvidia/driver/dev/nvidia3"}});
  CHECK(g->warnings == std::vector<std::string>{"/run/nvidia/driver/dev/nvidia4 (in "
                                                "/etc/cdi/nvidia.yaml) is missing on this host: "
                                                "not injected"});
  // gpu --cdi writes the hostPath, and it reads back the same.
  fs::remove(root / "etc/cdi/nvidia.yaml");
  test::write(root / "etc/cdi/nvidia.json", to_cdi_json(*g));
  auto again = load_cdi(root);
  REQUIRE(again);
  CHECK(again->device_host_paths == g->device_host_paths);
  // A relative hostPath is refused where it is.
  fs::remove(root / "etc/cdi/nvidia.json");
  test::write(root / "etc/cdi/nvidia.yaml",
              "cdiVersion: 0.6.0\nkind: nvidia.com/gpu\ndevices: [{name: \"0\"}]\n"
              "containerEdits:\n  deviceNodes: [{path: /dev/nvidia0, hostPath: dev/nvidia0}]\n");
  CHECK_THROWS_WITH(load_cdi(root), Catch::Contains("'deviceNodes[0].hostPath' is not an absolute "
                                                    "path: 'dev/nvidia0'"));
}
