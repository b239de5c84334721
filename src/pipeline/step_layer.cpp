#include "pipeline/step_layer.hpp"
#include "pipeline/duplicate_libraries.hpp"

#include "pipeline/layer_cache.hpp"
#include "pipeline/library_paths.hpp"
#include "pipeline/pip_layer.hpp"
#include "pipeline/source_tree.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "build/steps.hpp"
#include "layer/extract.hpp"
#include "layer/write.hpp"
#include "util/error.hpp"

namespace sb {

namespace {

Digest chain_id(const std::vector<Layer>& layers, size_t n) {
  KeyHasher h;
  // 2: no device nodes or trusted/overlay xattrs; 3: <chain>/tree and its
  // privileged.json (roots unpacked before are not reused).
  h.field("stackbuild-rootfs", "3");
  for (size_t i = 0; i < n; ++i) h.field("diff_id", layers[i].diff_id.str());
  return h.finish();
}

Digest step_key(const Digest& parent, const LayerSpec& spec,
                const std::map<std::string, std::string>& env, const LayerOptions& lo,
                int64_t epoch, bool rootless, const std::optional<LayerSource>& source, uint64_t budget) {
  KeyHasher key;
  if (source) key.field("source", source->identity.str());
  key.field("stackbuild-step-layer", "2")
      .field("budget", static_cast<int64_t>(budget))
      .field("parent", parent.str())
      .field("spec", nlohmann::json(spec).dump())
      .field("compression", to_string(lo.compression))
      .field("level", lo.level)
      .field("epoch", epoch)
      .field("rootless", rootless ? 1 : 0)
      .field("duplicates", to_string(duplicate_policy(spec)));
  key.field("env", static_cast<int64_t>(env.size()));
  for (const auto& [k, v] : env) key.field("name", k).field("value", v);
  return key.finish();
}

// Where steps run: options.sandbox (tests), else a LinuxSandbox, with
// overlayfs unless it is unavailable or STACKBUILD_SANDBOX_OVERLAY=0.
struct SandboxChoice {
  std::unique_ptr<sandbox::Sandbox> own;
  sandbox::Sandbox* sandbox = nullptr;
  bool overlay = true;
};

SandboxChoice choose_sandbox(const std::string& layer, const BuildOptions& options,
                             const Store& store, Status& status) {
  SandboxChoice c;
  c.sandbox = options.sandbox;
  // STACKBUILD_SANDBOX_OVERLAY=0 forces the copy-and-compare fallback (tests compare the two).
  const char* force = getenv("STACKBUILD_SANDBOX_OVERLAY");
  const bool copy = force && std::string(force) == "0";
  if (c.sandbox) {  // a test's
    c.overlay = !copy;
    return c;
  }
  if (std::string why = sandbox::namespaces_unavailable(); !why.empty())
    throw Error("layer '" + layer +
                "' has build steps, and this machine does not let stackbuild make a sandbox for them: " + why);
  c.own = std::make_unique<sandbox::LinuxSandbox>();
  c.sandbox = c.own.get();
  // The upper directory is in the store (its tmp/): overlayfs must take the
  // store's filesystem, which it does not where that is overlayfs itself (a
  // store inside a container's own root).
  const std::string why = sandbox::overlay_unavailable(store.root() / "tmp");
  c.overlay = why.empty() && !copy;
  if (!c.overlay && why.empty())
    status.message(Level::Info, "layer " + layer + ": built in a full copy of its root (STACKBUILD_SANDBOX_OVERLAY=0)");
  else if (!c.overlay)
    status.message(Level::Warning, "overlayfs is unavailable (" + why + "): layer " + layer +
                                       " is built in a full copy of its root");
  return c;
}

// Where a layer's `cache:` directories live (build/steps.hpp binds
// <root>/<cache_dir_name(path)> for each): the recipe's own, under
// <store>/cache/<stack>/<layer>/, so that another recipe's steps can neither
// read nor poison them. A path given `shared: NAME` is a link there to
// <store>/cache/@shared/NAME, which every recipe naming NAME reaches (as
// BuildKit's cache mounts with an `id`). '@' is in no sanitized stack name.
fs::path cache_root(const Recipe& recipe, const LayerSpec& spec, const BuildSpec& steps, const Store& store) {
  const fs::path stack = cache_dir_name(recipe.stack);
  const fs::path root = store.private_dir(fs::path("cache") / stack / cache_dir_name(spec.name));
  ::utimensat(AT_FDCWD, (store.root() / "cache" / stack).c_str(), nullptr, 0);  // used now (gc: least recent first)
  for (const auto& path : steps.cache) {
    const fs::path at = root / cache_dir_name(path);
    struct stat st;
    const bool there = ::lstat(at.c_str(), &st) == 0;
    auto shared = steps.shared_caches.find(path);
    if (shared == steps.shared_caches.end()) {
      if (there && S_ISLNK(st.st_mode)) fs::remove(at);  // shared before: the recipe's own from now on
      continue;
    }
    store.private_dir(fs::path("cache") / "@shared" / shared->second);
    ::utimensat(AT_FDCWD, (store.root() / "cache" / "@shared").c_str(), nullptr, 0);
    const fs::path target = fs::path("../../@shared") / shared->second;
    std::error_code ec;
    if (there && S_ISLNK(st.st_mode) && fs::read_symlink(at, ec) == target) continue;
    if (there) fs::remove_all(at);  // the recipe's own before: shared from now on
    fs::create_symlink(target, at, ec);
    if (ec && fs::read_symlink(at, ec) != target)  // another build of this layer made it first, or not
      throw Error("cannot link the shared cache " + at.string() + " to " + target.string());
  }
  return root;
}

}  // namespace

CachedRoot cached_root(const Store& store, const std::vector<Layer>& layers, Status& status) {
  const fs::path base = store.private_dir("rootfs");
  const fs::path dir = base / chain_id(layers, layers.size()).hex();
  auto load = [&] {
    return CachedRoot{dir / "tree", privileged_from_json(read_file(dir / "privileged.json"), (dir / "privileged.json").string())};
  };
  std::error_code ec;
  if (fs::is_directory(dir, ec)) return load();
  auto lock = store.lock("rootfs-" + dir.filename().string());
  if (fs::is_directory(dir, ec)) return load();

  auto tmp = store.temp_dir();
  const fs::path made = tmp->path() / "root", tree = made / "tree";
  fs::create_directories(tree);
  size_t from = 0;
  PrivilegedFiles inherited;
  fs::path inherited_tree;
  if (layers.size() > 1) {
    fs::path prefix = base / chain_id(layers, layers.size() - 1).hex();
    if (fs::is_directory(prefix, ec)) {
      inherited_tree = prefix / "tree";
      inherited = privileged_from_json(read_file(prefix / "privileged.json"), (prefix / "privileged.json").string());
      copy_tree(inherited_tree, tree, /*link_files=*/true);
      from = layers.size() - 1;
    }
  }
  int task = status.task_begin("unpack the " + std::to_string(layers.size()) + " layers below", 0);
  // Owners kept (as root); no device nodes: the sandbox gives steps its own
  // /dev and mounts the root nodev, so one from a layer would only be a way
  // onto the host's devices for whoever reaches the store (docs/layers.md).
  ExtractOptions o;
  o.skip_devices = true;
  o.preserve_owner = true;
  ExtractStats stats;
  for (size_t i = from; i < layers.size(); ++i)
    extract_layer(store.blob_path(layers[i].digest), tree, o, stats);
  // And no setuid-root program or capability on the host's disk: recorded instead.
  const PrivilegedFiles privileged = take_privileged(tree, inherited, inherited_tree);
  write_file_atomic(made / "privileged.json", privileged_to_json(privileged), 0600);
  if (::chmod(made.c_str(), 0700) != 0) throw_errno("chmod " + made.string());
  if (::chmod(tree.c_str(), 0700) != 0) throw_errno("chmod " + tree.string());
  fs::rename(made, dir);
  status.task_end(task, dir.string());
  return {dir / "tree", privileged};
}

LayerReport build_step_layer(const Recipe& recipe, const LayerSpec& spec, const Digest& key_parent,
                             const std::vector<Layer>& below, const std::vector<std::string>& below_names,
                             const Store& store,
                             const BuildOptions& options, int64_t epoch, Status& status,
                             Digest& key_out) {
  auto start = std::chrono::steady_clock::now();
  const bool rootless = ::geteuid() != 0;
  StepsInput in;
  in.layer = spec.name;
  in.spec = spec.build;
  in.env = step_environment(recipe, spec.build, options.variables, epoch,
                            library_paths(recipe, spec, options.variables, options.point));
  const std::optional<LayerSource> source = layer_source(spec, options.variables, options.point);
  const uint64_t budget = layer_budget(recipe, options);
  const Digest key = step_key(key_parent, spec, in.env, options.layer, epoch, rootless, source, budget);
  key_out = key;
  auto seconds = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };

