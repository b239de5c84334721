// The packages an image's files record: dpkg's status (and distroless'
// status.d), apk's installed database, Python's *.dist-info and *.egg-info,
// the CUDA toolkit's version.json, and cuDNN's and NCCL's headers in it.
#include <algorithm>
#include <cctype>
#include <set>

#include <nlohmann/json.hpp>

#include "fetch/apt/control.hpp"
#include "image/sbom.hpp"
#include "fetch/pip/index.hpp"
#include "fetch/pip/requirement.hpp"
#include "fetch/pip/version.hpp"
#include "util/c_header.hpp"
#include "util/digest.hpp"
#include "util/error.hpp"
#include "util/text.hpp"
#include "util/utf8.hpp"

namespace sb::sbom {

namespace {

std::string id_part(std::string_view s) {
  std::string out;
  for (char c : s) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-') ? c : '-';
  return out;
}

void set_id(Package& p) {
  std::string key = p.type + '\0' + p.name + '\0' + p.version + '\0' + p.arch + '\0' + p.file;
  p.id = id_part(p.type + "-" + p.name + "-" + p.version) + "-" + Digest::of_bytes(key).hex().substr(0, 8);
}

// Sorted by type, name, version, file, architecture; a record written twice
// in one file (the same package, version, architecture) is one package.
void sort_packages(Contents& c) {
  std::stable_sort(c.packages.begin(), c.packages.end(), [](const Package& a, const Package& b) {
    return std::tie(a.type, a.name, a.version, a.file, a.arch) <
           std::tie(b.type, b.name, b.version, b.file, b.arch);
  });
  c.packages.erase(std::unique(c.packages.begin(), c.packages.end(),
                               [](const Package& a, const Package& b) { return a.id == b.id; }),
                   c.packages.end());
}

std::string first_line(const std::string& s) { return trim(s.substr(0, s.find('\n'))); }

// os-release: KEY=value lines, the value maybe quoted.
std::map<std::string, std::string> os_release(const std::string& text) {
  std::map<std::string, std::string> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = trim(text.substr(pos, end - pos));
    pos = end + 1;
    size_t eq = line.find('=');
    if (line.empty() || line[0] == '#' || eq == std::string::npos) continue;
    std::string v = line.substr(eq + 1);
    if (v.size() >= 2 && (v[0] == '"' || v[0] == '\'') && v.back() == v[0]) v = v.substr(1, v.size() - 2);
    out[line.substr(0, eq)] = v;
  }
  return out;
}

std::string purl(const std::string& type, const std::string& ns, const std::string& name, const std::string& version,
                 const std::vector<std::pair<std::string, std::string>>& qualifiers) {
  std::string s = "pkg:" + type + "/" + (ns.empty() ? "" : purl_encode(ns) + "/") + purl_encode(name);
  if (!version.empty()) s += "@" + purl_encode(version);
  char sep = '?';
  for (const auto& [k, v] : qualifiers) {  // the caller gives them sorted by key
    if (v.empty()) continue;
    // A URL's slashes stay, as the spec's examples write them.
    s += sep + k + "=" + purl_encode(v, "/");
    sep = '&';
  }
  return s;
}

// ---- dpkg ----------------------------------------------------------------

void read_dpkg(const std::string& file, const std::string& text, const Contents& c, std::vector<Package>& out,
               std::map<std::string, std::string>& depends_field, std::map<std::string, std::string>& provides) {
  std::string distro = c.os_id.empty() ? "" : c.os_id + (c.os_version_id.empty() ? "" : "-" + c.os_version_id);
  apt::for_each_paragraph(text, [&](const apt::Paragraph& para) {
    if (para.get("Package").empty()) return;
    // Every package whose files are in the image counts: installed, and also
    // unpacked and not yet configured (as stackbuild's apt layers leave what
    // has maintainer scripts), half-configured or awaiting triggers. A
    // removed package whose configuration dpkg keeps (config-files), or one
    // it knows of but has not installed, does not.
    if (para.has("Status")) {
      auto words = apt::split_words(para.get("Status"));
      if (words.size() < 3 || words[2] == "not-installed" || words[2] == "config-files") return;
    }
    Package p;
    p.type = "deb";
    p.name = para.get("Package");
    p.version = para.get("Version");
    p.arch = para.get("Architecture");
    auto source = apt::split_words(para.get("Source"));  // "gcc-12 (12.2.0-14)": the name
    if (!source.empty() && source[0] != p.name) p.source = source[0];
    p.supplier = para.get("Maintainer");
    p.homepage = para.get("Homepage");
    p.summary = first_line(para.get("Description"));
    p.file = "/" + file;
    p.purl = purl("deb", c.os_id.empty() ? "debian" : c.os_id, p.name, p.version,
                  {{"arch", p.arch}, {"distro", distro}, {"upstream", p.source}});
    set_id(p);
    std::string deps = para.get("Pre-Depends");
    if (!para.get("Depends").empty()) deps += (deps.empty() ? "" : ", ") + para.get("Depends");
    depends_field[p.id] = deps;
    provides[p.id] = para.get("Provides");
    out.push_back(std::move(p));
  });
}

// Each group of alternatives becomes the first alternative that is installed.
void link_debs(std::vector<Package>& debs, const std::map<std::string, std::string>& depends_field,
               const std::map<std::string, std::string>& provides) {
  std::map<std::string, std::vector<const Package*>> by_name;
  for (const auto& p : debs) {
    by_name[p.name].push_back(&p);
    try {
      for (const auto& alts : apt::parse_depends(provides.at(p.id)))
        for (const auto& a : alts) by_name[a.name].push_back(&p);
    } catch (const Error&) {  // a malformed Provides provides nothing
    }
  }
  for (auto& p : debs) {
    std::vector<apt::Alternatives> groups;
    try {
      groups = apt::parse_depends(depends_field.at(p.id), p.arch);
    } catch (const Error&) {
      continue;  // the package's own field is broken: no relationships for it
    }
    std::set<std::string> seen;
    for (const auto& alts : groups)
      for (const auto& a : alts) {
        auto it = by_name.find(a.name);
        if (it == by_name.end()) continue;
        const Package* best = it->second.front();
        for (const Package* q : it->second)
          if (q->arch == p.arch) best = q;
        if (best != &p && seen.insert(best->id).second) p.depends.push_back(best->id);
        break;
      }
  }
}

// Each package's license from its copyright file. A package without one of
// its own (its /usr/share/doc/<package> a link, which policy allows only to a
// package of the same source) takes that of a package of its source.
void license_debs(std::vector<Package>& debs, const std::map<std::string, const std::string*>& copyright) {
  auto source_of = [](const Package& p) { return p.source.empty() ? p.name : p.source; };
  std::map<std::string, const std::string*> by_source;  // a file of an installed package of that source
  for (const auto& p : debs)
    if (auto it = copyright.find(p.name); it != copyright.end()) by_source.emplace(source_of(p), it->second);
  std::map<const std::string*, std::pair<std::string, std::string>> read;  // each file once: (license, words)
  for (auto& p : debs) {
    auto own = copyright.find(p.name);
    auto shared = by_source.find(source_of(p));
    const std::string* text = own != copyright.end()        ? own->second
                              : shared != by_source.end() ? shared->second
                                                          : nullptr;
    if (!text) continue;
    auto [it, fresh] = read.try_emplace(text);
    if (fresh) it->second.first = debian_license(*text, it->second.second);
    std::tie(p.license, p.license_text) = it->second;
  }
}

// ---- apk -----------------------------------------------------------------

void read_apk(const std::string& file, const std::string& text, const Contents& c, std::vector<Package>& out) {
  std::string distro = "alpine" + (c.os_version_id.empty() ? "" : "-" + c.os_version_id);
  Package p;
  auto flush = [&] {
    if (!p.name.empty()) {
      if (p.source == p.name) p.source.clear();
      p.type = "apk";
      p.file = "/" + file;
      p.purl = purl("apk", c.os_id.empty() ? "alpine" : c.os_id, p.name, p.version,
                    {{"arch", p.arch}, {"distro", distro}, {"upstream", p.source}});
      set_id(p);
      out.push_back(std::move(p));
    }
    p = Package{};
  };
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + pos, end - pos);
    pos = end + 1;
    if (line.empty()) {
      flush();
      if (end == text.size()) break;
      continue;
    }
    if (line.size() < 2 || line[1] != ':') continue;
    std::string v(line.substr(2));
    switch (line[0]) {
      case 'P': p.name = v; break;
      case 'V': p.version = v; break;
      case 'A': p.arch = v; break;
      case 'L': p.license = v; break;  // an SPDX expression in Alpine; else kept as its words
      case 'm': p.supplier = v; break;
      case 'o': p.source = v; break;
      case 'U': p.homepage = v; break;
      case 'T': p.summary = v; break;
    }
  }
  flush();
}

