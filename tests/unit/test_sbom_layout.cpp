// SBOMs of OCI layouts: blobs the store already holds, malformed layouts and
// configs refused naming the field, SBOM artifacts referring to their image,
// Debian licenses from copyright files, and the report that release notes
// take. What layers hold and the documents themselves are in test_sbom.cpp.
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

TEST_CASE("layout: a blob that is the store's own file is not hashed again, a copied one is",
          "[sbom]") {
  TempDir dir;
  Store store(dir.path() / "store");
  std::string layer = "the bytes of a layer";
  Digest ld = Digest::of_bytes(layer);  // an uncompressed layer: its diff_id is its digest
  std::string config =
      R"({"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[")" + ld.str() +
      R"("]}})";
  store.put(layer);
  Digest cd = store.put(config);
  std::string manifest = json{{"schemaVersion", 2},
                              {"mediaType", kMediaTypeManifest},
                              {"config", {{"mediaType", "application/vnd.oci.image.config.v1+json"},
                                          {"digest", cd.str()},
                                          {"size", config.size()}}},
                              {"layers", json::array({{{"mediaType", "application/vnd.oci.image.layer.v1.tar"},
                                                       {"digest", ld.str()},
                                                       {"size", layer.size()}}})}}
                             .dump();
  Digest md = store.put(manifest);
  fs::path layout = dir.path() / "layout";
  fs::create_directories(layout / "blobs" / "sha256");
  for (const Digest& d : {ld, cd, md})  // hard links, as build -o writes them
    REQUIRE(::link(store.blob_path(d).c_str(), (layout / "blobs" / "sha256" / d.hex()).c_str()) == 0);
  write_file_atomic(layout / "oci-layout", R"({"imageLayoutVersion":"1.0.0"})");
  write_file_atomic(layout / "index.json",
                    json{{"schemaVersion", 2},
                         {"manifests", json::array({{{"mediaType", kMediaTypeManifest},
                                                     {"digest", md.str()},
                                                     {"size", manifest.size()},
                                                     {"annotations", {{"org.opencontainers.image.ref.name", "t"}}}}})}}
                        .dump());
  CHECK(open_layout_image(layout, "t", &store).manifest_digest == md);
  CHECK(open_layout_image(layout, "t").manifest_digest == md);

  // A copy of the layout is hashed with the store given too: a damaged layer of the same size is refused.
  fs::path copy = dir.path() / "copy";
  fs::copy(layout, copy, fs::copy_options::recursive);
  fs::path blob = copy / "blobs" / "sha256" / ld.hex();
  fs::remove(blob);
  write_file_atomic(blob, "the bytes of a layeR");
  CHECK_THROWS_WITH(open_layout_image(copy, "t", &store), Catch::Contains("does not match its digest"));
  CHECK_THROWS_WITH(open_layout_image(copy, "t"), Catch::Contains("does not match its digest"));

  // The store's own file is trusted as the store trusts it: damage made to it
  // in place is seen only without the store.
  fs::permissions(store.blob_path(ld), fs::perms::owner_write, fs::perm_options::add);
  {
    std::FILE* f = std::fopen(store.blob_path(ld).c_str(), "r+");
    REQUIRE(f);
    std::fputs("The", f);
    std::fclose(f);
  }
  CHECK(open_layout_image(layout, "t", &store).manifest_digest == md);
  CHECK_THROWS_WITH(open_layout_image(layout, "t"), Catch::Contains("does not match its digest"));
}

TEST_CASE("sbom: an image config of the wrong shape is refused naming the field", "[sbom]") {
  auto info = [](const std::string& config) {
    return image_info("t:1", Digest::of_bytes("m"), config);
  };
  CHECK(info(R"({"architecture":"arm64","config":{"Labels":{"k":"v"}},"created":null})")
            .labels.at("k") == "v");
  CHECK_THROWS_WITH(info("[1]"), "the config of t:1 is not a JSON object");
  CHECK_THROWS_WITH(info(R"({"config":{"Labels":{"k":1}}})"),
                    "the config of t:1: config.Labels[\"k\"] is a number, not a string");
  CHECK_THROWS_WITH(info(R"({"created":5})"), "the config of t:1: created is not a string");
}

