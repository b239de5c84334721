#include "pipeline/duplicate_libraries.hpp"

#include <archive.h>
#include <archive_entry.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include "archive/libarchive.hpp"
#include "archive/read.hpp"
#include "archive/utf8_locale.hpp"
#include "util/digest.hpp"
#include "util/error.hpp"
#include "util/process.hpp"
#include "util/utf8.hpp"
#include "verify/elf.hpp"

namespace sb {

DuplicatePolicy parse_duplicate_policy(const std::string& text, const std::string& what) {
  if (text.empty() || text == "report") return DuplicatePolicy::Report;
  if (text == "lower") return DuplicatePolicy::Lower;
  if (text == "upper") return DuplicatePolicy::Upper;
  if (text == "error") return DuplicatePolicy::Error;
  throw Error(what + " is report, lower, upper or error, not '" + text + "'");
}

std::string to_string(DuplicatePolicy p) {
  switch (p) {
    case DuplicatePolicy::Report:
      return "report";
    case DuplicatePolicy::Lower:
      return "lower";
    case DuplicatePolicy::Upper:
      return "upper";
    case DuplicatePolicy::Error:
      return "error";
  }
  return "report";
}

DuplicatePolicy duplicate_policy(const LayerSpec& spec) {
  if (!spec.duplicates.empty()) return parse_duplicate_policy(spec.duplicates, "'duplicates'");
  return parse_duplicate_policy(env_or("STACKBUILD_DUPLICATE_LIBRARIES", "report"),
                                "STACKBUILD_DUPLICATE_LIBRARIES");
}

std::optional<LibraryName> library_name(const std::string& name) {
  if (!name.starts_with("lib")) return std::nullopt;
  size_t so = name.find(".so");
  if (so == std::string::npos || so <= 3) return std::nullopt;
  std::string rest = name.substr(so + 3);  // "", ".12", ".12.6.4.1"
  if (!rest.empty()) {
    if (rest[0] != '.' || rest.size() < 2 || rest.back() == '.' ||
        rest.find("..") != std::string::npos)
      return std::nullopt;
    for (size_t i = 1; i < rest.size(); ++i)
      if (!isdigit(static_cast<unsigned char>(rest[i])) && rest[i] != '.') return std::nullopt;
  }
  LibraryName out;
  size_t dot = rest.find('.', 1);
  out.soname = name.substr(0, so + 3) + rest.substr(0, dot);
  if (dot != std::string::npos) out.version = rest.substr(1);
  return out;
}

namespace {

bool under_stubs(const std::string& path) {
  return path.starts_with("stubs/") || path.find("/stubs/") != std::string::npos;
}

std::string base_name(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string dir_name(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash);
}

// "nvidia_cublas_cu12-12.6.4.1.dist-info/RECORD" in `site` -> image path -> "wheel
// nvidia-cublas-cu12 12.6.4.1".
void read_record(const std::string& record_path, const std::string& text,
                 std::map<std::string, std::string>& owner) {
  std::string info = dir_name(record_path), site = dir_name(info);
  std::string stem = base_name(info);
  stem.resize(stem.size() - std::string(".dist-info").size());
  size_t dash = stem.find('-');
  if (dash == std::string::npos) return;
  std::string name = stem.substr(0, dash), version = stem.substr(dash + 1);
  for (auto& c : name)
    c = (c == '_' || c == '.') ? '-' : static_cast<char>(tolower(static_cast<unsigned char>(c)));
  const std::string who = "wheel " + name + " " + version;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::string p;
    if (line.starts_with('"')) {
      size_t q = line.find('"', 1);
      if (q == std::string::npos) continue;
      p = line.substr(1, q - 1);
    } else {
      p = line.substr(0, line.find(','));
    }
    if (p.empty()) continue;
    std::string image =
        fs::path(site.empty() ? p : site + "/" + p).lexically_normal().generic_string();
    owner[image] = who;
  }
}

bool is_record(const std::string& path) {
  return path.ends_with(".dist-info/RECORD");
}

// A wheel's version is its library's only when it starts with the soname's
// major: nvidia-cublas-cu12 12.6.4.1 for libcublas.so.12, nvidia-nccl-cu12
// 2.26.2 for libnccl.so.2; torch 2.7.0 says nothing of the libgomp.so.1 it
// bundles, nor nvidia-nvtx-cu12 12.6.77 of libnvToolsExt.so.1.
bool wheel_versions_library(const std::string& soname, const std::string& version) {
  size_t so = soname.find(".so.");
  if (so == std::string::npos) return false;
  std::string major = soname.substr(so + 4);
  return version == major || version.starts_with(major + ".");
}

void fill_versions(std::vector<LibraryCopy>& copies,
                   const std::map<std::string, std::string>& owner) {
  for (auto& c : copies) {
    if (!c.version.empty()) continue;
    auto it = owner.find(c.path);
    if (it == owner.end()) continue;
    std::string version = it->second.substr(it->second.rfind(' ') + 1);
    if (!wheel_versions_library(c.soname, version)) continue;
    c.version = version;
    c.version_from = it->second;
  }
}

}  // namespace

