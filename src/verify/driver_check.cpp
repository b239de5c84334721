#include "verify/driver_check.hpp"

#include <algorithm>
#include <cctype>
#include <cstring>

#include "util/error.hpp"

namespace sb::verify {

namespace {

std::vector<std::string> split_on(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t end = s.find(sep, start);
    out.push_back(s.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) return out;
    start = end + 1;
  }
}

bool is_version(const std::string& v) {
  if (v.empty() || v.front() == '.' || v.back() == '.' || v.find("..") != std::string::npos)
    return false;
  return std::all_of(v.begin(), v.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c)) || c == '.';
  });
}

Truth both(Truth a, Truth b) {
  if (a == Truth::False || b == Truth::False) return Truth::False;
  return a == Truth::Unknown || b == Truth::Unknown ? Truth::Unknown : Truth::True;
}

Truth either(Truth a, Truth b) {
  if (a == Truth::True || b == Truth::True) return Truth::True;
  return a == Truth::Unknown || b == Truth::Unknown ? Truth::Unknown : Truth::False;
}

Truth factor(const Requirement& r, const std::string& f, const HostProperties& host) {
  size_t op_at = f.find_first_of("<>=!");
  if (op_at == std::string::npos || op_at == 0)
    throw Error(r.name + ": '" + f + "' is not a constraint (PROPERTY OP VALUE, e.g. cuda>=12.8)");
  const std::string property = f.substr(0, op_at);
  const std::string* have = property == "cuda"     ? &host.cuda
                            : property == "driver" ? &host.driver
                            : property == "arch"   ? &host.arch
                            : property == "brand"  ? &host.brand
                                                   : nullptr;
  if (!have) return Truth::True;  // a property the toolkit does not know: left out, as it does
  std::string op;
  for (const char* o : {"!=", "<=", ">=", "=", "<", ">"})
    if (f.compare(op_at, std::strlen(o), o) == 0) {
      op = o;
      break;
    }
  if (op.empty()) throw Error(r.name + ": '" + f + "' has no operator (one of != <= >= = < >)");
  const std::string value = f.substr(op_at + op.size());
  const bool version = property != "brand";
  if (version && !is_version(value))
    throw Error(r.name + ": '" + f + "': '" + value + "' is not a version");
  if (have->empty()) return Truth::Unknown;
  int c = version ? compare_versions(*have, value) : have->compare(value);
  bool holds = op == "!="   ? c != 0
               : op == "<=" ? c <= 0
               : op == ">=" ? c >= 0
               : op == "="  ? c == 0
               : op == "<"  ? c < 0
                            : c > 0;
  return holds ? Truth::True : Truth::False;
}

// "CUDA 12.2, driver 535.104.05, brand tesla, arch 9.0", saying which are unknown.
std::string describe(const HostProperties& h) {
  auto one = [](const char* what, const std::string& v) {
    return std::string(what) + " " + (v.empty() ? "unknown" : v);
  };
  return one("CUDA", h.cuda) + ", " + one("driver", h.driver) + ", " + one("brand", h.brand) +
         ", " + one("arch", h.arch);
}

// "NVIDIA_REQUIRE_CUDA (cuda>=12.8 or 50 other terms)"
std::string summary(const Requirement& r) {
  std::vector<std::string> terms;
  for (auto& t : split_on(r.expression, ' '))
    if (!t.empty()) terms.push_back(t);
  std::string s = r.name + " (" + (terms.empty() ? "" : terms.front());
  if (terms.size() == 2) s += " or 1 other term";
  if (terms.size() > 2) s += " or " + std::to_string(terms.size() - 1) + " other terms";
  return s + ")";
}

long major_of(const std::string& v) {
  return std::atol(v.c_str());
}

}  // namespace

bool requirements_disabled(const std::map<std::string, std::string>& env) {
  auto it = env.find("NVIDIA_DISABLE_REQUIRE");
  if (it == env.end()) return false;
  // Go's strconv.ParseBool, which the toolkit uses.
  for (const char* t : {"1", "t", "T", "TRUE", "true", "True"})
    if (it->second == t) return true;
  return false;
}

std::vector<Requirement> image_requirements(const std::map<std::string, std::string>& env) {
  std::vector<Requirement> out;
  if (requirements_disabled(env)) return out;
  for (const auto& [name, value] : env)
    if (name.rfind("NVIDIA_REQUIRE_", 0) == 0 && name.rfind("NVIDIA_REQUIRE_JETPACK", 0) != 0)
      out.push_back({name, value});
  auto legacy = env.find("CUDA_VERSION");
  auto require = env.find("NVIDIA_REQUIRE_CUDA");
  if (legacy != env.end() && !legacy->second.empty() &&
      (require == env.end() || require->second.empty())) {
    std::string v = legacy->second.rfind('v', 0) == 0 ? legacy->second.substr(1) : legacy->second;
    auto parts = split_on(v, '.');
    if (!is_version(v))
      throw Error("CUDA_VERSION=" + legacy->second + " in the image config is not a version");
    out.push_back(
        {"CUDA_VERSION", "cuda>=" + parts[0] + "." + (parts.size() > 1 ? parts[1] : "0")});
  }
  return out;
}

Truth evaluate(const Requirement& r, const HostProperties& host) {
  Truth any = Truth::False;
  bool some = false;
  for (const auto& term : split_on(r.expression, ' ')) {
    Truth all = Truth::True;
    bool factors = false;
    for (const auto& f : split_on(term, ',')) {
      if (f.empty()) continue;
      factors = true;
      all = both(all, factor(r, f, host));
    }
    if (!factors) continue;
    some = true;
    any = either(any, all);
  }
  return some ? any : Truth::True;
}

