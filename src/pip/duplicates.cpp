#include "pip/duplicates.hpp"

#include <archive.h>
#include <archive_entry.h>

#include <algorithm>
#include <map>
#include <memory>

#include "layer/utf8_locale.hpp"
#include "util/error.hpp"

namespace sb::pip {

DuplicatePolicy parse_duplicate_policy(const std::string& text) {
  if (text.empty() || text == "report") return DuplicatePolicy::Report;
  if (text == "lower") return DuplicatePolicy::KeepLower;
  throw Error("duplicate library policy is 'report' or 'lower', not '" + text + "'");
}

bool is_library_name(const std::string& name) {
  if (!name.starts_with("lib")) return false;
  size_t so = name.find(".so");
  if (so == std::string::npos || so <= 3) return false;
  std::string rest = name.substr(so + 3);
  if (rest.empty()) return true;
  if (rest[0] != '.') return false;
  for (size_t i = 1; i < rest.size(); ++i)
    if (!isdigit(static_cast<unsigned char>(rest[i])) && rest[i] != '.') return false;
  return rest.size() > 1;
}

LayerListing list_layer(const std::string& name, const fs::path& blob) {
  LayerListing out{name, {}};
  Utf8Locale locale;  // the blob's pax headers hold UTF-8 names (ca-certificates has some)
  std::unique_ptr<archive, int (*)(archive*)> a(archive_read_new(), archive_read_free);
  archive_read_support_filter_all(a.get());
  archive_read_support_format_tar(a.get());
  if (archive_read_open_filename(a.get(), blob.c_str(), 1 << 16) != ARCHIVE_OK)
    throw Error("layer " + name + " (" + blob.string() + "): " + archive_error_string(a.get()));
  archive_entry* e;
  int rc;
  // ARCHIVE_WARN: a name that is not valid in the C locale (layers hold UTF-8
  // names, e.g. Debian's locale and timezone files); the UTF-8 name is read.
  while ((rc = archive_read_next_header(a.get(), &e)) == ARCHIVE_OK || rc == ARCHIVE_WARN) {
    auto type = archive_entry_filetype(e);
    const char* utf8 = archive_entry_pathname_utf8(e);
    const char* raw = archive_entry_pathname(e);
    std::string p = utf8 ? utf8 : raw ? raw : "";
    if (type == AE_IFREG || type == AE_IFLNK) out.paths.push_back(canonical_archive_path(p));
    if (type == AE_IFREG && out.paths.back() == "lib/apk/db/installed") {
      std::string text, buf(1 << 16, '\0');  // on the heap: layers are listed on small-stack threads
      for (la_ssize_t n; (n = archive_read_data(a.get(), buf.data(), buf.size())) > 0;)
        text.append(buf.data(), static_cast<size_t>(n));
      out.musl_version = musl_version_from_apk(text);
    }
  }
  if (rc != ARCHIVE_EOF) throw Error("layer " + name + ": " + archive_error_string(a.get()));
  return out;
}

std::string musl_version_from_apk(const std::string& installed) {
  // Records are blank-line separated; "P:" names the package, "V:" its version.
  size_t pos = 0;
  while ((pos = installed.find("P:musl\n", pos)) != std::string::npos) {
    if (pos != 0 && installed[pos - 1] != '\n') {
      ++pos;
      continue;
    }
    size_t end = installed.find("\n\n", pos);
    std::string rec = installed.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    size_t v = rec.find("\nV:");
    if (v == std::string::npos) return "";
    std::string ver = rec.substr(v + 3, rec.find('\n', v + 3) - (v + 3));  // 1.2.5-r0
    size_t d1 = ver.find('.');
    size_t d2 = d1 == std::string::npos ? std::string::npos : ver.find_first_not_of("0123456789", d1 + 1);
    if (d1 == std::string::npos || d1 == 0 || d2 == d1 + 1) return "";
    return ver.substr(0, d2);
  }
  return "";
}

bool detect_musl(const std::vector<LayerListing>& lower, Target& target) {
  const std::string loader = "lib/ld-musl-" + target.machine + ".so.1";
  bool musl = false;
  std::string version;
  for (const auto& l : lower) {
    if (std::find(l.paths.begin(), l.paths.end(), loader) != l.paths.end()) musl = true;
    if (!l.musl_version.empty()) version = l.musl_version;  // the topmost layer's database
  }
  if (!musl) return false;
  target.libc = "musl";
  target.libc_version = version.empty() ? "1.1" : version;
  return true;
}

LayerListing list_entries(const std::string& name, const EntryMap& entries) {
  LayerListing out{name, {}};
  for (const auto& [p, e] : entries)
    if (e.type == TarEntry::Type::File || e.type == TarEntry::Type::Symlink || e.type == TarEntry::Type::Hardlink)
      out.paths.push_back(p);
  return out;
}

std::vector<DuplicateLibrary> find_duplicate_libraries(const std::vector<LayerListing>& lower,
                                                       const std::string& upper_name, const EntryMap& upper) {
  // soname -> (layer, path) of the topmost lower copy
  std::map<std::string, std::pair<std::string, std::string>> have;
  for (const auto& l : lower)
    for (const auto& p : l.paths) {
      std::string base = fs::path(p).filename().string();
      if (is_library_name(base)) have[base] = {l.layer, p};
    }
  std::vector<DuplicateLibrary> out;
  for (const auto& [p, e] : upper) {
    if (e.type != TarEntry::Type::File) continue;
    std::string base = fs::path(p).filename().string();
    if (!is_library_name(base)) continue;
    auto it = have.find(base);
    if (it == have.end() || it->second.second == p) continue;  // same path: an overwrite, not a second copy
    out.push_back({base, it->second.first, it->second.second, upper_name, p, e.size});
  }
  return out;
}

uint64_t keep_lower(EntryMap& upper, const std::vector<DuplicateLibrary>& dups) {
  uint64_t saved = 0;
  for (const auto& d : dups) {
    auto it = upper.find(d.upper_path);
    if (it == upper.end() || it->second.type != TarEntry::Type::File) continue;
    saved += it->second.size;
    TarEntry link = it->second;
    link.type = TarEntry::Type::Symlink;
    link.mode = 0777;
    link.size = 0;
    link.source.clear();
    link.link = "/" + d.lower_path;
    link.host_dev = link.host_ino = 0;
    it->second = link;
  }
  return saved;
}

}  // namespace sb::pip
