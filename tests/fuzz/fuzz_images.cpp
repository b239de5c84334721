// Images from outside: ELF files and fat binaries the static checks read in
// every image (a base image can come from any registry), OCI layouts, and
// the package databases an SBOM reads.
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "fuzz.hpp"
#include "image/layout.hpp"
#include "image/sbom.hpp"
#include "util/digest.hpp"
#include "util/utf8.hpp"
#include "verify/elf.hpp"
#include "verify/fatbin.hpp"

namespace fs = std::filesystem;

SB_FUZZ_TARGET(elf) {
  const fs::path& scratch = sb::fuzz::fresh_scratch();
  fs::path file = scratch / "libfuzz.so";
  sb::fuzz::write_file(file, sb::fuzz::text(data, size));
  using namespace sb::verify;
  sb::fuzz::expect_errors([&] { (void)read_elf(file); });
  sb::fuzz::expect_errors([&] {
    MappedFile mapped(file);
    for (const auto& s : elf_sections(mapped)) (void)s.name;
  });
  sb::fuzz::expect_errors([&] {
    if (auto fatbin = read_elf_section(file, ".nv_fatbin")) (void)parse_fatbin(*fatbin);
  });
  sb::fuzz::expect_errors([&] { (void)gpu_code_of_file(file); });
  sb::fuzz::expect_errors([&] { (void)parse_fatbin(sb::fuzz::text(data, size)); });
  size_t containers = 0;
  (void)scan_embedded_fatbins(sb::fuzz::text(data, size), &containers);
}

// index.json, a manifest and a config, cut at "----" lines. The manifest and
// config are stored as blobs under their digests; "@MANIFEST@" and "@CONFIG@"
// in the documents become those digests, so the fuzzer reaches past the
// digest checks.
SB_FUZZ_TARGET(layout) {
  const fs::path& scratch = sb::fuzz::fresh_scratch();
  auto parts = sb::fuzz::split(sb::fuzz::text(data, size), 3);
  auto replace = [](std::string s, const std::string& from, const std::string& to) {
    for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
      s.replace(at, from.size(), to);
    return s;
  };
  fs::path layout = scratch / "layout", blobs = layout / "blobs" / "sha256";
  fs::create_directories(blobs);
  sb::fuzz::write_file(layout / "oci-layout", R"({"imageLayoutVersion":"1.0.0"})");
  std::string config = parts[2];
  sb::Digest config_digest = sb::Digest::of_bytes(config);
  sb::fuzz::write_file(blobs / config_digest.hex(), config);
  std::string manifest = replace(parts[1], "@CONFIG@", config_digest.str());
  sb::Digest manifest_digest = sb::Digest::of_bytes(manifest);
  sb::fuzz::write_file(blobs / manifest_digest.hex(), manifest);
  std::string index = replace(replace(parts[0], "@MANIFEST@", manifest_digest.str()), "@CONFIG@", config_digest.str());
  sb::fuzz::write_file(layout / "index.json", index);
  for (std::string ref : {"", "fuzz:1", "1"})
    sb::fuzz::expect_errors([&] { (void)sb::open_layout_image(layout, ref); });
}

