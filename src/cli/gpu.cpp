#include <nlohmann/json.hpp>

#include "cli/cli.hpp"
#include "util/error.hpp"
#include "verify/gpu.hpp"

namespace sb::cli {

const char* const kGpuHelp =
    "usage: stackbuild gpu [options]\n"
    "\n"
    "Prints what a GPU test would inject into an image from this host: the driver version\n"
    "(and the CUDA version its libcuda reports), the selected GPUs (with the brand and\n"
    "compute capability NVML reports: an image's NVIDIA_REQUIRE_CUDA is checked against\n"
    "these), device nodes, the driver's libraries, binaries and firmware (read-only\n"
    "mounts), and the links and linker-cache folders a CDI spec's nvidia-ctk hooks ask for\n"
    "(stackbuild applies them; it runs no hook). libcuda and NVML are asked in a child\n"
    "process. A CDI spec for nvidia.com/gpu in /etc/cdi or /var/run/cdi is used when there\n"
    "is one; otherwise the driver is discovered the way libnvidia-container does. Exits 0\n"
    "with \"no NVIDIA driver\" on a host without one (with --json: no GPUs and that as a\n"
    "warning; with --cdi: exit 1, there being no spec to write).\n"
    "\n"
    "options:\n"
    "  --gpus SEL         all (default), none, indices (0,1) or GPU UUIDs\n"
    "  --cdi              print a CDI spec (JSON) for what was found, with the libraries'\n"
    "                     soname links as nvidia-cdi-hook hooks (or nvidia-ctk's) where the\n"
    "                     host has that program, else as mounts at those names\n"
    "  --json             print what was found as JSON\n"
    "  --capabilities L   discovery's driver capabilities, as an image's\n"
    "                     NVIDIA_DRIVER_CAPABILITIES names them: compute and utility always,\n"
    "                     video (NVDEC, NVENC) when L names it or is all\n"
    "  --host-root DIR    look at DIR as the host's root (for tests; default /)\n";

int cmd_gpu(const std::vector<std::string>& argv) {
  std::vector<std::string> flags = kCommonFlags;
  flags.push_back("--cdi");
  std::vector<std::string> options = kCommonOptions;
  options.insert(options.end(), {"--gpus", "--host-root", "--capabilities"});
  Args args(argv, flags, options);
  if (maybe_help(args, kGpuHelp)) return kExitOk;
  if (!args.positional().empty()) throw Error("gpu takes no arguments", ErrorKind::Usage);
  fs::path root = args.get("--host-root").value_or("/");
  std::string sel = args.get("--gpus").value_or("all");
  verify::check_gpu_selection(sel);

  auto found = verify::load_cdi(root, sel);
  if (!found) found = verify::discover_gpus(root, sel, args.get("--capabilities").value_or(""));
  if (!found) {
    const char* none =
        "no NVIDIA driver on this host (no CDI spec, no /proc/driver/nvidia/version, no "
        "/dev/nvidiactl with a libcuda.so)";
    // --json stays JSON for scripts; --cdi has no spec to write.
    if (args.has("--cdi")) throw Error(std::string(none) + ": no CDI spec to write");
    if (args.has("--json")) {
      nlohmann::json j{{"source", nullptr},
                       {"driver_version", ""},
                       {"cuda_version", ""},
                       {"gpus", nlohmann::json::array()},
                       {"device_nodes", nlohmann::json::array()},
                       {"mounts", nlohmann::json::array()},
                       {"env", nlohmann::json::array()},
                       {"device_host_paths", nlohmann::json::object()},
                       {"symlinks", nlohmann::json::array()},
                       {"ldconfig_folders", nlohmann::json::array()},
                       {"cuda_compat", false},
                       {"warnings", nlohmann::json::array({none})}};
      print_document(j, true);
    } else {
      printf("%s\n", none);
    }
    return kExitOk;
  }
  const auto& g = *found;
  if (args.has("--cdi")) {
    fputs(verify::to_cdi_json(g, root).c_str(), stdout);
    return kExitOk;
  }
  if (args.has("--json")) {
    nlohmann::json gpus = nlohmann::json::array(), mounts = nlohmann::json::array();
    for (const auto& d : g.gpus)
      gpus.push_back({{"index", d.index},
                      {"minor", d.minor},
                      {"uuid", d.uuid},
                      {"model", d.model},
                      {"pci", d.pci_bus},
                      {"brand", d.brand},
                      {"arch", d.arch}});
    for (const auto& m : g.mounts) mounts.push_back({{"host", "/" + m.host_path.string()}, {"container", m.container_path}});
    nlohmann::json links = nlohmann::json::array();
    for (const auto& l : g.symlinks) links.push_back({{"link", l.link}, {"target", l.target}});
    nlohmann::json j{{"source", g.source},
                     {"driver_version", g.driver_version},
                     {"cuda_version", g.cuda_version},
                     {"gpus", gpus},
                     {"device_nodes", g.device_nodes},
                     {"mounts", mounts},
                     {"env", g.env},
                     {"device_host_paths", g.device_host_paths},
                     {"symlinks", links},
                     {"ldconfig_folders", g.ldconfig_folders},
                     {"cuda_compat", g.cuda_compat},
                     {"warnings", g.warnings}};
    print_document(j, true);
    return kExitOk;
  }
  printf("source: %s\ndriver: %s%s\n", g.source.c_str(),
         g.driver_version.empty() ? "?" : g.driver_version.c_str(),
         g.cuda_version.empty() ? "" : (" (CUDA " + g.cuda_version + ")").c_str());
  for (const auto& d : g.gpus) {
    std::string nvml =
        (d.brand.empty() ? "" : ", brand " + d.brand) + (d.arch.empty() ? "" : ", arch " + d.arch);
    printf("gpu %d: %s %s (minor %d, %s%s)\n", d.index, d.model.c_str(), d.uuid.c_str(), d.minor,
           d.pci_bus.c_str(), nvml.c_str());
  }
  for (const auto& n : g.device_nodes) {
    auto host = g.device_host_paths.find(n);
    printf("device: %s%s\n", n.c_str(),
           host == g.device_host_paths.end() ? "" : (" (from " + host->second + ")").c_str());
  }
  for (const auto& m : g.mounts) printf("mount: /%s -> %s (ro)\n", m.host_path.c_str(), m.container_path.c_str());
  for (const auto& l : g.symlinks) printf("link: %s -> %s\n", l.link.c_str(), l.target.c_str());
  for (const auto& f : g.ldconfig_folders) printf("ldconfig: %s\n", f.c_str());
  for (const auto& w : g.warnings) printf("warning: %s\n", w.c_str());
  return kExitOk;
}

}  // namespace sb::cli
