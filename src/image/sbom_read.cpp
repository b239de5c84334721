// An SBOM document read back into Contents: what release notes compare when
// an image's layers are not at hand (an image in a registry with its SBOM
// attached). SPDX 2.x and CycloneDX 1.x JSON, as stackbuild or another tool
// writes them; what identifies a package across both is its purl.
#include <algorithm>
#include <cctype>
#include <set>
#include <tuple>

#include <nlohmann/json.hpp>

#include "image/sbom.hpp"
#include "util/error.hpp"
#include "util/utf8.hpp"

namespace sb::sbom {

namespace {

using json = nlohmann::json;

int purl_hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Percent-decoded: any bytes. Those that are not UTF-8 come back as \xHH,
// as read_contents shows a database's bytes, so that the value compares
// equal to what the image's layers give and JSON (notes --data) can hold it.
std::string purl_decoded(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && purl_hex(s[i + 1]) >= 0 && purl_hex(s[i + 2]) >= 0) {
      out += static_cast<char>(purl_hex(s[i + 1]) * 16 + purl_hex(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return printable_utf8(out);
}

// A package's kind and architecture from its purl: "pkg:deb/debian/libc6@2.36?arch=amd64"
// -> ("deb", "amd64"). The kinds stackbuild's own reader gives: pypi is
// "python", NVIDIA's generic purls (the CUDA toolkit's version.json) are "cuda".
std::pair<std::string, std::string> purl_kind_and_arch(const std::string& purl) {
  if (!purl.starts_with("pkg:")) return {"", ""};
  std::string rest = purl.substr(4);
  size_t slash = rest.find('/');
  std::string type = rest.substr(0, slash);
  for (auto& c : type) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string arch;
  size_t q = rest.find('?');
  if (q != std::string::npos) {
    std::string qs = rest.substr(q + 1, rest.find('#', q) - q - 1);
    for (size_t p = 0; p <= qs.size();) {
      size_t e = qs.find('&', p);
      if (e == std::string::npos) e = qs.size();
      std::string kv = qs.substr(p, e - p);
      if (kv.starts_with("arch=")) arch = purl_decoded(kv.substr(5));
      p = e + 1;
    }
  }
  if (type == "pypi") type = "python";
  if (type == "generic" && slash != std::string::npos && rest.compare(slash + 1, 7, "nvidia/") == 0)
    type = "cuda";
  return {type, arch};
}

std::string doc_string(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

// `source`: the document says it is a source tree (SPDX's purpose SOURCE,
// stackbuild's CycloneDX property stackbuild:kind), whatever its purl.
void add_listed_package(Contents& c, const std::string& name, const std::string& version,
                        const std::string& purl, const std::string& id, bool source = false) {
  if (name.empty()) return;
  Package p;
  auto [kind, arch] = purl_kind_and_arch(purl);
  p.type = source ? "source" : kind.empty() ? "unknown" : kind;
  p.name = name;
  p.version = version;
  p.arch = arch;
  p.purl = purl;
  p.id = id;
  c.packages.push_back(std::move(p));
}

Contents read_spdx_doc(const json& doc, std::string* described) {
  Contents c;
  std::string comment = doc_string(doc, "comment");
  const std::string os_prefix = "the image's operating system: ";  // as spdx_json() writes it
  if (comment.starts_with(os_prefix)) c.os_name = comment.substr(os_prefix.size());
  std::set<std::string> top;  // what the document describes: the image, not a package in it
  for (const auto& d : doc.value("documentDescribes", json::array()))
    if (d.is_string()) top.insert(d.get<std::string>());
  for (const auto& r : doc.value("relationships", json::array()))
    if (r.is_object() && doc_string(r, "relationshipType") == "DESCRIBES" &&
        doc_string(r, "spdxElementId") == "SPDXRef-DOCUMENT")
      top.insert(doc_string(r, "relatedSpdxElement"));
  for (const auto& p : doc.value("packages", json::array())) {
    if (!p.is_object()) continue;
    std::string purl;
    for (const auto& r : p.value("externalRefs", json::array()))
      if (r.is_object() && doc_string(r, "referenceType") == "purl")
        purl = doc_string(r, "referenceLocator");
    if (top.count(doc_string(p, "SPDXID"))) {
      if (described)
        for (const auto& ck : p.value("checksums", json::array()))
          if (ck.is_object() && doc_string(ck, "algorithm") == "SHA256")
            *described = "sha256:" + doc_string(ck, "checksumValue");
      continue;
    }
    add_listed_package(c, doc_string(p, "name"), doc_string(p, "versionInfo"), purl,
                       doc_string(p, "SPDXID"), doc_string(p, "primaryPackagePurpose") == "SOURCE");
  }
  return c;
}

void add_cyclonedx_components(Contents& c, const json& list, int depth = 0) {
  if (depth > 32) throw Error("the SBOM's components nest more than 32 deep", ErrorKind::Input);
  for (const auto& p : list) {
    if (!p.is_object()) continue;
    bool source = false;
    if (p.contains("properties") && p["properties"].is_array())
      for (const auto& q : p["properties"])
        if (q.is_object() && doc_string(q, "name") == "stackbuild:kind" &&
            doc_string(q, "value") == "source")
          source = true;
    add_listed_package(c, doc_string(p, "name"), doc_string(p, "version"), doc_string(p, "purl"),
                       doc_string(p, "bom-ref"), source);
    if (p.contains("components"))  // nested, as some tools write them
      add_cyclonedx_components(c, p["components"], depth + 1);
  }
}

Contents read_cyclonedx_doc(const json& doc, std::string* described) {
  Contents c;
  json meta = doc.value("metadata", json::object());
  json top = meta.is_object() ? meta.value("component", json::object()) : json::object();
  if (!top.is_object()) top = json::object();
  for (const auto& pr : top.value("properties", json::array()))
    if (pr.is_object() && doc_string(pr, "name") == "stackbuild:os")
      c.os_name = doc_string(pr, "value");
  if (described)
    for (const auto& h : top.value("hashes", json::array()))
      if (h.is_object() && doc_string(h, "alg") == "SHA-256")
        *described = "sha256:" + doc_string(h, "content");
  add_cyclonedx_components(c, doc.value("components", json::array()));
  return c;
}

}  // namespace

Contents contents_from_document(const std::string& text, std::string* described) {
  json doc = json::parse(text, nullptr, false);
  if (!doc.is_object()) throw Error("the SBOM is not a JSON object", ErrorKind::Input);
  Contents c;
  if (doc.contains("spdxVersion"))
    c = read_spdx_doc(doc, described);
  else if (doc_string(doc, "bomFormat") == "CycloneDX")
    c = read_cyclonedx_doc(doc, described);
  else
    throw Error("the SBOM is neither SPDX (spdxVersion) nor CycloneDX (bomFormat) JSON",
                ErrorKind::Input);
  std::sort(c.packages.begin(), c.packages.end(), [](const Package& a, const Package& b) {
    return std::tie(a.type, a.name, a.version, a.arch) <
           std::tie(b.type, b.name, b.version, b.arch);
  });
  return c;
}

}  // namespace sb::sbom
