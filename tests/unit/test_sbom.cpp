// The SBOM: what layers hold (whiteouts honoured), the packages read from
// it, the SPDX and CycloneDX documents, what changed between two images, and
// the source trees named in labels. SBOMs of OCI layouts (artifacts, malformed
// layouts, licenses from copyright files) are in test_sbom_layout.cpp.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <set>
#include <tuple>

#include <unistd.h>

#include "helpers.hpp"
#include "sbom_fixture.hpp"
#include "image/layout.hpp"
#include "image/notes.hpp"
#include "image/sbom.hpp"
#include "registry/push.hpp"
#include "store/gc.hpp"
#include "tar_fixture.hpp"

using namespace sb;
using namespace sb::sbom;
using json = nlohmann::json;
using sb::test::RawEntry;
using namespace sb::test::sbom_fixture;

namespace {

std::string metadata(const std::string& name, const std::string& version, const std::string& extra = "") {
  return "Metadata-Version: 2.1\nName: " + name + "\nVersion: " + version + "\n" + extra +
         "\nA long description that is not kept.\n";
}

const std::string kSite = "usr/local/lib/python3.11/site-packages/";

struct Fixture {
  TempDir dir;
  fs::path layer(const std::string& name, const std::vector<RawEntry>& entries) {
    fs::path p = dir.path() / name;
    sb::test::make_tar(p, entries, true);
    return p;
  }
};


}  // namespace

TEST_CASE("sbom: a layer's files of interest, its whiteouts and opaque directories", "[sbom]") {
  CHECK(wanted_path("var/lib/dpkg/status"));
  CHECK(wanted_path("var/lib/dpkg/status.d/libc6"));
  CHECK_FALSE(wanted_path("var/lib/dpkg/status.d/libc6.md5sums"));
  CHECK(wanted_path(kSite + "torch-2.7.0.dist-info/METADATA"));
  CHECK(wanted_path("usr/lib/python3/dist-packages/six-1.16.0.egg-info/PKG-INFO"));
  CHECK(wanted_path("usr/lib/python3/dist-packages/foo-1.0.egg-info"));
  CHECK_FALSE(wanted_path("opt/x/torch-2.7.0.dist-info/METADATA"));  // not in a site directory
  CHECK_FALSE(wanted_path(kSite + "torch-2.7.0.dist-info/RECORD"));
  CHECK(wanted_path("usr/local/cuda-12.6/version.json"));
  CHECK_FALSE(wanted_path("usr/local/lib/version.json"));
  CHECK(wanted_path("etc/os-release"));
  CHECK(wanted_path("usr/local/cuda-12.6/include/cudnn_version.h"));
  CHECK(wanted_path("usr/local/cuda-12.6/include/nccl.h"));
  CHECK_FALSE(wanted_path("usr/include/nccl.h"));  // a Debian package's: dpkg lists it
  CHECK_FALSE(wanted_path("usr/local/cuda-12.6/include/crt/nccl.h"));

  Fixture f;
  auto lower = f.layer("lower.tgz", {{"etc/os-release", 'f', "ID=debian\nVERSION_ID=\"12\"\nPRETTY_NAME=\"Debian 12\"\n"},
                                     {"var/lib/dpkg/status", 'f', kStatus},
                                     {kSite + "numpy-2.1.0.dist-info/METADATA", 'f', metadata("numpy", "2.1.0")},
                                     {kSite + "six-1.16.0.dist-info/METADATA", 'f', metadata("six", "1.16.0")},
                                     {"opt/env/lib/python3.11/site-packages/a-1.dist-info/METADATA", 'f',
                                      metadata("a", "1")},
                                     {"usr/bin/gzip", 'f', "binary"}});
  auto upper = f.layer("upper.tgz", {{kSite + ".wh.six-1.16.0.dist-info", 'f', ""},
                                     {"opt/env/lib/python3.11/site-packages/.wh..wh..opq", 'f', ""},
                                     {kSite + "torch-2.7.0.dist-info/METADATA", 'f', metadata("torch", "2.7.0")},
                                     {kSite + "numpy-2.1.0.dist-info/METADATA", 'l', "elsewhere"}});
  LayerFiles l = scan_layer(lower);
  CHECK(l.files.size() == 5);  // gzip is no file of interest
  CHECK(l.files.at(kSite + "numpy-2.1.0.dist-info/METADATA").find("long description") == std::string::npos);
  LayerFiles u = scan_layer(upper);
  CHECK(u.removed == std::vector<std::string>{kSite + "six-1.16.0.dist-info", kSite + "numpy-2.1.0.dist-info/METADATA"});
  CHECK(u.opaque == std::vector<std::string>{"opt/env/lib/python3.11/site-packages"});

  auto files = stack_layers({l, u});
  std::set<std::string> paths;
  for (const auto& [p, text] : files) paths.insert(p);
  CHECK(paths == std::set<std::string>{"etc/os-release", "var/lib/dpkg/status", kSite + "torch-2.7.0.dist-info/METADATA"});
  // A layer's whiteouts hide only what is below it.
  CHECK(stack_layers({u, l}).count(kSite + "six-1.16.0.dist-info/METADATA") == 1);

  // The record round-trips.
  auto back = layer_files_from_json(layer_files_json(u));
  CHECK(back.files == u.files);
  CHECK(back.removed == u.removed);
  CHECK(back.opaque == u.opaque);
}

