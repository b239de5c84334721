#include "fetch/apt/install.hpp"

#include <openssl/evp.h>

#include <algorithm>
#include <atomic>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "fetch/apt/deb.hpp"
#include "util/digest.hpp"
#include "util/error.hpp"
#include "util/file.hpp"
#include "util/json.hpp"
#include "util/threads.hpp"

namespace sb::apt {

void to_json(nlohmann::json& j, const LockedPackage& p) {
  j = {{"name", p.name}, {"version", p.version}, {"architecture", p.architecture},
       {"sha256", p.sha256}, {"size", p.size}};
  if (!p.path.empty())
    j["path"] = p.path, j["repository"] = p.repository;
  else
    j["url"] = p.url;
}

void from_json(const nlohmann::json& j, LockedPackage& p) {
  p.name = j.at("name").get<std::string>();
  p.version = j.at("version").get<std::string>();
  p.architecture = j.value("architecture", std::string());
  if (j.contains("path")) {
    p.path = j.at("path").get<std::string>();
    p.repository = j.at("repository").get<int>();
    if (p.path.empty() || p.path.front() == '/' || p.path.find("..") != std::string::npos || p.repository < 0)
      throw Error("path '" + p.path + "' in repository " + std::to_string(p.repository) + " is not a file of a repository");
  } else {
    p.url = j.at("url").get<std::string>();
  }
  p.sha256 = j.at("sha256").get<std::string>();
  Digest::parse("sha256:" + p.sha256);  // 64 hex digits, or an error that says so
  p.size = j.contains("size") ? json_size(j, "size") : 0;
}

std::vector<LockedPackage> lock_solution(const PackageIndex& index, const Solution& solution) {
  std::vector<LockedPackage> out;
  for (const Package* p : solution.packages) {
    const Repository& r = index.repositories()[p->repo];
    if (p->sha256.empty() || p->filename.empty())
      throw Error(p->id() + " from " + r.id() + " has no Filename or SHA256 in its index");
    out.push_back({std::string(p->name), std::string(p->version), std::string(p->architecture),
                   r.uri + "/" + std::string(p->filename), std::string(p->sha256), p->size});
  }
  return out;
}

std::string AptState::str() const {
  nlohmann::json j = {{"dir_links", dir_links}, {"status", nlohmann::json::array()}, {"files", files},
                      {"sources", sources}, {"keyrings", keyrings}};
  for (const auto& p : status) j["status"].push_back(p.str());
  return j.dump();
}

AptState AptState::parse(const std::string& text) {
  auto j = nlohmann::json::parse(text);
  AptState s;
  s.dir_links = j.at("dir_links").get<std::map<std::string, std::string>>();
  s.files = j.value("files", decltype(s.files){});
  s.sources = j.value("sources", decltype(s.sources){});
  s.keyrings = j.value("keyrings", decltype(s.keyrings){});
  for (const auto& p : j.at("status")) {
    auto ps = parse_paragraphs(p.get<std::string>());
    if (!ps.empty()) s.status.push_back(ps.front());
  }
  return s;
}

namespace {

std::string md5_hex(const fs::path& file) {
  std::string data = read_file(file);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), md, &len, EVP_md5(), nullptr);
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (unsigned i = 0; i < len; ++i) s += hex[md[i] >> 4], s += hex[md[i] & 15];
  return s;
}

// Writes generated content (status, lists, sources) as a layer entry.
class Generated {
 public:
  Generated(const fs::path& staging, int64_t epoch) : dir_(staging / "generated"), epoch_(epoch) {
    fs::create_directories(dir_);
  }
  void file(EntryMap& entries, const std::string& path, const std::string& content, uint32_t mode = 0644) {
    fs::path src = dir_ / ("g" + std::to_string(n_++));
    write_file_atomic(src, content);
    TarEntry e;
    e.mode = mode;
    e.mtime = epoch_;
    e.size = content.size();
    e.source = src;
    entries[path] = e;
  }
  void dir(EntryMap& entries, const std::string& path) {
    if (entries.count(path)) return;
    TarEntry e;
    e.type = TarEntry::Type::Dir;
    e.mode = 0755;
    e.mtime = epoch_;
    entries[path] = e;
  }

 private:
  fs::path dir_;
  int64_t epoch_;
  int n_ = 0;
};

