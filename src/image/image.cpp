#include "image/image.hpp"

#include <ctime>
#include <regex>

#include <nlohmann/json.hpp>

#include "util/error.hpp"
#include "util/json.hpp"

namespace sb {

using json = nlohmann::json;


void to_json(json& j, const Descriptor& d) {
  j = json{{"mediaType", d.media_type}, {"digest", d.digest.str()}, {"size", d.size}};
  if (!d.annotations.empty()) j["annotations"] = d.annotations;
  if (d.platform) j["platform"] = json{{"os", d.platform->first}, {"architecture", d.platform->second}};
}

namespace {

// Reads a config's fields for read_image_config(); every error names `where`
// and the field ("config.WorkingDir").
struct ConfigFields {
  const std::string& where;

  [[noreturn]] void wrong(const std::string& field, const json& v, const char* want) const {
    throw Error(where + ": " + field + " is " + json_kind(v) + ", not " + want);
  }
  // j[key], or nullptr when it is absent or null.
  static const json* get(const json& j, const char* key) {
    auto it = j.find(key);
    return it == j.end() || it->is_null() ? nullptr : &*it;
  }
  void string(const json& j, const char* key, const std::string& field, std::string& out) const {
    if (const json* v = get(j, key)) {
      if (!v->is_string()) wrong(field, *v, "a string");
      out = v->get<std::string>();
    }
  }
  void strings(const json& j, const char* key, const std::string& field,
               std::vector<std::string>& out) const {
    if (const json* v = get(j, key)) {
      if (!v->is_array()) wrong(field, *v, "a list of strings");
      for (size_t i = 0; i < v->size(); ++i) {
        if (!(*v)[i].is_string()) wrong(field + "[" + std::to_string(i) + "]", (*v)[i], "a string");
        out.push_back((*v)[i].get<std::string>());
      }
    }
  }
  const json* object(const json& j, const char* key, const std::string& field) const {
    const json* v = get(j, key);
    if (v && !v->is_object()) wrong(field, *v, "an object");
    return v;
  }
};

}  // namespace

json parse_config_document(const std::string& bytes, const std::string& where) {
  json cfg;
  try {
    cfg = json::parse(bytes);
  } catch (const json::exception& e) {
    throw Error(where + " is not JSON: " + e.what());
  }
  if (!cfg.is_object()) throw Error(where + " is not a JSON object");
  return cfg;
}

ImageConfig image_config_from(const json& cfg, const std::string& where) {
  ConfigFields f{where};
  ImageConfig c;
  c.os = "linux";
  c.architecture = "";
  f.string(cfg, "os", "os", c.os);
  f.string(cfg, "architecture", "architecture", c.architecture);
  f.string(cfg, "variant", "variant", c.variant);
  const json* inner = f.object(cfg, "config", "config");
  if (!inner) return c;
  f.strings(*inner, "Env", "config.Env", c.env);
  f.strings(*inner, "Entrypoint", "config.Entrypoint", c.entrypoint);
  f.strings(*inner, "Cmd", "config.Cmd", c.cmd);
  f.string(*inner, "WorkingDir", "config.WorkingDir", c.working_dir);
  f.string(*inner, "User", "config.User", c.user);
  f.string(*inner, "StopSignal", "config.StopSignal", c.stop_signal);
  if (const json* labels = f.object(*inner, "Labels", "config.Labels"))
    for (const auto& [k, v] : labels->items()) {
      if (!v.is_string()) f.wrong("config.Labels[\"" + k + "\"]", v, "a string");
      c.labels[k] = v.get<std::string>();
    }
  if (const json* ports = f.object(*inner, "ExposedPorts", "config.ExposedPorts"))
    for (const auto& [k, v] : ports->items()) c.exposed_ports.push_back(k);
  return c;
}

ImageConfig read_image_config(const std::string& bytes, const std::string& where) {
  return image_config_from(parse_config_document(bytes, where), where);
}

std::vector<Digest> read_diff_ids(const json& cfg, const std::string& where) {
  ConfigFields f{where};
  const json* rootfs = f.object(cfg, "rootfs", "rootfs");
  if (!rootfs || !ConfigFields::get(*rootfs, "diff_ids"))
    throw Error(where + " has no rootfs.diff_ids list");
  std::vector<std::string> ids;
  f.strings(*rootfs, "diff_ids", "rootfs.diff_ids", ids);
  std::vector<Digest> out;
  for (size_t i = 0; i < ids.size(); ++i) {
    try {
      out.push_back(Digest::parse(ids[i]));
    } catch (const Error& e) {
      throw Error(where + ": rootfs.diff_ids[" + std::to_string(i) + "]: " + e.what());
    }
  }
  return out;
}

static std::string canonical(const json& j) { return j.dump(); }  // keys sorted: nlohmann objects are std::map

static json config_document(const ImageConfig& c, const std::vector<Layer>& layers,
                            const std::vector<HistoryEntry>& history, int64_t created) {
  json cfg = json::object();
  if (!c.env.empty()) cfg["Env"] = c.env;
  if (!c.entrypoint.empty()) cfg["Entrypoint"] = c.entrypoint;
  if (!c.cmd.empty()) cfg["Cmd"] = c.cmd;
  if (!c.working_dir.empty()) cfg["WorkingDir"] = c.working_dir;
  if (!c.user.empty()) cfg["User"] = c.user;
  if (!c.labels.empty()) cfg["Labels"] = c.labels;
  if (!c.stop_signal.empty()) cfg["StopSignal"] = c.stop_signal;
  if (!c.exposed_ports.empty()) {
    json ports = json::object();
    for (const auto& p : c.exposed_ports) ports[p] = json::object();
    cfg["ExposedPorts"] = ports;
  }
  json diff_ids = json::array();
  for (const auto& l : layers) diff_ids.push_back(l.diff_id.str());
  json hist = json::array();
  for (const auto& h : history) {
    json e{{"created", h.created.empty() ? rfc3339(created) : h.created}, {"created_by", h.created_by}};
    if (!h.comment.empty()) e["comment"] = h.comment;
    if (h.empty_layer) e["empty_layer"] = true;
    hist.push_back(e);
  }
  json doc{{"architecture", c.architecture},
           {"os", c.os},
           {"created", rfc3339(created)},
           {"config", cfg},
           {"rootfs", {{"type", "layers"}, {"diff_ids", diff_ids}}},
           {"history", hist}};
  if (!c.variant.empty()) doc["variant"] = c.variant;
  return doc;
}

Image make_image(const ImageConfig& config, const std::vector<Layer>& layers,
                 const std::vector<HistoryEntry>& history, int64_t created, const ImageAnnotations& a) {
  size_t real_layers = 0;
  for (const auto& h : history) real_layers += h.empty_layer ? 0 : 1;
  if (real_layers != layers.size())
    throw Error("internal: " + std::to_string(layers.size()) + " layers but " + std::to_string(real_layers) +
                " history entries");
  std::string config_json = canonical(config_document(config, layers, history, created));
  Descriptor config_desc{kMediaTypeConfig, Digest::of_bytes(config_json), config_json.size(), {}, {}};

  json layer_descs = json::array();
  for (const auto& l : layers) layer_descs.push_back(Descriptor{l.media_type, l.digest, l.size, l.annotations, {}});
  std::map<std::string, std::string> ann{{"org.opencontainers.image.created", rfc3339(created)}};
  auto put = [&](const char* key, const std::string& v) {
    if (!v.empty()) ann[std::string("org.opencontainers.image.") + key] = v;
  };
  put("title", a.title);
  put("version", a.version);
  put("source", a.source);
  put("revision", a.revision);
  put("description", a.description);
  json manifest{{"schemaVersion", 2},
                {"mediaType", kMediaTypeManifest},
                {"config", config_desc},
                {"layers", layer_descs},
                {"annotations", ann}};
  std::string manifest_json = canonical(manifest);
  Descriptor manifest_desc{kMediaTypeManifest, Digest::of_bytes(manifest_json), manifest_json.size(), {},
                           std::make_pair(config.os, config.architecture)};
  return Image{layers, config_json, config_desc, manifest_json, manifest_desc};
}

std::string make_index_json(const std::vector<Descriptor>& manifests,
                            const std::map<std::string, std::string>& annotations) {
  json list = json::array();
  for (const auto& m : manifests) list.push_back(m);
  json index{{"schemaVersion", 2}, {"mediaType", kMediaTypeIndex}, {"manifests", list}};
  if (!annotations.empty()) index["annotations"] = annotations;
  return canonical(index);
}

std::string oci_architecture(const std::string& m) {
  if (m == "x86_64" || m == "amd64") return "amd64";
  if (m == "aarch64" || m == "arm64") return "arm64";
  if (m == "ppc64le") return "ppc64le";
  if (m == "s390x") return "s390x";
  return m;
}

void validate_tag(const std::string& tag) {
  // name: lowercase path components; tag: [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}
  static const std::regex name_re("[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*(/[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*)*");
  static const std::regex tag_re("[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}");
  auto colon = tag.rfind(':');
  std::string name = colon == std::string::npos ? "" : tag.substr(0, colon);
  std::string t = colon == std::string::npos ? tag : tag.substr(colon + 1);
  if (!std::regex_match(t, tag_re))
    throw Error("invalid tag '" + t + "' in '" + tag + "': use letters, digits, '_', '.', '-' (up to 128)");
  if (colon != std::string::npos) {
    // Allow a registry host (with port) in front: host[:port]/path.
    std::string path = name;
    auto slash = name.find('/');
    if (slash != std::string::npos) {
      std::string first = name.substr(0, slash);
      if (first.find('.') != std::string::npos || first.find(':') != std::string::npos || first == "localhost")
        path = name.substr(slash + 1);
    }
    if (!std::regex_match(path, name_re))
      throw Error("invalid image name '" + name + "' in '" + tag + "': use lowercase letters, digits and . _ - /");
  }
}

}  // namespace sb