Digest findings_key(const Digest& layer_key) {
  return KeyHasher().field("stackbuild-duplicate-libraries", "2").field("layer", layer_key.str()).finish();
}

void to_json(nlohmann::json& j, const LibraryCopy& c) {
  j = {{"layer", c.layer},
       {"path", c.path},
       {"soname", c.soname},
       {"version", c.version},
       {"version_from", c.version_from},
       {"bytes", c.bytes}};
}

void from_json(const nlohmann::json& j, LibraryCopy& c) {
  c.layer = j.value("layer", "");
  c.path = j.at("path").get<std::string>();
  c.soname = j.at("soname").get<std::string>();
  c.version = j.value("version", "");
  c.version_from = j.value("version_from", "");
  c.bytes = j.value("bytes", uint64_t{0});
}

void to_json(nlohmann::json& j, const DuplicateLibrary& d) {
  j = {{"lower", d.lower}, {"upper", d.upper}, {"action", d.action}, {"saved", d.saved}};
}

void from_json(const nlohmann::json& j, DuplicateLibrary& d) {
  d.lower = j.at("lower").get<LibraryCopy>();
  d.upper = j.at("upper").get<LibraryCopy>();
  d.action = j.value("action", "");
  d.saved = j.value("saved", uint64_t{0});
}

LibraryListing library_listing(const Store& store, const Layer& layer) {
  const Digest key = KeyHasher()
                         .field("stackbuild-library-listing", "2")
                         .field("blob", layer.digest.str())
                         .finish();
  if (auto rec = store.get_record("library-listing", key)) {
    auto j = nlohmann::json::parse(*rec);
    return {j.at("copies").get<std::vector<LibraryCopy>>(),
            j.at("shadows").get<std::vector<std::string>>(),
            j.at("removed").get<std::vector<std::string>>(),
            j.at("opaque").get<std::vector<std::string>>()};
  }
  const fs::path blob = store.blob_path(layer.digest);
  LibraryListing out;
  std::map<std::string, std::string> owner;
  Utf8Locale locale;  // pax headers hold UTF-8 names
  LayerReader a(blob);
  while (archive_entry* e = a.next()) {
    // The listing is a JSON record, and a base image's names need not be
    // UTF-8: such a name is listed in its shown form, and never as a copy a
    // link could point to.
    const char* archived = archived_name(archive_entry_pathname_utf8(e), archive_entry_pathname(e));
    std::string p = canonical_archive_path(printable_utf8(archived ? archived : ""));
    const bool shown_as_is = archived && valid_utf8(archived);
    std::string name = base_name(p);
    if (name == ".wh..wh..opq") {
      out.opaque.push_back(dir_name(p));
      continue;
    }
    if (name.starts_with(".wh.")) {
      std::string dir = dir_name(p);
      out.removed.push_back((dir.empty() ? "" : dir + "/") + name.substr(4));
      continue;
    }
    const auto type = archive_entry_filetype(e);
    if (type == AE_IFREG && is_record(p)) {
      std::string text, buf(1 << 16, '\0');
      for (la_ssize_t n; (n = archive_read_data(a.get(), buf.data(), buf.size())) > 0;)
        text.append(buf.data(), static_cast<size_t>(n));
      read_record(p, text, owner);
      continue;
    }
    auto lib = library_name(name);
    if (!lib) continue;
    char magic[4] = {};
    bool elf = type == AE_IFREG && archive_entry_size(e) >= 4 &&
               archive_read_data(a.get(), magic, 4) == 4 && magic[0] == 0x7f && magic[1] == 'E' &&
               magic[2] == 'L' && magic[3] == 'F';
    if (elf && shown_as_is && !under_stubs(p))
      out.copies.push_back({"", p, lib->soname, lib->version,
                            lib->version.empty() ? "" : "file name",
                            static_cast<uint64_t>(archive_entry_size(e))});
    else
      out.shadows.push_back(p);
  }
  fill_versions(out.copies, owner);
  nlohmann::json j = {{"copies", out.copies},
                      {"shadows", out.shadows},
                      {"removed", out.removed},
                      {"opaque", out.opaque}};
  store.put_record("library-listing", key, j.dump());
  return out;
}

