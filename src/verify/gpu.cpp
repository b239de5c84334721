#include "verify/gpu.hpp"

#include <elf.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "util/error.hpp"
#include "util/file.hpp"
#include "verify/driver_query.hpp"
#include "verify/elf.hpp"

namespace sb::verify {

const char* multiarch_tuple() {
#if defined(__aarch64__)
  return "aarch64-linux-gnu";
#else
  return "x86_64-linux-gnu";
#endif
}

namespace {

// True when `file` is a 64-bit ELF file for this machine. A host with the
// driver's 32-bit libraries (the .run installer puts them in by default) has
// a second libcuda.so.VERSION, for i386, in the same linker cache.
bool native_elf(const fs::path& file) {
#if defined(__aarch64__)
  constexpr uint16_t machine = EM_AARCH64;
#else
  constexpr uint16_t machine = EM_X86_64;
#endif
  try {
    auto elf = read_elf(file);
    return elf && elf->is64 && elf->machine == machine;
  } catch (const Error&) {  // missing, unreadable or malformed: not a library to mount
    return false;
  }
}

// (soname or file name) -> image path, from the host's /etc/ld.so.cache.
std::vector<std::string> ld_cache_paths(const fs::path& root) {
  std::string data = read_file_or_empty(under(root, "/etc/ld.so.cache"));
  const char magic[] = "glibc-ld.so.cache1.1";
  size_t base = data.find(magic);
  std::vector<std::string> out;
  if (base == std::string::npos || base + 48 > data.size()) return out;
  uint32_t nlibs;
  std::memcpy(&nlibs, data.data() + base + 20, 4);
  for (uint32_t i = 0; i < nlibs; ++i) {
    size_t e = base + 48 + static_cast<size_t>(i) * 24;
    if (e + 24 > data.size()) break;
    uint32_t value;
    std::memcpy(&value, data.data() + e + 8, 4);
    if (base + value >= data.size()) continue;
    out.emplace_back(data.c_str() + base + value);
  }
  return out;
}

// The files of the linker cache and the usual driver directories, as image
// paths, where the driver's libraries are looked for (the 32-bit ones too:
// callers take only native_elf() files).
std::vector<std::string> driver_file_candidates(const fs::path& root) {
  std::vector<std::string> candidates = ld_cache_paths(root);
  for (const std::string& dir : {std::string("/usr/lib/") + multiarch_tuple(),
                                 std::string("/usr/lib64"), std::string("/usr/local/nvidia/lib64"),
                                 std::string("/usr/local/nvidia/lib"), std::string("/usr/lib")}) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(under(root, dir), ec))
      candidates.push_back(dir + "/" + e.path().filename().string());
  }
  return candidates;
}

}  // namespace

std::string host_driver_version(const fs::path& root) {
  static const std::regex re(R"(Kernel Module\s+(?:for\s+\S+\s+)?(\d+\.\d+(?:\.\d+)?))");
  std::smatch m;
  std::string text = read_file_or_empty(under(root, "/proc/driver/nvidia/version"));
  if (std::regex_search(text, m, re)) return m[1];
  std::string sys = read_file_or_empty(under(root, "/sys/module/nvidia/version"));
  sys.erase(sys.find_last_not_of(" \n") + 1);
  if (!sys.empty() || !fs::exists(under(root, "/dev/nvidiactl"))) return sys;
  // A container may see the driver's device nodes and libraries but not the
  // kernel's files: the version of the installed libcuda.so, when only one is.
  static const std::regex lib(R"(libcuda\.so\.(\d+\.\d+(?:\.\d+)?))");
  std::set<std::string> versions;
  for (const auto& c : driver_file_candidates(root)) {
    std::smatch m;
    std::string name = fs::path(c).filename().string();
    if (std::regex_match(name, m, lib) && native_elf(under(root, c))) versions.insert(m[1]);
  }
  return versions.size() == 1 ? *versions.begin() : "";
}