TEST_CASE("sbom: a directory replaced by a link or a file hides what the layers below held in it", "[sbom]") {
  Fixture f;
  auto lower = f.layer("lower.tgz", {{"usr/local/cuda-12.6/version.json", 'f', R"({"cuda": {"version": "12.6.3"}})"},
                                     {kSite + "numpy-2.1.0.dist-info/METADATA", 'f', metadata("numpy", "2.1.0")},
                                     {kSite + "six-1.16.0.dist-info/METADATA", 'f', metadata("six", "1.16.0")},
                                     {"var/lib/dpkg/status.d/libc6", 'f', kStatus},
                                     {"usr/share/doc/libc6/copyright", 'f', "Format: copyright-format/1.0\n"},
                                     {"usr/share/doc/gzip/copyright", 'f', "Format: copyright-format/1.0\n"},
                                     {"usr/share/doc/zlib1g/copyright", 'f', "Format: copyright-format/1.0\n"}});
  auto upper = f.layer("upper.tgz", {{"usr/local/cuda-12.6", 'l', "/opt/cuda"},
                                     {kSite + "numpy-2.1.0.dist-info", 'f', "not a directory any more"},
                                     {"var/lib/dpkg/status.d", 'l', "elsewhere"},
                                     {"usr/share/doc/libc6", 'l', "libc-bin"},
                                     {"usr/share/doc/gzip", 'f', "not a directory any more"},
                                     {"usr/bin/tool", 'f', "a file of no interest"}});
  LayerFiles u = scan_layer(upper);
  CHECK(u.removed == std::vector<std::string>{"usr/local/cuda-12.6", kSite + "numpy-2.1.0.dist-info",
                                              "var/lib/dpkg/status.d", "usr/share/doc/libc6", "usr/share/doc/gzip"});
  auto files = stack_layers({scan_layer(lower), u});
  std::set<std::string> paths;
  for (const auto& [p, text] : files) paths.insert(p);
  CHECK(paths == std::set<std::string>{kSite + "six-1.16.0.dist-info/METADATA", "usr/share/doc/zlib1g/copyright"});
}

TEST_CASE("sbom: a layer is read once per store", "[sbom]") {
  Fixture f;
  Store store(f.dir.path() / "store");
  auto blob = f.layer("l.tgz", {{"var/lib/dpkg/status", 'f', kStatus}});
  Digest d = Digest::of_file(blob);
  auto first = image_files(store, {{d, blob}});
  REQUIRE(first.count("var/lib/dpkg/status"));
  fs::remove(blob);  // gone: the record answers
  CHECK(image_files(store, {{d, blob}}) == first);
  // The record lives while its layer does: gc reads what it needs.
  gc::Item item;
  gc::read_record("sbom-layer", *store.get_record("sbom-layer", d), item);
  CHECK(item.needs == std::vector<Digest>{d});
  CHECK(item.refs.empty());  // the files' own text names no blob of the store
  // A damaged record is read again from the layer (here: gone, so an error naming it).
  store.put_record("sbom-layer", d, "{not json");
  CHECK_THROWS_WITH(image_files(store, {{d, blob}}), Catch::Contains(blob.string()));
}

