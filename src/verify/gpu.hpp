// What of the host's NVIDIA driver a GPU test needs inside the image, found
// the way the NVIDIA container toolkit does: from a CDI spec when the host has
// one (/etc/cdi, /var/run/cdi), else by discovery like libnvidia-container:
// the driver version from /proc/driver/nvidia/version, the GPUs from
// /proc/driver/nvidia/gpus/*/information, the user-space libraries whose
// version suffix is the running driver's (through the host's ld.so.cache and
// driver directories such as /usr/local/nvidia), nvidia-smi, the device
// nodes, and the firmware. Every lookup is under `host_root`, so tests use
// fake trees.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace sb::verify {

namespace fs = std::filesystem;

struct GpuDevice {
  int index = 0;          // in the order of their minor numbers
  int minor = 0;          // /dev/nvidia<minor>
  std::string uuid;       // "GPU-..."
  std::string model;
  std::string pci_bus;    // "0000:3b:00.0"
  // From NVML (driver_query.hpp); "" where it could not be asked.
  std::string brand;  // as NVIDIA_REQUIRE_CUDA names it: "tesla", "nvidia", "geforcertx"
  std::string arch;   // the compute capability: "9.0"
};

struct Mount {
  fs::path host_path;     // relative to the host root the discovery ran on
  std::string container_path;
  // A driver library discovery found: it goes to the image's own library
  // directory, as libnvidia-container does (container_path names the one of
  // a Debian-family image; see run_in_image).
  bool library = false;
};

// A link a CDI spec's create-symlinks hook makes inside the container:
// `link` (an absolute image path) pointing to `target`, as written.
struct Symlink {
  std::string target;
  std::string link;
};

struct GpuInjection {
  std::string source;                 // "cdi <file>" or "discovered"
  std::string driver_version;         // "550.54.15"
  std::string
      cuda_version;  // the host libcuda's CUDA version, "12.4"; "" where it could not be asked
  std::vector<GpuDevice> gpus;        // the selected ones
  std::vector<std::string> device_nodes;  // every node to create, e.g. /dev/nvidia0, /dev/nvidiactl
  // Where a CDI spec's node is elsewhere on the host (its hostPath: a driver
  // container's /run/nvidia/driver/dev/nvidia0): node -> host path.
  std::map<std::string, std::string> device_host_paths;
  std::vector<Mount> mounts;          // libraries, binaries, firmware; read-only
  std::vector<std::string> env;       // "KEY=value" from a CDI spec
  // From a CDI spec's nvidia-ctk hooks, which stackbuild applies itself
  // rather than running them: create-symlinks' links, and update-ldcache's
  // folders for the image's linker cache.
  std::vector<Symlink> symlinks;
  std::vector<std::string> ldconfig_folders;
  // CUDA forward compatibility, as the toolkit applies it (discovery always,
  // a CDI spec through its enable-cuda-compat hook): an image's
  // /usr/local/cuda/compat/libcuda.so of a newer driver branch than the
  // host's is used before the host's.
  bool cuda_compat = false;
  std::vector<std::string> warnings;  // e.g. a GPU whose device node is missing

  bool has_gpu() const { return !gpus.empty(); }
};

// The libraries libnvidia-container mounts for compute and utility use.
const std::vector<std::string>& driver_library_names();

// Those it mounts for the video capability: NVDEC, NVENC, optical flow, VDPAU.
const std::vector<std::string>& video_library_names();

// This machine's Debian multiarch tuple: "x86_64-linux-gnu", "aarch64-linux-gnu".
const char* multiarch_tuple();

// Refuses a --gpus value that is not "all", "none" or a list of distinct
// indices and UUIDs ("0,,1", "0,0", "all,1", " 1"), exit 2, on any host:
// a GPU-less host would otherwise skip the GPU tests without a word about it.
void check_gpu_selection(const std::string& selection);

// `selection`: "all", "none", indices "0,1", or GPU UUIDs "GPU-...,GPU-...".
// `capabilities`: an image's NVIDIA_DRIVER_CAPABILITIES ("compute,utility,
// video", "all"): the compute and utility libraries are always mounted, the
// video ones when it names video or all; graphics and display are not
// injected, with a warning when it names them. Returns nullopt when the host
// has no NVIDIA driver. Throws sb::Error for a selection naming a GPU that
// is not there.
std::optional<GpuInjection> discover_gpus(const fs::path& host_root,
                                          const std::string& selection = "all",
                                          const std::string& capabilities = "");

// The running driver's version from host_root's /proc/driver/nvidia/version
// (else /sys/module/nvidia/version; else, where /dev/nvidiactl exists but the
// kernel's files are not visible, as in some containers, the suffix of the
// one libcuda.so.X.Y.Z version installed); empty when there is no driver.
std::string host_driver_version(const fs::path& host_root);

// The host's GPUs from /proc/driver/nvidia/gpus/*/information, indexed in
// the order of their minor numbers; where /proc has none, one per
// /dev/nvidiaN node (no UUID or model).
std::vector<GpuDevice> host_gpus(const fs::path& host_root);

// Reads the first CDI spec for kind nvidia.com/gpu under host_root's /etc/cdi
// or /var/run/cdi; nullopt when there is none. `selection` names the spec's
// devices ("0,1"), or GPU UUIDs, which match a device of that name or, where
// the spec names devices by index (nvidia-ctk's default), the index the
// host's /proc/driver/nvidia/gpus gives that UUID. Throws sb::Error for an
// item that matches no device. The driver version is the spec's
// NVIDIA_DRIVER_VERSION, else the running driver's, else the version suffix
// of the libcuda.so it mounts (nvidia-ctk's specs set no such variable).
std::optional<GpuInjection> load_cdi(const fs::path& host_root, const std::string& selection = "all");

// A CDI spec (JSON, cdiVersion 0.6.0, kind nvidia.com/gpu) for what was
// found, whose host paths are under `host_root`. For discovered libraries it
// adds what a runtime needs beyond the mounts: their soname links and the
// linker cache, as hooks of the toolkit's program where the host has one
// (cdi_hook_program), else as a second mount of each library at its soname.
std::string to_cdi_json(const GpuInjection& gpu, const fs::path& host_root = "/");

// The toolkit's hook program on the host: /usr/bin/nvidia-cdi-hook (toolkit
// 1.17 and later), else nvidia-ctk (which takes `hook NAME`), in /usr/bin or
// /usr/local/bin under `host_root`; "" where there is none.
std::string cdi_hook_program(const fs::path& host_root);

// Compares dotted numeric versions: <0, 0, >0.
int compare_versions(const std::string& a, const std::string& b);

}  // namespace sb::verify