std::vector<LibraryCopy> visible_libraries(const Store& store, const std::vector<Layer>& layers,
                                           const std::vector<std::string>& names) {
  std::map<std::string, std::pair<size_t, LibraryCopy>> seen;  // path -> (layer index, copy)
  auto erase_under = [&](const std::string& dir) {
    const std::string prefix = dir.empty() ? "" : dir + "/";
    for (auto it = seen.lower_bound(prefix); it != seen.end() && it->first.starts_with(prefix);)
      it = seen.erase(it);
  };
  for (size_t i = 0; i < layers.size(); ++i) {
    LibraryListing l = library_listing(store, layers[i]);
    for (const auto& d : l.opaque) erase_under(d);
    for (const auto& r : l.removed) seen.erase(r), erase_under(r);
    for (const auto& s : l.shadows) seen.erase(s);
    for (auto& c : l.copies) {
      c.layer = i < names.size() ? names[i] : "#" + std::to_string(i + 1);
      const std::string path =
          c.path;  // the right side is evaluated first: c is moved from before seen[] runs
      seen[path] = {i, std::move(c)};
    }
  }
  std::vector<std::pair<size_t, LibraryCopy>> ordered;
  for (auto& [p, v] : seen) ordered.push_back(std::move(v));
  std::stable_sort(ordered.begin(), ordered.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<LibraryCopy> out;
  for (auto& [i, c] : ordered) out.push_back(std::move(c));
  return out;
}

std::vector<LibraryCopy> entry_libraries(const std::string& layer, const EntryMap& entries) {
  std::map<std::string, std::string> owner;
  for (const auto& [p, e] : entries) {
    if (e.type != TarEntry::Type::File || !is_record(p) || e.source.empty()) continue;
    std::ifstream in(e.source, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    read_record(p, text.str(), owner);
  }
  std::vector<LibraryCopy> out;
  for (const auto& [p, e] : entries) {
    if (e.type != TarEntry::Type::File || e.source.empty() || under_stubs(p)) continue;
    auto lib = library_name(base_name(p));
    if (!lib || !verify::is_elf(e.source)) continue;
    LibraryCopy c{layer, p, lib->soname, lib->version, lib->version.empty() ? "" : "file name",
                  e.size};
    try {
      // The loader's name for it: a wheel's libfoo.so may say libfoo.so.1.
      if (auto info = verify::read_elf(e.source); info && !info->soname.empty())
        if (auto by_soname = library_name(info->soname)) c.soname = by_soname->soname;
    } catch (const Error&) {
      // A malformed ELF file: known by its file name only.
    }
    out.push_back(std::move(c));
  }
  fill_versions(out, owner);
  return out;
}

std::vector<DuplicateLibrary> find_duplicates(const std::vector<LibraryCopy>& lower,
                                              const std::vector<LibraryCopy>& upper) {
  std::vector<DuplicateLibrary> out;
  for (const auto& u : upper)
    for (const auto& l :
         lower)  // bottom first: the last pair of an upper copy is the topmost lower copy
      if (l.soname == u.soname && l.path != u.path) out.push_back({l, u, "reported", 0});
  return out;
}

std::optional<int> compare_library_versions(const std::string& a, const std::string& b) {
  if (a.empty() || b.empty()) return std::nullopt;
  std::istringstream x(a), y(b);
  for (std::string p, q; std::getline(x, p, '.') && std::getline(y, q, '.');) {
    long long m = 0, n = 0;
    try {
      m = std::stoll(p), n = std::stoll(q);
    } catch (const std::exception&) {
      return std::nullopt;
    }
    if (m != n) return m < n ? -1 : 1;
  }
  return 0;
}

namespace {

std::string version_text(const LibraryCopy& c) {
  return c.version.empty() ? "version unknown" : c.version + " from the " + c.version_from;
}

TarEntry symlink_to(const std::string& target, const TarEntry& like) {
  TarEntry link;
  link.type = TarEntry::Type::Symlink;
  link.mode = 0777;
  link.uid = like.uid;
  link.gid = like.gid;
  link.mtime = like.mtime;
  link.link =
      "/" +
      target;  // absolute: a relative one would break under a symlinked parent (/lib -> usr/lib)
  return link;
}

}  // namespace

void apply_duplicate_policy(DuplicatePolicy policy, const std::string& layer,
                            std::vector<DuplicateLibrary>& dups, EntryMap& entries) {
  if (dups.empty()) return;
  if (policy == DuplicatePolicy::Report) {
    for (auto& d : dups) d.action = "reported";
    return;
  }
  if (policy == DuplicatePolicy::Error) {
    std::string all;
    for (const auto& d : dups) all += "\n  " + describe(d);
    throw Error("layer " + layer + " holds " +
                counted(dups.size(), "shared library", "shared libraries") +
                " that a lower layer already has, and its duplicates policy is error:" + all);
  }
  // Refused before anything changes: the newer copy's users may need what it added.
  for (const auto& d : dups) {
    auto cmp = compare_library_versions(d.lower.version, d.upper.version);
    if (policy == DuplicatePolicy::Lower && cmp && *cmp < 0)
      throw Error("layer " + layer + ": duplicates: lower would make /" + d.upper.path + " (" +
                  d.upper.version + ") a link to the older /" + d.lower.path + " (" +
                  d.lower.version + ", layer " + d.lower.layer +
                  "); what this layer installs may need the newer " + d.upper.soname +
                  ". Use `duplicates: upper` (the newer copy serves both layers), `report`, or a "
                  "lower layer with " +
                  d.upper.soname + " " + d.upper.version + " or later");
    if (policy == DuplicatePolicy::Upper && cmp && *cmp > 0)
      throw Error("layer " + layer + ": duplicates: upper would make /" + d.lower.path + " (" +
                  d.lower.version + ", layer " + d.lower.layer + ") a link to the older /" +
                  d.upper.path + " (" + d.upper.version +
                  "); what the lower layer installs may need the newer " + d.lower.soname +
                  ". Use `duplicates: lower` (which also saves the bytes), `report`, or " +
                  d.upper.soname + " " + d.lower.version + " or later in this layer");
  }
  if (policy == DuplicatePolicy::Lower) {
    std::map<std::string, const DuplicateLibrary*> target;  // upper path -> its topmost lower copy
    for (const auto& d : dups) target[d.upper.path] = &d;
    for (const auto& [path, d] : target) {
      auto it = entries.find(path);
      if (it == entries.end() || it->second.type != TarEntry::Type::File) continue;
      it->second = symlink_to(d->lower.path, it->second);
    }
    for (auto& d : dups) {
      d.action = "/" + d.upper.path + " linked to /" + target[d.upper.path]->lower.path;
      d.saved = &d == target[d.upper.path] ? d.upper.bytes : 0;
    }
    return;
  }
  // Upper: each lower path becomes a link to the (first) upper copy of its soname.
  std::map<std::string, std::string> to;  // lower path -> upper path
  for (const auto& d : dups) to.emplace(d.lower.path, d.upper.path);
  for (const auto& [lower, upper] : to) {
    if (entries.count(lower)) continue;  // this layer writes that path itself
    entries[lower] = symlink_to(upper, entries.at(upper));
  }
  for (auto& d : dups) {
    d.action = "/" + d.lower.path + " linked to /" + to[d.lower.path] + " (saves nothing: layer " +
               d.lower.layer + " still holds its bytes)";
    d.saved = 0;
  }
}

void check_duplicate_libraries(const LayerSpec& spec, const std::vector<Layer>& below,
                               const std::vector<std::string>& below_names, const Store& store,
                               EntryMap& entries, const Digest& key) {
  const DuplicatePolicy policy = duplicate_policy(spec);
  std::vector<LibraryCopy> upper = entry_libraries(spec.name, entries);
  if (upper.empty() || below.empty()) return;  // nothing to compare: the lower layers are not read
  auto dups = find_duplicates(visible_libraries(store, below, below_names), upper);
  if (dups.empty()) return;
  try {
    apply_duplicate_policy(policy, spec.name, dups, entries);
  } catch (const Error& e) {
    throw InputError(
        spec.at("duplicates"), e.what(),
        "`duplicates:` on the layer (or STACKBUILD_DUPLICATE_LIBRARIES) says which copy wins: "
        "report, lower, upper or error; see docs/layers.md");
  }
  store.put_record("duplicate-libraries", findings_key(key), nlohmann::json(dups).dump());
}

std::vector<DuplicateLibrary> duplicates_of(const Store& store, const Digest& key) {
  auto rec = store.get_record("duplicate-libraries", findings_key(key));
  if (!rec) return {};
  return nlohmann::json::parse(*rec).get<std::vector<DuplicateLibrary>>();
}

std::string describe(const DuplicateLibrary& d) {
  auto one = [](const LibraryCopy& c) {
    return "/" + c.path + " in layer " + c.layer + " (" + version_text(c) + ", " +
           human_bytes(static_cast<double>(c.bytes)) + ")";
  };
  return d.upper.soname + " twice: " + one(d.upper) + " and " + one(d.lower);
}

std::string duplicate_outcome(const DuplicateLibrary& d) {
  if (d.action != "reported")
    return d.action +
           (d.saved ? ", saving " + human_bytes(static_cast<double>(d.saved)) : std::string());
  auto cmp = compare_library_versions(d.lower.version, d.upper.version);
  if (cmp && *cmp < 0)
    return "the lower copy is older, so `duplicates: lower` would be refused; `duplicates: upper` "
           "makes the upper "
           "copy serve both layers (saving nothing), or give the lower layer " +
           d.upper.soname + " " + d.upper.version;
  return "`duplicates: lower` would save " + human_bytes(static_cast<double>(d.upper.bytes));
}

std::string duplicate_summary(const std::vector<DuplicateLibrary>& dups) {
  std::map<std::string, std::pair<uint64_t, bool>> upper;  // layer + path -> bytes, saved
  uint64_t saved = 0;
  for (const auto& d : dups) {
    auto& u = upper[d.upper.layer + "\n" + d.upper.path];
    u.first = d.upper.bytes;
    u.second = u.second || d.saved;
    saved += d.saved;
  }
  uint64_t twice = 0;
  size_t kept = 0;
  for (const auto& [k, u] : upper)
    if (!u.second) twice += u.first, ++kept;
  return "duplicate libraries: " + counted(upper.size(), "second copy", "second copies") +
         " of a library a lower layer has; " + human_bytes(static_cast<double>(saved)) +
         " saved by `duplicates: lower`, " + human_bytes(static_cast<double>(twice)) +
         " still stored twice (" + counted(kept, "copy", "copies") + ")";
}

}  // namespace sb
