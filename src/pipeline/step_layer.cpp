// The steps kind: a layer made by `build:` steps run in the sandbox on the
// layers below (pipeline/step_runner.hpp), its changeset written as the layer.
#include <unistd.h>

#include <chrono>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "build/steps.hpp"
#include "layer/tree.hpp"
#include "layer/write.hpp"
#include "pipeline/duplicate_libraries.hpp"
#include "pipeline/layer_cache.hpp"
#include "pipeline/layer_kind.hpp"
#include "pipeline/library_paths.hpp"
#include "pipeline/pip_index.hpp"
#include "pipeline/source_tree.hpp"
#include "pipeline/step_runner.hpp"
#include "util/error.hpp"

namespace sb {

namespace {

Digest step_key(const Digest& parent, const LayerSpec& spec,
                const std::map<std::string, std::string>& env, const LayerOptions& lo,
                int64_t epoch, bool rootless, const std::optional<LayerSource>& source, uint64_t budget,
                const std::string& architecture) {
  KeyHasher key;
  if (source) key.field("source", source->identity.str());
  // The same steps on the same files give another layer on another platform
  // (a copy layer below is the same for both).
  if (architecture != "amd64") key.field("architecture", architecture);
  key.field("stackbuild-step-layer", "2")
      .field("budget", static_cast<int64_t>(budget))
      .field("parent", parent.str())
      .field("spec", nlohmann::json(spec).dump());
  hash_layer_options(key, lo)
      .field("epoch", epoch)
      .field("rootless", rootless ? 1 : 0)
      .field("duplicates", to_string(duplicate_policy(spec)));
  key.field("env", static_cast<int64_t>(env.size()));
  for (const auto& [k, v] : env) key.field("name", k).field("value", v);
  return key.finish();
}

}  // namespace

// One layer made by build steps: from the cache when its key is there, else
// its steps run in the sandbox on the layers below and their changeset is
// written. The key hashes the parent's key, the layer's spec (with ${vars}
// expanded), the steps' whole environment, compression and the epoch.
LayerReport build_step_layer(const LayerContext& c, Digest& key_out) {
  auto start = std::chrono::steady_clock::now();
  const bool rootless = ::geteuid() != 0;
  StepsInput in;
  in.layer = c.spec.name;
  in.spec = c.spec.build;
  in.env = step_environment(c.recipe, c.spec.build, c.options.variables, c.epoch,
                            library_paths(c.recipe, c.spec, c.options.variables, c.options.point));
  const std::optional<LayerSource> source = layer_source(c.spec, c.options.variables, c.options.point);
  const uint64_t budget = layer_budget(c.recipe, c.options);
  const Digest key = step_key(c.parent_key, c.spec, in.env, c.options.layer, c.epoch, rootless, source, budget,
                                c.recipe.architecture);
  key_out = key;
  auto seconds = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };

  auto found = find_layers(c.store, key, c.spec.name, c.status, c.options.cache_from);
  auto report = [&](LayerReport r) {
    if (source)
      r.source =
          source_label(c.spec, *source, c.options.variables, true, recorded_source_commit(c.store, key));
    return r;
  };
  std::optional<source::SourceLock> fetched;  // the commit (or Debian package) the source was fetched at
  if (found.hit) return report(layer_report(c.spec.name, *found.hit, true, seconds()));
  if (c.below.empty())
    throw InputError(
        c.spec.at("build"),
        "layer '" + c.spec.name + "' has build steps but no layers below it to run in",
        "put a base first: a copy of a root filesystem (e.g. a static busybox), or an OS layer");

  // A step with the network that runs pip reaches the index stackbuild uses,
  // unless the recipe names one (config.env or build.env). Not in the key:
  // like everything a step fetches, the index is the network's, and two
  // machines with different mirrors share the layer.
  if (c.spec.build.network && !in.env.count("PIP_INDEX_URL") && !in.env.count("PIP_EXTRA_INDEX_URL"))
    for (const auto& [k, v] : pip_index_environment(c.store)) in.env[k] = v;
  // And the machine's proxy, as BuildKit passes its predefined proxy ARGs to
  // RUN: the step's curl, pip, git and apt-get go the way stackbuild's own
  // downloads do. Not in the key and not in the image's config, for the
  // same reason; the recipe's own value of a name wins.
  if (c.spec.build.network)
    for (const char* name : {"http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "ftp_proxy", "FTP_PROXY",
                             "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY"})
      if (const char* v = getenv(name); v && *v && !in.env.count(name)) in.env[name] = v;
  StepsSetup setup = prepare_steps(in, c.recipe, c.spec, c.below, c.store, c.options, c.status, key);
  if (source) {  // fetched (or copied) and patched now, into the scratch directory
    fetched =
        fetch_layer_source(c.spec, *source, in.scratch / "source", c.store, c.status, c.options.services.make_fetcher);
    in.source = in.scratch / "source";
    in.source_at = source->image_path;
    in.keep_source = source->kept;
  }

  const size_t n_steps = c.spec.build.run.size();
  int task = c.status.task_begin("build layer " + c.spec.name + " (" + std::to_string(n_steps) +
                                   (n_steps == 1 ? " step)" : " steps)"),
                               0);
  Changeset cs = run_build_steps(in, *setup.sandbox.sandbox, c.status);
  ScanOptions o;
  o.source_date_epoch = c.epoch;
  o.preserve_owner = !rootless;        // as root, what the steps chowned stays
  if (rootless) o.uid = 0, o.gid = 0;  // without root, every file is ours: root in the image
  EntryMap entries = entries_from_changeset(cs, o);
  c.status.task_end(task, std::to_string(entries.size()) + " entries, " + std::to_string(cs.deleted.size()) +
                            " deleted, " + human_bytes(static_cast<double>(content_bytes(entries))));
  // Over the budget: split by top-level path, as a copy layer is; whiteouts
  // stay with what they hide (layer/split.hpp). The duplicate check
  // (pipeline/duplicate_libraries.hpp), the write and the records: now, or
  // beside the build (pipeline/layer_writes.hpp), the scratch directory the
  // changeset's files are in kept until then.
  record_source_commit(c.store, key, fetched);  // for the label, which report() reads now
  LayerTail tail{budget, top_level_group, "layer " + c.spec.name, "by top-level path"};
  tail.hold = std::make_shared<StepsSetup>(std::move(setup));
  LayerParts parts = finish_layer(c, std::move(entries), key, std::move(found), std::move(tail));
  return report(layer_report(c.spec.name, parts, seconds()));
}


const LayerKind& step_layer_kind() {
  static const BuilderKind kind(
      "build", [](const LayerSpec& spec) { return !spec.build.empty() && !spec.copies(); }, build_step_layer, {},
      {{kSourceCommitRecord,  // a tree compiled from a git source: its commit, for the label
        [](const Digest& key, const std::vector<Layer>&) -> std::optional<Digest> { return source_commit_key(key); },
        check_source_commit_record}});
  return kind;
}

}  // namespace sb