TEST_CASE("sbom: packages of dpkg, Python and the CUDA toolkit, with their dependencies", "[sbom]") {
  std::map<std::string, std::string> files{
      {"usr/lib/os-release", "ID=debian\nVERSION_ID=\"12\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n"},
      {"var/lib/dpkg/status", kStatus},
      {"var/lib/dpkg/status.d/base-files", "Package: base-files\nVersion: 12.4\nArchitecture: amd64\n"},
      {kSite + "torch-2.7.0.dist-info/METADATA",
       metadata("torch", "2.7.0+cu126",
                "Summary: Tensors and Dynamic neural networks\nAuthor-email: PyTorch Team <packages@pytorch.org>\n"
                "License: BSD-3-Clause\nRequires-Dist: filelock\nRequires-Dist: typing_extensions>=4.10.0\n"
                "Requires-Dist: nvidia-cudnn-cu12==9.5.1.17; platform_system == \"Linux\" and platform_machine == "
                "\"x86_64\"\nRequires-Dist: triton==3.3.0; platform_machine == \"aarch64\"\n"
                "Requires-Dist: opt-einsum>=3.3; extra == \"opt-einsum\"\n")},
      {kSite + "filelock-3.16.1.dist-info/METADATA",
       metadata("filelock", "3.16.1", "License-Expression: Unlicense\n")},
      {kSite + "typing_extensions-4.12.2.dist-info/METADATA",
       metadata("typing_extensions", "4.12.2",
                "Classifier: License :: OSI Approved :: Python Software Foundation License\n")},
      {kSite + "nvidia_cudnn_cu12-9.5.1.17.dist-info/METADATA",
       metadata("nvidia-cudnn-cu12", "9.5.1.17", "License: NVIDIA Proprietary Software\nAuthor: Nvidia CUDA Installer Team\n")},
      {kSite + "triton-3.3.0.dist-info/METADATA", metadata("triton", "3.3.0")},
      {kSite + "opt_einsum-3.4.0.dist-info/METADATA", metadata("opt_einsum", "3.4.0")},
      {"usr/local/cuda-12.6/version.json",
       R"j({"cuda": {"name": "CUDA SDK", "version": "12.6.3"}, "cuda_cudart": {"name": "CUDA Runtime (cudart)", "version": "12.6.77"}})j"},
  };
  Contents c = read_contents(files, "x86_64");
  CHECK(c.os_id == "debian");
  CHECK(c.os_version_id == "12");
  CHECK(c.os_name == "Debian GNU/Linux 12 (bookworm)");
  CHECK(find(c, "deb", "old-tool") == nullptr);  // removed, its configuration kept: not installed
  CHECK(find(c, "deb", "never-tool") == nullptr);
  // gzip is "unpacked" (its maintainer scripts not run, as stackbuild's apt layers leave
  // such packages): its files are in the image, so it is listed.
  REQUIRE(find(c, "deb", "base-files"));        // distroless' status.d: no Status field
  const Package* libc = find(c, "deb", "libc6");
  const Package* gcc = find(c, "deb", "libgcc-s1");
  const Package* gz = find(c, "deb", "gzip");
  REQUIRE((libc && gcc && gz));
  CHECK(libc->purl == "pkg:deb/debian/libc6@2.36-9%2Bdeb12u4?arch=amd64&distro=debian-12&upstream=glibc");
  CHECK(gz->purl == "pkg:deb/debian/gzip@1:1.12-1?arch=amd64&distro=debian-12");  // ':' stays, as the purl spec says
  CHECK(gcc->source == "gcc-12");
  CHECK(libc->summary == "GNU C Library: Shared libraries");
  CHECK(libc->supplier == "GNU Libc Maintainers <debian-glibc@lists.debian.org>");
  CHECK(libc->depends == std::vector<std::string>{gcc->id});
  CHECK(gcc->depends == std::vector<std::string>{libc->id});  // gcc-12-base is not installed
  // Pre-Depends, and an alternative found through Provides.
  CHECK(gz->depends == std::vector<std::string>{libc->id, gcc->id});

  const Package* torch = find(c, "python", "torch");
  REQUIRE(torch);
  CHECK(torch->purl == "pkg:pypi/torch@2.7.0%2Bcu126");
  CHECK(torch->license == "BSD-3-Clause");
  CHECK(torch->supplier == "PyTorch Team <packages@pytorch.org>");
  std::set<std::string> deps(torch->depends.begin(), torch->depends.end());
  // Markers read for this image's Python (3.11 from the path) and CPU; extras not asked for are out.
  CHECK(deps == std::set<std::string>{find(c, "python", "filelock")->id, find(c, "python", "typing_extensions")->id,
                                      find(c, "python", "nvidia-cudnn-cu12")->id});
  CHECK(find(c, "python", "filelock")->license == "Unlicense");
  CHECK(find(c, "python", "typing_extensions")->license == "PSF-2.0");
  const Package* cudnn = find(c, "python", "nvidia-cudnn-cu12");
  CHECK(cudnn->license.empty());
  CHECK(cudnn->license_text == "NVIDIA Proprietary Software");
  CHECK(cudnn->purl == "pkg:pypi/nvidia-cudnn-cu12@9.5.1.17");
  // The same wheels on an aarch64 image: triton, not cuDNN.
  Contents arm = read_contents(files, "aarch64");
  std::set<std::string> arm_deps;
  for (const auto& d : find(arm, "python", "torch")->depends) arm_deps.insert(d);
  CHECK(arm_deps.count(find(arm, "python", "triton")->id));
  CHECK_FALSE(arm_deps.count(find(arm, "python", "nvidia-cudnn-cu12")->id));

  // cuDNN and NCCL from NVIDIA's redist archives, known by their headers.
  std::map<std::string, std::string> redist{
      {"usr/local/cuda-12.6/include/cudnn_version.h",
       "#define CUDNN_MAJOR 9\n#define CUDNN_MINOR 5\n#define CUDNN_PATCHLEVEL 1\n"},
      {"usr/local/cuda-12.6/include/nccl.h", "#define NCCL_MAJOR 2\n#define NCCL_MINOR 26\n#define NCCL_PATCH 2\n"}};
  Contents rc = read_contents(redist, "x86_64");
  REQUIRE(rc.packages.size() == 2);
  CHECK(find(rc, "cuda", "cudnn")->version == "9.5.1");
  CHECK(find(rc, "cuda", "cudnn")->purl == "pkg:generic/nvidia/cudnn@9.5.1");
  CHECK(find(rc, "cuda", "nccl")->version == "2.26.2");

  const Package* cudart = find(c, "cuda", "cuda_cudart");
  REQUIRE(cudart);
  CHECK(cudart->version == "12.6.77");
  CHECK(cudart->purl == "pkg:generic/nvidia/cuda_cudart@12.6.77");
  CHECK(find(c, "cuda", "cuda")->version == "12.6.3");

  std::set<std::string> ids;
  for (const auto& p : c.packages) CHECK(ids.insert(p.id).second);  // unique
  CHECK(std::is_sorted(c.packages.begin(), c.packages.end(),
                       [](const Package& a, const Package& b) { return std::tie(a.type, a.name) < std::tie(b.type, b.name); }));
}