// "bin/ls" with bin -> usr/bin becomes "usr/bin/ls"; applied to every
// prefix, as the image's own directories will resolve it.
std::string through_links(const std::string& path, const std::map<std::string, std::string>& links) {
  std::string out = path;
  for (int guard = 0; guard < 8; ++guard) {
    bool changed = false;
    for (size_t slash = out.find('/'); slash != std::string::npos; slash = out.find('/', slash + 1)) {
      auto it = links.find(out.substr(0, slash));
      if (it != links.end()) {
        out = it->second + out.substr(slash);
        changed = true;
        break;
      }
    }
    if (!changed) break;
  }
  return out;
}

// Symlinks to directories (in this layer, or below): "bin" -> "usr/bin".
void collect_dir_links(const EntryMap& entries, std::map<std::string, std::string>& links) {
  for (const auto& [path, e] : entries) {
    if (e.type != TarEntry::Type::Symlink || e.link.empty()) continue;
    std::string parent = path.find('/') == std::string::npos ? "" : path.substr(0, path.rfind('/'));
    std::string target = e.link[0] == '/' ? e.link : (parent.empty() ? "" : parent + "/") + e.link;
    try {
      target = canonical_archive_path(target);
    } catch (const Error&) {
      continue;
    }
    auto it = entries.find(target);
    if (it != entries.end() && it->second.type == TarEntry::Type::Dir) links[path] = target;
  }
}

std::string info_name(const Paragraph& control) {
  std::string name = control.get("Package");
  if (control.get("Multi-Arch") == "same") name += ":" + control.get("Architecture");
  return name;
}

}  // namespace

std::vector<fetch::FetchItem> package_fetch_items(const std::vector<LockedPackage>& pkgs) {
  std::vector<fetch::FetchItem> items;
  for (const auto& p : pkgs)
    items.push_back({p.url, Digest::parse("sha256:" + p.sha256), p.size ? std::optional<uint64_t>(p.size) : std::nullopt,
                     p.name + "_" + p.version + "_" + p.architecture + ".deb"});
  return items;
}