std::vector<GpuDevice> host_gpus(const fs::path& root) {
  std::vector<GpuDevice> out;
  fs::path dir = under(root, "/proc/driver/nvidia/gpus");
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::istringstream info(read_file_or_empty(e.path() / "information"));
    GpuDevice g;
    g.pci_bus = e.path().filename().string();
    g.minor = -1;
    std::string line;
    while (std::getline(info, line)) {
      auto colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string key = line.substr(0, colon), value = line.substr(colon + 1);
      value.erase(0, value.find_first_not_of(" \t"));
      if (key == "Model") g.model = value;
      if (key == "GPU UUID") g.uuid = value;
      if (key == "Device Minor") g.minor = std::atoi(value.c_str());
    }
    if (g.minor >= 0) out.push_back(g);
  }
  if (out.empty()) {  // /proc/driver/nvidia not visible: the GPUs' device nodes
    for (const auto& e : fs::directory_iterator(under(root, "/dev"), ec)) {
      std::string name = e.path().filename().string();
      if (name.size() > 6 && name.rfind("nvidia", 0) == 0 &&
          name.find_first_not_of("0123456789", 6) == std::string::npos) {
        GpuDevice g;
        g.minor = std::atoi(name.c_str() + 6);
        out.push_back(g);
      }
    }
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.minor < b.minor; });
  for (size_t i = 0; i < out.size(); ++i) out[i].index = static_cast<int>(i);
  return out;
}

namespace {

std::vector<GpuDevice> select(const std::vector<GpuDevice>& all, const std::string& selection) {
  if (selection.empty() || selection == "all") return all;
  if (selection == "none") return {};
  std::vector<GpuDevice> out;
  std::stringstream ss(selection);
  std::string item;
  while (std::getline(ss, item, ',')) {
    auto it = std::find_if(all.begin(), all.end(), [&](const GpuDevice& g) {
      return g.uuid == item || (!item.empty() && std::all_of(item.begin(), item.end(), ::isdigit) &&
                                g.index == std::atoi(item.c_str()));
    });
    if (it == all.end())
      throw Error("--gpus " + selection + ": no GPU '" + item + "' on this host (it has " +
                  std::to_string(all.size()) + ")", ErrorKind::Usage);
    out.push_back(*it);
  }
  return out;
}

}  // namespace

void check_gpu_selection(const std::string& selection) {
  if (selection == "all" || selection == "none") return;
  auto bad = [&](const std::string& why) {
    throw Error(
        "--gpus wants all, none, or GPU indices or UUIDs separated by commas (0,1 or GPU-...), not "
        "'" +
            selection + "': " + why,
        ErrorKind::Usage);
  };
  if (selection.empty()) bad("it is empty");
  std::set<std::string> seen;
  size_t start = 0;
  for (;;) {
    size_t end = selection.find(',', start);
    std::string item =
        selection.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (item.empty()) bad("an empty item");
    if (item == "all" || item == "none") bad("'" + item + "' stands alone");
    if (!std::all_of(item.begin(), item.end(),
                     [](unsigned char c) { return std::isalnum(c) || c == '-'; }))
      bad("'" + item + "' is neither an index nor a UUID");
    if (!seen.insert(item).second) bad("'" + item + "' twice");
    if (end == std::string::npos) break;
    start = end + 1;
  }
}

const std::vector<std::string>& driver_library_names() {
  static const std::vector<std::string> names = {"libcuda.so",
                                                 "libcudadebugger.so",
                                                 "libnvidia-ml.so",
                                                 "libnvidia-cfg.so",
                                                 "libnvidia-ptxjitcompiler.so",
                                                 "libnvidia-nvvm.so",
                                                 "libnvidia-gpucomp.so",
                                                 "libnvidia-opencl.so",
                                                 "libnvidia-allocator.so",
                                                 "libnvidia-compiler.so",
                                                 "libnvidia-pkcs11.so",
                                                 "libnvidia-pkcs11-openssl3.so",
                                                 "libnvidia-fatbinaryloader.so",
                                                 "libnvidia-tileiras.so"};
  return names;
}

const std::vector<std::string>& video_library_names() {
  static const std::vector<std::string> names = {"libvdpau_nvidia.so", "libnvidia-encode.so",
                                                 "libnvidia-opticalflow.so", "libnvcuvid.so"};
  return names;
}

int compare_versions(const std::string& a, const std::string& b) {
  std::stringstream sa(a), sb(b);
  std::string x, y;
  for (;;) {
    bool ha = static_cast<bool>(std::getline(sa, x, '.')), hb = static_cast<bool>(std::getline(sb, y, '.'));
    if (!ha && !hb) return 0;
    long vx = ha ? std::atol(x.c_str()) : 0, vy = hb ? std::atol(y.c_str()) : 0;
    if (vx != vy) return vx < vy ? -1 : 1;
  }
}