TEST_CASE("sbom: bytes that are not UTF-8 are shown escaped and the documents stay JSON", "[sbom]") {
  // Found by the fuzzer: a Latin-1 maintainer in dpkg's status made the JSON writer throw.
  std::map<std::string, std::string> files{
      {"var/lib/dpkg/status", "Package: caf\xe9\nStatus: install ok installed\nVersion: 1\nArchitecture: amd64\n"
                              "Maintainer: Ren\xe9 <r@x.org>\n"}};
  Contents c = read_contents(files, "x86_64");
  REQUIRE(c.packages.size() == 1);
  CHECK(c.packages[0].name == "caf\\xE9");
  CHECK(c.packages[0].supplier == "Ren\\xE9 <r@x.org>");
  CHECK(c.packages[0].purl == "pkg:deb/debian/caf%E9@1?arch=amd64");
  ImageInfo info = image_info("t\xff:1", Digest::of_bytes("m"), "{}");  // a name from a path
  CHECK_NOTHROW(json::parse(spdx_json(c, info)));
  CHECK_NOTHROW(json::parse(cyclonedx_json(c, info)));
}

TEST_CASE("sbom: apk's database", "[sbom]") {
  std::map<std::string, std::string> files{
      {"etc/os-release", "ID=alpine\nVERSION_ID=3.20.3\n"},
      {"lib/apk/db/installed",
       "C:Q1abc=\nP:musl\nV:1.2.5-r0\nA:x86_64\nL:MIT\nT:the musl c library\no:musl\nm:Natanael Copa <ncopa@alpinelinux.org>\n"
       "U:https://musl.libc.org/\n\nP:busybox\nV:1.36.1-r29\nA:x86_64\nL:GPL-2.0-only\no:busybox-src\n\n"}};
  Contents c = read_contents(files, "x86_64");
  REQUIRE(c.packages.size() == 2);
  const Package* musl = find(c, "apk", "musl");
  REQUIRE(musl);
  CHECK(musl->source.empty());  // its own origin
  CHECK(musl->license == "MIT");
  ImageInfo info = image_info("a:1", Digest::of_bytes("m"), "{}");
  json doc = json::parse(spdx_json(c, info));
  std::map<std::string, std::string> declared;
  for (const auto& p : doc["packages"]) declared[p["name"]] = p["licenseDeclared"];
  CHECK(declared["musl"] == "MIT");
  CHECK(declared["busybox"] == "GPL-2.0-only");
  CHECK(musl->purl == "pkg:apk/alpine/musl@1.2.5-r0?arch=x86_64&distro=alpine-3.20.3");
  CHECK(find(c, "apk", "busybox")->purl ==
        "pkg:apk/alpine/busybox@1.36.1-r29?arch=x86_64&distro=alpine-3.20.3&upstream=busybox-src");
}

TEST_CASE("sbom: license expressions, times, Package URLs", "[sbom]") {
  CHECK(license_expression_known("MIT"));
  CHECK(license_expression_known("Apache-2.0 OR MIT"));
  CHECK(license_expression_known("(MIT AND BSD-3-Clause) OR GPL-2.0-or-later WITH Classpath-exception-2.0"));
  CHECK(license_expression_known("MPL-1.1+"));
  CHECK_FALSE(license_expression_known("GPL-2.0+"));  // a deprecated identifier: GPL-2.0-or-later
  CHECK_FALSE(license_expression_known("BSD License"));
  CHECK_FALSE(license_expression_known("MIT AND"));
  CHECK_FALSE(license_expression_known("(MIT"));
  CHECK_FALSE(license_expression_known("MIT WITH MIT"));
  CHECK_FALSE(license_expression_known(""));
  CHECK_FALSE(license_expression_known("LicenseRef-NVIDIA"));

  CHECK(spdx_time("2026-11-01T00:00:00Z") == "2026-11-01T00:00:00Z");
  CHECK(spdx_time("2024-05-01T12:00:00.123456789Z") == "2024-05-01T12:00:00Z");
  CHECK(spdx_time("2024-05-01T01:30:00+02:00") == "2024-04-30T23:30:00Z");
  CHECK(spdx_time("yesterday").empty());
  CHECK(spdx_time("2024-05-01T01:30:00").empty());  // no zone: no time

  CHECK(purl_encode("2.7.0+cu126") == "2.7.0%2Bcu126");
  CHECK(purl_encode("1:2.3~rc1") == "1:2.3~rc1");
  CHECK(purl_encode("a b/c") == "a%20b%2Fc");
}