TEST_CASE("sbom: a malformed OCI layout is refused naming the document and the field", "[sbom]") {
  TempDir dir;
  fs::path layout = dir.path() / "layout";
  fs::create_directories(layout / "blobs" / "sha256");
  write_file_atomic(layout / "oci-layout", R"({"imageLayoutVersion":"1.0.0"})");
  auto index_of = [&](const json& entry) {
    write_file_atomic(layout / "index.json",
                      json{{"schemaVersion", 2}, {"manifests", json::array({entry})}}.dump());
  };
  json entry = {{"mediaType", kMediaTypeManifest},
                {"digest", 5},
                {"annotations", {{"org.opencontainers.image.ref.name", "t"}}}};
  index_of(entry);
  CHECK_THROWS_WITH(open_layout_image(layout, "t"),
                    Catch::Contains("index.json") &&
                        Catch::Contains("(/manifests/0/digest) type must be string"));

  Digest cd = Digest::of_bytes("{}");
  std::string manifest = R"({"schemaVersion":2,"config":{"digest":")" + cd.str() +
                         R"(","size":2},"layers":[{"digest":7}]})";
  Digest md = Digest::of_bytes(manifest);
  write_file_atomic(layout / "blobs" / "sha256" / md.hex(), manifest);
  write_file_atomic(layout / "blobs" / "sha256" / cd.hex(), "{}");
  entry["digest"] = md.str();
  index_of(entry);
  CHECK_THROWS_WITH(open_layout_image(layout, "t"),
                    Catch::Contains("manifest " + md.str() + " in " + layout.string()) &&
                        Catch::Contains("(/layers/0/digest) type must be string"));

  // A config that is not JSON, has no diff_id for each layer, or has a field
  // of the wrong type: opening the layout, notes and push say which and where.
  const std::string rootfs = R"("rootfs":{"type":"layers","diff_ids":[]})";
  for (const auto& [config, opening, what] :
       std::vector<std::tuple<std::string, bool, std::string>>{
           {"no", true, " is not JSON: "},
           {R"({"rootfs":{"type":"layers","diff_ids":[")" + Digest::of_bytes("x").str() + R"("]}})",
            true, " lists 1 diff_ids for 0 layers"},
           {"{" + rootfs + R"(,"os":5})", false, ": os is a number, not a string"},
           {"{" + rootfs + R"(,"config":{"Env":"A=1"}})", false,
            ": config.Env is a string, not a list of strings"}}) {
    Digest bad = Digest::of_bytes(config);
    write_file_atomic(layout / "blobs" / "sha256" / bad.hex(), config);
    std::string m = R"({"schemaVersion":2,"config":{"digest":")" + bad.str() + R"(","size":)" +
                    std::to_string(config.size()) + R"(},"layers":[]})";
    Digest mbad = Digest::of_bytes(m);
    write_file_atomic(layout / "blobs" / "sha256" / mbad.hex(), m);
    entry["digest"] = mbad.str();
    index_of(entry);
    std::string in_layout = "config " + bad.str() + " in " + layout.string() + what;
    if (opening) {
      CHECK_THROWS_WITH(open_layout_image(layout, "t"), Catch::StartsWith(in_layout));
      CHECK_THROWS_WITH(notes::read_layout(layout), Catch::StartsWith(in_layout));
    } else {
      CHECK_THROWS_WITH(notes::read_layout(layout), Catch::StartsWith("the config of t" + what));
      CHECK_THROWS_WITH(registry::manifest_from_layout(layout, kMediaTypeManifest, mbad),
                        Catch::StartsWith(layout.string() + ": config " + bad.str() +
                                          " of manifest " + mbad.str() + what));
    }
  }
}

