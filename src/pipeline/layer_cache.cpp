#include "pipeline/layer_cache.hpp"

#include <nlohmann/json.hpp>

namespace sb {

std::optional<Layer> cached_layer(const Store& store, const Digest& key) {
  auto rec = store.get_record("layer", key);
  if (!rec) return std::nullopt;
  Layer l = layer_from_json(nlohmann::json::parse(*rec));
  return store.has(l.digest) ? std::optional<Layer>(l) : std::nullopt;
}

Layer store_layer(const EntryMap& entries, const Store& store, const LayerOptions& options, const Digest& key,
                  Status& status, const std::string& label) {
  int task = status.task_begin(label, content_bytes(entries));
  Layer l = write_layer(entries, store, options, [&](uint64_t done) { status.task_progress(task, done); });
  store.put_record("layer", key, nlohmann::json(l).dump());
  status.task_end(task, l.digest.str() + ", " + human_bytes(static_cast<double>(l.size)));
  return l;
}

}  // namespace sb