TEST_CASE("sbom: the SPDX document", "[sbom]") {
  std::map<std::string, std::string> files{
      {"etc/os-release", "ID=debian\nVERSION_ID=\"12\"\nPRETTY_NAME=\"Debian 12\"\n"},
      {"var/lib/dpkg/status", kStatus},
      {kSite + "nvidia_cudnn_cu12-9.5.1.17.dist-info/METADATA",
       metadata("nvidia-cudnn-cu12", "9.5.1.17", "License: NVIDIA Proprietary Software\n")},
  };
  Contents c = read_contents(files, "x86_64");
  Digest manifest = Digest::of_bytes("manifest");
  std::string config = R"({"architecture": "amd64", "os": "linux", "created": "2026-11-01T00:00:00Z",
                           "config": {"Labels": {"dev.stackbuild.version.cuda": "12.6.3",
                                                 "org.opencontainers.image.vendor": "Example Corp"}}})";
  ImageInfo info = image_info("pytorch:26.11-cuda12.6", manifest, config);
  CHECK(info.architecture == "amd64");
  CHECK(info.labels.size() == 2);
  std::string doc = spdx_json(c, info);
  CHECK(doc == spdx_json(c, info));  // the same bytes every time
  json j = json::parse(doc);
  CHECK(j["spdxVersion"] == "SPDX-2.3");
  CHECK(j["dataLicense"] == "CC0-1.0");
  CHECK(j["creationInfo"]["created"] == "2026-11-01T00:00:00Z");
  CHECK(j["creationInfo"]["creators"][0].get<std::string>().starts_with("Tool: stackbuild-"));
  std::string ns = j["documentNamespace"];
  CHECK(ns.starts_with("urn:uuid:"));
  CHECK(ns.size() == 9 + 36);
  CHECK(ns[9 + 14] == '5');  // a name-based UUID
  // Another image, another namespace.
  CHECK(json::parse(spdx_json(c, image_info("x", Digest::of_bytes("other"), config)))["documentNamespace"] != ns);

  std::map<std::string, json> by_id;
  for (const auto& p : j["packages"]) by_id[p["SPDXID"]] = p;
  REQUIRE(by_id.size() == j["packages"].size());
  REQUIRE(by_id.size() == c.packages.size() + 1);
  const json& img = by_id.at("SPDXRef-Image");
  CHECK(img["primaryPackagePurpose"] == "CONTAINER");
  CHECK(img["supplier"] == "Organization: Example Corp");  // its vendor label
  CHECK(img["versionInfo"] == manifest.str());
  CHECK(img["externalRefs"][0]["referenceLocator"] ==
        "pkg:oci/pytorch@sha256:" + manifest.hex() + "?arch=amd64&tag=26.11-cuda12.6");
  CHECK(img["comment"].get<std::string>().find("cuda 12.6.3") != std::string::npos);

  const Package* libc = find(c, "deb", "libc6");
  const json& lp = by_id.at("SPDXRef-" + libc->id);
  CHECK(lp["supplier"] == "Person: GNU Libc Maintainers (debian-glibc@lists.debian.org)");
  CHECK(lp["licenseDeclared"] == "NOASSERTION");
  CHECK(lp["homepage"] == "https://www.gnu.org/software/libc/libc.html");
  const json& cudnn = by_id.at("SPDXRef-" + find(c, "python", "nvidia-cudnn-cu12")->id);
  CHECK(cudnn["licenseDeclared"] == "NOASSERTION");  // not an SPDX expression: said in words
  CHECK(cudnn["licenseComments"] == "the package states: NVIDIA Proprietary Software");
  CHECK(cudnn["supplier"] == "NOASSERTION");

  size_t describes = 0, contains = 0, depends = 0;
  for (const auto& r : j["relationships"]) {
    CHECK(by_id.count(r["relatedSpdxElement"]));
    if (r["relationshipType"] == "DESCRIBES") ++describes;
    if (r["relationshipType"] == "CONTAINS") ++contains;
    if (r["relationshipType"] == "DEPENDS_ON") ++depends;
  }
  CHECK(describes == 1);
  CHECK(contains == c.packages.size());
  CHECK(depends == 4);  // libc6 -> libgcc-s1 -> libc6; gzip -> libc6, libgcc-s1
}