ImageDriverNeeds driver_needs(const std::map<std::string, std::string>& labels,
                              const std::map<std::string, std::string>& env,
                              const std::string& compat_driver) {
  auto get = [](const std::map<std::string, std::string>& m, const char* key) {
    auto it = m.find(key);
    return it == m.end() ? std::string() : it->second;
  };
  ImageDriverNeeds needs{get(labels, "dev.stackbuild.driver_min"), env, compat_driver,
                         get(labels, "dev.stackbuild.version.cuda")};
  if (needs.cuda.empty()) needs.cuda = get(env, "CUDA_VERSION");
  return needs;
}

DriverVerdict check_driver(const GpuInjection& gpu, const ImageDriverNeeds& needs) {
  const std::string& host = gpu.driver_version;
  const std::string& floor = needs.driver_min;
  const bool disabled = requirements_disabled(needs.env);
  const std::vector<Requirement> reqs = image_requirements(needs.env);
  if (host.empty() && (!floor.empty() || !reqs.empty()))
    throw Error("the image needs " +
                (floor.empty() ? "a driver its " + reqs.front().name + " accepts"
                               : "NVIDIA driver " + floor + " or newer") +
                ", and this host's driver version is unknown (" + gpu.source +
                " names none, and there is no /proc/driver/nvidia/version)");

  // Every requirement for every GPU, keeping the first that does not hold.
  Truth verdict = Truth::True;
  std::string why;
  for (const auto& d : gpu.gpus) {
    HostProperties p{gpu.cuda_version, host, d.arch, d.brand};
    for (const auto& r : reqs) {
      Truth t = evaluate(r, p);
      if (t != Truth::True && why.empty())
        why = summary(r) + (t == Truth::False ? " does not accept" : " cannot be checked against") +
              " GPU " + std::to_string(d.index) + " (" + describe(p) + ")";
      verdict = both(verdict, t);
    }
  }

  DriverVerdict v;
  v.detail = "driver " + host +
             (gpu.cuda_version.empty() ? "" : " (CUDA " + gpu.cuda_version + ")") + ", " +
             std::to_string(gpu.gpus.size()) + " GPUs";
  if (!floor.empty()) v.detail += ", the image needs " + floor;
  if (floor.empty() || compare_versions(host, floor) >= 0) {
    if (verdict == Truth::False)
      throw Error("the image's " + why +
                  ": the NVIDIA container toolkit would not start this image here (the image's "
                  "NVIDIA_DISABLE_REQUIRE=1 switches that check off)");
    if (verdict == Truth::Unknown)
      v.warnings.push_back(why + ": what this host lacks could not be read from its driver");
    if (!reqs.empty() && verdict == Truth::True)
      v.detail += "; " + reqs.front().name + (reqs.size() > 1 ? " and the rest hold" : " holds");
    if (disabled) v.detail += " (NVIDIA_DISABLE_REQUIRE)";
    return v;
  }

  // Below the floor of the image's CUDA release.
  const bool forward = !needs.compat_driver.empty() &&
                       compare_versions(needs.compat_driver, floor) >= 0 &&
                       major_of(needs.compat_driver) > major_of(host);
  const std::string compat_lib = "/usr/local/cuda/compat/libcuda.so." + needs.compat_driver;
  const std::string how =
      forward
          ? "under CUDA forward compatibility: the image's " + compat_lib +
                " is used before the host's libcuda (on data-center GPUs only)"
          : "under CUDA minor version compatibility, with the host's libcuda: code that needs a "
            "newer driver" +
                (gpu.cuda_version.empty() ? std::string()
                                          : ", and PTX newer than CUDA " + gpu.cuda_version + ",") +
                " fails";
  const std::string older = "driver " + host + " is older than the " + floor +
                            " the image needs (dev.stackbuild.driver_min)";
  // Minor version compatibility holds within a CUDA major version only.
  const bool other_major = !forward && !needs.cuda.empty() && !gpu.cuda_version.empty() &&
                           major_of(needs.cuda) != major_of(gpu.cuda_version);
  const std::string no_compat = "the image's CUDA " + needs.cuda + " does not run on a CUDA " +
                                gpu.cuda_version + " driver without forward-compatibility " +
                                "libraries of a newer branch (/usr/local/cuda/compat)";
  if (disabled) {
    v.detail += " (NVIDIA_DISABLE_REQUIRE)";
    v.warnings.push_back(
        older + "; NVIDIA_DISABLE_REQUIRE switches the toolkit's check off, so the tests run " +
        (other_major ? "as they are, and " + no_compat : how));
    return v;
  }
  if (other_major)
    throw Error(older + ", and " + no_compat +
                (needs.compat_driver.empty() ? ", which it lacks"
                                             : ", which its " + compat_lib + " is not"));
  if (!reqs.empty() && verdict == Truth::True) {
    v.detail += "; " + reqs.front().name + " accepts this host";
    v.warnings.push_back(older + "; its " + summary(reqs.front()) +
                         " accepts this host, so the tests run " + how);
    return v;
  }
  if (reqs.empty() && forward) {
    v.detail += "; the image's " + compat_lib + " meets it";
    v.warnings.push_back(older + ", so the tests run " + how);
    return v;
  }
  std::string msg = "the image needs NVIDIA driver " + floor + " or newer; this host runs " + host;
  if (!reqs.empty()) msg += ", and its " + why;
  if (!needs.compat_driver.empty() && !forward)
    msg += "; the image's " + compat_lib + " cannot stand in (it must be " + floor +
           " or newer, of a newer branch than the host's)";
  throw Error(msg);
}

}  // namespace sb::verify