// ---- Python --------------------------------------------------------------

// License-Expression (PEP 639); else a License: that is an SPDX expression;
// else the one license the classifiers name, where they name exactly one.
// What the package says otherwise goes to `text`.
std::string python_license(const pip::Metadata& m, std::string& text) {
  auto one = [&](const char* k) {
    auto it = m.find(k);
    return it == m.end() ? std::string() : it->second;
  };
  if (auto e = one("License-Expression"); !e.empty()) return e;
  static const std::map<std::string, std::string> classifiers = {
      {"License :: OSI Approved :: MIT License", "MIT"},
      {"License :: OSI Approved :: ISC License (ISCL)", "ISC"},
      {"License :: OSI Approved :: Python Software Foundation License", "PSF-2.0"},
      {"License :: OSI Approved :: Mozilla Public License 2.0 (MPL 2.0)", "MPL-2.0"},
      {"License :: OSI Approved :: The Unlicense (Unlicense)", "Unlicense"},
  };
  std::vector<std::string> named;
  for (auto [it, end] = m.equal_range("Classifier"); it != end; ++it)
    if (it->second.starts_with("License ::")) named.push_back(it->second);
  std::string lic = trim(one("License"));
  if (!lic.empty() && license_expression_known(lic)) return lic;
  if (!lic.empty()) text = lic.find('\n') == std::string::npos ? lic : first_line(lic) + " ...";
  for (const auto& n : named) text += (text.empty() ? "" : "; ") + n;
  if (named.size() == 1)
    if (auto it = classifiers.find(named[0]); it != classifiers.end()) return it->second;
  return "";
}

