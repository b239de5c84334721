// CDI (Container Device Interface) specs for NVIDIA GPUs: reading the host's
// (as the NVIDIA container toolkit generates them with `nvidia-ctk cdi
// generate`) and writing one for what discovery found.
#include <algorithm>

#include <nlohmann/json.hpp>

#include "util/file.hpp"
#include "util/yaml_reader.hpp"
#include "verify/gpu.hpp"

namespace sb::verify {

namespace {

fs::path under(const fs::path& root, const std::string& abs) { return root / fs::path(abs).relative_path(); }

// Adds one containerEdits block (the spec's or a device's) to `g`.
void apply_edits(const yaml::Reader& r, const YAML::Node& edits, GpuInjection& g) {
  if (!edits) return;
  r.expect_map(edits, "'containerEdits'");
  if (const auto& env = edits["env"])
    for (const auto& e : r.strings(env, "'env'")) g.env.push_back(e);
  if (const auto& nodes = edits["deviceNodes"]) {
    r.expect_list(nodes, "'deviceNodes'");
    for (const auto& n : nodes) {
      std::string path = r.string(n["path"], "'deviceNodes.path'");
      if (std::find(g.device_nodes.begin(), g.device_nodes.end(), path) == g.device_nodes.end())
        g.device_nodes.push_back(path);
    }
  }
  if (const auto& mounts = edits["mounts"]) {
    r.expect_list(mounts, "'mounts'");
    for (const auto& m : mounts) {
      std::string host = r.string(m["hostPath"], "'mounts.hostPath'");
      std::string container = r.string(m["containerPath"], "'mounts.containerPath'");
      g.mounts.push_back({fs::path(host).relative_path(), container});
    }
  }
}

bool selected(const std::string& name, const std::string& selection) {
  if (selection.empty() || selection == "all") return true;
  std::string list = "," + selection + ",";
  return list.find("," + name + ",") != std::string::npos;
}

}  // namespace

std::optional<GpuInjection> load_cdi(const fs::path& root, const std::string& selection) {
  for (const char* dir : {"/etc/cdi", "/var/run/cdi"}) {
    std::error_code ec;
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(under(root, dir), ec)) {
      auto ext = e.path().extension();
      if (ext == ".yaml" || ext == ".yml" || ext == ".json") files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
    for (const auto& file : files) {
      yaml::Reader r(file.string());
      YAML::Node spec = r.parse(read_file(file));
      r.expect_map(spec, "a CDI spec");
      if (!spec["kind"] || r.string(spec["kind"], "'kind'") != "nvidia.com/gpu") continue;
      GpuInjection g;
      g.source = "cdi " + (fs::path(dir) / file.filename()).string();
      apply_edits(r, spec["containerEdits"], g);
      if (const auto& devices = spec["devices"]) {
        r.expect_list(devices, "'devices'");
        int index = 0;
        bool any = false;
        for (const auto& d : devices) {
          std::string name = r.string(d["name"], "'devices.name'");
          if (name == "all" || !selected(name, selection)) continue;
          GpuDevice gpu;
          gpu.index = index++;
          gpu.uuid = name.rfind("GPU-", 0) == 0 ? name : "";
          g.gpus.push_back(gpu);
          apply_edits(r, d["containerEdits"], g);
          any = true;
        }
        if (!any && selection != "none")
          g.warnings.push_back("the CDI spec " + file.string() + " has no device matching '" + selection + "'");
      }
      for (const auto& e : g.env)
        if (e.rfind("NVIDIA_DRIVER_VERSION=", 0) == 0) g.driver_version = e.substr(22);
      return g;
    }
  }
  return std::nullopt;
}

std::string to_cdi_json(const GpuInjection& g) {
  using json = nlohmann::json;
  json devices = json::array();
  std::vector<std::string> per_gpu;
  for (const auto& gpu : g.gpus) {
    std::string node = "/dev/nvidia" + std::to_string(gpu.minor);
    per_gpu.push_back(node);
    devices.push_back({{"name", std::to_string(gpu.index)},
                       {"containerEdits", {{"deviceNodes", json::array({{{"path", node}}})}}}});
  }
  json common_nodes = json::array();
  for (const auto& n : g.device_nodes)
    if (std::find(per_gpu.begin(), per_gpu.end(), n) == per_gpu.end()) common_nodes.push_back({{"path", n}});
  json mounts = json::array();
  for (const auto& m : g.mounts)
    mounts.push_back({{"hostPath", (fs::path("/") / m.host_path).string()},
                      {"containerPath", m.container_path},
                      {"options", json::array({"ro", "nosuid", "nodev", "bind"})}});
  json spec{{"cdiVersion", "0.6.0"},
            {"kind", "nvidia.com/gpu"},
            {"devices", devices},
            {"containerEdits",
             {{"env", json::array({"NVIDIA_VISIBLE_DEVICES=void", "NVIDIA_DRIVER_VERSION=" + g.driver_version})},
              {"deviceNodes", common_nodes},
              {"mounts", mounts}}}};
  return spec.dump(2) + "\n";
}

}  // namespace sb::verify
