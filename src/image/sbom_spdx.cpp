// An image's SBOM as an SPDX 2.3 JSON document: the image is the package the
// document DESCRIBES; it CONTAINS every package found in it; packages that
// depend on others of the image say so (DEPENDS_ON). Nothing in it comes from
// the clock: the document's time is the image's own created time.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <ctime>
#include <functional>
#include <regex>
#include <set>

#include <nlohmann/json.hpp>

#include "image/image.hpp"
#include "image/sbom.hpp"
#include "util/digest.hpp"
#include "util/error.hpp"
#include "util/text.hpp"
#include "util/version.hpp"

namespace sb::sbom {

using ojson = nlohmann::ordered_json;

namespace {

// SPDX license list identifiers a package here commonly states. An identifier
// that is not among them is passed on as the package's own words
// (licenseComments), not guessed.
const std::set<std::string, std::less<>>& known_licenses() {
  static const std::set<std::string, std::less<>> ids = {
      "0BSD", "AFL-2.1", "AGPL-3.0-only", "AGPL-3.0-or-later", "Apache-1.1", "Apache-2.0", "Artistic-1.0",
      "Artistic-1.0-Perl", "Artistic-2.0", "BSD-1-Clause", "BSD-2-Clause", "BSD-3-Clause", "BSD-3-Clause-Clear",
      "BSD-4-Clause", "BSD-4-Clause-UC", "BSL-1.0", "bzip2-1.0.6", "CC-BY-3.0", "CC-BY-4.0", "CC-BY-SA-4.0", "CC0-1.0", "CDDL-1.0",
      "curl", "EPL-1.0", "EPL-2.0", "FSFAP", "FSFUL", "FSFULLR", "FTL", "GFDL-1.2-only", "GFDL-1.2-or-later", "GFDL-1.2-no-invariants-only",
      "GFDL-1.2-no-invariants-or-later", "GFDL-1.3-only", "GFDL-1.3-or-later", "GFDL-1.3-no-invariants-only",
      "GFDL-1.3-no-invariants-or-later", "GPL-1.0-only",
      "GPL-1.0-or-later", "GPL-2.0-only",
      "GPL-2.0-or-later", "GPL-3.0-only", "GPL-3.0-or-later", "HPND", "ICU", "IJG", "ISC", "LGPL-2.0-only",
      "LGPL-2.0-or-later", "LGPL-2.1-only", "LGPL-2.1-or-later", "LGPL-3.0-only", "LGPL-3.0-or-later", "libpng-2.0",
      "MIT", "MIT-0", "MS-PL", "MPL-1.1", "MPL-2.0", "NCSA", "OFL-1.1", "OpenSSL", "PostgreSQL", "PSF-2.0", "Python-2.0", "Ruby", "Sleepycat",
      "Unicode-3.0", "Unicode-DFS-2016", "Unlicense", "Vim", "W3C", "X11", "Zlib", "ZPL-2.1"};
  return ids;
}

const std::set<std::string, std::less<>>& known_exceptions() {
  static const std::set<std::string, std::less<>> ids = {
      "Autoconf-exception-3.0", "Bison-exception-2.2", "Classpath-exception-2.0", "GCC-exception-3.1",
      "LLVM-exception", "Linux-syscall-note", "OpenSSL-exception"};
  return ids;
}

std::string spdx_id(const std::string& id) { return "SPDXRef-" + id; }

// "Name <email>" -> "Person: Name (email)", as SPDX writes a supplier.
std::string supplier_of(const std::string& s, const char* kind) {
  auto [name, email] = split_contact(s);
  if (name.empty()) return "NOASSERTION";
  return std::string(kind) + ": " + name + (email.empty() ? "" : " (" + email + ")");
}

}  // namespace

std::pair<std::string, std::string> split_contact(const std::string& s) {
  std::string t = trim(s);
  size_t lt = t.find('<'), gt = t.rfind('>');
  if (lt == std::string::npos || gt == std::string::npos || gt < lt) return {t, ""};
  std::string name = trim(t.substr(0, lt)), email = trim(t.substr(lt + 1, gt - lt - 1));
  return {name.empty() ? email : name, email};
}

std::string image_uuid(const ImageInfo& image) {
  // A name-based UUID (version 5's layout, from SHA-256) of the manifest digest.
  std::string h = Digest::of_bytes("stackbuild sbom\n" + image.manifest_digest).hex();
  h[12] = '5';
  h[16] = "89ab"[std::stoi(h.substr(16, 1), nullptr, 16) & 3];
  return h.substr(0, 8) + "-" + h.substr(8, 4) + "-" + h.substr(12, 4) + "-" + h.substr(16, 4) + "-" + h.substr(20, 12);
}

std::string image_purl(const ImageInfo& image) {
  // pkg:oci/NAME@sha256:HEX?arch=..&tag=..: NAME is the repository's last
  // component, lowercased; no namespace (the purl spec's oci type).
  std::string name = image.name, tag;
  size_t at = name.find('@');
  if (at != std::string::npos) name.resize(at);
  size_t colon = name.rfind(':');
  if (colon != std::string::npos && name.find('/', colon) == std::string::npos) {
    tag = name.substr(colon + 1);
    name.resize(colon);
  }
  name = name.substr(name.rfind('/') == std::string::npos ? 0 : name.rfind('/') + 1);
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  std::string s = "pkg:oci/" + purl_encode(name.empty() ? "image" : name) + "@" + purl_encode(image.manifest_digest);
  char sep = '?';
  if (!image.architecture.empty()) s += std::string(1, sep) + "arch=" + purl_encode(image.architecture), sep = '&';
  if (!tag.empty()) s += std::string(1, sep) + "tag=" + purl_encode(tag);
  return s;
}

namespace {

// `where` as a package's downloadLocation when it is one SPDX accepts (a URL
// of a named host, a VCS locator "git+https://host/repo@ref"); else
// NOASSERTION: a file:// URL or a bare address says nothing to a reader
// elsewhere (the purl and the comment still have it).
std::string download_location(const std::string& where) {
  static const std::regex spdx_location(
      R"(^((git|hg|svn|bzr)\+)?(https?://(www\.)?|ssh://|git://|svn://|sftp://|ftp://)?)"
      R"(([\w\-.!~*'()%;:&=+$,]+@)?[a-z0-9]+([\-.][a-z0-9]+){0,100}\.[a-z]{2,5}(:[0-9]{1,5})?(/.*)?$)",
      std::regex::icase);
  return !where.empty() && where.size() < 2000 && std::regex_match(where, spdx_location)
             ? where
             : "NOASSERTION";
}

ojson package_json(const Package& p) {
  ojson j;
  j["name"] = p.name;
  j["SPDXID"] = spdx_id(p.id);
  if (!p.version.empty()) j["versionInfo"] = p.version;
  j["supplier"] =
      supplier_of(p.supplier, p.type == "cuda" || p.type == "source" ? "Organization" : "Person");
  j["downloadLocation"] = download_location(p.download);
  j["filesAnalyzed"] = false;
  if (!p.sha256.empty())
    j["checksums"] = ojson::array({{{"algorithm", "SHA256"}, {"checksumValue", p.sha256}}});
  if (!p.homepage.empty() && (p.homepage.starts_with("http://") || p.homepage.starts_with("https://")))
    j["homepage"] = p.homepage;
  if (!p.source.empty()) j["sourceInfo"] = "built from the source package " + p.source;
  j["licenseConcluded"] = "NOASSERTION";
  bool known = !p.license.empty() && license_expression_known(p.license, true);
  j["licenseDeclared"] = known ? p.license : "NOASSERTION";
  std::string words = p.license_text.empty() && !known ? p.license : p.license_text;
  if (!words.empty()) j["licenseComments"] = "the package states: " + words;
  j["copyrightText"] = "NOASSERTION";
  if (!p.summary.empty()) j["summary"] = p.summary;
  j["comment"] = p.comment.empty() ? "found in " + p.file : p.comment;
  j["externalRefs"] = ojson::array(
      {{{"referenceCategory", "PACKAGE-MANAGER"}, {"referenceType", "purl"}, {"referenceLocator", p.purl}}});
  // An OS package, a source tree, else a library.
  j["primaryPackagePurpose"] = p.type == "deb" || p.type == "apk" ? "INSTALL"
                               : p.type == "source"               ? "SOURCE"
                                                                  : "LIBRARY";
  return j;
}

}  // namespace

std::string spdx_time(const std::string& t) {
  int y, mo, d, h, mi, sec, n = 0;
  if (t.size() < 19 || sscanf(t.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &sec, &n) != 6 || n != 19)
    return "";
  size_t i = 19;
  if (i < t.size() && t[i] == '.')
    while (++i < t.size() && std::isdigit(static_cast<unsigned char>(t[i]))) {
    }
  long offset = 0;
  std::string zone = t.substr(i);
  if (zone.size() == 6 && (zone[0] == '+' || zone[0] == '-') && zone[3] == ':') {
    offset = (std::stol(zone.substr(1, 2)) * 60 + std::stol(zone.substr(4, 2))) * 60 * (zone[0] == '-' ? -1 : 1);
  } else if (zone != "Z" && zone != "z") {
    return "";
  }
  struct tm tm = {};
  tm.tm_year = y - 1900, tm.tm_mon = mo - 1, tm.tm_mday = d, tm.tm_hour = h, tm.tm_min = mi, tm.tm_sec = sec;
  time_t utc = timegm(&tm) - offset;
  struct tm out;
  gmtime_r(&utc, &out);
  char buf[32];
  strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &out);
  return buf;
}