// The directory a project's *.dist-info or *.egg-info is in.
std::string site_of(const std::string& file) {
  for (const char* s : {".dist-info/", ".egg-info/"})
    if (size_t at = file.find(s); at != std::string::npos) return file.substr(0, file.rfind('/', at));
  return file.substr(0, file.rfind('/'));
}

std::string python_version_of(std::string_view site_dir) {
  // usr/lib/python3.11/site-packages, usr/local/lib/python3.12/dist-packages
  size_t at = site_dir.rfind("/python");
  if (at == std::string_view::npos) return "";
  std::string_view rest = site_dir.substr(at + 7);
  rest = rest.substr(0, rest.find('/'));
  if (rest.find('.') == std::string_view::npos || rest.find_first_not_of("0123456789.") != std::string_view::npos)
    return "";
  return std::string(rest);
}

struct PythonDeps {
  std::string site;                 // the directory the project is installed in
  std::vector<std::string> requires_dist;
};

void read_python(const std::string& file, const std::string& text, std::vector<Package>& out,
                 std::map<std::string, PythonDeps>& deps) {
  auto m = pip::parse_metadata(text);
  auto one = [&](const char* k) {
    auto it = m.find(k);
    return it == m.end() ? std::string() : it->second;
  };
  Package p;
  p.type = "python";
  p.name = one("Name");
  p.version = one("Version");
  if (p.name.empty()) return;  // not a project's metadata
  p.summary = one("Summary");
  p.homepage = one("Home-page");
  for (auto [it, end] = m.equal_range("Project-URL"); it != end && p.homepage.empty(); ++it) {
    size_t comma = it->second.find(',');
    std::string label = pip::normalize_name(trim(it->second.substr(0, comma)));
    if (comma != std::string::npos && (label == "homepage" || label == "home"))
      p.homepage = trim(it->second.substr(comma + 1));
  }
  for (const char* k : {"Author-email", "Author", "Maintainer-email", "Maintainer"})
    if (p.supplier.empty()) p.supplier = first_line(one(k));
  p.license = python_license(m, p.license_text);
  p.file = "/" + file;
  p.purl = purl("pypi", "", pip::normalize_name(p.name), p.version, {});
  set_id(p);
  PythonDeps d{site_of(file), {}};
  for (auto [it, end] = m.equal_range("Requires-Dist"); it != end; ++it) d.requires_dist.push_back(it->second);
  deps[p.id] = std::move(d);
  out.push_back(std::move(p));
}

