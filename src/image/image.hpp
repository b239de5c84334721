// OCI image documents: config, manifest and index, built from layers and a
// plain ImageConfig. Every document is serialised once, canonically (sorted
// keys, no whitespace), and its digest is that of those exact bytes.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "layer/layer.hpp"
#include "util/text.hpp"

namespace sb {

struct ImageConfig {
  std::string architecture = "amd64";
  std::string os = "linux";
  std::string variant;                      // e.g. "v8" for arm64, usually empty
  std::vector<std::string> env;             // "KEY=value", in recipe order
  std::vector<std::string> entrypoint;
  std::vector<std::string> cmd;
  std::string working_dir;
  std::string user;
  std::map<std::string, std::string> labels;
  std::vector<std::string> exposed_ports;   // "8888/tcp"
  std::string stop_signal;
};

struct HistoryEntry {
  std::string created_by;   // what made the layer, e.g. "stackbuild: layer 'app' (copy)"
  std::string comment;
  bool empty_layer = false;
  std::string created;      // RFC 3339; "" = the build's time (a base image's entries keep theirs)
};

// The standard org.opencontainers.image.* annotations a manifest carries.
struct ImageAnnotations {
  std::string title, version, source, revision, description;
};

struct Descriptor {
  std::string media_type;
  Digest digest;
  uint64_t size = 0;
  std::map<std::string, std::string> annotations;
  std::optional<std::pair<std::string, std::string>> platform;  // (os, architecture)
};
void to_json(nlohmann::json& j, const Descriptor& d);

// A built image: its documents' bytes and descriptors.
struct Image {
  std::vector<Layer> layers;
  std::string config_json;
  Descriptor config;
  std::string manifest_json;
  Descriptor manifest;
};

constexpr const char* kMediaTypeConfig = "application/vnd.oci.image.config.v1+json";
constexpr const char* kMediaTypeManifest = "application/vnd.oci.image.manifest.v1+json";
// The artifactType of a test report (`stackbuild test`, the build's gate) that refers to its image.
constexpr const char* kTestReportType = "application/vnd.stackbuild.test-report.v1+json";
constexpr const char* kMediaTypeIndex = "application/vnd.oci.image.index.v1+json";
constexpr const char* kMediaTypeEmpty = "application/vnd.oci.empty.v1+json";  // an artifact's config


// An image config document's bytes as JSON; refused unless they are a JSON
// object. `where` names the document in errors ("the config of app:1").
nlohmann::json parse_config_document(const std::string& bytes, const std::string& where);

// The ImageConfig of a config document's bytes (os, architecture, variant and the
// `config` object's Env, Entrypoint, Cmd, WorkingDir, User, Labels,
// ExposedPorts and StopSignal), read as a runtime reads them: a field of the
// wrong type is refused naming it, as Go's JSON decoding of the spec's
// structs refuses it, and null is absent. An absent os is "linux"; an absent
// architecture "".
ImageConfig read_image_config(const std::string& bytes, const std::string& where);
// The same, of a document parse_config_document() gave.
ImageConfig image_config_from(const nlohmann::json& config, const std::string& where);

// A config document's rootfs.diff_ids, one for each layer: refused, naming the
// entry, unless it is a list of sha256 digests.
std::vector<Digest> read_diff_ids(const nlohmann::json& config, const std::string& where);

// Assembles config and manifest. `history` has one entry per layer.
Image make_image(const ImageConfig& config, const std::vector<Layer>& layers,
                 const std::vector<HistoryEntry>& history, int64_t created_epoch,
                 const ImageAnnotations& annotations);

// An image index listing manifests, each with its ref name annotation, and
// the index's own annotations (none when empty).
std::string make_index_json(const std::vector<Descriptor>& manifests,
                            const std::map<std::string, std::string>& annotations = {});

// The Go-style names OCI uses: "amd64", "arm64" from `uname -m` style names.
std::string oci_architecture(const std::string& machine);

// Checks a tag ("name:tag" or "tag") for what registries and layouts accept.
void validate_tag(const std::string& tag);

}  // namespace sb