ImageInfo image_info(const std::string& name, const Digest& manifest, const std::string& config_json) {
  ImageInfo info;
  info.name = name;
  info.manifest_digest = manifest.str();
  info.tool = std::string("stackbuild-") + kStackbuildVersion;
  // Read as test and run read it: a field of the wrong type is refused by name.
  auto cfg = parse_config_document(config_json, "the config of " + name);
  ImageConfig config = image_config_from(cfg, "the config of " + name);
  info.architecture = config.architecture;
  info.labels = config.labels;
  if (auto it = cfg.find("created"); it != cfg.end() && !it->is_null()) {
    if (!it->is_string()) throw Error("the config of " + name + ": created is not a string");
    info.created = spdx_time(it->get<std::string>());
  }
  return info;
}

std::string image_sbom(const Store& store, const std::string& name, const Digest& manifest,
                       const std::string& config_json, const std::vector<std::pair<Digest, fs::path>>& layers,
                       Format format) {
  ImageInfo info = image_info(name, manifest, config_json);
  Contents c = image_contents(store, info, layers);
  return format == Format::Spdx ? spdx_json(c, info) : cyclonedx_json(c, info);
}

const std::map<std::string, std::string>& sbom_annotations(Format format) {
  static const std::map<std::string, std::string> spdx{{"org.opencontainers.image.title", "SBOM (SPDX 2.3)"}};
  static const std::map<std::string, std::string> cyclonedx{
      {"org.opencontainers.image.title", "SBOM (CycloneDX 1.5)"}};
  return format == Format::Spdx ? spdx : cyclonedx;
}

