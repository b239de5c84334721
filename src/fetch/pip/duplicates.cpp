#include "fetch/pip/duplicates.hpp"

#include <archive.h>
#include <archive_entry.h>

#include <algorithm>
#include <map>
#include <memory>

#include "archive/libarchive.hpp"
#include "archive/read.hpp"
#include "archive/utf8_locale.hpp"
#include "util/error.hpp"
#include "util/utf8.hpp"

namespace sb::pip {

LayerListing list_layer(const std::string& name, const fs::path& blob) {
  LayerListing out{name, {}};
  Utf8Locale locale;  // the blob's pax headers hold UTF-8 names (ca-certificates has some)
  LayerReader a(blob);
  // ARCHIVE_WARN: a name that is not valid in the C locale (layers hold UTF-8
  // names, e.g. Debian's locale and timezone files); the UTF-8 name is read.
  while (archive_entry* e = a.next()) {
    auto type = archive_entry_filetype(e);
    // Shown form: the listing is a JSON record, and a base image's name need
    // not be UTF-8 (such a name matches no wheel's or library's).
    const char* name = archived_name(archive_entry_pathname_utf8(e), archive_entry_pathname(e));
    std::string p = printable_utf8(name ? name : "");
    if (type == AE_IFREG || type == AE_IFLNK) out.paths.push_back(canonical_archive_path(p));
    if (type == AE_IFREG && out.paths.back() == "lib/apk/db/installed") {
      std::string text, buf(1 << 16, '\0');  // on the heap: layers are listed on small-stack threads
      for (la_ssize_t n; (n = archive_read_data(a.get(), buf.data(), buf.size())) > 0;)
        text.append(buf.data(), static_cast<size_t>(n));
      out.musl_version = musl_version_from_apk(text);
    }
  }
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

}  // namespace sb::pip