TEST_CASE("sbom: an artifact in an OCI layout refers to its image", "[sbom]") {
  TempDir dir;
  fs::path layout = dir.path() / "layout";
  fs::create_directories(layout / "blobs" / "sha256");
  write_file_atomic(layout / "oci-layout", R"({"imageLayoutVersion":"1.0.0"})");
  // An image with no layers.
  std::string config = R"({"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]}})";
  Digest cd = Digest::of_bytes(config);
  std::string manifest = R"({"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":")" +
                         cd.str() + R"(","size":)" + std::to_string(config.size()) + R"(},"layers":[]})";
  Digest md = Digest::of_bytes(manifest);
  write_file_atomic(layout / "blobs" / "sha256" / cd.hex(), config);
  write_file_atomic(layout / "blobs" / "sha256" / md.hex(), manifest);
  json index{{"schemaVersion", 2},
             {"manifests", json::array({{{"mediaType", kMediaTypeManifest},
                                         {"digest", md.str()},
                                         {"size", manifest.size()},
                                         {"annotations", {{"org.opencontainers.image.ref.name", "t"}}}}})}};
  write_file_atomic(layout / "index.json", index.dump());
  Descriptor subject{kMediaTypeManifest, md, manifest.size(), {}, {}};

  Digest a1 = add_layout_artifact(layout, kSpdxMediaType, "{\"v\":1}", subject, {{"k", "v"}});
  Digest a2 = add_layout_artifact(layout, kSpdxMediaType, "{\"v\":2}", subject, {{"k", "v"}});
  CHECK(a1 != a2);
  json idx = json::parse(read_file(layout / "index.json"));
  CHECK(idx["manifests"].size() == 2);  // the second replaced the first
  CHECK(idx["manifests"][1]["artifactType"] == kSpdxMediaType);
  CHECK(idx["manifests"][1]["digest"] == a2.str());

  // Readers of images pass over it.
  CHECK(open_layout_image(layout, "").manifest_digest == md);
  auto entries = registry::layout_entries(layout);
  REQUIRE(entries.size() == 1);
  CHECK(entries[0].ref == "t");

  auto refs = layout_referrers(layout, md);
  REQUIRE(refs.size() == 1);
  CHECK(refs[0].manifest == a2);
  CHECK(read_file(refs[0].file) == "{\"v\":2}");
  json m = json::parse(refs[0].manifest_json);
  CHECK(m["subject"]["digest"] == md.str());
  CHECK(m["config"]["mediaType"] == kMediaTypeEmpty);
  CHECK(layout_referrers(layout, Digest::of_bytes("no such image")).empty());

  CHECK_THROWS_WITH(add_layout_artifact(layout, kSpdxMediaType, "{}",
                                        {kMediaTypeManifest, Digest::of_bytes("x"), 1, {}, {}}, {}),
                    Catch::Contains("lacks the image"));

  // Another image under another ref keeps the artifact; a new image under the
  // artifact's image's ref name takes it away (no stale SBOMs in a layout
  // rebuilt every month).
  Store store(dir.path() / "store");
  auto image_of = [](const std::string& arch) {
    std::string config = R"({"architecture":")" + arch + R"(","os":"linux","rootfs":{"type":"layers","diff_ids":[]}})";
    Descriptor cd{kMediaTypeConfig, Digest::of_bytes(config), config.size(), {}, {}};
    std::string manifest =
        R"({"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":")" +
        cd.digest.str() + R"(","size":)" + std::to_string(config.size()) + R"(},"layers":[]})";
    Descriptor md{kMediaTypeManifest, Digest::of_bytes(manifest), manifest.size(), {}, {}};
    return Image{{}, config, cd, manifest, md};
  };
  write_oci_layout(layout, store, {{"x:other", image_of("arm64")}});
  CHECK(layout_referrers(layout, md).size() == 1);
  write_oci_layout(layout, store, {{"x:t", image_of("riscv64")}});
  CHECK(layout_referrers(layout, md).empty());
  idx = json::parse(read_file(layout / "index.json"));
  CHECK(idx["manifests"].size() == 2);
  for (const auto& m : idx["manifests"]) CHECK_FALSE(m.contains("artifactType"));
}