std::string sbom_name(const std::string& manifest_json, const std::string& tag, const std::string& fallback) {
  auto m = nlohmann::json::parse(manifest_json, nullptr, false);
  std::string title;
  if (m.is_object() && m.contains("annotations") && m["annotations"].is_object()) {
    const auto& a = m["annotations"];
    if (a.contains("org.opencontainers.image.title") && a["org.opencontainers.image.title"].is_string())
      title = a["org.opencontainers.image.title"].get<std::string>();
  }
  if (title.empty()) return fallback;
  return tag.empty() ? title : title + ":" + tag;
}

// The member of `ids` spelled `name` in any case; "" when none.
static std::string id_in(const std::set<std::string, std::less<>>& ids, std::string_view name) {
  std::string want = ascii_lower(name);
  for (const auto& id : ids)
    if (ascii_lower(id) == want) return id;
  return "";
}

std::string spdx_license_id(std::string_view name) { return id_in(known_licenses(), name); }
std::string spdx_exception_id(std::string_view name) { return id_in(known_exceptions(), name); }

std::string license_ref(std::string_view name) {
  std::string out = "LicenseRef-";
  for (char c : name) {
    if (c == '+') out += "-plus";
    else out += std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' ? c : '-';
  }
  return out;
}

bool license_expression_known(std::string_view expr, bool refs) {
  // Tokens: identifiers (with an optional '+'), AND, OR, WITH, '(' and ')'.
  std::vector<std::string> tokens;
  std::string cur;
  for (char c : expr) {
    if (c == '(' || c == ')' || c == ' ' || c == '\t') {
      if (!cur.empty()) tokens.push_back(cur), cur.clear();
      if (c == '(' || c == ')') tokens.emplace_back(1, c);
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) tokens.push_back(cur);
  // expr := term ((AND|OR) term)*; term := '(' expr ')' | ID ['+'] [WITH EXC]
  size_t i = 0;
  std::function<bool()> expression;
  auto term = [&]() -> bool {
    if (i >= tokens.size()) return false;
    if (tokens[i] == "(") {
      ++i;
      if (!expression() || i >= tokens.size() || tokens[i] != ")") return false;
      ++i;
      return true;
    }
    std::string id = tokens[i++];
    if (refs && id.starts_with("LicenseRef-") && id.size() > 11 &&
        id.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.-", 11) == std::string::npos)
      return true;  // no WITH after a LicenseRef
    if (id.ends_with("+")) id.pop_back();
    if (!known_licenses().count(id)) return false;
    if (i < tokens.size() && tokens[i] == "WITH") {
      if (++i >= tokens.size() || !known_exceptions().count(tokens[i])) return false;
      ++i;
    }
    return true;
  };
  expression = [&]() -> bool {
    if (!term()) return false;
    while (i < tokens.size() && (tokens[i] == "AND" || tokens[i] == "OR")) {
      ++i;
      if (!term()) return false;
    }
    return true;
  };
  return expression() && i == tokens.size();
}

std::string spdx_json(const Contents& contents, const ImageInfo& image) {
  ojson doc;
  doc["spdxVersion"] = "SPDX-2.3";
  doc["dataLicense"] = "CC0-1.0";
  doc["SPDXID"] = "SPDXRef-DOCUMENT";
  doc["name"] = image.name;
  doc["documentNamespace"] = "urn:uuid:" + image_uuid(image);  // a URI unique to this image
  ojson creators = ojson::array({"Tool: " + image.tool});
  doc["creationInfo"] = {{"created", image.created.empty() ? "1970-01-01T00:00:00Z" : image.created},
                         {"creators", creators}};
  if (!contents.os_name.empty())
    doc["comment"] = "the image's operating system: " + contents.os_name;

  ojson packages = ojson::array();
  ojson img;
  img["name"] = image.name;
  img["SPDXID"] = "SPDXRef-Image";
  img["versionInfo"] = image.manifest_digest;
  // The image's own supplier: its org.opencontainers.image.vendor label ("the
  // distributing entity"), which a recipe sets in config.labels.
  auto vendor = image.labels.find("org.opencontainers.image.vendor");
  img["supplier"] = vendor == image.labels.end() ? "NOASSERTION" : supplier_of(vendor->second, "Organization");
  img["downloadLocation"] = "NOASSERTION";
  img["filesAnalyzed"] = false;
  img["licenseConcluded"] = "NOASSERTION";
  img["licenseDeclared"] = "NOASSERTION";
  img["copyrightText"] = "NOASSERTION";
  img["checksums"] = ojson::array({{{"algorithm", "SHA256"}, {"checksumValue", image.manifest_digest.substr(7)}}});
  std::string components;
  for (const auto& [k, v] : image.labels)
    if (k.starts_with("dev.stackbuild.version."))
      components += (components.empty() ? "" : ", ") + k.substr(23) + " " + v;
  img["comment"] = "the OCI image manifest " + image.manifest_digest +
                   (components.empty() ? "" : "; its stack's components: " + components);
  img["externalRefs"] = ojson::array(
      {{{"referenceCategory", "PACKAGE-MANAGER"}, {"referenceType", "purl"}, {"referenceLocator", image_purl(image)}}});
  img["primaryPackagePurpose"] = "CONTAINER";
  packages.push_back(img);
  for (const auto& p : contents.packages) packages.push_back(package_json(p));
  doc["packages"] = packages;
  // Each LicenseRef a declared license uses, defined as SPDX requires. Its
  // text is not in the document: the packages' own files hold it.
  std::set<std::string> refs;
  for (const auto& p : contents.packages) {
    if (p.license.empty() || !license_expression_known(p.license, true)) continue;
    for (size_t at = p.license.find("LicenseRef-"); at != std::string::npos; at = p.license.find("LicenseRef-", at + 1)) {
      size_t end = p.license.find_first_of(" ()", at);
      refs.insert(p.license.substr(at, end == std::string::npos ? std::string::npos : end - at));
    }
  }
  if (!refs.empty()) {
    ojson infos = ojson::array();
    for (const auto& r : refs)
      infos.push_back({{"licenseId", r},
                       {"name", r.substr(11)},
                       {"extractedText", "A license without an SPDX identifier, named \"" + r.substr(11) +
                                             "\" (as stackbuild writes it) by the packages that state it: in a "
                                             "Debian package's copyright file (/usr/share/doc/PACKAGE/copyright), "
                                             "whose License paragraph of that name holds its text, or in a "
                                             "Python project's License-Expression."}});
    doc["hasExtractedLicensingInfos"] = infos;
  }

  ojson rels = ojson::array();
  auto rel = [&](const std::string& a, const char* type, const std::string& b) {
    rels.push_back({{"spdxElementId", a}, {"relationshipType", type}, {"relatedSpdxElement", b}});
  };
  rel("SPDXRef-DOCUMENT", "DESCRIBES", "SPDXRef-Image");
  // A source tree not kept in the image is not in it; one compiled into it, the image is generated
  // from.
  for (const auto& p : contents.packages)
    if (p.type != "source" || !p.file.empty()) rel("SPDXRef-Image", "CONTAINS", spdx_id(p.id));
  for (const auto& p : contents.packages)
    if (p.built) rel("SPDXRef-Image", "GENERATED_FROM", spdx_id(p.id));
  for (const auto& p : contents.packages)
    for (const auto& d : p.depends) rel(spdx_id(p.id), "DEPENDS_ON", spdx_id(d));
  doc["relationships"] = rels;
  return doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";  // a name from outside
}

}  // namespace sb::sbom