TEST_CASE("sbom: the CycloneDX document says what the SPDX one says", "[sbom]") {
  std::map<std::string, std::string> files{
      {"var/lib/dpkg/status", kStatus},
      {kSite + "nvidia_cudnn_cu12-9.5.1.17.dist-info/METADATA",
       metadata("nvidia-cudnn-cu12", "9.5.1.17", "License: NVIDIA Proprietary Software\nAuthor: Nvidia CUDA Installer Team\n")},
      {kSite + "filelock-3.16.1.dist-info/METADATA", metadata("filelock", "3.16.1", "License-Expression: Unlicense\n")}};
  Contents c = read_contents(files, "x86_64");
  ImageInfo info = image_info("t:1", Digest::of_bytes("manifest"),
                              R"({"architecture": "amd64", "created": "2026-11-01T00:00:00Z",
                                  "config": {"Labels": {"org.opencontainers.image.vendor": "Example Corp <oss@example.com>"}}})");
  std::string text = cyclonedx_json(c, info);
  CHECK(text == cyclonedx_json(c, info));
  json j = json::parse(text);
  json spdx = json::parse(spdx_json(c, info));
  CHECK(j["bomFormat"] == "CycloneDX");
  CHECK(j["specVersion"] == "1.5");
  CHECK(j["serialNumber"] == spdx["documentNamespace"]);
  CHECK(j["metadata"]["timestamp"] == "2026-11-01T00:00:00Z");
  const json& img = j["metadata"]["component"];
  CHECK(img["type"] == "container");
  CHECK(img["supplier"]["name"] == "Example Corp");
  CHECK(img["supplier"]["contact"][0]["email"] == "oss@example.com");
  CHECK(img["purl"] == spdx["packages"][0]["externalRefs"][0]["referenceLocator"]);
  REQUIRE(j["components"].size() == c.packages.size());
  std::map<std::string, json> by_ref;
  for (const auto& comp : j["components"]) by_ref[comp["bom-ref"]] = comp;
  CHECK(by_ref.size() == c.packages.size());
  const json& filelock = by_ref.at(find(c, "python", "filelock")->id);
  CHECK(filelock["licenses"][0]["expression"] == "Unlicense");
  const json& cudnn = by_ref.at(find(c, "python", "nvidia-cudnn-cu12")->id);
  CHECK(cudnn["licenses"][0]["license"]["name"] == "NVIDIA Proprietary Software");  // its words, not an id
  CHECK(cudnn["supplier"]["name"] == "Nvidia CUDA Installer Team");
  CHECK(cudnn["purl"] == "pkg:pypi/nvidia-cudnn-cu12@9.5.1.17");
  // The graph: the image depends on every package; packages on what they name.
  REQUIRE(j["dependencies"].size() == c.packages.size() + 1);
  CHECK(j["dependencies"][0]["ref"] == "image");
  CHECK(j["dependencies"][0]["dependsOn"].size() == c.packages.size());
  const Package* gz = find(c, "deb", "gzip");
  for (const auto& d : j["dependencies"])
    if (d["ref"] == gz->id) CHECK(d["dependsOn"] == json(gz->depends));
}

TEST_CASE("sbom: what changed between two images, for release notes", "[sbom]") {
  std::map<std::string, std::string> before_files{
      {"var/lib/dpkg/status", kStatus},
      {kSite + "torch-2.7.0.dist-info/METADATA", metadata("torch", "2.7.0+cu126")},
      {kSite + "six-1.16.0.dist-info/METADATA", metadata("six", "1.16.0")}};
  std::map<std::string, std::string> after_files = before_files;
  after_files.erase(kSite + "six-1.16.0.dist-info/METADATA");
  after_files[kSite + "torch-2.7.0.dist-info/METADATA"] = metadata("torch", "2.8.0+cu128");
  after_files[kSite + "Filelock-3.16.1.dist-info/METADATA"] = metadata("Filelock", "3.16.1");
  std::string status = kStatus;
  status.replace(status.find("Version: 2.36-9+deb12u4"), 23, "Version: 2.36-9+deb12u9");
  after_files["var/lib/dpkg/status"] = status;
  Contents before = read_contents(before_files, "x86_64"), after = read_contents(after_files, "x86_64");
  std::string d = contents_diff(before, after, "pytorch:a", "pytorch:b");
  CHECK(d == contents_diff(before, after, "pytorch:a", "pytorch:b"));
  CHECK(d.find("## Packages: pytorch:a to pytorch:b\n\n2 changed, 1 added, 1 removed, 2 unchanged.\n") == 0);
  CHECK(d.find("| package | kind | pytorch:a | pytorch:b |\n|---|---|---|---|\n") != std::string::npos);
  CHECK(d.find("| libc6 | deb | 2.36-9+deb12u4 | 2.36-9+deb12u9 |\n") != std::string::npos);
  CHECK(d.find("| torch | python | 2.7.0+cu126 | 2.8.0+cu128 |\n") != std::string::npos);
  CHECK(d.find("| filelock | python | - | 3.16.1 |\n") != std::string::npos);  // the project's normalized name
  CHECK(d.find("| six | python | 1.16.0 | - |\n") != std::string::npos);
  CHECK(d.find("gzip") == std::string::npos);  // unchanged: counted, not listed
  // Nothing changed: the counts alone.
  CHECK(contents_diff(before, before, "a", "a") == "## Packages: a to a\n\n0 changed, 0 added, 0 removed, 5 unchanged.\n");
}