std::optional<GpuInjection> discover_gpus(const fs::path& root, const std::string& selection,
                                          const std::string& capabilities) {
  std::string version = host_driver_version(root);
  if (version.empty()) return std::nullopt;
  GpuInjection g;
  g.source = "discovered";
  g.driver_version = version;
  g.cuda_compat = true;
  g.gpus = select(host_gpus(root), selection);
  if (!fs::exists(under(root, "/proc/driver/nvidia/version")) &&
      !fs::exists(under(root, "/sys/module/nvidia/version")))
    g.warnings.push_back("the kernel's /proc/driver/nvidia is not visible here: driver " + version +
                         " is the installed libcuda.so's, and the GPUs are the /dev/nvidiaN nodes");

  for (const auto& gpu : g.gpus) {
    std::string node = "/dev/nvidia" + std::to_string(gpu.minor);
    if (!fs::exists(under(root, node)))
      g.warnings.push_back("GPU " + std::to_string(gpu.index) + " (" + gpu.uuid + "): " + node + " is missing");
    else
      g.device_nodes.push_back(node);
  }
  for (const char* node : {"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset"}) {
    if (fs::exists(under(root, node)))
      g.device_nodes.push_back(node);
    else if (std::string(node) == "/dev/nvidiactl" || std::string(node) == "/dev/nvidia-uvm")
      g.warnings.push_back(std::string(node) + " is missing: CUDA will not start");
  }

  // Libraries: the file whose suffix is exactly the running driver's version,
  // built for this machine, from the linker cache first, then the usual
  // driver directories.
  std::vector<std::string> candidates = driver_file_candidates(root);
  std::set<std::string> taken;
  const std::string lib_dir = std::string("/usr/lib/") + multiarch_tuple() + "/";
  // NVIDIA_DRIVER_CAPABILITIES, as libnvidia-container reads it.
  std::set<std::string> caps;
  for (size_t start = 0; start <= capabilities.size();) {
    size_t end = std::min(capabilities.find(',', start), capabilities.size());
    std::string c = capabilities.substr(start, end - start);
    c.erase(0, c.find_first_not_of(' '));
    c.erase(c.find_last_not_of(' ') + 1);
    if (!c.empty()) caps.insert(c);
    start = end + 1;
  }
  std::vector<std::string> names = driver_library_names();
  if (caps.count("video") || caps.count("all"))
    names.insert(names.end(), video_library_names().begin(), video_library_names().end());
  std::string left_out;
  for (const char* missing : {"graphics", "display"})
    if (caps.count(missing) || caps.count("all"))
      left_out += (left_out.empty() ? "" : " and ") + std::string(missing);
  if (!left_out.empty())
    g.warnings.push_back("NVIDIA_DRIVER_CAPABILITIES=" + capabilities + ": " + left_out +
                         " are not injected (stackbuild injects compute, utility and video)");
  for (const auto& name : names) {
    std::string want = name + "." + version;
    for (const auto& c : candidates) {
      if (fs::path(c).filename() != want || taken.count(want) || !native_elf(under(root, c)))
        continue;
      taken.insert(want);
      g.mounts.push_back({fs::path(c).relative_path(), lib_dir + want, true});
    }
  }
  for (const char* bin : {"nvidia-smi", "nvidia-debugdump", "nvidia-persistenced", "nvidia-cuda-mps-control",
                          "nvidia-cuda-mps-server"}) {
    for (const char* dir : {"/usr/bin", "/usr/local/nvidia/bin", "/usr/sbin"}) {
      std::string p = std::string(dir) + "/" + bin;
      if (fs::exists(under(root, p))) {
        g.mounts.push_back({fs::path(p).relative_path(), std::string("/usr/bin/") + bin});
        break;
      }
    }
  }
  std::error_code ec;
  std::string fw = "/lib/firmware/nvidia/" + version;
  for (const auto& e : fs::directory_iterator(under(root, fw), ec))
    g.mounts.push_back({fs::path(fw + "/" + e.path().filename().string()).relative_path(),
                        fw + "/" + e.path().filename().string()});
  if (std::none_of(g.mounts.begin(), g.mounts.end(),
                   [&](const Mount& m) { return m.container_path.find("libcuda.so.") != std::string::npos; }))
    g.warnings.push_back("no libcuda.so." + version + " found for the running driver");
  query_driver(g, root);
  return g;
}

}  // namespace sb::verify
