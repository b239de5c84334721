#include "pipeline/prefetch_order.hpp"

#include <set>

#include <nlohmann/json.hpp>

#include "pipeline/build_options.hpp"
#include "util/error.hpp"
#include "util/file.hpp"
#include "util/utf8.hpp"

namespace sb {

using json = nlohmann::json;

namespace {

constexpr size_t kMaxPaths = 1000000;
constexpr size_t kMaxPathBytes = 4096;

// Why `p` is not an absolute, normalised image path; "" when it is.
std::string path_problem(const std::string& p) {
  if (p.empty() || p[0] != '/') return "is not absolute";
  if (p.size() > kMaxPathBytes) return "is longer than 4096 bytes";
  if (p.find('\0') != std::string::npos) return "holds a NUL byte";
  if (p == "/") return "is the root";
  size_t start = 1;
  while (start <= p.size()) {
    size_t end = p.find('/', start);
    if (end == std::string::npos) end = p.size();
    std::string part = p.substr(start, end - start);
    if (part.empty() || part == "." || part == "..") return "is not normalised (an empty, '.' or '..' part)";
    start = end + 1;
  }
  return "";
}

}  // namespace

std::string prefetch_document(const std::vector<std::string>& paths) {
  json list = json::array();
  for (const auto& p : paths) list.push_back("/" + p);
  return json{{"paths", list}}.dump(1) + "\n";
}

std::vector<std::string> parse_prefetch_document(const std::string& text, const std::string& where) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {
    throw Error(where + ": not JSON: " + e.what());
  }
  if (!doc.is_object() || !doc.contains("paths") || !doc["paths"].is_array())
    throw Error(where + ": wants an object with a list 'paths'");
  const json& paths = doc["paths"];
  if (paths.size() > kMaxPaths)
    throw Error(where + ": " + std::to_string(paths.size()) + " paths, more than " + std::to_string(kMaxPaths));
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (size_t i = 0; i < paths.size(); ++i) {
    if (!paths[i].is_string()) throw Error(where + ": paths[" + std::to_string(i) + "] is not a string");
    const std::string p = paths[i].get<std::string>();
    if (std::string why = path_problem(p); !why.empty()) {
      std::string shown;  // the path as a message may hold it: no NUL, valid UTF-8, not too long
      for (char c : p.substr(0, 200)) shown += c ? std::string(1, c) : std::string("\\0");
      throw Error(where + ": paths[" + std::to_string(i) + "] '" + printable_utf8(shown) + "' " + why);
    }
    if (seen.insert(p).second) out.push_back(p.substr(1));
  }
  return out;
}

Digest add_prefetch_to_layout(const fs::path& layout, const Descriptor& subject, const std::vector<std::string>& paths) {
  return add_layout_artifact(layout, kPrefetchOrderType, prefetch_document(paths), subject, {});
}

std::optional<std::vector<std::string>> layout_prefetch(const fs::path& layout, const std::string& ref,
                                                        const std::string& platform, const Store& store) {
  if (!fs::exists(layout / "index.json")) return std::nullopt;
  std::optional<LayoutImage> image;
  try {
    image = open_layout_image(layout, ref, &store, platform, LayerDigests::LeftToCaller);
  } catch (const Error&) {
    return std::nullopt;  // no image of that name (yet): no order
  }
  for (const auto& a : layout_referrers(layout, image->manifest_digest))
    if (a.artifact_type == kPrefetchOrderType) {
      if (fs::file_size(a.file) > (256u << 20))
        throw Error("the prefetch order " + a.manifest.str() + " in " + layout.string() + " is over 256 MiB");
      return parse_prefetch_document(read_file(a.file), "the prefetch order " + a.manifest.str() + " in " +
                                                            layout.string() + " (of " + ref + ")");
    }
  return std::nullopt;
}

bool has_estargz_layers(const Recipe& recipe, const BuildOptions& options) {
  if (options.layer.compression == Compression::Estargz) return true;
  for (const auto& l : recipe.layers)
    if (!l.compression.empty() && parse_compression(l.compression) == Compression::Estargz) return true;
  return false;
}

}  // namespace sb