void link_python(std::vector<Package>& pys, const std::map<std::string, PythonDeps>& deps, const std::string& machine) {
  std::map<std::pair<std::string, std::string>, std::string> installed;  // (site, key) -> id
  for (const auto& p : pys) installed[{deps.at(p.id).site, pip::normalize_name(p.name)}] = p.id;
  for (auto& p : pys) {
    const auto& d = deps.at(p.id);
    std::string py = python_version_of(d.site);
    auto env = pip::MarkerEnv::linux_cpython(py.empty() ? "3" : py, machine);
    std::set<std::string> seen;
    for (const auto& text : d.requires_dist) {
      try {
        auto r = pip::Requirement::parse(text);
        if (!r.marker.empty()) {
          // Without the site's Python version, only markers on extras are read as false.
          bool applies = py.empty() ? r.marker.str().find("extra") == std::string::npos : r.applies(env);
          if (!applies) continue;
        }
        auto it = installed.find({d.site, r.key});
        if (it != installed.end() && it->second != p.id && seen.insert(it->second).second) p.depends.push_back(it->second);
      } catch (const Error&) {  // a requirement pip could not read either
      }
    }
  }
}

// ---- the CUDA toolkit ----------------------------------------------------

void read_cuda(const std::string& file, const std::string& text, std::vector<Package>& out) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object()) return;
  for (const auto& [key, v] : j.items()) {
    if (!v.is_object() || !v.contains("version") || !v["version"].is_string()) continue;
    Package p;
    p.type = "cuda";
    p.name = key;
    p.version = v["version"].get<std::string>();
    if (v.contains("name") && v["name"].is_string()) p.summary = v["name"].get<std::string>();
    p.supplier = "NVIDIA Corporation";
    p.file = "/" + file;
    p.purl = purl("generic", "nvidia", key, p.version, {});
    set_id(p);
    out.push_back(std::move(p));
  }
}

// cuDNN's and NCCL's headers in a CUDA tree: what NVIDIA's redist archives
// leave of their version, as the image records no package for them.
void read_cuda_header(const std::string& file, const std::string& text, std::vector<Package>& out) {
  bool cudnn = file.ends_with("/cudnn_version.h");
  Package p;
  p.type = "cuda";
  p.name = cudnn ? "cudnn" : "nccl";
  p.version = c_header_version(text, cudnn ? "CUDNN_" : "NCCL_");
  if (p.version.empty()) return;
  p.summary = cudnn ? "NVIDIA cuDNN (its version from cudnn_version.h)" : "NVIDIA NCCL (its version from nccl.h)";
  p.supplier = "NVIDIA Corporation";
  p.file = "/" + file;
  p.purl = purl("generic", "nvidia", p.name, p.version, {});
  set_id(p);
  out.push_back(std::move(p));
}

}  // namespace

std::string purl_encode(std::string_view s, std::string_view keep) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '.' || c == '-' || c == '_' || c == '~' || c == ':' ||
        keep.find(static_cast<char>(c)) != std::string_view::npos) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

std::string python_machine(const std::string& arch) {
  if (arch == "amd64") return "x86_64";
  if (arch == "arm64") return "aarch64";
  return arch;  // ppc64le, s390x and riscv64 are Python's names too
}