TEST_CASE("sbom: a Debian package's licenses from its machine-readable copyright file", "[sbom]") {
  std::string text;
  auto dep5 = [](const std::string& body) {
    return "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n"
           "Upstream-Name: thing\n\n" + body;
  };
  // Files paragraphs in order, each once; stand-alone License paragraphs are texts, not more licenses.
  CHECK(debian_license(dep5("Files: *\nCopyright: 2001 A\nLicense: GPL-2+\n\n"
                            "Files: lib/*\nCopyright: B\nLicense: LGPL-2.1+\n\n"
                            "Files: doc/*\nLicense: GPL-2+\n\n"
                            "License: GPL-2+\n This program is free software.\n .\n On Debian systems, see\n"
                            " /usr/share/common-licenses/GPL-2.\n\n"
                            "License: LGPL-2.1+\n The text.\n"),
                       text) == "GPL-2.0-or-later AND LGPL-2.1-or-later");
  CHECK(text.empty());
  // Debian's short names, or, and, commas and exceptions.
  CHECK(debian_license(dep5("Files: *\nLicense: Expat\n"), text) == "MIT");
  CHECK(debian_license(dep5("Files: *\nLicense: BSD-3-clause\n"), text) == "BSD-3-Clause");
  CHECK(debian_license(dep5("Files: *\nLicense: GPL-3\n"), text) == "GPL-3.0-only");
  CHECK(debian_license(dep5("Files: *\nLicense: GPL-1+ or Artistic\n"), text) == "GPL-1.0-or-later OR Artistic-1.0-Perl");
  CHECK(debian_license(dep5("Files: *\nLicense: GPL-2+ or Artistic-2.0, and BSD-3-clause\n"), text) ==
        "(GPL-2.0-or-later OR Artistic-2.0) AND BSD-3-Clause");
  CHECK(debian_license(dep5("Files: *\nLicense: GPL-2+ with OpenSSL exception\n"), text) ==
        "GPL-2.0-or-later WITH OpenSSL-exception");
  CHECK(debian_license(dep5("Files: *\nLicense: Zlib\n\nFiles: x/*\nLicense: MIT or Apache-2.0\n"), text) ==
        "Zlib AND (MIT OR Apache-2.0)");
  CHECK(debian_license(dep5("Files: *\nLicense: GFDL-NIV-1.3+ and CC0\n"), text) ==
        "GFDL-1.3-no-invariants-or-later AND CC0-1.0");
  // A name SPDX has no identifier for: a LicenseRef (the document defines it).
  CHECK(debian_license(dep5("Files: *\nLicense: GPL-2+\n\nFiles: tz/*\nLicense: public-domain\n"), text) ==
        "GPL-2.0-or-later AND LicenseRef-public-domain");
  CHECK(debian_license(dep5("Files: *\nLicense: GPL-3+ with GCC-exception\n"), text) ==
        "LicenseRef-GPL-3-plus-with-GCC-exception");
  CHECK(debian_license(dep5("Files: *\nLicense: GPL-3+ with Bison exception, and MIT/X11\n"), text) ==
        "LicenseRef-GPL-3-plus-with-Bison-exception AND LicenseRef-MIT-X11");
  CHECK(license_expression_known("GPL-2.0-or-later AND LicenseRef-public-domain", true));
  CHECK_FALSE(license_expression_known("GPL-2.0-or-later AND LicenseRef-public-domain"));
  CHECK_FALSE(license_expression_known("LicenseRef-", true));
  CHECK_FALSE(license_expression_known("LicenseRef-a+b", true));
  // Terms once: GPL-3+ here and in "GPL-3+ and ISC".
  CHECK(debian_license(dep5("Files: *\nLicense: GPL-3+\n\nFiles: a\nLicense: GPL-3+ and ISC\n\n"
                            "Files: b\nLicense: MIT or ISC\n\nFiles: c\nLicense: GPL-2+ or MIT, and ISC\n"),
                       text) == "GPL-3.0-or-later AND ISC AND (MIT OR ISC) AND (GPL-2.0-or-later OR MIT)");
  // A License field that is no expression: one LicenseRef of its words, not a guess.
  CHECK(debian_license(dep5("Files: *\nLicense: BSD-3-clause and/or GPL-3+\n\nFiles: x\nLicense: Zlib\n"), text) ==
        "LicenseRef-BSD-3-clause-and-or-GPL-3-plus AND Zlib");
  // A free-form file: what it refers to, as words only.
  CHECK(debian_license("This package was debianized by X.\n\nSee /usr/share/common-licenses/GPL-2.\n"
                       "Also /usr/share/common-licenses/LGPL-2.1 and /usr/share/common-licenses/GPL-2.\n",
                       text).empty());
  CHECK(text == "refers to /usr/share/common-licenses/GPL-2, /usr/share/common-licenses/LGPL-2.1 (a copyright "
                "file not in the machine-readable format)");
  text.clear();
  CHECK(debian_license("Copyright 1999 Someone. All rights reserved.\n", text).empty());
  CHECK(text.empty());
  // What a layer's scan keeps: the fields read, the paragraphs apart, no license texts.
  CHECK(reduce_copyright("Format: x/copyright-format/1.0/\r\nUpstream-Name: y\n\n\n\nFiles: *\nCopyright: me\n"
                         "License: MIT\n Permission is hereby granted\n") ==
        "Format: x/copyright-format/1.0/\n\nFiles: *\nLicense: MIT\n");
}

