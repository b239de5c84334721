#include "layer/layer.hpp"

#include <nlohmann/json.hpp>

#include "util/error.hpp"

namespace sb {

std::string to_string(Compression c) {
  switch (c) {
    case Compression::Gzip: return "gzip";
    case Compression::Zstd: return "zstd";
    case Compression::None: return "none";
  }
  return "?";
}

Compression parse_compression(const std::string& name) {
  if (name == "gzip") return Compression::Gzip;
  if (name == "zstd") return Compression::Zstd;
  if (name == "none") return Compression::None;
  throw Error("unknown compression '" + name + "' (use gzip, zstd or none)", ErrorKind::Usage);
}

std::string layer_media_type(Compression c) {
  switch (c) {
    case Compression::Gzip: return "application/vnd.oci.image.layer.v1.tar+gzip";
    case Compression::Zstd: return "application/vnd.oci.image.layer.v1.tar+zstd";
    case Compression::None: return "application/vnd.oci.image.layer.v1.tar";
  }
  return {};
}

void to_json(nlohmann::json& j, const Layer& l) {
  j = nlohmann::json{{"diff_id", l.diff_id.str()},   {"digest", l.digest.str()},
                     {"size", l.size},               {"uncompressed_size", l.uncompressed_size},
                     {"media_type", l.media_type}};
}

Layer layer_from_json(const nlohmann::json& j) {
  return Layer{Digest::parse(j.at("diff_id").get<std::string>()),
               Digest::parse(j.at("digest").get<std::string>()), j.at("size").get<uint64_t>(),
               j.at("uncompressed_size").get<uint64_t>(), j.at("media_type").get<std::string>()};
}

}  // namespace sb
