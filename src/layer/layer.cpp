#include "layer/layer.hpp"

#include <nlohmann/json.hpp>

#include "layer/estargz.hpp"
#include "layer/zstd_chunked.hpp"
#include "util/error.hpp"

namespace sb {

std::string to_string(Compression c) {
  switch (c) {
    case Compression::Gzip: return "gzip";
    case Compression::Zstd: return "zstd";
    case Compression::None: return "none";
    case Compression::Estargz: return "estargz";
    case Compression::ZstdChunked: return "zstd:chunked";
  }
  return "?";
}

KeyHasher& hash_layer_options(KeyHasher& key, const LayerOptions& options) {
  key.field("compression", to_string(options.compression)).field("level", options.level);
  if (options.compression != Compression::Estargz || options.prefetch.empty()) return key;
  key.field("prefetch", static_cast<int64_t>(options.prefetch.size()));
  for (const auto& p : options.prefetch) key.field("path", p);
  return key;
}

Compression parse_compression(const std::string& name) {
  if (name == "gzip") return Compression::Gzip;
  if (name == "zstd") return Compression::Zstd;
  if (name == "none") return Compression::None;
  if (name == "estargz") return Compression::Estargz;
  if (name == "zstd:chunked") return Compression::ZstdChunked;
  throw Error("unknown compression '" + name + "' (use gzip, zstd, estargz, zstd:chunked or none)",
              ErrorKind::Usage);
}

std::string layer_media_type(Compression c) {
  switch (c) {
    case Compression::Gzip:
    case Compression::Estargz: return "application/vnd.oci.image.layer.v1.tar+gzip";
    case Compression::Zstd:
    case Compression::ZstdChunked: return "application/vnd.oci.image.layer.v1.tar+zstd";
    case Compression::None: return "application/vnd.oci.image.layer.v1.tar";
  }
  return {};
}

bool is_gzip_family(Compression c) { return c == Compression::Gzip || c == Compression::Estargz; }

void to_json(nlohmann::json& j, const Layer& l) {
  j = nlohmann::json{{"diff_id", l.diff_id.str()},   {"digest", l.digest.str()},
                     {"size", l.size},               {"uncompressed_size", l.uncompressed_size},
                     {"media_type", l.media_type}};
  // Absent when empty: the records of plain layers stay as they were.
  if (!l.annotations.empty()) j["annotations"] = l.annotations;
}

Layer layer_from_json(const nlohmann::json& j) {
  Layer l{Digest::parse(j.at("diff_id").get<std::string>()),
          Digest::parse(j.at("digest").get<std::string>()), j.at("size").get<uint64_t>(),
          j.at("uncompressed_size").get<uint64_t>(), j.at("media_type").get<std::string>()};
  l.annotations = chunked_annotations(j);
  return l;
}

namespace {

bool all_digits(std::string_view s) {
  return !s.empty() && s.size() <= 20 && s.find_first_not_of("0123456789") == std::string_view::npos;
}

bool is_digest(const std::string& s) {
  try {
    (void)Digest::parse(s);
    return true;
  } catch (const Error&) {
    return false;
  }
}

// "offset:length:uncompressed length:1", as containers/storage writes it.
bool is_chunked_position(std::string_view s) {
  for (int field = 0; field < 4; ++field) {
    size_t colon = s.find(':');
    if ((colon == std::string_view::npos) != (field == 3)) return false;
    if (!all_digits(s.substr(0, colon))) return false;
    s = colon == std::string_view::npos ? std::string_view() : s.substr(colon + 1);
  }
  return true;
}

}  // namespace

std::map<std::string, std::string> chunked_annotations(const nlohmann::json& descriptor) {
  std::map<std::string, std::string> out;
  auto a = descriptor.find("annotations");
  if (a == descriptor.end() || !a->is_object()) return out;
  auto keep = [&](const char* key, auto well_formed) {
    auto v = a->find(key);
    if (v != a->end() && v->is_string() && well_formed(v->get<std::string>())) out[key] = v->get<std::string>();
  };
  keep(kEstargzTocDigestAnnotation, is_digest);
  keep(kEstargzUncompressedSizeAnnotation, [](const std::string& s) { return all_digits(s); });
  keep(kZstdChunkedChecksumAnnotation, is_digest);
  keep(kZstdChunkedPositionAnnotation, [](const std::string& s) { return is_chunked_position(s); });
  return out;
}

}  // namespace sb