  auto found = find_layers(store, key, spec.name, status, options.cache_from);
  auto report = [&](LayerReport r) {
    if (source)
      r.source =
          source_label(spec, *source, options.variables, true, recorded_source_commit(store, key));
    return r;
  };
  std::string fetched;  // the commit a git source was fetched at
  if (found.hit) return report(layer_report(spec.name, *found.hit, true, seconds()));
  if (below.empty())
    throw InputError(
        spec.at("build"),
        "layer '" + spec.name + "' has build steps but no layers below it to run in",
        "put a base first: a copy of a root filesystem (e.g. a static busybox), or an OS layer");

  // A step with the network that runs pip reaches the index stackbuild uses,
  // unless the recipe names one (config.env or build.env). Not in the key:
  // like everything a step fetches, the index is the network's, and two
  // machines with different mirrors share the layer.
  if (spec.build.network && !in.env.count("PIP_INDEX_URL") && !in.env.count("PIP_EXTRA_INDEX_URL"))
    for (const auto& [k, v] : pip_index_environment(store)) in.env[k] = v;
  // And the machine's proxy, as BuildKit passes its predefined proxy ARGs to
  // RUN: the step's curl, pip, git and apt-get go the way stackbuild's own
  // downloads do. Not in the key and not in the image's config, for the
  // same reason; the recipe's own value of a name wins.
  if (spec.build.network)
    for (const char* name : {"http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "ftp_proxy", "FTP_PROXY",
                             "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY"})
      if (const char* v = getenv(name); v && *v && !in.env.count(name)) in.env[name] = v;
  SandboxChoice sbx = choose_sandbox(spec.name, options, store, status);
  in.overlay = sbx.overlay;
  CachedRoot lower = cached_root(store, below, status);
  in.lower = lower.tree;
  in.privileged = std::move(lower.privileged);
  auto scratch = store.temp_dir();
  in.scratch = scratch->path();
  in.cache_root = cache_root(recipe, spec, in.spec, store);
  in.log = store.private_dir("logs") / (spec.name + "-" + key.hex().substr(0, 16) + ".log");
  if (source) {  // fetched (or copied) and patched now, into the scratch directory
    fetched = fetch_layer_source(spec, *source, in.scratch / "source", store, status).commit;
    in.source = in.scratch / "source";
    in.source_at = source->image_path;
    in.keep_source = source->kept;
  }

