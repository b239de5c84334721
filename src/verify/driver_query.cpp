#include "verify/driver_query.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sstream>

namespace sb::verify {

namespace {

// The host file of the first mount whose image path holds `name`
// ("libcuda.so."), or "".
std::string mounted_library(const GpuInjection& g, const fs::path& host_root, const char* name) {
  for (const auto& m : g.mounts)
    if (fs::path(m.container_path).filename().string().rfind(name, 0) == 0)
      return (host_root / m.host_path).string();
  return "";
}

void put(int fd, const char* line) {
  size_t n = std::strlen(line);
  while (n > 0) {
    ssize_t w = ::write(fd, line, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    line += w;
    n -= static_cast<size_t>(w);
  }
}

// Where a GPU is found in NVML, prepared before the fork.
struct Lookup {
  std::string uuid, pci;
  int index = 0;
};

// The child: writes "cuda N", "gpu I BRAND MAJOR MINOR" and, for a GPU
// without a UUID, "name I TEXT" and "uuid I TEXT" lines to `fd`.
// Everything it reads was prepared by the parent; it only loads, calls and
// writes, then _exits.
[[noreturn]] void child(int fd, const std::string& libcuda, const std::string& nvml,
                        const std::vector<Lookup>& gpus) {
  // A driver library that crashes kills this child, not a handler of stackbuild's.
  for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGINT, SIGTERM, SIGPIPE})
    ::signal(sig, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  char line[128];
  if (!libcuda.empty()) {
    if (void* h = ::dlopen(libcuda.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      using Version = int (*)(int*);
      auto get = reinterpret_cast<Version>(::dlsym(h, "cuDriverGetVersion"));
      int v = 0;
      if (get && get(&v) == 0 && v > 0) {
        std::snprintf(line, sizeof line, "cuda %d\n", v);
        put(fd, line);
      }
    }
  }
  if (!nvml.empty() && !gpus.empty()) {
    if (void* h = ::dlopen(nvml.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      using Init = int (*)();
      using ByName = int (*)(const char*, void**);
      using ByIndex = int (*)(unsigned, void**);
      using Brand = int (*)(void*, int*);
      using Capability = int (*)(void*, int*, int*);
      using Text = int (*)(void*, char*, unsigned);
      auto init = reinterpret_cast<Init>(::dlsym(h, "nvmlInit_v2"));
      auto shutdown = reinterpret_cast<Init>(::dlsym(h, "nvmlShutdown"));
      auto by_uuid = reinterpret_cast<ByName>(::dlsym(h, "nvmlDeviceGetHandleByUUID"));
      auto by_pci = reinterpret_cast<ByName>(::dlsym(h, "nvmlDeviceGetHandleByPciBusId_v2"));
      auto by_index = reinterpret_cast<ByIndex>(::dlsym(h, "nvmlDeviceGetHandleByIndex_v2"));
      auto brand = reinterpret_cast<Brand>(::dlsym(h, "nvmlDeviceGetBrand"));
      auto capability =
          reinterpret_cast<Capability>(::dlsym(h, "nvmlDeviceGetCudaComputeCapability"));
      auto name = reinterpret_cast<Text>(::dlsym(h, "nvmlDeviceGetName"));
      auto uuid = reinterpret_cast<Text>(::dlsym(h, "nvmlDeviceGetUUID"));
      // "KEY I TEXT" for a GPU whose name or UUID /proc did not give (a sandbox
      // such as gVisor shows the device nodes but not /proc/driver/nvidia).
      auto text = [&](Text get, void* dev, const char* key, size_t i) {
        char buf[96] = {};
        if (!get || get(dev, buf, sizeof buf) != 0) return;
        for (char& c : buf)
          if (c == '\n') c = ' ';
        std::snprintf(line, sizeof line, "%s %zu %s\n", key, i, buf);
        put(fd, line);
      };
      if (init && by_uuid && by_pci && by_index && brand && capability && init() == 0) {
        for (size_t i = 0; i < gpus.size(); ++i) {
          void* dev = nullptr;
          int found = !gpus[i].uuid.empty()  ? by_uuid(gpus[i].uuid.c_str(), &dev)
                      : !gpus[i].pci.empty() ? by_pci(gpus[i].pci.c_str(), &dev)
                                             : by_index(static_cast<unsigned>(gpus[i].index), &dev);
          int b = 0, major = 0, minor = 0;
          if (found != 0 || brand(dev, &b) != 0) b = -1;
          if (found != 0 || capability(dev, &major, &minor) != 0) major = minor = -1;
          std::snprintf(line, sizeof line, "gpu %zu %d %d %d\n", i, b, major, minor);
          put(fd, line);
          if (found == 0 && gpus[i].uuid.empty()) {
            text(name, dev, "name", i);
            text(uuid, dev, "uuid", i);
          }
        }
        if (shutdown) shutdown();
      }
    }
  }
  ::_exit(0);
}

// The child's output, or "" when it did not finish within `timeout` (it is
// then killed).
std::string run_child(const std::string& libcuda, const std::string& nvml,
                      const std::vector<Lookup>& gpus, std::chrono::milliseconds timeout) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return "";
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return "";
  }
  if (pid == 0) {
    ::close(fds[0]);
    child(fds[1], libcuda, nvml, gpus);
  }
  ::close(fds[1]);
  std::string out;
  bool done = false;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p{fds[0], POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    char buf[512];
    ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      done = true;
    else
      out.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  if (!done) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  // A child that crashed after writing some lines: keep what it said.
  return done || !out.empty() ? out : "";
}

}  // namespace

std::string nvml_brand_name(int brand) {
  // The names NVIDIA_REQUIRE_CUDA's brand= terms use, as the toolkit maps them.
  static const char* const names[] = {
      "",          "quadro",      "tesla",     "nvs",        "grid",      "geforce",
      "titan",     "nvidiavapps", "nvidiavpc", "nvidiavcs",  "nvidiavws", "nvidiacloudgaming",
      "quadrortx", "nvidiartx",   "nvidia",    "geforcertx", "titanrtx"};
  return brand >= 0 && brand < static_cast<int>(std::size(names)) ? names[brand] : "";
}

void query_driver(GpuInjection& g, const fs::path& host_root, std::chrono::milliseconds timeout) {
  std::string libcuda = mounted_library(g, host_root, "libcuda.so.");
  std::string nvml = mounted_library(g, host_root, "libnvidia-ml.so.");
  if (libcuda.empty() && nvml.empty()) return;
  std::vector<Lookup> gpus;
  for (const auto& d : g.gpus) gpus.push_back({d.uuid, d.pci_bus, d.index});
  std::istringstream out(run_child(libcuda, nvml, gpus, timeout));
  for (std::string line; std::getline(out, line);) {
    std::istringstream in(line);
    std::string word;
    in >> word;
    if (word == "cuda") {
      int v = 0;
      if (in >> v) g.cuda_version = std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
      continue;
    }
    size_t i = 0;
    if (!(in >> i) || i >= g.gpus.size()) continue;
    GpuDevice& d = g.gpus[i];
    if (word == "gpu") {
      int brand = 0, major = 0, minor = 0;
      if (!(in >> brand >> major >> minor)) continue;
      d.brand = nvml_brand_name(brand);
      if (major >= 0) d.arch = std::to_string(major) + "." + std::to_string(minor);
    } else if (word == "name" || word == "uuid") {
      std::string rest;
      std::getline(in >> std::ws, rest);
      std::string& field = word == "name" ? d.model : d.uuid;
      if (field.empty()) field = rest;
    }
  }
}

}  // namespace sb::verify
