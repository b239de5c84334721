// An image's SBOM as a CycloneDX 1.5 JSON document, for the tools that read
// CycloneDX (Dependency-Track, Grype, cdxgen's users): the image is
// metadata.component, each package a component, and `dependencies` the
// graph. The same contents and image give the same bytes, as for SPDX.
#include <nlohmann/json.hpp>

#include "image/sbom.hpp"
#include "util/version.hpp"

namespace sb::sbom {

namespace {

using cjson = nlohmann::ordered_json;

cjson contact_of(const std::string& supplier) {
  auto [name, email] = split_contact(supplier);
  cjson c{{"name", name}};
  if (!email.empty()) c["contact"] = cjson::array({{{"email", email}}});
  return c;
}

cjson component_json(const Package& p) {
  cjson c;
  c["type"] = "library";
  c["bom-ref"] = p.id;
  if (!p.supplier.empty() && !split_contact(p.supplier).first.empty()) c["supplier"] = contact_of(p.supplier);
  c["name"] = p.name;
  if (!p.version.empty()) c["version"] = p.version;
  if (!p.summary.empty()) c["description"] = p.summary;
  bool known = !p.license.empty() && license_expression_known(p.license, true);
  std::string words = p.license_text.empty() && !known ? p.license : p.license_text;
  if (known)
    c["licenses"] = cjson::array({{{"expression", p.license}}});
  else if (!words.empty())
    c["licenses"] = cjson::array({{{"license", {{"name", words}}}}});
  c["purl"] = p.purl;
  cjson refs = cjson::array();
  if (!p.homepage.empty() && (p.homepage.starts_with("http://") || p.homepage.starts_with("https://")))
    refs.push_back({{"type", "website"}, {"url", p.homepage}});
  if (p.download.starts_with("git+")) {  // a source tree: its repository, the ref in the comment
    cjson r{{"type", "vcs"}, {"url", git_repository(p)}};
    if (!p.revision.empty()) r["comment"] = "at " + p.revision;
    refs.push_back(r);
  } else if (!p.download.empty()) {
    // CycloneDX 1.6 has "source-distribution"; 1.5, which this document is, "distribution".
    cjson r{{"type", "distribution"}, {"url", p.download}};
    if (!p.sha256.empty())
      r["hashes"] = cjson::array({{{"alg", "SHA-256"}, {"content", p.sha256}}});
    refs.push_back(r);
  }
  if (!refs.empty()) c["externalReferences"] = refs;
  cjson props = cjson::array();
  if (p.type == "source") {
    props.push_back({{"name", "stackbuild:kind"}, {"value", "source"}});
    props.push_back({{"name", "stackbuild:comment"}, {"value", p.comment}});
    if (p.built) props.push_back({{"name", "stackbuild:compiled-into-image"}, {"value", "true"}});
  }
  if (p.type != "source" || !p.file.empty())
    props.push_back({{"name", "stackbuild:found-in"}, {"value", p.file}});
  if (!p.arch.empty()) props.push_back({{"name", "stackbuild:architecture"}, {"value", p.arch}});
  if (!p.source.empty()) props.push_back({{"name", "stackbuild:source-package"}, {"value", p.source}});
  c["properties"] = props;
  return c;
}

}  // namespace

std::string cyclonedx_json(const Contents& contents, const ImageInfo& image) {
  cjson doc;
  doc["bomFormat"] = "CycloneDX";
  doc["specVersion"] = "1.5";
  doc["serialNumber"] = "urn:uuid:" + image_uuid(image);
  doc["version"] = 1;
  cjson meta;
  meta["timestamp"] = image.created.empty() ? "1970-01-01T00:00:00Z" : image.created;
  meta["tools"] = {{"components", cjson::array({{{"type", "application"},
                                                 {"name", "stackbuild"},
                                                 {"version", image.tool.substr(image.tool.find('-') + 1)}}})}};
  cjson img;
  img["type"] = "container";
  img["bom-ref"] = "image";
  auto vendor = image.labels.find("org.opencontainers.image.vendor");
  if (vendor != image.labels.end() && !vendor->second.empty()) img["supplier"] = contact_of(vendor->second);
  img["name"] = image.name;
  img["version"] = image.manifest_digest;
  img["hashes"] = cjson::array({{{"alg", "SHA-256"}, {"content", image.manifest_digest.substr(7)}}});
  img["purl"] = image_purl(image);
  cjson props = cjson::array();
  for (const auto& [k, v] : image.labels)
    if (k.starts_with("dev.stackbuild.version."))
      props.push_back({{"name", "stackbuild:component:" + k.substr(23)}, {"value", v}});
  if (!contents.os_name.empty()) props.push_back({{"name", "stackbuild:os"}, {"value", contents.os_name}});
  if (!props.empty()) img["properties"] = props;
  meta["component"] = img;
  doc["metadata"] = meta;

  cjson components = cjson::array();
  for (const auto& p : contents.packages) components.push_back(component_json(p));
  doc["components"] = components;

  // The image depends on what it holds; each package on the packages of the image it names.
  cjson deps = cjson::array();
  cjson all = cjson::array();
  for (const auto& p : contents.packages) all.push_back(p.id);
  deps.push_back({{"ref", "image"}, {"dependsOn", all}});
  for (const auto& p : contents.packages) deps.push_back({{"ref", p.id}, {"dependsOn", p.depends}});
  doc["dependencies"] = deps;
  return doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";  // a name from outside
}

}  // namespace sb::sbom
