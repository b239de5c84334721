// An image's software bill of materials: the packages it holds, read off its
// layers the way a scanner (syft, trivy) reads an unpacked image, but without
// unpacking it. Each layer is read once for the few files that record what is
// installed (dpkg's and apk's databases, Python's *.dist-info, the CUDA
// toolkit's version.json, os-release); the layers are then stacked with their
// whiteouts, and the packages read off the result. Written as an SPDX 2.3 JSON
// document (image/sbom_spdx.cpp, which also holds what both formats share) or
// a CycloneDX 1.5 one (sbom_cyclonedx.cpp); two images compared for release
// notes in sbom_diff.cpp.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "store/store.hpp"
#include "util/digest.hpp"

namespace sb::sbom {

namespace fs = std::filesystem;

// What one layer holds of those files, and what it removes from the layers below.
struct LayerFiles {
  std::map<std::string, std::string> files;  // image path without the leading '/' -> content
  std::vector<std::string> removed;           // paths it whites out or replaces with a non-file
  std::vector<std::string> opaque;            // directories whose lower contents it hides
};

// Whether `path` (an archive path, no leading '/') is a file the SBOM reads.
bool wanted_path(std::string_view path);

// Reads a layer blob (tar, gzip or zstd). Throws sb::Error naming the blob.
LayerFiles scan_layer(const fs::path& blob);

nlohmann::json layer_files_json(const LayerFiles& l);
LayerFiles layer_files_from_json(const nlohmann::json& j);  // throws on a malformed record

// The files an unpacked image would have, the layers stacked bottom first.
std::map<std::string, std::string> stack_layers(const std::vector<LayerFiles>& layers);

// stack_layers() of an image's layer blobs (digest and path, bottom first).
// Each layer is read once per store: the record sbom-layer/<digest> keeps
// what it held, so a layer shared by many images or rebuilt unchanged is not
// read again.
std::map<std::string, std::string> image_files(const Store& store,
                                               const std::vector<std::pair<Digest, fs::path>>& layers);

struct Package {
  std::string id;        // unique in the document: "deb-libc6-2.36-9-<hash>"
  std::string type;      // "deb", "apk", "python", "cuda"
  std::string name;
  std::string version;
  std::string arch;      // deb/apk architecture
  std::string source;    // the source package (deb Source, apk origin) when it differs
  std::string supplier;  // "Name <email>" as the package says it
  std::string license;   // an SPDX license expression, "" when none is stated as one
  std::string license_text;  // what the package says of its license otherwise
  std::string homepage;
  std::string summary;
  std::string file;      // the image file that records it ("/var/lib/dpkg/status")
  std::string purl;
  std::vector<std::string> depends;  // ids of the packages (of this image) it depends on
  // A source tree (type "source", from an image label: source_packages()):
  std::string download;  // "git+URL@COMMIT" (or @REF), an archive's URL; "" for a local directory
  std::string revision;  // a git source's commit (or ref): the end of `download`
  std::string sha256;    // an archive's sha256 (hex)
  bool built = false;   // a layer of the image was compiled from it (`file` is set when it is kept)
  std::string comment;  // what the document says of it instead of "found in FILE"
};

struct Contents {
  std::string os_id;          // os-release ID: "debian"
  std::string os_version_id;  // "12"
  std::string os_name;        // PRETTY_NAME
  std::vector<Package> packages;  // sorted by type, name, version, file
};

// The packages of an image's files. `machine` is the image's CPU in
// Python's terms ("x86_64", "aarch64"), for the markers of Requires-Dist.
Contents read_contents(const std::map<std::string, std::string>& files, const std::string& machine);

// The labels dev.stackbuild.source.<layer> of an image stackbuild built:
// the source tree each layer was compiled from or keeps (JSON, written by
// pipeline/source_tree.hpp's source_label).
constexpr const char* kSourceLabelPrefix = "dev.stackbuild.source.";

// A package of type "source" for each such label among `labels`: named for
// its component (else its layer), versioned by the component's version (else
// the commit or ref, or "sha256:<12 hex>" of the archive or the local tree),
// "+patches.<8 hex>" added when patches were applied;
// where it comes from (`download`, `sha256`, a pkg:generic purl with
// vcs_url or download_url and checksum), where the image keeps it (`file`)
// and whether a layer was compiled from it; the supplier of a kept tree is
// the image's org.opencontainers.image.vendor (who distributes that copy).
// A label that is not such JSON (another tool's, or a recipe's own) is
// passed over. Sorted as read_contents() sorts.
void add_source_packages(Contents& contents, const std::map<std::string, std::string>& labels);

// A git source tree's repository: its `download` without "git+" and "@REVISION"; "" for other
// packages.
std::string git_repository(const Package& p);

// "amd64" -> "x86_64", "arm64" -> "aarch64"; others as they are.
std::string python_machine(const std::string& oci_architecture);

// What the document says of the image itself.
struct ImageInfo {
  std::string name;        // "pytorch:26.11-2.7.0-cuda12.6", or a registry reference
  std::string manifest_digest;  // "sha256:..."
  std::string architecture;     // the config's
  std::string created;          // the config's created (RFC 3339); the document's time
  std::map<std::string, std::string> labels;  // the config's labels
  std::string tool;             // "stackbuild-0.1.0"
};

// An image's packages: read_contents() of its layers' files (image_files()),
// and add_source_packages() of its config's labels.
Contents image_contents(const Store& store, const ImageInfo& info,
                        const std::vector<std::pair<Digest, fs::path>>& layers);

// The SPDX 2.3 JSON document: the image as the package the document
// describes, which CONTAINS every package found; DEPENDS_ON between them;
// a source tree a layer was compiled from is one the image is GENERATED_FROM
// (and CONTAINS, where it keeps the tree).
// Deterministic: the same image gives the same bytes.
std::string spdx_json(const Contents& contents, const ImageInfo& image);

// An image's ImageInfo, from its config (architecture, created, labels).
ImageInfo image_info(const std::string& name, const Digest& manifest, const std::string& config_json);

// "2024-05-01T12:00:00.123+02:00" -> "2024-05-01T10:00:00Z", as SPDX writes a
// time; "" for a time it cannot read.
std::string spdx_time(const std::string& rfc3339);

enum class Format { Spdx, CycloneDx };

// The SBOM of an image: its layers (bottom first) read through image_files(),
// their packages, and what its config says; SPDX or CycloneDX.
std::string image_sbom(const Store& store, const std::string& name, const Digest& manifest,
                       const std::string& config_json, const std::vector<std::pair<Digest, fs::path>>& layers,
                       Format format = Format::Spdx);

// The CycloneDX 1.5 JSON document of the same: the image as metadata.component
// (type container), every package a component with its purl, supplier and
// licenses, and `dependencies` from what each depends on. Deterministic too.
std::string cyclonedx_json(const Contents& contents, const ImageInfo& image);

// The packages (kind, name, and architecture where a name has several)
// added, removed or of other versions from `before` to `after`, in that
// order of kind and name; "" for the side a package is not on.
struct PackageChange {
  std::string name, kind, before, after;
};
struct PackageChanges {
  std::vector<PackageChange> rows;
  size_t changed = 0, added = 0, removed = 0, unchanged = 0;
};
PackageChanges package_changes(const Contents& before, const Contents& after);

// A Markdown table cell: '|' escaped, line breaks as spaces.
std::string markdown_cell(const std::string& s);

// What changed from `before` to `after`, for release notes: a Markdown table
// of the packages (kind, name, architecture) added, removed or of other
// versions, and the counts. The same inputs give the same text.
std::string contents_diff(const Contents& before, const Contents& after, const std::string& before_name,
                          const std::string& after_name);

// Shared by both formats: the image's pkg:oci purl; a UUID of its manifest
// digest (the SPDX namespace, the CycloneDX serial number); "Name <email>"
// -> (Name, email).
std::string image_purl(const ImageInfo& image);
std::string image_uuid(const ImageInfo& image);
std::pair<std::string, std::string> split_contact(const std::string& s);

constexpr const char* kSpdxMediaType = "application/spdx+json";
constexpr const char* kCycloneDxMediaType = "application/vnd.cyclonedx+json";

// The annotations of an SBOM artifact in a layout or a registry: its title.
const std::map<std::string, std::string>& sbom_annotations(Format format);

// The name an SBOM gives its image: TITLE:TAG, from the manifest's
// org.opencontainers.image.title (stackbuild writes the recipe's stack
// there), so that an image has the same SBOM wherever it is read from: its
// build, its layout, a registry it was pushed to. `fallback` without a title.
std::string sbom_name(const std::string& manifest_json, const std::string& tag, const std::string& fallback);

// A Debian package's license from its /usr/share/doc/<package>/copyright:
// the SPDX expression of a machine-readable (DEP-5) file's License fields,
// a name without an SPDX identifier as license_ref(name); else "" and what
// a free-form file says (the common licenses it refers to) in `text`.
// sbom_debian.cpp.
std::string debian_license(std::string_view copyright, std::string& text);

// The lines of a copyright file that debian_license() reads (Format, Files,
// License and references to /usr/share/common-licenses, paragraphs kept
// apart): what a layer's scan keeps of it.
std::string reduce_copyright(std::string_view copyright);

// Whether `expr` is an SPDX license expression of identifiers on SPDX's list
// (the common ones stackbuild knows; others read as unknown), and, with
// `refs`, of LicenseRef-<idstring> for a license that has none (the SPDX
// document then defines each in hasExtractedLicensingInfos).
bool license_expression_known(std::string_view expr, bool refs = false);

// The identifier on SPDX's list (of those stackbuild knows) spelled `name` in
// any case ("bsd-3-clause" -> "BSD-3-Clause"), and the same of exceptions; "" when none.
std::string spdx_license_id(std::string_view name);
std::string spdx_exception_id(std::string_view name);

// "LicenseRef-" and `name` with what an SPDX idstring cannot hold ([A-Za-z0-9.-])
// as '-', '+' as "-plus": "public-domain" -> "LicenseRef-public-domain".
std::string license_ref(std::string_view name);

// The packages an SBOM document lists (SPDX 2.x or CycloneDX 1.x JSON, as
// stackbuild or another tool writes them), for comparing an image whose
// layers are not at hand: each package's name and version, its kind and
// architecture from its purl (pkg:deb -> "deb", pkg:pypi -> "python",
// pkg:apk -> "apk", pkg:generic/nvidia/ -> "cuda", else the purl's type), and
// the OS where the document names it. `described`, when given, is set to the
// manifest digest of the image the document describes, where it says one.
// Throws sb::Error (exit 3) for a document that is neither. sbom_read.cpp.
Contents contents_from_document(const std::string& text, std::string* described = nullptr);

// A Package URL component: percent-encoded as the purl spec says (':' kept,
// and the characters of `keep`: "/" in a qualifier's value).
std::string purl_encode(std::string_view s, std::string_view keep = "");

}  // namespace sb::sbom