TEST_CASE("sbom: Debian packages take their licenses from copyright files, through their source when linked",
          "[sbom]") {
  const std::string format = "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n\n";
  std::map<std::string, std::string> files{
      {"etc/os-release", "ID=debian\nVERSION_ID=\"12\"\n"},
      {"var/lib/dpkg/status", kStatus},
      {"var/lib/dpkg/status.d/gcc-12-base", "Package: gcc-12-base\nVersion: 12.2.0-14\nArchitecture: amd64\nSource: gcc-12\n"},
      {"usr/share/doc/libc6/copyright", format + "Files: *\nLicense: LGPL-2.1+\n"},
      {"usr/share/doc/gcc-12-base/copyright", format + "Files: *\nLicense: GPL-3+ with GCC-exception\n"},
      {"usr/share/doc/gzip/copyright", "gzip is under /usr/share/common-licenses/GPL-3.\n"},
  };
  Contents c = read_contents(files, "x86_64");
  REQUIRE(find(c, "deb", "libc6"));
  CHECK(find(c, "deb", "libc6")->license == "LGPL-2.1-or-later");
  // libgcc-s1 has no copyright file of its own (its doc directory is a link): its source's.
  REQUIRE(find(c, "deb", "libgcc-s1"));
  CHECK(find(c, "deb", "libgcc-s1")->license == "LicenseRef-GPL-3-plus-with-GCC-exception");
  CHECK(find(c, "deb", "gzip")->license.empty());
  CHECK_THAT(find(c, "deb", "gzip")->license_text, Catch::Contains("/usr/share/common-licenses/GPL-3"));
  // Copyright files are no packages.
  for (const auto& p : c.packages) CHECK(p.type == "deb");
  // A layer's scan keeps the copyright files of /usr/share/doc only, reduced.
  CHECK(wanted_path("usr/share/doc/libc6/copyright"));
  CHECK_FALSE(wanted_path("usr/share/doc/libc6/changelog.Debian.gz"));
  CHECK_FALSE(wanted_path("usr/share/doc/libc6/examples/copyright"));
  CHECK_FALSE(wanted_path("opt/thing/copyright"));
}

TEST_CASE("notes: an image's report is its newest, in whatever order the referrers come",
          "[sbom][notes]") {
  auto report = [](int failed) {
    return json{{"image", "x"},
                {"results", json::array()},
                {"summary", {{"passed", 1}, {"failed", failed}}}}
        .dump();
  };
  const Digest a = Digest::of_bytes("a"), b = Digest::of_bytes("b"), c = Digest::of_bytes("c");
  const std::string t1 = "2026-12-01T10:00:00.000Z", t2 = "2026-12-02T09:00:00.500Z";
  for (bool newest_first : {true, false}) {
    notes::Image f{.digest = a};
    std::string newest;
    if (newest_first) {
      notes::offer_report(f, newest, report(0), b, t2);
      notes::offer_report(f, newest, report(1), a, t1);
    } else {
      notes::offer_report(f, newest, report(1), a, t1);
      notes::offer_report(f, newest, report(0), b, t2);
    }
    CHECK(f.report_digest == b.str());
    CHECK(f.report["summary"]["failed"] == 0);
    notes::offer_report(f, newest, report(2), c, "");  // no time (older stackbuild): not newer
    CHECK(f.report_digest == b.str());
    notes::offer_report(f, newest, R"({"not": "a report"})", c, "2027-01-01T00:00:00.000Z");
    CHECK(f.report_digest == b.str());
  }
  // Reports without a time: the one listed last, as before.
  notes::Image g{.digest = a};
  std::string newest;
  notes::offer_report(g, newest, report(1), a, "");
  notes::offer_report(g, newest, report(0), b, "");
  CHECK(g.report_digest == b.str());
}
