// Writers for finished images: an OCI image layout directory and a
// docker-archive tarball (what `docker save` writes and `docker load` reads).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "image/image.hpp"
#include "store/store.hpp"

namespace sb {

struct TaggedImage {
  std::string tag;   // "name:tag" (the layout's ref name is the part after ':')
  Image image;
};

// An image index (its canonical bytes) to list in a layout under `ref`.
struct TaggedIndex {
  std::string ref;
  std::string json;
  Digest digest;
  // The images it lists whose blobs the layout needs even when no ref names
  // them (a tag over platforms, with no tag of each platform's own).
  std::vector<Image> children = {};
};

// The ref name an image gets in an OCI layout: the tag part of "name:tag".
std::string layout_ref_name(const std::string& tag);

// The ref names of the tags a build recorded for a point in its matrix index
// (the annotation dev.stackbuild.tags: "pytorch:26.11-2.7.0-cuda12.6,..."),
// in order: the names the build's layout gives that image.
std::vector<std::string> recorded_ref_names(const std::string& tags);

// Adds the images to the OCI layout at `dir` (created if missing). Images
// already there under other ref names are kept; the same ref name is replaced.
// Blobs go in first, index.json last and atomically, so a reader never sees a
// manifest whose blobs are missing. `indexes` (written after the images they
// list) join index.json under their ref names in the same way.
void write_oci_layout(const fs::path& dir, const Store& store, const std::vector<TaggedImage>& images,
                      const std::vector<TaggedIndex>& indexes = {});

// Writes a docker-archive tarball (manifest.json, config, uncompressed layers)
// to `out`, atomically.
void write_docker_archive(const fs::path& out, const Store& store, const std::vector<TaggedImage>& images);

// An image read back from an OCI layout, every blob's digest checked (the
// layers' unless the caller takes that on: LayerDigests below).
struct LayoutImage {
  Digest manifest_digest;
  std::string ref;                      // its org.opencontainers.image.ref.name
  std::string manifest_json;
  std::string config_json;
  std::vector<fs::path> layer_blobs;    // in order, bottom first
  std::vector<Digest> layer_digests;    // their descriptors' digests
};

// Whether open_layout_image hashes the layer blobs, or leaves that to its
// caller (who must then call check_blob_digest on each before using what it
// read from them: unpack hashes while it extracts into a directory that it
// throws away on a mismatch).
enum class LayerDigests { Checked, LeftToCaller };

// Throws unless the file hashes to `d`, naming both.
void check_blob_digest(const fs::path& blob, const Digest& d);

// Artifacts that refer to an image of a layout (OCI 1.1: a manifest whose
// `subject` is the image's): their manifest and one blob in blobs/, listed in
// index.json by artifactType without a ref name, as `oras attach
// --oci-layout` lists one. Readers of images (open_layout_image, push) pass
// over them.
struct LayoutArtifact {
  std::string artifact_type;
  Digest manifest;
  std::string manifest_json;
  Digest subject;
  fs::path file;  // the blob
};

// The manifest of an artifact: the empty config, `file` as its one layer, `subject`.
std::string artifact_manifest_json(const std::string& artifact_type, const Descriptor& file, const Descriptor& subject,
                                   const std::map<std::string, std::string>& annotations);

// Adds `bytes` to the layout as an artifact of `artifact_type` referring to
// `subject`, which the layout must hold; one of the same type for the same
// subject is replaced. Returns the artifact's manifest digest.
Digest add_layout_artifact(const fs::path& dir, const std::string& artifact_type, const std::string& bytes,
                           const Descriptor& subject, const std::map<std::string, std::string>& annotations);

// The layout's artifacts that refer to `subject`.
std::vector<LayoutArtifact> layout_referrers(const fs::path& dir, const Digest& subject);

// "DIR[:REF]" -> (DIR, REF): DIR as a whole when it is a directory.
std::pair<fs::path, std::string> split_layout_ref(const std::string& arg);

// The image under `ref` (may be empty when the layout holds one image), each
// blob checked against its size and digest; with `store`, a blob that is the
// store's own file (a hard link, as `build -o` writes layouts) is not hashed
// again: the store checked it when it took it in.
//
// A ref that names an image index (a tag over several platforms) gives the
// image for `platform` ("linux/arm64"); "" = this machine's, else an error
// naming the platforms it has. An image of another platform than a given
// one is an error too.
LayoutImage open_layout_image(const fs::path& layout, const std::string& ref, const Store* store = nullptr,
                              const std::string& platform = "", LayerDigests layer_digests = LayerDigests::Checked);

// This machine's platform in OCI's terms: "linux/amd64", "linux/arm64".
std::string host_platform();

}  // namespace sb