TEST_CASE("sbom: an SBOM document read back gives the packages the layers gave", "[sbom]") {
  std::map<std::string, std::string> files{
      {"etc/os-release", "ID=debian\nVERSION_ID=\"12\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n"},
      {"var/lib/dpkg/status", kStatus},
      {kSite + "Filelock-3.16.1.dist-info/METADATA", metadata("Filelock", "3.16.1")},
      {kSite + "torch-2.7.0.dist-info/METADATA", metadata("torch", "2.7.0+cu126")},
      {"usr/local/cuda-12.6/version.json", R"({"cuda": {"name": "CUDA SDK", "version": "12.6.3"}})"}};
  Contents c = read_contents(files, "x86_64");
  REQUIRE(find(c, "cuda", "cuda"));
  // A package of another architecture (multiarch) and a version that needs percent-encoding.
  Package i386 = *find(c, "deb", "libc6");
  i386.arch = "i386";
  i386.id += "-i386";
  i386.purl = "pkg:deb/debian/libc6@2.36-9%2Bdeb12u4?arch=i386&distro=debian-12";
  c.packages.push_back(i386);
  Digest manifest = Digest::of_bytes("manifest");
  ImageInfo info = image_info("t:1", manifest, R"({"architecture": "amd64", "created": "2026-11-01T00:00:00Z"})");
  for (const std::string& doc : {spdx_json(c, info), cyclonedx_json(c, info)}) {
    INFO(doc.substr(0, 80));
    std::string described;
    Contents back = contents_from_document(doc, &described);
    CHECK(described == manifest.str());
    CHECK(back.os_name == "Debian GNU/Linux 12 (bookworm)");
    CHECK(back.packages.size() == c.packages.size());
    PackageChanges same = package_changes(c, back);
    CHECK(same.rows.empty());
    CHECK(same.unchanged == c.packages.size());  // libc6 of each architecture counted apart
    const Package* cuda = find(back, "cuda", "cuda");
    REQUIRE(cuda);
    CHECK(cuda->version == "12.6.3");
    std::set<std::string> archs;
    for (const auto& p : back.packages)
      if (p.name == "libc6") archs.insert(p.arch);
    CHECK(archs == std::set<std::string>{"amd64", "i386"});
  }
  // Another tool's SPDX: no image package, purls of other kinds kept as their type.
  std::string other = R"({"spdxVersion": "SPDX-2.3", "packages": [
      {"SPDXID": "SPDXRef-a", "name": "left-pad", "versionInfo": "1.3.0",
       "externalRefs": [{"referenceType": "purl", "referenceLocator": "pkg:npm/left-pad@1.3.0"}]},
      {"SPDXID": "SPDXRef-b", "name": "no-purl", "versionInfo": "1"}]})";
  std::string described = "unset";
  Contents o = contents_from_document(other, &described);
  CHECK(described == "unset");
  REQUIRE(o.packages.size() == 2);
  CHECK(o.packages[0].type == "npm");
  CHECK(o.packages[1].type == "unknown");
  // A purl's architecture is percent-encoded bytes: those that are not UTF-8
  // read back as \xHH, as the image's own reader shows them (and as JSON, the
  // notes' --data, can hold them), never as raw bytes.
  std::string bytes = R"({"bomFormat": "CycloneDX", "components": [
      {"name": "libc6", "version": "2.36", "purl": "pkg:deb/debian/libc6@2.36?arch=amd64%F0x%3A"}]})";
  Contents b = contents_from_document(bytes);
  REQUIRE(b.packages.size() == 1);
  CHECK(b.packages[0].arch == "amd64\\xF0x:");
  CHECK_NOTHROW(nlohmann::json(b.packages[0].arch).dump());
  CHECK_THROWS_WITH(contents_from_document("[1, 2]"), Catch::Contains("not a JSON object"));
  CHECK_THROWS_WITH(contents_from_document(R"({"name": "x"})"), Catch::Contains("neither SPDX"));
}