Installed install_packages(const std::vector<LockedPackage>& pkgs, const AptState& below, const InstallOptions& o,
                           const Store& store, fetch::Fetcher& fetcher) {
  const std::vector<fetch::FetchItem> items = package_fetch_items(pkgs);
  auto fetched = fetcher.fetch(items);

  // Unpack in parallel; merge in name order so the result never depends on timing.
  std::vector<DebContents> debs(pkgs.size());
  std::vector<std::exception_ptr> errors(pkgs.size());
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i; (i = next++) < pkgs.size();) {
      try {
        debs[i] = read_deb(store.blob_path(fetched[i].digest), o.staging, o.epoch);
        if (debs[i].control.get("Package") != pkgs[i].name || debs[i].control.get("Version") != pkgs[i].version)
          throw Error(items[i].label + " holds " + debs[i].control.get("Package") + " " +
                      debs[i].control.get("Version") + ", not what its index says");
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  unsigned n = o.threads > 0 ? static_cast<unsigned>(o.threads) : std::max(1u, std::thread::hardware_concurrency());
  run_on_threads(std::min<size_t>(n, pkgs.size()), worker);
  for (size_t i = 0; i < pkgs.size(); ++i)
    if (errors[i]) {
      try {
        std::rethrow_exception(errors[i]);
      } catch (Error& e) {
        e.add_trace("while unpacking " + items[i].label + " (" + pkgs[i].url + ")");
        throw;
      }
    }

  std::vector<size_t> order(pkgs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return pkgs[a].name < pkgs[b].name; });

  Installed out;
  out.state = below;
  EntryMap& entries = out.entries;
  std::vector<std::vector<std::string>> owned(pkgs.size());  // each package's non-directory paths
  // Directory links first (base-files' bin -> usr/bin), so every package's
  // files land where the image resolves them.
  for (size_t i : order) collect_dir_links(debs[i].entries, out.state.dir_links);
  for (size_t i : order)
    for (auto& [path, e] : debs[i].entries) {
      std::string real = out.state.dir_links.count(path) ? path : through_links(path, out.state.dir_links);
      if (e.type != TarEntry::Type::Dir) owned[i].push_back(real);
      if (e.type != TarEntry::Type::Dir) out.owner[real] = info_name(debs[i].control);
      else out.owner.emplace(real, info_name(debs[i].control));
      auto it = entries.find(real);
      if (it != entries.end() && it->second.type == TarEntry::Type::Dir && e.type == TarEntry::Type::Dir) continue;
      entries[real] = e;
    }

  // base-passwd's preinst (not run here) creates /etc/passwd and /etc/group
  // from its masters; without them no later maintainer script can chown.
  for (const char* f : {"passwd", "group"}) {
    auto master = entries.find(std::string("usr/share/base-passwd/") + f + ".master");
    if (master != entries.end() && !entries.count(std::string("etc/") + f)) {
      TarEntry e = master->second;
      e.mode = 0644;
      e.host_ino = e.host_dev = 0;
      entries[std::string("etc/") + f] = e;
    }
  }

  Generated gen(o.staging, o.epoch);
  std::map<std::string, Paragraph> status;
  std::map<std::string, std::string> below_name;  // Package -> its dpkg name below
  for (const auto& p : below.status) status[info_name(p)] = p, below_name[p.get("Package")] = info_name(p);
  std::vector<std::string> upgraded;  // dpkg names below that this layer replaces
  for (size_t i : order) {
    DebContents& d = debs[i];
    std::string name = info_name(d.control);
    if (auto it = below_name.find(d.control.get("Package")); it != below_name.end()) {
      if (!below.files.count(it->second))
        throw Error("cannot upgrade " + it->second + " " + status[it->second].get("Version") +
                    ": the layer below records no file list for it (it was built by an older stackbuild); "
                    "rebuild the layers below");
      upgraded.push_back(it->second);
      status.erase(it->second);
      out.state.files.erase(it->second);
    }
    std::string info = "var/lib/dpkg/info/" + name;
    auto info_file = [&](const std::string& suffix, const std::string& content, uint32_t mode = 0644) {
      gen.file(entries, info + suffix, content, mode);
      owned[i].push_back(info + suffix);
      out.owner[info + suffix] = name;
    };
    std::string list;
    for (const auto& p : d.paths) list += p + "\n";
    info_file(".list", list);
    bool scripts = false;
    if (!d.control_files.count("md5sums")) {  // as dpkg does for a package without one
      std::string sums;
      for (const auto& [path, e] : d.entries)
        if (e.type == TarEntry::Type::File && !e.source.empty()) sums += md5_hex(e.source) + "  " + path + "\n";
      d.control_files["md5sums"] = sums;
    }
    for (const auto& [file, content] : d.control_files) {
      bool exec = file == "preinst" || file == "postinst" || file == "prerm" || file == "postrm" || file == "config";
      scripts |= file == "preinst" || file == "postinst";
      info_file("." + file, content, exec ? 0755 : 0644);
    }
    Paragraph st;
    for (const auto& [k, v] : d.control.fields) {
      st.fields.emplace_back(k, v);
      if (k == "Package") st.fields.emplace_back("Status", scripts ? "install ok unpacked" : "install ok installed");
    }
    if (auto cf = d.control_files.find("conffiles"); cf != d.control_files.end()) {
      std::string conf;
      for (const auto& w : split_words(cf->second)) {
        if (w[0] != '/') continue;  // "remove-on-upgrade" flags
        auto it = entries.find(through_links(w.substr(1), out.state.dir_links));
        if (it == entries.end() || it->second.type != TarEntry::Type::File) continue;
        conf += "\n" + w + " " + md5_hex(it->second.source);
      }
      if (!conf.empty()) st.set("Conffiles", conf);
    }
    status[name] = st;
    std::sort(owned[i].begin(), owned[i].end());
    out.state.files[name] = owned[i];
  }
  // What an upgraded package's old version owned and nothing owns now goes,
  // as dpkg deletes it on upgrade.
  if (!upgraded.empty()) {
    std::set<std::string> kept;
    for (const auto& [name, paths] : out.state.files) kept.insert(paths.begin(), paths.end());
    std::map<std::string, std::string> gone;  // path -> the package that dropped it
    for (const auto& name : upgraded)
      for (const auto& path : below.files.at(name))
        if (!kept.count(path) && !entries.count(path)) gone.emplace(path, name);
    for (const auto& [path, name] : gone) {
      out.owner.emplace(path, name);  // its whiteout goes with the package
      auto slash = path.rfind('/');
      TarEntry wh;
      wh.mode = 0;
      entries[(slash == std::string::npos ? "" : path.substr(0, slash + 1)) + ".wh." + path.substr(slash + 1)] = wh;
      out.removed.push_back(path);
    }
  }
  out.state.status.clear();
  std::string text;
  for (const auto& [name, p] : status) {
    out.state.status.push_back(p);
    text += p.str() + "\n";
  }
  gen.file(entries, "var/lib/dpkg/status", text);
  if (below.status.empty()) {  // the base layer: the rest of dpkg's and apt's state
    gen.file(entries, "var/lib/dpkg/available", "");
    for (const char* d : {"var/lib/dpkg/updates", "var/lib/dpkg/triggers", "var/lib/dpkg/alternatives",
                          "var/lib/dpkg/info", "var/lib/apt/lists/partial", "var/cache/apt/archives/partial"})
      gen.dir(entries, d);
  }
  if (!o.sources.empty() || !below.sources.empty()) {
    std::set<std::string> in_image;  // what packages of this layer and those below put there
    for (const auto& [name, paths] : out.state.files) in_image.insert(paths.begin(), paths.end());
    for (const auto& lr : o.sources) {
      const Repository& r = lr.repo;
      std::string signed_by;
      if (!lr.keyring.empty()) {
        // Named by the path it stands for (a package's keyring kept in the
        // store: the package's path), read from where it is.
        std::string inside = canonical_archive_path(lr.keyring_path().string());
        if (!entries.count(inside) && !in_image.count(inside)) {
          // Written once under its own name; another keyring of the same
          // name (a later layer's key.gpg) gets its digest in its name.
          std::string key = read_file(lr.keyring);
          std::string sha = Digest::of_bytes(key).hex();
          fs::path name = lr.keyring_path().filename();
          inside = "etc/apt/keyrings/" + name.string();
          auto& written = out.state.keyrings;
          if (written.count(inside) && written.at(inside) != sha)
            inside = "etc/apt/keyrings/" + name.stem().string() + "-" + sha.substr(0, 12) + name.extension().string();
          if (!written.count(inside)) {
            gen.file(entries, inside, key);
            written[inside] = sha;
          }
        }
        signed_by = "/" + inside;
      }
      std::string comps;
      for (const auto& c : r.components) comps += (comps.empty() ? "" : " ") + c;
      std::string stanza = "Types: deb\nURIs: " + r.uri + "\nSuites: " + r.suite + "\nComponents: " + comps + "\n";
      if (!signed_by.empty()) stanza += "Signed-By: " + signed_by + "\n";
      if (r.trusted) stanza += "Trusted: yes\n";
      if (!r.check_valid_until) stanza += "Check-Valid-Until: no\n";
      auto& all = out.state.sources;  // those below first, then this layer's new ones
      if (std::find(all.begin(), all.end(), stanza) == all.end()) all.push_back(stanza);
    }
    std::string sources;
    for (const auto& stanza : out.state.sources) sources += stanza + "\n";
    gen.file(entries, "etc/apt/sources.list.d/stackbuild.sources", sources);
  }
  ScanOptions so;
  so.source_date_epoch = o.epoch;
  add_parent_dirs(so, entries);
  link_hardlinks(entries);
  return out;
}

GroupFn package_groups(const Installed& installed) {
  std::set<std::string> packages;
  for (const auto& [path, name] : installed.owner) packages.insert(name);
  return [owner = installed.owner, packages = std::move(packages)](const std::string& path) -> std::string {
    if (auto it = owner.find(path); it != owner.end()) return it->second;
    static const std::string info = "var/lib/dpkg/info/";
    if (path.starts_with(info) && path.find('/', info.size()) == std::string::npos) {
      std::string name = path.substr(info.size(), path.rfind('.') > info.size() ? path.rfind('.') - info.size() : 0);
      if (packages.count(name)) return name;  // a file dpkg or a script wrote for the package
    }
    for (const char* state : {"var/lib/dpkg", "var/lib/apt", "var/cache/apt", "etc/apt"})
      if (path == state || path.starts_with(std::string(state) + "/")) return "~~dpkg-status";
    return "~" + top_level_group(path);
  };
}

}  // namespace sb::apt
