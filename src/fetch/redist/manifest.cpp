#include "fetch/redist/manifest.hpp"

#include <algorithm>
#include <set>

#include <nlohmann/json.hpp>

#include "util/error.hpp"
#include "util/number.hpp"

namespace sb::redist {

namespace {

Artifact artifact(const nlohmann::json& j, const std::string& where) {
  Artifact a;
  a.relative_path = j.at("relative_path").get<std::string>();
  a.sha256 = j.at("sha256").get<std::string>();
  Digest::parse("sha256:" + a.sha256);  // validates
  a.md5 = j.value("md5", "");
  const auto& s = j.at("size");
  if (s.is_string()) {
    std::string t = s.get<std::string>();
    auto size = parse_integer<uint64_t>(t);
    if (!size) throw Error("size '" + t + "' is not a number of bytes");
    a.size = *size;
  } else {
    a.size = s.get<uint64_t>();
  }
  if (a.relative_path.empty() || a.relative_path.starts_with("/") || a.relative_path.find("..") != std::string::npos)
    throw Error("relative_path '" + a.relative_path + "' is not a path below the manifest");
  return a;
}

// A top-level release_* field: a string, or absent.
std::string release_field(const nlohmann::json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end()) return "";
  if (!it->is_string()) throw Error("redist manifest " + where + ": '" + key + "' is not a string");
  return it->get<std::string>();
}

bool is_platform(const std::string& k) {
  return k.starts_with("linux-") || k.starts_with("windows-") || k == "source";
}

}  // namespace

Manifest parse_manifest(const std::string& text, const std::string& where) {
  Manifest m;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error("redist manifest " + where + " is not JSON: " + e.what());
  }
  if (!j.is_object()) throw Error("redist manifest " + where + " is not a JSON object");
  m.release_date = release_field(j, "release_date", where);
  m.release_label = release_field(j, "release_label", where);
  m.release_product = release_field(j, "release_product", where);
  for (const auto& [key, v] : j.items()) {
    if (!v.is_object()) continue;  // release_* strings
    Component c;
    c.key = key;
    try {
      c.name = v.value("name", key);
      c.license = v.value("license", "");
      c.version = v.at("version").get<std::string>();
      if (v.contains("cuda_variant"))
        for (const auto& cv : v["cuda_variant"]) c.cuda_variants.push_back(cv.get<std::string>());
      for (const auto& [pk, pv] : v.items()) {
        if (!is_platform(pk) || !pv.is_object()) continue;
        if (pv.contains("relative_path")) {
          c.platforms[pk][""] = artifact(pv, where);
        } else {
          for (const auto& [variant, av] : pv.items())
            if (av.is_object()) c.platforms[pk][variant] = artifact(av, where);
        }
      }
    } catch (const nlohmann::json::exception& e) {
      throw Error("redist manifest " + where + ": component '" + key + "': " + e.what());
    } catch (Error& e) {
      throw Error("redist manifest " + where + ": component '" + key + "': " + e.what());
    }
    m.components[key] = std::move(c);
  }
  if (m.components.empty()) throw Error("redist manifest " + where + " names no component");
  return m;
}

std::string platform_for(const std::string& oci_arch) {
  if (oci_arch == "amd64" || oci_arch == "x86_64") return "linux-x86_64";
  if (oci_arch == "arm64" || oci_arch == "aarch64") return "linux-sbsa";
  if (oci_arch == "ppc64le") return "linux-ppc64le";
  throw Error("NVIDIA publishes no redist archives for architecture '" + oci_arch + "'");
}

std::string manifest_url(const std::string& base, const std::string& product, const std::string& version) {
  std::string b = base;
  while (b.ends_with("/")) b.pop_back();
  return b + "/" + product + "/redist/redistrib_" + version + ".json";
}

std::string artifact_url(const std::string& base, const std::string& product, const Artifact& a) {
  std::string b = base;
  while (b.ends_with("/")) b.pop_back();
  return b + "/" + product + "/redist/" + a.relative_path;
}

std::vector<Selected> select(const Manifest& m, const std::vector<std::string>& wanted, const std::string& platform,
                             int cuda_major) {
  auto key_of = [&](const std::string& w) -> std::string {
    for (const std::string& k : {w, "cuda_" + w, "lib" + w})
      if (m.components.count(k)) return k;
    std::vector<std::string> keys;  // manifest keys and the short names recipes use
    for (const auto& [k, c] : m.components) {
      keys.push_back(k);
      for (const std::string p : {"cuda_", "lib"})
        if (k.starts_with(p)) keys.push_back(k.substr(p.size()));
    }
    std::string best = suggest(w, keys);
    throw Error("the " + (m.release_product.empty() ? std::string("redist") : m.release_product) + " " +
                m.release_label + " manifest has no component '" + w + "'" +
                (best.empty() ? "" : " (did you mean '" + best + "'?)"));
  };
  std::set<std::string> keys;
  for (const auto& w : wanted) {
    std::string k = key_of(w);
    keys.insert(k);
    if (k == "cuda_nvcc")  // what nvcc needs beside it
      for (const char* dep : {"cuda_cudart", "cuda_cccl", "cuda_crt", "libnvvm", "cuda_nvvm"})
        if (m.components.count(dep)) keys.insert(dep);
  }
  std::vector<Selected> out;
  for (const auto& k : keys) {
    const Component& c = m.components.at(k);
    auto p = c.platforms.find(platform);
    if (p == c.platforms.end()) {
      std::string have;
      for (const auto& [pk, pv] : c.platforms) have += (have.empty() ? "" : ", ") + pk;
      throw Error(k + " " + c.version + " has no " + platform + " archive (the manifest has: " +
                  (have.empty() ? "none" : have) + ")");
    }
    Selected s{k, c.version, "", {}};
    if (p->second.count("")) {
      s.artifact = p->second.at("");
    } else {
      std::string variant = "cuda" + std::to_string(cuda_major);
      auto v = p->second.find(variant);
      if (v == p->second.end()) {
        std::string have;
        for (const auto& [vk, vv] : p->second) have += (have.empty() ? "" : ", ") + vk;
        throw Error(k + " " + c.version + " has no build for CUDA " + std::to_string(cuda_major) + " on " + platform +
                    " (variants: " + have + ")");
      }
      s.variant = variant;
      s.artifact = v->second;
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace sb::redist