TEST_CASE("sbom: the source trees an image was compiled from or keeps, from its labels", "[sbom]") {
  const std::string commit(40, 'c'), sum(64, 'd'), patch(64, 'e');
  // As pipeline/source_tree.cpp writes them: NGC's kept PyTorch beside its
  // wheels, a tool compiled from a patched archive (not kept), a layer
  // compiled from a local directory and kept; and labels that are not such.
  std::map<std::string, std::string> labels{
      {"dev.stackbuild.source.torch",
       R"({"component":"pytorch","version":"2.6.0","git":"https://github.com/pytorch/pytorch","ref":")" +
           commit + R"(","commit":")" + commit + R"(","path":"/opt/pytorch","built":false})"},
      {"dev.stackbuild.source.tool",
       R"({"archive":"https://example.invalid/tool-1.0.tar.gz","sha256":")" + sum +
           R"(","patches":[{"path":"fix.patch","sha256":")" + patch + R"("}],"built":true})"},
      {"dev.stackbuild.source.mine",
       R"({"local":"sha256:)" + sum + R"(","path":"/src/mine","built":true})"},
      {"dev.stackbuild.source.junk", "not json"},
      {"dev.stackbuild.source.other", R"({"what":"another tool's"})"},
      {"dev.stackbuild.version.cuda", "12.6.3"}};
  Contents c = read_contents(
      {{kSite + "torch-2.6.0.dist-info/METADATA", metadata("torch", "2.6.0+cu126")}}, "x86_64");
  add_source_packages(c, labels);
  REQUIRE(c.packages.size() == 4);
  const Package* torch = find(c, "source", "pytorch");
  const Package* tool = find(c, "source", "tool");
  const Package* mine = find(c, "source", "mine");
  REQUIRE(torch);
  REQUIRE(tool);
  REQUIRE(mine);
  CHECK(torch->version == "2.6.0");
  CHECK(torch->download == "git+https://github.com/pytorch/pytorch@" + commit);
  CHECK(torch->purl ==
        "pkg:generic/pytorch@2.6.0?vcs_url=git%2Bhttps://github.com/pytorch/pytorch%40" + commit);
  CHECK(torch->file == "/opt/pytorch");
  CHECK_FALSE(torch->built);
  CHECK(torch->supplier.empty());  // no vendor label (below: with one)
  // Patched: the version says so, the comment says which.
  CHECK(tool->version.starts_with(
      "sha256:dddddddddddd+patches."));  // no component: the archive's digest
  CHECK(tool->sha256 == sum);
  CHECK(tool->purl.find("checksum=sha256:" + sum) != std::string::npos);
  CHECK(tool->purl.find("download_url=https://example.invalid/tool-1.0.tar.gz") !=
        std::string::npos);
  CHECK_THAT(tool->comment, Catch::Contains("fix.patch (sha256:" + patch + ")"));
  CHECK_THAT(tool->comment, Catch::Contains("not kept in the image"));
  CHECK(tool->built);
  CHECK(mine->download.empty());
  CHECK(mine->version == "sha256:dddddddddddd");
  CHECK_THAT(mine->comment, Catch::Contains("a local directory (tree sha256:" + sum + ")"));

  ImageInfo info = image_info("t:1", Digest::of_bytes("manifest"), R"({"architecture": "amd64"})");
  labels["org.opencontainers.image.vendor"] = "Example Corp";  // who distributes the kept trees
  c = read_contents({{kSite + "torch-2.6.0.dist-info/METADATA", metadata("torch", "2.6.0+cu126")}},
                    "x86_64");
  add_source_packages(c, labels);
  torch = find(c, "source", "pytorch"), tool = find(c, "source", "tool"),
  mine = find(c, "source", "mine");
  CHECK(torch->supplier == "Example Corp");
  CHECK(tool->supplier.empty());  // not kept: not distributed with the image
  info.labels = labels;
  json spdx = json::parse(spdx_json(c, info));
  std::map<std::string, json> by_name;
  for (const auto& p : spdx["packages"]) by_name[p["name"]] = p;
  CHECK(by_name.at("pytorch")["primaryPackagePurpose"] == "SOURCE");
  CHECK(by_name.at("pytorch")["supplier"] == "Organization: Example Corp");
  CHECK(by_name.at("tool")["supplier"] == "NOASSERTION");
  CHECK(by_name.at("pytorch")["downloadLocation"] ==
        "git+https://github.com/pytorch/pytorch@" + commit);
  CHECK(by_name.at("tool")["checksums"][0]["checksumValue"] == sum);
  CHECK(by_name.at("mine")["downloadLocation"] == "NOASSERTION");
  // One SPDX accepts, or none: .invalid is no top-level domain it knows (nor file://).
  CHECK(by_name.at("tool")["downloadLocation"] == "NOASSERTION");
  CHECK(by_name.at("torch")["primaryPackagePurpose"] == "LIBRARY");
  // Kept trees are in the image; compiled ones are what it was generated from.
  std::set<std::pair<std::string, std::string>> rels;
  for (const auto& r : spdx["relationships"])
    if (r["spdxElementId"] == "SPDXRef-Image")
      rels.emplace(r["relationshipType"].get<std::string>(),
                   r["relatedSpdxElement"].get<std::string>());
  auto has = [&](const char* type, const Package* p) {
    return rels.count({type, "SPDXRef-" + p->id}) == 1;
  };
  CHECK(has("CONTAINS", torch));
  CHECK_FALSE(has("GENERATED_FROM", torch));
  CHECK_FALSE(has("CONTAINS", tool));
  CHECK(has("GENERATED_FROM", tool));
  CHECK(has("CONTAINS", mine));
  CHECK(has("GENERATED_FROM", mine));

  json cdx = json::parse(cyclonedx_json(c, info));
  std::map<std::string, json> comps;
  for (const auto& p : cdx["components"]) comps[p["name"]] = p;
  CHECK(comps.at("pytorch")["externalReferences"][0] ==
        json({{"type", "vcs"},
              {"url", "https://github.com/pytorch/pytorch"},
              {"comment", "at " + commit}}));
  CHECK(comps.at("tool")["externalReferences"][0]["type"] == "distribution");
  CHECK(comps.at("tool")["externalReferences"][0]["hashes"][0]["content"] == sum);

  // Read back, from either document, a source tree is a source tree.
  for (const std::string& doc : {spdx_json(c, info), cyclonedx_json(c, info)}) {
    Contents back = contents_from_document(doc);
    CHECK(package_changes(c, back).rows.empty());
    REQUIRE(find(back, "source", "pytorch"));
    CHECK(find(back, "source", "pytorch")->version == "2.6.0");
    CHECK(find(back, "source", "tool")->version == tool->version);
  }

  // A newer commit of the kept tree shows in the release notes' table.
  Contents later = read_contents(
      {{kSite + "torch-2.6.0.dist-info/METADATA", metadata("torch", "2.6.0+cu126")}}, "x86_64");
  auto moved = labels;
  moved["dev.stackbuild.source.torch"] =
      R"({"component":"pytorch","version":"2.7.0","git":"https://github.com/pytorch/pytorch","ref":"v2.7.0","path":"/opt/pytorch","built":false})";
  add_source_packages(later, moved);
  CHECK_THAT(contents_diff(c, later, "a", "b"),
             Catch::Contains("| pytorch | source | 2.6.0 | 2.7.0 |"));
}
