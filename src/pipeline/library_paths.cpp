#include "pipeline/library_paths.hpp"

#include <algorithm>
#include <optional>

#include "pipeline/apt_layer.hpp"
#include "pipeline/pip_layer.hpp"
#include "pipeline/redist_layer.hpp"

namespace sb {

namespace {

struct Where {
  std::string root, include, lib;
};

// "12.6.3" -> "12.6", as redist::install lays out /usr/local/cuda-X.Y.
std::string cuda_xy(const std::string& v) {
  size_t dot = v.find('.');
  if (dot == std::string::npos) return v;
  size_t second = v.find('.', dot + 1);
  return second == std::string::npos ? v : v.substr(0, second);
}

std::string triplet(const std::string& oci_arch) {
  if (oci_arch == "arm64") return "aarch64-linux-gnu";
  if (oci_arch == "ppc64le") return "powerpc64le-linux-gnu";
  return "x86_64-linux-gnu";
}

bool names_any(const std::vector<std::string>& items, const std::string& prefix) {
  return std::any_of(items.begin(), items.end(), [&](const std::string& s) { return s.starts_with(prefix); });
}

}  // namespace

std::map<std::string, std::string> library_paths(const Recipe& recipe, const LayerSpec& layer,
                                                 const std::map<std::string, std::string>& vars,
                                                 const PointInputs& point) {
  size_t top = 0;
  while (top < recipe.layers.size() && recipe.layers[top].name != layer.name) ++top;
  std::optional<std::string> site;  // the wheels' site-packages, read once
  auto wheels = [&](const std::string& c) -> std::optional<Where> {
    if (!site) site = pip_target(recipe, vars, point).site();
    std::string root = *site + "/nvidia/" + c;
    return Where{root, root + "/include", root + "/lib"};
  };
  auto apt = [&]() { return Where{"/usr", "/usr/include", "/usr/lib/" + triplet(recipe.architecture)}; };
  auto redist = [&]() -> std::optional<Where> {
    auto it = vars.find("cuda");
    if (it == vars.end()) return std::nullopt;  // the redist layer itself fails without it
    std::string root = "/usr/local/cuda-" + cuda_xy(it->second);
    return Where{root, root + "/include", root + "/lib64"};
  };

  std::map<std::string, std::string> env;
  for (const std::string c : {"cudnn", "nccl"}) {
    std::optional<Where> w;
    for (size_t i = top; i-- > 0 && !w;) {
      const LayerSpec& l = recipe.layers[i];
      if (std::find(l.use.begin(), l.use.end(), c) != l.use.end()) {
        if (is_redist_layer(l)) w = redist();
        else if (is_pip_layer(l)) w = wheels(c);
        else if (is_apt_layer(l)) w = apt();
      } else if (names_any(l.apt, "lib" + c)) {
        w = apt();
      } else if (names_any(l.pip, "nvidia-" + c)) {
        w = wheels(c);
      }
    }
    if (!w && vars.count(c))
      for (size_t i = top; i-- > 0 && !w;)
        if (is_pip_layer(recipe.layers[i])) w = wheels(c);
    if (!w) continue;
    std::string p = c == "cudnn" ? "CUDNN" : "NCCL";
    env[p + "_ROOT"] = env[p + "_HOME"] = w->root;
    if (c == "cudnn") env["CUDNN_PATH"] = w->root;
    env[p + "_INCLUDE_DIR"] = w->include;
    env[p + "_LIB_DIR"] = w->lib;
  }
  return env;
}

}  // namespace sb
