// CDI (Container Device Interface) specs for NVIDIA GPUs: reading the host's
// (as the NVIDIA container toolkit generates them with `nvidia-ctk cdi
// generate`) and writing one for what discovery found.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <sstream>

#include <nlohmann/json.hpp>

#include "util/error.hpp"
#include "util/file.hpp"
#include "util/yaml_reader.hpp"
#include "verify/driver_query.hpp"
#include "verify/elf.hpp"
#include "verify/gpu.hpp"

namespace sb::verify {

namespace {

// A path a CDI spec names (a device node, a mount's host or container side, a
// hook's link or folder): absolute and without "..", for it is joined to the
// host's or the image's root. `what` names it in the error ("deviceNodes[1].path").
void check_path(const yaml::Reader& r, const YAML::Node& at, const std::string& path,
                const std::string& what) {
  if (path.empty() || path[0] != '/')
    r.fail(at, "'" + what + "' is not an absolute path: '" + path + "'");
  for (const auto& c : fs::path(path))
    if (c == "..") r.fail(at, "'" + what + "' contains '..': '" + path + "'");
}

std::string spec_path(const yaml::Reader& r, const YAML::Node& map, const char* key,
                      const std::string& what) {
  const YAML::Node v = map[key];
  if (!v) r.fail(map, "missing '" + std::string(key) + "' in " + what.substr(0, what.rfind('.')));
  std::string path = r.string(v, "'" + what + "'");
  check_path(r, v, path, what);
  return path;
}

// One hook of a containerEdits block. nvidia-ctk's (`nvidia-ctk hook NAME`,
// or `nvidia-cdi-hook NAME` since toolkit 1.17) run on the host against the
// container's root; stackbuild does what they do itself: create-symlinks'
// links and update-ldcache's folders go into `g`, enable-cuda-compat sets
// cuda_compat, and chmod (of /dev directories the sandbox makes 0755) and
// disable-device-node-modification need nothing here. Any other hook is not
// run, with a warning.
void read_hook(const yaml::Reader& r, const YAML::Node& hook, const std::string& at,
               GpuInjection& g) {
  r.expect_map(hook, "'" + at + "'");
  std::vector<std::string> args;
  if (const auto& a = hook["args"]) args = r.strings(a, "'" + at + ".args'");
  std::string path = hook["path"] ? r.string(hook["path"], "'" + at + ".path'") : "";
  if (path.empty()) r.fail(hook, "missing 'path' in " + at);
  size_t first = 0;  // the hook's own name in args
  std::string tool = args.empty() ? "" : fs::path(args[0]).filename().string();
  if (tool == "nvidia-ctk" && args.size() > 1 && args[1] == "hook")
    first = 2;
  else if (tool == "nvidia-cdi-hook")
    first = 1;
  const std::string name = first && first < args.size() ? args[first] : "";
  // The values of option `opt`, given as "--opt V" or "--opt=V".
  auto values = [&](const std::string& opt) {
    std::vector<std::string> out;
    for (size_t i = first + 1; i < args.size(); ++i) {
      if (args[i] == opt && i + 1 < args.size())
        out.push_back(args[++i]);
      else if (args[i].rfind(opt + "=", 0) == 0)
        out.push_back(args[i].substr(opt.size() + 1));
    }
    return out;
  };
  if (name == "create-symlinks") {
    for (const auto& l : values("--link")) {
      auto sep = l.find("::");
      if (sep == std::string::npos || sep == 0)
        r.fail(hook, "'" + at + "': create-symlinks wants --link TARGET::LINK, not '" + l + "'");
      Symlink s{l.substr(0, sep), l.substr(sep + 2)};
      check_path(r, hook, s.link, at + " --link");
      g.symlinks.push_back(std::move(s));
    }
  } else if (name == "update-ldcache") {
    for (const auto& f : values("--folder")) {
      check_path(r, hook, f, at + " --folder");
      if (std::find(g.ldconfig_folders.begin(), g.ldconfig_folders.end(), f) ==
          g.ldconfig_folders.end())
        g.ldconfig_folders.push_back(f);
    }
  } else if (name == "enable-cuda-compat") {
    g.cuda_compat = true;
  } else if (name != "chmod" && name != "disable-device-node-modification") {
    std::string cmd = path;
    for (size_t i = 1; i < args.size(); ++i) cmd += " " + args[i];
    g.warnings.push_back("hook '" + cmd + "' (" + at + " in " + r.file() + ") is not run");
  }
}

// Adds one containerEdits block (the spec's or a device's) to `g`.
void apply_edits(const yaml::Reader& r, const YAML::Node& edits, GpuInjection& g) {
  if (!edits) return;
  r.expect_map(edits, "'containerEdits'");
  if (const auto& env = edits["env"])
    for (const auto& e : r.strings(env, "'env'")) g.env.push_back(e);
  if (const auto& nodes = edits["deviceNodes"]) {
    r.expect_list(nodes, "'deviceNodes'");
    for (size_t i = 0; i < nodes.size(); ++i) {
      const std::string at = "deviceNodes[" + std::to_string(i) + "]";
      r.expect_map(nodes[i], "'" + at + "'");
      std::string path = spec_path(r, nodes[i], "path", at + ".path");
      if (std::find(g.device_nodes.begin(), g.device_nodes.end(), path) == g.device_nodes.end())
        g.device_nodes.push_back(path);
      if (nodes[i]["hostPath"]) {
        std::string host = spec_path(r, nodes[i], "hostPath", at + ".hostPath");
        if (host != path) g.device_host_paths[path] = host;
      }
    }
  }
  if (const auto& mounts = edits["mounts"]) {
    r.expect_list(mounts, "'mounts'");
    for (size_t i = 0; i < mounts.size(); ++i) {
      const std::string at = "mounts[" + std::to_string(i) + "]";
      r.expect_map(mounts[i], "'" + at + "'");
      std::string host = spec_path(r, mounts[i], "hostPath", at + ".hostPath");
      std::string container = spec_path(r, mounts[i], "containerPath", at + ".containerPath");
      g.mounts.push_back({fs::path(host).relative_path(), container});
    }
  }
  if (const auto& hooks = edits["hooks"]) {
    r.expect_list(hooks, "'hooks'");
    for (size_t i = 0; i < hooks.size(); ++i)
      read_hook(r, hooks[i], "hooks[" + std::to_string(i) + "]", g);
  }
}

bool is_index(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

// "libcuda.so.550.54.15" -> "550.54.15"; "" when no mount is one.
std::string libcuda_version(const GpuInjection& g) {
  for (const auto& m : g.mounts) {
    std::string name = fs::path(m.container_path).filename().string();
    if (name.rfind("libcuda.so.", 0) == 0 && name.size() > 11 && std::isdigit(static_cast<unsigned char>(name[11])) &&
        name.find('.', 12) != std::string::npos)
      return name.substr(11);
  }
  return "";
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
      std::vector<GpuDevice> host = host_gpus(root);  // for UUIDs, models and minors, where /proc has them
      if (const auto& devices = spec["devices"]) {
        r.expect_list(devices, "'devices'");
        struct Named {
          std::string name;
          YAML::Node node;
          GpuInjection own;  // its own edits, read (and so checked) whether selected or not
        };
        std::vector<Named> named;
        for (size_t i = 0; i < devices.size(); ++i) {
          const YAML::Node d = devices[i];
          r.expect_map(d, "'devices[" + std::to_string(i) + "]'");
          if (!d["name"]) r.fail(d, "missing 'name' in devices[" + std::to_string(i) + "]");
          std::string name = r.string(d["name"], "'devices[" + std::to_string(i) + "].name'");
          GpuInjection own;
          apply_edits(r, d["containerEdits"], own);
          if (name != "all") named.push_back({name, d, std::move(own)});
        }
        // The selection's items, each a device name (or, by UUID, the index /proc gives it).
        std::vector<std::string> wanted;
        if (selection.empty() || selection == "all") {
          for (const auto& n : named) wanted.push_back(n.name);
        } else if (selection != "none") {
          std::stringstream ss(selection);
          for (std::string item; std::getline(ss, item, ',');) {
            auto has = [&](const std::string& n) {
              return std::any_of(named.begin(), named.end(),
                                 [&](const auto& p) { return p.name == n; });
            };
            std::string name = item;
            if (!has(name))
              for (const auto& h : host)
                if (h.uuid == item) name = std::to_string(h.index);
            if (!has(name))
              throw Error("--gpus " + selection + ": no device '" + item + "' in the CDI spec " + file.string() +
                              " (it has " + std::to_string(named.size()) + ")",
                          ErrorKind::Usage);
            wanted.push_back(name);
          }
        }
        for (const auto& [name, d, own] : named) {
          if (std::find(wanted.begin(), wanted.end(), name) == wanted.end()) continue;
          GpuDevice gpu;
          gpu.index = is_index(name) ? std::atoi(name.c_str()) : static_cast<int>(g.gpus.size());
          gpu.minor = gpu.index;
          for (const auto& p : own.device_nodes)  // its /dev/nvidiaN says the minor
            if (p.rfind("/dev/nvidia", 0) == 0 && is_index(p.substr(11)))
              gpu.minor = std::atoi(p.c_str() + 11);
          gpu.uuid = name.rfind("GPU-", 0) == 0 ? name : "";
          for (const auto& h : host)
            if ((is_index(name) && h.index == gpu.index) || (!gpu.uuid.empty() && h.uuid == gpu.uuid)) gpu = h;
          g.gpus.push_back(gpu);
          apply_edits(r, d["containerEdits"], g);
        }
      }
      // A node the spec names that this host lacks (a spec generated before a
      // GPU went, or on another machine) is left out, as discovery does,
      // rather than failing every GPU test at the bind.
      std::vector<std::string> present;
      for (const auto& n : g.device_nodes) {
        std::error_code ec;
        auto host = g.device_host_paths.find(n);
        const std::string& on_host = host != g.device_host_paths.end() ? host->second : n;
        if (fs::exists(under(root, on_host), ec))
          present.push_back(n);
        else
          g.warnings.push_back(on_host + " (in " + g.source.substr(4) +
                               ") is missing on this host: not injected");
      }
      g.device_nodes = present;
      for (auto it = g.device_host_paths.begin(); it != g.device_host_paths.end();)
        it = std::find(present.begin(), present.end(), it->first) == present.end()
                 ? g.device_host_paths.erase(it)
                 : std::next(it);
      // So is a mount of a file the host lacks: nvidia-ctk lists libraries
      // the open kernel modules' driver does not ship (libnvidia-tileiras.so),
      // and such a spec fails every container at the bind.
      std::vector<Mount> mounts;
      for (auto& m : g.mounts) {
        std::error_code ec;
        if (fs::exists(root / m.host_path, ec))
          mounts.push_back(std::move(m));
        else
          g.warnings.push_back("/" + m.host_path.string() + " (in " + g.source.substr(4) +
                               ") is missing on this host: not mounted");
      }
      g.mounts = std::move(mounts);
      for (const auto& e : g.env)
        if (e.rfind("NVIDIA_DRIVER_VERSION=", 0) == 0) g.driver_version = e.substr(22);
      if (g.driver_version.empty()) g.driver_version = host_driver_version(root);
      if (g.driver_version.empty()) g.driver_version = libcuda_version(g);
      query_driver(g, root);
      return g;
    }
  }
  return std::nullopt;
}

std::string cdi_hook_program(const fs::path& host_root) {
  for (const char* p : {"/usr/bin/nvidia-cdi-hook", "/usr/local/bin/nvidia-cdi-hook",
                        "/usr/bin/nvidia-ctk", "/usr/local/bin/nvidia-ctk"})
    if (::access((host_root / fs::path(p).relative_path()).c_str(), X_OK) == 0) return p;
  return "";
}

std::string to_cdi_json(const GpuInjection& g, const fs::path& host_root) {
  using json = nlohmann::json;
  json devices = json::array();
  std::vector<std::string> per_gpu;
  for (const auto& gpu : g.gpus) {
    std::string node = "/dev/nvidia" + std::to_string(gpu.minor);
    per_gpu.push_back(node);
    json entry{{"path", node}};
    if (auto host = g.device_host_paths.find(node); host != g.device_host_paths.end())
      entry["hostPath"] = host->second;
    devices.push_back({{"name", std::to_string(gpu.index)},
                       {"containerEdits", {{"deviceNodes", json::array({entry})}}}});
  }
  json common_nodes = json::array();
  for (const auto& n : g.device_nodes) {
    if (std::find(per_gpu.begin(), per_gpu.end(), n) != per_gpu.end()) continue;
    json entry{{"path", n}};
    if (auto host = g.device_host_paths.find(n); host != g.device_host_paths.end())
      entry["hostPath"] = host->second;
    common_nodes.push_back(entry);
  }
  json mounts = json::array();
  auto mount = [&](const fs::path& host, const std::string& container) {
    mounts.push_back({{"hostPath", (fs::path("/") / host).string()},
                      {"containerPath", container},
                      {"options", json::array({"ro", "nosuid", "nodev", "bind"})}});
  };
  for (const auto& m : g.mounts) mount(m.host_path, m.container_path);

  // What the toolkit's hooks do in a container and stackbuild does itself
  // (run_in_image): each discovered library's soname link (libcuda.so.1,
  // which CUDA opens), libcuda.so (which -lcuda links against), and the
  // linker cache over the libraries' folders. A runtime given this spec has
  // only the spec: with the toolkit's hook program on the host, the spec asks
  // for those hooks, as nvidia-ctk's specs do; without one, each link is a
  // second mount of the library, at its soname.
  const std::string hook = cdi_hook_program(host_root);
  json links = json::array(), folders = json::array();
  for (const auto& m : g.mounts) {
    if (!m.library) continue;
    const fs::path at(m.container_path);
    if (std::find(folders.begin(), folders.end(), at.parent_path().string()) == folders.end())
      folders.push_back(at.parent_path().string());
    std::string soname;
    try {
      if (auto elf = read_elf(host_root / m.host_path)) soname = elf->soname;
    } catch (const Error&) {  // unreadable: no link to make
    }
    if (soname.empty() || soname == at.filename()) continue;
    std::vector<std::pair<std::string, std::string>> wanted{{at.filename().string(), soname}};
    if (soname.rfind("libcuda.so.", 0) == 0) wanted.push_back({soname, "libcuda.so"});
    for (const auto& [target, name] : wanted) {
      const std::string link = (at.parent_path() / name).string();
      if (hook.empty())
        mount(m.host_path, link);
      else
        links.push_back(target + "::" + link);
    }
  }
  json edits{{"env", json::array({"NVIDIA_VISIBLE_DEVICES=void",
                                  "NVIDIA_DRIVER_VERSION=" + g.driver_version})},
             {"deviceNodes", common_nodes},
             {"mounts", mounts}};
  if (!hook.empty() && !folders.empty()) {
    // nvidia-cdi-hook NAME ..., or, before toolkit 1.17, nvidia-ctk hook NAME ...
    json prefix = fs::path(hook).filename() == "nvidia-ctk" ? json::array({"nvidia-ctk", "hook"})
                                                            : json::array({"nvidia-cdi-hook"});
    auto call = [&](const char* name, const char* opt, const json& values) {
      json args = prefix;
      args.push_back(name);
      for (const auto& v : values) {
        args.push_back(opt);
        args.push_back(v);
      }
      return json{{"hookName", "createContainer"}, {"path", hook}, {"args", args}};
    };
    edits["hooks"] = json::array();
    if (!links.empty()) edits["hooks"].push_back(call("create-symlinks", "--link", links));
    edits["hooks"].push_back(call("update-ldcache", "--folder", folders));
  }
  json spec{{"cdiVersion", "0.6.0"},
            {"kind", "nvidia.com/gpu"},
            {"devices", devices},
            {"containerEdits", edits}};
  return spec.dump(2) + "\n";
}

}  // namespace sb::verify