Contents read_contents(const std::map<std::string, std::string>& files, const std::string& machine) {
  Contents c;
  auto os = files.find("etc/os-release");
  if (os == files.end()) os = files.find("usr/lib/os-release");
  if (os != files.end()) {
    auto kv = os_release(os->second);
    c.os_id = kv["ID"];
    c.os_version_id = kv["VERSION_ID"];
    c.os_name = kv["PRETTY_NAME"];
  }
  std::vector<Package> debs, apks, pys, cuda;
  std::map<std::string, std::string> deb_depends, deb_provides;
  std::map<std::string, PythonDeps> py_deps;
  std::map<std::string, const std::string*> copyright;  // package -> its copyright file
  for (const auto& [path, text] : files) {
    try {
      if (path.starts_with("usr/share/doc/") && path.ends_with("/copyright"))
        copyright[path.substr(14, path.size() - 14 - 10)] = &text;
      else if (path == "var/lib/dpkg/status" || path.starts_with("var/lib/dpkg/status.d/"))
        read_dpkg(path, text, c, debs, deb_depends, deb_provides);
      else if (path == "lib/apk/db/installed")
        read_apk(path, text, c, apks);
      else if (path.ends_with("version.json"))
        read_cuda(path, text, cuda);
      else if (path.ends_with(".h"))
        read_cuda_header(path, text, cuda);
      else if (path != "etc/os-release" && path != "usr/lib/os-release")
        read_python(path, text, pys, py_deps);
    } catch (Error& e) {
      e.add_trace("while reading /" + path + " for the SBOM");
      throw;
    }
  }
  link_debs(debs, deb_depends, deb_provides);
  license_debs(debs, copyright);
  link_python(pys, py_deps, machine);
  // The databases are bytes from an image of any origin: what is not UTF-8
  // is shown as \xHH, so that every document (JSON) can hold it.
  for (auto* list : {&debs, &apks, &pys, &cuda})
    for (auto& p : *list) {
      for (std::string* f : {&p.name, &p.version, &p.arch, &p.source, &p.supplier, &p.license, &p.license_text,
                             &p.homepage, &p.summary, &p.file})
        *f = printable_utf8(*f);
      c.packages.push_back(std::move(p));
    }
  for (std::string* f : {&c.os_id, &c.os_version_id, &c.os_name}) *f = printable_utf8(*f);
  sort_packages(c);
  return c;
}

