#include "pipeline/layer_cache.hpp"

#include <nlohmann/json.hpp>

#include "pipeline/duplicate_libraries.hpp"
#include "pipeline/layer_kind.hpp"
#include "pipeline/registry_cache.hpp"

namespace sb {

std::optional<Layer> cached_layer(const Store& store, const Digest& key) {
  auto rec = store.get_record("layer", key);
  if (!rec) return std::nullopt;
  Layer l = layer_from_json(nlohmann::json::parse(*rec));
  return store.has(l.digest) ? std::optional<Layer>(l) : std::nullopt;
}

Layer store_layer(const EntryMap& entries, const Store& store, const LayerOptions& options, const Digest& key,
                  Status& status, const std::string& label) {
  return store_layers(entries, store, options, key, 0, {}, status, label, "").front();  // budget 0: never split
}

std::optional<std::vector<Layer>> cached_layers(const Store& store, const Digest& key) {
  if (auto one = cached_layer(store, key)) return std::vector<Layer>{*one};
  auto rec = store.get_record("layer-parts", key);
  if (!rec) return std::nullopt;
  std::vector<Layer> parts;
  for (const auto& j : nlohmann::json::parse(*rec)) {
    parts.push_back(layer_from_json(j));
    if (!store.has(parts.back().digest)) return std::nullopt;
  }
  if (parts.empty()) return std::nullopt;
  return parts;
}

LayerLookup find_layers(const Store& store, const Digest& key, const std::string& name, Status& status,
                        const RegistryCache* remote, const std::function<bool(const std::vector<Layer>&)>& usable) {
  auto look = [&]() -> std::optional<std::vector<Layer>> {
    auto parts = cached_layers(store, key);
    return parts && (!usable || usable(*parts)) ? parts : std::nullopt;
  };
  LayerLookup r;
  r.hit = look();
  std::string from;
  if (!r.hit) {
    r.lock = store.lock("layer-" + key.hex());
    r.hit = look();
    if (!r.hit && remote)
      if (auto cache = remote->import(store, key, name, status)) {
        r.hit = look();
        from = " (from the cache " + *cache + ")";
      }
  }
  if (r.hit)
    status.message(Level::Info, "layer " + name + ": cached " + r.hit->front().digest.str() +
                                    (r.hit->size() > 1 ? " and " + std::to_string(r.hit->size() - 1) + " more parts"
                                                       : "") + from);
  return r;
}

std::vector<Layer> write_layers(const EntryMap& entries, const Store& store, const LayerOptions& options,
                                uint64_t budget, const GroupFn& group_of, Status& status, const std::string& label,
                                const std::string& split_by) {
  std::vector<std::vector<std::string>> groups;
  std::vector<EntryMap> split = split_entries(entries, budget, group_of, &groups);
  auto write = [&](const EntryMap& part, const std::string& what) {
    // The phase, as the progress display names it: fetch, install, build, compress (or cached).
    int task = status.task_begin("compress " + what, content_bytes(part));
    LayerStages stages;
    Layer l = write_layer(part, store, options, [&](uint64_t done) { status.task_progress(task, done); }, &stages);
    status.task_end(task, l.digest.str() + ", " + human_bytes(static_cast<double>(l.size)) + "; " + stages.summary());
    return l;
  };
  if (split.size() == 1) return {write(entries, label)};
  status.message(Level::Info, label + ": " + human_bytes(static_cast<double>(content_bytes(entries))) +
                                  " is over the layer budget of " + human_bytes(static_cast<double>(budget)) +
                                  ": split " + split_by + " into " + std::to_string(split.size()) + " layers");
  // A component over the budget alone stays whole: one warning names them all.
  std::string over;
  size_t n_over = 0;
  for (size_t i = 0; i < split.size(); ++i)
    if (content_bytes(split[i]) > budget) {
      ++n_over;
      over += std::string(over.empty() ? "" : "; ") + "part " + std::to_string(i + 1) + ", " +
              human_bytes(static_cast<double>(content_bytes(split[i]))) + ":";
      for (const auto& g : groups[i]) over += " " + g;
    }
  if (n_over)
    status.message(Level::Warning, label + ": " + std::to_string(n_over) + " of its " + std::to_string(split.size()) +
                                       " parts are still over the budget, as a component (or components that "
                                       "whiteouts tie together) is never split (" + over + ")");
  std::vector<Layer> parts;
  for (size_t i = 0; i < split.size(); ++i)
    parts.push_back(write(split[i], label + " (part " + std::to_string(i + 1) + " of " + std::to_string(split.size()) + ")"));
  return parts;
}

void record_layers(const Store& store, const Digest& key, const std::vector<Layer>& parts) {
  if (parts.size() == 1) {
    store.put_record("layer", key, nlohmann::json(parts.front()).dump());
    return;
  }
  nlohmann::json rec = nlohmann::json::array();
  for (const auto& l : parts) rec.push_back(l);
  store.put_record("layer-parts", key, rec.dump());
}

std::vector<Layer> store_layers(const EntryMap& entries, const Store& store, const LayerOptions& options,
                                const Digest& key, uint64_t budget, const GroupFn& group_of, Status& status,
                                const std::string& label, const std::string& split_by) {
  std::vector<Layer> parts = write_layers(entries, store, options, budget, group_of, status, label, split_by);
  record_layers(store, key, parts);
  return parts;
}

LayerReport layer_report(const std::string& name, const std::vector<Layer>& parts, bool cached, double seconds) {
  LayerReport r{name, parts.front(), cached, seconds, {}};
  r.more.assign(parts.begin() + 1, parts.end());
  return r;
}

bool duplicates_rewrite(const LayerSpec& spec) {
  const DuplicatePolicy policy = duplicate_policy(spec);
  return policy == DuplicatePolicy::Lower || policy == DuplicatePolicy::Upper;
}

LayerParts finish_layer(const LayerContext& c, EntryMap entries, const Digest& key, LayerLookup found,
                        LayerTail tail) {
  if (!c.writes || (tail.check_duplicates && duplicates_rewrite(c.spec))) {  // the check, the write and the records, now
    if (tail.check_duplicates) check_duplicate_libraries(c.spec, c.below, c.below_names, c.store, entries, key);
    std::vector<Layer> parts = store_layers(entries, c.store, c.options.layer, key, tail.budget, tail.group_of,
                                            c.status, tail.label, tail.split_by);
    if (tail.after) tail.after(parts);
    return {parts, nullptr};
  }
  // The write now, beside the build; the rest when the layer is settled.
  auto shared = std::make_shared<EntryMap>(std::move(entries));
  std::shared_ptr<FileLock> lock = std::move(found.lock);
  const Store& store = c.store;
  const LayerSpec& spec = c.spec;  // the recipe's, which outlives the build
  Status& status = c.status;
  auto write = [shared, &store, options = c.options.layer, &status, tail] {
    return write_layers(*shared, store, options, tail.budget, tail.group_of, status, tail.label, tail.split_by);
  };
  auto finish = [shared, &store, &spec, key, tail, lock](const std::vector<Layer>& below,
                                                         const std::vector<std::string>& names,
                                                         const std::vector<Layer>& parts) {
    if (tail.check_duplicates) check_duplicate_libraries(spec, below, names, store, *shared, key);
    record_layers(store, key, parts);
    if (tail.after) tail.after(parts);
  };
  return {{}, c.writes->start(std::move(write), std::move(finish))};
}

LayerReport layer_report(const std::string& name, const LayerParts& written, double seconds) {
  if (!written.pending) return layer_report(name, written.parts, false, seconds);
  const Digest none = Digest::of_bytes("");  // until settled
  LayerReport r{name, Layer{none, none}, false, seconds, {}};
  r.pending = written.pending;
  return r;
}

}  // namespace sb
