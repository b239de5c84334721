// The host's CDI spec for nvidia.com/gpu (/etc/cdi, /var/run/cdi), which
// `stackbuild gpu`, `test --gpus` and `run --gpus` read.
#include <algorithm>

#include "fuzz.hpp"
#include "verify/driver_check.hpp"
#include "verify/gpu.hpp"

namespace {

bool inside(const std::string& path) {
  if (path.empty() || path[0] != '/') return false;
  for (const auto& c : std::filesystem::path(path))
    if (c == "..") return false;
  return true;
}

}  // namespace

SB_FUZZ_TARGET(cdi) {
  const auto& root = sb::fuzz::fresh_scratch();
  std::filesystem::create_directories(root / "etc/cdi");
  sb::fuzz::write_file(root / "etc/cdi/nvidia.yaml", sb::fuzz::text(data, size));
  for (const char* selection : {"all", "0"}) {
    std::optional<sb::verify::GpuInjection> g;
    if (!sb::fuzz::expect_errors([&] { g = sb::verify::load_cdi(root, selection); }) || !g)
      continue;
    for (const auto& m : g->mounts) {
      sb::fuzz::check(inside(m.container_path),
                      "a mount's container path escapes: " + m.container_path);
      sb::fuzz::check(inside("/" + m.host_path.string()),
                      "a mount's host path escapes: " + m.host_path.string());
    }
    for (const auto& n : g->device_nodes)
      sb::fuzz::check(inside(n), "a device node path escapes: " + n);
    for (const auto& [node, host] : g->device_host_paths)
      sb::fuzz::check(inside(host), "a device node's host path escapes: " + host);
    for (const auto& l : g->symlinks)
      sb::fuzz::check(inside(l.link) && !l.target.empty(), "a hook's link escapes: " + l.link);
    for (const auto& f : g->ldconfig_folders)
      sb::fuzz::check(inside(f), "a hook's ldconfig folder escapes: " + f);
    // What stackbuild writes for it (gpu --cdi) reads back to the same injection.
    std::string spec = sb::verify::to_cdi_json(*g);
    const auto& again_root = sb::fuzz::fresh_scratch();
    std::filesystem::create_directories(again_root / "etc/cdi");
    sb::fuzz::write_file(again_root / "etc/cdi/nvidia.json", spec);
    auto again = sb::verify::load_cdi(again_root, "all");
    sb::fuzz::check(again.has_value(), "the written CDI spec is not read back");
    sb::fuzz::check(again->mounts.size() == g->mounts.size(),
                    "the written CDI spec has other mounts");
    std::vector<std::string> a = g->device_nodes, b = again->device_nodes;
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    // Device nodes of GPUs with other minors may be written differently; common ones stay.
    for (const auto& n : a)
      if (n.rfind("/dev/nvidia", 0) != 0 ||
          n.find_first_not_of("0123456789", 11) != std::string::npos)
        sb::fuzz::check(std::binary_search(b.begin(), b.end(), n),
                        "the written CDI spec lost device node " + n);
    break;
  }
}

// An image's NVIDIA_REQUIRE_* and CUDA_VERSION, which the driver check before
// GPU tests evaluates (verify/driver_check.hpp): the input is the expression,
// and the legacy CUDA_VERSION too.
SB_FUZZ_TARGET(require) {
  const std::string input(sb::fuzz::text(data, size));
  const sb::verify::Requirement r{"NVIDIA_REQUIRE_CUDA", input};
  const sb::verify::HostProperties known{"12.2", "535.104.05", "9.0", "tesla"};
  const sb::verify::HostProperties none{};
  sb::verify::Truth with_all = sb::verify::Truth::Unknown;
  if (sb::fuzz::expect_errors([&] { with_all = sb::verify::evaluate(r, known); })) {
    // What a host says in full decides every requirement.
    sb::fuzz::check(with_all != sb::verify::Truth::Unknown,
                    "undecided with every property known: " + input);
    // An expression that parses once parses against any host.
    sb::verify::Truth with_none = sb::verify::Truth::True;
    sb::fuzz::check(sb::fuzz::expect_errors([&] { with_none = sb::verify::evaluate(r, none); }),
                    "refused only against a host that says nothing: " + input);
    // Knowing less never turns a refusal into acceptance, or the reverse.
    sb::fuzz::check(with_none == sb::verify::Truth::Unknown || with_none == with_all,
                    "knowing less changed the answer: " + input);
  }
  sb::fuzz::expect_errors([&] { sb::verify::image_requirements({{"CUDA_VERSION", input}}); });
}