void add_source_packages(Contents& c, const std::map<std::string, std::string>& labels) {
  const std::string prefix = kSourceLabelPrefix;
  for (auto it = labels.lower_bound(prefix); it != labels.end() && it->first.starts_with(prefix);
       ++it) {
    const std::string layer = it->first.substr(prefix.size());
    nlohmann::json j = nlohmann::json::parse(it->second, nullptr, false);
    if (layer.empty() || !j.is_object()) continue;
    auto str = [&j](const char* k) {
      return j.contains(k) && j[k].is_string() ? j[k].get<std::string>() : "";
    };
    Package p;
    p.type = "source";
    p.name = str("component").empty() ? layer : str("component");
    const std::string git = str("git"), archive = str("archive");
    const std::string at = str("commit").empty() ? str("ref") : str("commit");
    // A Debian source package: {"package", "version", "suite", "dsc": {name, sha256}, "files": [...]}.
    const nlohmann::json debian = j.contains("debian") && j["debian"].is_object() ? j["debian"] : nlohmann::json();
    auto dstr = [&debian](const char* k) {
      return debian.contains(k) && debian[k].is_string() ? debian[k].get<std::string>() : "";
    };
    if (git.empty() && archive.empty() && str("local").empty() && dstr("package").empty())
      continue;  // not a source stackbuild describes
    // Its version: the component's, else what pins the tree (a commit or ref,
    // an archive's or a local tree's digest), so that a new tree is a new version.
    auto short_digest = [](std::string d) {
      return "sha256:" + d.substr(d.starts_with("sha256:") ? 7 : 0, 12);
    };
    p.version = !str("version").empty() ? str("version")
                : !dstr("package").empty() ? dstr("version")
                : !git.empty()          ? at
                : !archive.empty()      ? short_digest(str("sha256"))
                                        : short_digest(str("local"));
    // Patches change the tree: the version says so, and which (their sha256s).
    std::string patch_ids;
    std::vector<std::string> patches;
    if (j.contains("patches") && j["patches"].is_array())
      for (const auto& q : j["patches"])
        if (q.is_object() && q.contains("sha256") && q["sha256"].is_string()) {
          patch_ids += q["sha256"].get<std::string>() + "\n";
          const bool named = q.contains("path") && q["path"].is_string();
          patches.push_back((named ? q["path"].get<std::string>() : "?") +
                            " (sha256:" + q["sha256"].get<std::string>() + ")");
        }
    if (!patches.empty()) p.version += "+patches." + Digest::of_bytes(patch_ids).hex().substr(0, 8);
    std::vector<std::pair<std::string, std::string>> qualifiers;
    if (!git.empty()) {
      p.revision = at;
      p.download = "git+" + git + (at.empty() ? "" : "@" + at);
      qualifiers.push_back({"vcs_url", p.download});
    } else if (!archive.empty()) {
      p.download = archive;
      p.sha256 = str("sha256");
      if (!p.sha256.empty()) qualifiers.push_back({"checksum", "sha256:" + p.sha256});
      qualifiers.push_back({"download_url", archive});
    }
    std::string debian_files;  // "NAME (sha256:HEX)", the .dsc first
    if (!dstr("package").empty()) {
      p.source = dstr("package");
      p.revision = dstr("version");
      if (debian.contains("dsc") && debian["dsc"].is_object() && debian["dsc"].contains("sha256") &&
          debian["dsc"]["sha256"].is_string())
        p.sha256 = debian["dsc"]["sha256"].get<std::string>();
      std::vector<nlohmann::json> listed;
      if (debian.contains("dsc")) listed.push_back(debian["dsc"]);
      if (debian.contains("files") && debian["files"].is_array())
        for (const auto& f : debian["files"]) listed.push_back(f);
      for (const auto& f : listed)
        if (f.is_object() && f.contains("name") && f["name"].is_string() && f.contains("sha256") &&
            f["sha256"].is_string())
          debian_files += (debian_files.empty() ? "" : ", ") + f["name"].get<std::string>() + " (sha256:" +
                          f["sha256"].get<std::string>() + ")";
    }
    p.purl = !dstr("package").empty()
                 ? purl("deb", "debian", dstr("package"), dstr("version"), {{"arch", "source"}})
                 : purl("generic", "", p.name, p.version, qualifiers);
    p.file = str("path");
    p.built = j.contains("built") && j["built"].is_boolean() && j["built"].get<bool>();
    // SPDX's supplier is who distributes this copy: of a tree the image keeps
    // (patched, maybe), the image's vendor. Its upstream is no statement here.
    if (auto vendor = labels.find("org.opencontainers.image.vendor");
        vendor != labels.end() && !p.file.empty())
      p.supplier = vendor->second;
    std::string origin = !dstr("package").empty()
                             ? "Debian's source package " + dstr("package") + " " + dstr("version") + " (" +
                                   dstr("suite") + (debian_files.empty() ? "" : ": " + debian_files) + ")"
                         : !git.empty()       ? "git " + git + (at.empty() ? "" : " at " + at)
                         : !archive.empty() ? "the archive " + archive
                                            : "a local directory (tree " + str("local") + ")";
    p.comment = "the source tree of layer '" + layer + "', from " + origin;
    if (!patches.empty()) {
      p.comment += ", with patches";
      for (size_t i = 0; i < patches.size(); ++i) p.comment += (i ? ", " : " ") + patches[i];
    }
    p.comment += std::string(p.built ? "; the layer was compiled from it" : "") +
                 (p.file.empty() ? "; not kept in the image" : "; kept in the image at " + p.file);
    for (std::string* f : {&p.name, &p.version, &p.file, &p.download, &p.revision, &p.sha256,
                           &p.purl, &p.comment, &p.supplier})
      *f = printable_utf8(*f);
    set_id(p);
    c.packages.push_back(std::move(p));
  }
  sort_packages(c);
}

std::string git_repository(const Package& p) {
  if (!p.download.starts_with("git+")) return "";
  const size_t tail = p.revision.empty() ? 0 : p.revision.size() + 1;  // "@REVISION"
  return p.download.substr(4, p.download.size() - 4 - tail);
}

Contents image_contents(const Store& store, const ImageInfo& info,
                        const std::vector<std::pair<Digest, fs::path>>& layers) {
  Contents c = read_contents(image_files(store, layers), python_machine(info.architecture));
  add_source_packages(c, info.labels);
  return c;
}

}  // namespace sb::sbom
