#include "fetch/pip/tags.hpp"

#include "util/error.hpp"

namespace sb::pip {

namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  for (size_t p = 0; p <= s.size();) {
    size_t e = s.find(sep, p);
    if (e == std::string::npos) e = s.size();
    out.push_back(s.substr(p, e - p));
    p = e + 1;
  }
  return out;
}

std::pair<int, int> major_minor(const std::string& v, const std::string& what) {
  auto parts = split(v, '.');
  try {
    if (parts.size() >= 2) return {std::stoi(parts[0]), std::stoi(parts[1])};
  } catch (const std::exception&) {
  }
  throw Error(what + " '" + v + "' is not MAJOR.MINOR");
}

// The platform tags of the target, best first (as packaging.tags does).
std::vector<std::string> platforms(const Target& t) {
  std::vector<std::string> out;
  auto [maj, min] = major_minor(t.libc_version, t.libc + " version");
  if (t.libc == "musl") {
    for (int m = min; m >= 0; --m) out.push_back("musllinux_" + std::to_string(maj) + "_" + std::to_string(m) + "_" + t.machine);
  } else {
    bool legacy_arch = t.machine == "x86_64" || t.machine == "i686";
    for (int m = min; m >= (legacy_arch ? 5 : 17); --m) {
      out.push_back("manylinux_" + std::to_string(maj) + "_" + std::to_string(m) + "_" + t.machine);
      // The PEP 513/571/599 names of the same glibc floors.
      if (m == 17) out.push_back("manylinux2014_" + t.machine);
      if (m == 12 && legacy_arch) out.push_back("manylinux2010_" + t.machine);
      if (m == 5 && legacy_arch) out.push_back("manylinux1_" + t.machine);
    }
  }
  out.push_back("linux_" + t.machine);
  return out;
}

}  // namespace

Target Target::for_distro(const std::string& distro, const std::string& python, const std::string& glibc,
                          const std::string& oci_arch) {
  Target t;
  t.python = python;
  t.libc_version = glibc;
  t.machine = oci_arch == "arm64" ? "aarch64" : oci_arch == "amd64" ? "x86_64" : oci_arch;
  if (distro == "debian" || distro == "ubuntu") {
    t.site_packages = "/usr/local/lib/python" + python + "/dist-packages";
    t.interpreter = "/usr/bin/python" + python;
  }
  return t;
}

std::string Target::site() const {
  return site_packages.empty() ? prefix + "/lib/python" + python + "/site-packages" : site_packages;
}

std::string Target::describe() const {
  return "CPython " + python + ", " + (libc == "musl" ? "musllinux musl " : "manylinux glibc ") + libc_version + ", " +
         machine;
}

TagPriority::TagPriority(const Target& t) {
  auto [maj, min] = major_minor(t.python, "Python version");
  std::string cp = "cp" + std::to_string(maj) + std::to_string(min);
  auto plats = platforms(t);
  auto add = [&](const std::string& py, const std::string& abi, const std::string& plat) {
    std::string tag = py + "-" + abi + "-" + plat;
    if (ranks_.emplace(tag, static_cast<int>(ordered_.size())).second) ordered_.push_back(tag);
  };
  // CPython-specific tags: own ABI, abi3 (of this and older minors), none.
  for (const auto& p : plats) add(cp, cp, p);
  for (const auto& p : plats) add(cp, "abi3", p);
  for (const auto& p : plats) add(cp, "none", p);
  for (int m = min - 1; m >= 2; --m)
    for (const auto& p : plats) add("cp" + std::to_string(maj) + std::to_string(m), "abi3", p);
  // Compatible tags: pyXY and py3 for the platform, then for any platform.
  std::vector<std::string> pys = {"py" + std::to_string(maj) + std::to_string(min), "py" + std::to_string(maj)};
  for (int m = min - 1; m >= 0; --m) pys.push_back("py" + std::to_string(maj) + std::to_string(m));
  for (const auto& py : pys)
    for (const auto& p : plats) add(py, "none", p);
  add(cp, "none", "any");
  for (const auto& py : pys) add(py, "none", "any");
}

std::optional<int> TagPriority::rank(const std::string& python, const std::string& abi,
                                     const std::string& platform) const {
  auto it = ranks_.find(python + "-" + abi + "-" + platform);
  if (it == ranks_.end()) return std::nullopt;
  return it->second;
}

std::optional<WheelName> WheelName::parse(const std::string& filename) {
  if (!filename.ends_with(".whl")) return std::nullopt;
  auto parts = split(filename.substr(0, filename.size() - 4), '-');
  if (parts.size() != 5 && parts.size() != 6) return std::nullopt;
  WheelName w;
  w.name = parts[0];
  w.version = parts[1];
  size_t i = 2;
  if (parts.size() == 6) w.build = parts[i++];
  w.pythons = split(parts[i], '.');
  w.abis = split(parts[i + 1], '.');
  w.platforms = split(parts[i + 2], '.');
  return w;
}

std::optional<int> WheelName::best_rank(const TagPriority& p) const {
  std::optional<int> best;
  for (const auto& py : pythons)
    for (const auto& abi : abis)
      for (const auto& plat : platforms)
        if (auto r = p.rank(py, abi, plat); r && (!best || *r < *best)) best = r;
  return best;
}

}  // namespace sb::pip
