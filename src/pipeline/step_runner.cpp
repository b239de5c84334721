// Build steps for the layer kinds that run them (step_layer.cpp, and
// apt_layer.cpp for `configure: true`): the cached roots they run on, the
// sandbox, the `cache:` directories. See step_runner.hpp.
#include "pipeline/step_runner.hpp"

#include "sandbox/emulation.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include "archive/extract.hpp"
#include "build/steps.hpp"
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

}  // namespace

// Where steps run: options.services.sandbox (tests), else a LinuxSandbox, with
// overlayfs unless it is unavailable or STACKBUILD_SANDBOX_OVERLAY=0.
SandboxChoice choose_sandbox(const std::string& layer, const BuildOptions& options,
                             const Store& store, Status& status) {
  SandboxChoice c;
  c.sandbox = options.services.sandbox;
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
  std::vector<fs::path> blobs;
  for (size_t i = from; i < layers.size(); ++i) blobs.push_back(store.blob_path(layers[i].digest));
  extract_layers(blobs, tree, o, stats);
  // And no setuid-root program or capability on the host's disk: recorded instead.
  const PrivilegedFiles privileged = take_privileged(tree, inherited, inherited_tree);
  write_file_atomic(made / "privileged.json", privileged_to_json(privileged), 0600);
  if (::chmod(made.c_str(), 0700) != 0) throw_errno("chmod " + made.string());
  if (::chmod(tree.c_str(), 0700) != 0) throw_errno("chmod " + tree.string());
  fs::rename(made, dir);
  status.task_end(task, dir.string());
  return {dir / "tree", privileged};
}


StepsSetup prepare_steps(StepsInput& in, const Recipe& recipe, const LayerSpec& spec, const std::vector<Layer>& below,
                         const Store& store, const BuildOptions& options, Status& status, const Digest& key) {
  StepsSetup setup;
  // Steps of another platform (build steps, maintainer scripts) run under
  // QEMU user emulation, which the machine must have registered.
  if (sandbox::Emulation e = sandbox::emulation_for(recipe.architecture); !e.native) {
    if (!e.available) throw Error("layer '" + spec.name + "': " + sandbox::emulation_missing(e, recipe.architecture));
    status.message(Level::Info, "layer " + spec.name + ": steps of linux/" + recipe.architecture + " run emulated (qemu-" +
                                    sandbox::machine_of(recipe.architecture) +
                                    (e.sandbox_register.empty() ? " through the machine's binfmt_misc"
                                                                : " registered in the sandbox's own binfmt_misc") +
                                    (e.interpreter.empty() ? "" : ", " + e.interpreter) + ")");
    in.architecture = recipe.architecture;
  }
  setup.sandbox = choose_sandbox(spec.name, options, store, status);
  in.overlay = setup.sandbox.overlay;
  CachedRoot lower = cached_root(store, below, status);
  in.lower = lower.tree;
  in.privileged = std::move(lower.privileged);
  setup.scratch = store.temp_dir();
  in.scratch = setup.scratch->path();
  in.cache_root = cache_root(recipe, spec, in.spec, store);
  in.log = store.private_dir("logs") / (spec.name + "-" + key.hex().substr(0, 16) + ".log");
  return setup;
}

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
  StepsSetup setup = prepare_steps(in, recipe, spec, chain, store, options, status, key);
  Changeset cs = run_build_steps(in, *setup.sandbox.sandbox, status);

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
  return std::move(setup.scratch);
}

}  // namespace sb