  const size_t n_steps = spec.build.run.size();
  int task = status.task_begin("build layer " + spec.name + " (" + std::to_string(n_steps) +
                                   (n_steps == 1 ? " step)" : " steps)"),
                               0);
  Changeset cs = run_build_steps(in, *sbx.sandbox, status);
  ScanOptions o;
  o.source_date_epoch = epoch;
  o.preserve_owner = !rootless;        // as root, what the steps chowned stays
  if (rootless) o.uid = 0, o.gid = 0;  // without root, every file is ours: root in the image
  EntryMap entries = entries_from_changeset(cs, o);
  status.task_end(task, std::to_string(entries.size()) + " entries, " + std::to_string(cs.deleted.size()) +
                            " deleted, " + human_bytes(static_cast<double>(content_bytes(entries))));
  check_duplicate_libraries(spec, below, below_names, store, entries, key);  // pipeline/duplicate_libraries.hpp
  // Over the budget: split by top-level path, as a copy layer is; whiteouts
  // stay with what they hide (layer/split.hpp).
  std::vector<Layer> parts = store_layers(entries, store, options.layer, key, budget, top_level_group, status,
                                          "layer " + spec.name, "by top-level path");
  record_source_commit(store, key, fetched);
  return report(layer_report(spec.name, parts, false, seconds()));
}

}  // namespace sb

namespace sb {

std::unique_ptr<TempDir> run_on_entries(const Recipe& recipe, const LayerSpec& spec, const BuildSpec& steps,
                                        const std::vector<Layer>& below, EntryMap& entries, const Store& store,
                                        const BuildOptions& options, int64_t epoch, Status& status,
                                        const Digest& key) {
  // The entries as a layer of their own (uncompressed: it only feeds the root).
  LayerOptions plain;
  plain.compression = Compression::None;
  std::vector<Layer> chain = below;
  chain.push_back(write_layer(entries, store, plain));

  StepsInput in;
  in.layer = spec.name;
  in.spec = steps;
  in.env = step_environment(recipe, steps, options.variables, epoch);
  SandboxChoice sbx = choose_sandbox(spec.name, options, store, status);
  in.overlay = sbx.overlay;
  CachedRoot lower = cached_root(store, chain, status);
  in.lower = lower.tree;
  in.privileged = std::move(lower.privileged);
  auto scratch = store.temp_dir();
  in.scratch = scratch->path();
  in.cache_root = cache_root(recipe, spec, steps, store);
  in.log = store.private_dir("logs") / (spec.name + "-" + key.hex().substr(0, 16) + ".log");
  Changeset cs = run_build_steps(in, *sbx.sandbox, status);

  // Deleted: gone from the entries, and a whiteout where a layer below has it.
  const bool rootless = ::geteuid() != 0;
  ScanOptions o;
  o.source_date_epoch = epoch;
  o.preserve_owner = !rootless;
  if (rootless) o.uid = 0, o.gid = 0;
  std::optional<fs::path> below_root;
  Changeset deletions;
  for (const auto& d : cs.deleted) {
    const std::string p = canonical_archive_path(d);
    for (auto it = entries.lower_bound(p); it != entries.end() && (it->first == p || it->first.starts_with(p + "/"));)
      it = entries.erase(it);
    if (below.empty()) continue;
    if (!below_root) below_root = cached_root(store, below, status).tree;
    struct stat st;
    if (::lstat((*below_root / p).c_str(), &st) == 0) deletions.deleted.push_back(p);
  }
  // Added and changed: over the entries.
  Changeset changed{cs.root, {}, {}};
  for (auto& [path, e] : entries_from_changeset(changed, o)) entries[path] = std::move(e);
  for (auto& [path, e] : entries_from_changeset(deletions, o))
    if (!entries.count(path)) entries[path] = std::move(e);
  return scratch;
}

}  // namespace sb