// What an SBOM reads in an image's layers: dpkg's status, apk's database, a
// Python project's METADATA, a CUDA version.json and os-release, cut at
// "----" lines. Properties: the SPDX document is JSON whose relationships
// name only its own packages, and it is the same bytes when written twice.
SB_FUZZ_TARGET(sbom) {
  auto parts = sb::fuzz::split(sb::fuzz::text(data, size), 5);
  std::map<std::string, std::string> files{
      {"var/lib/dpkg/status", parts[0]},
      {"lib/apk/db/installed", parts[1]},
      {"usr/lib/python3.11/site-packages/x-1.dist-info/METADATA", parts[2]},
      {"usr/local/cuda-12.6/version.json", parts[3]},
      {"etc/os-release", parts[4]}};
  sb::sbom::Contents c;
  if (!sb::fuzz::expect_errors([&] { c = sb::sbom::read_contents(files, "x86_64"); })) return;
  sb::sbom::ImageInfo info{"fuzz:1", sb::Digest::of_bytes("m").str(), "amd64", "", {}, "stackbuild-fuzz"};
  std::string doc = sb::sbom::spdx_json(c, info);
  sb::fuzz::check(doc == sb::sbom::spdx_json(c, info), "the SPDX document differs when written again");
  auto j = nlohmann::json::parse(doc);  // a json exception here is a finding
  std::set<std::string> ids{"SPDXRef-DOCUMENT"};
  for (const auto& p : j.at("packages")) ids.insert(p.at("SPDXID").get<std::string>());
  sb::fuzz::check(ids.size() == c.packages.size() + 2, "two packages share an SPDXID");
  for (const auto& r : j.at("relationships"))
    sb::fuzz::check(ids.count(r.at("spdxElementId").get<std::string>()) &&
                        ids.count(r.at("relatedSpdxElement").get<std::string>()),
                    "a relationship names no package of the document");
  for (const auto& p : c.packages) (void)sb::sbom::license_expression_known(p.license);
  // Read back, both documents list what was read (as notes --since a registry compares).
  for (const std::string& d : {doc, sb::sbom::cyclonedx_json(c, info)}) {
    auto back = sb::sbom::contents_from_document(d);
    sb::fuzz::check(back.packages.size() == c.packages.size(), "a package is lost when the SBOM is read back");
    sb::fuzz::check(sb::sbom::package_changes(c, back).rows.empty(), "the SBOM read back differs from what was read");
  }
}

// An image's dev.stackbuild.source.* labels (any image's config can carry
// them), cut at "----" lines: the label values, then the vendor label.
// Properties: the documents are JSON, each label gives at most one source
// package, and both documents read back give the same packages.
SB_FUZZ_TARGET(source_labels) {
  auto parts = sb::fuzz::split(sb::fuzz::text(data, size), 4);
  std::map<std::string, std::string> labels{{"dev.stackbuild.source.a", parts[0]},
                                            {"dev.stackbuild.source.b", parts[1]},
                                            {"dev.stackbuild.source.", parts[2]}};
  if (!parts[3].empty()) labels["org.opencontainers.image.vendor"] = parts[3];
  sb::sbom::Contents c;
  if (!sb::fuzz::expect_errors([&] { sb::sbom::add_source_packages(c, labels); })) return;
  sb::fuzz::check(c.packages.size() <= 2, "more source packages than labels");
  for (const auto& p : c.packages) {
    sb::fuzz::check(p.type == "source", "a label gave a package that is no source tree");
    sb::fuzz::check(p.revision.empty() || p.download.ends_with("@" + p.revision),
                    "a git source's download does not end with its revision");
    (void)sb::sbom::git_repository(p);
  }
  sb::sbom::ImageInfo info{"fuzz:1", sb::Digest::of_bytes("m").str(), "amd64", "", labels, "stackbuild-fuzz"};
  for (const std::string& d : {sb::sbom::spdx_json(c, info), sb::sbom::cyclonedx_json(c, info)}) {
    sb::fuzz::check(nlohmann::json::accept(d), "an SBOM document is not JSON");
    auto back = sb::sbom::contents_from_document(d);
    sb::fuzz::check(back.packages.size() == c.packages.size(), "a source package is lost when read back");
    sb::fuzz::check(sb::sbom::package_changes(c, back).rows.empty(), "the SBOM read back differs");
  }
}

// An SBOM document from anywhere (a registry's attached artifact) read back:
// only sb::Error for what is not one. Property: every text read is UTF-8, as
// notes and sbom --diff print it and notes --data writes it as JSON.
SB_FUZZ_TARGET(sbom_document) {
  std::string described;
  sb::sbom::Contents c;
  if (!sb::fuzz::expect_errors([&] {
        c = sb::sbom::contents_from_document(std::string(sb::fuzz::text(data, size)), &described);
      }))
    return;
  std::vector<const std::string*> texts{&described, &c.os_id, &c.os_version_id, &c.os_name};
  for (const auto& p : c.packages) {
    for (const std::string* f : {&p.id, &p.type, &p.name, &p.version, &p.arch, &p.source,
                                 &p.supplier, &p.license, &p.license_text, &p.homepage, &p.summary,
                                 &p.file, &p.purl, &p.download, &p.revision, &p.sha256, &p.comment})
      texts.push_back(f);
    for (const auto& d : p.depends) texts.push_back(&d);
  }
  for (const std::string* t : texts)
    sb::fuzz::check(sb::valid_utf8(*t), "a text read back is not UTF-8: " + *t);
}
