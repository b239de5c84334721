#include "pipeline/layer_kind.hpp"

#include <algorithm>

#include "pipeline/duplicate_libraries.hpp"

namespace sb {

const std::vector<const LayerKind*>& layer_kinds() {
  static const std::vector<const LayerKind*> kinds = {
      &apt_layer_kind(),     //
      &pip_layer_kind(),     //
      &redist_layer_kind(),  //
      &step_layer_kind(),    //
      &copy_layer_kind(),    // last: every layer the others do not take
  };
  return kinds;
}

const LayerKind& layer_kind_of(const LayerSpec& spec) {
  for (const LayerKind* kind : layer_kinds())
    if (kind->handles(spec)) return *kind;
  return copy_layer_kind();
}

const std::vector<RecordKind>& all_record_kinds() {
  static const std::vector<RecordKind> records = [] {
    std::vector<RecordKind> out{{"duplicate-libraries",  // every layer's, as the layer writer found them
                                  [](const Digest& key, const std::vector<Layer>&) -> std::optional<Digest> {
                                    return findings_key(key);
                                  },
                                  [](const std::string& value) {
                                    (void)nlohmann::json::parse(value).get<std::vector<DuplicateLibrary>>();
                                  }}};
    std::vector<const LayerKind*> kinds = layer_kinds();
    kinds.push_back(&kept_source_layer_kind());
    for (const LayerKind* kind : kinds)
      for (const RecordKind& r : kind->record_kinds())
        if (std::none_of(out.begin(), out.end(), [&](const RecordKind& o) { return std::string(o.kind) == r.kind; }))
          out.push_back(r);
    return out;
  }();
  return records;
}

}  // namespace sb
