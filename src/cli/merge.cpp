// stackbuild merge: the release a fan-out's tasks pushed, assembled from the
// registry alone (pipeline/release.hpp, docs/cluster.md).
#include <chrono>
#include <map>
#include <optional>

#include <nlohmann/json.hpp>

#include "cli/cli.hpp"
#include "image/sbom.hpp"
#include "pipeline/release.hpp"
#include "registry/push.hpp"
#include "registry/sign.hpp"
#include "util/error.hpp"

namespace sb::cli {

const char* const kMergeHelp =
    "usage: stackbuild merge RECIPE.yaml --registry REGISTRY/REPO[:TAG] [options]\n"
    "\n"
    "Assembles a release whose points were built apart, each by its own task running\n"
    "  stackbuild build RECIPE.yaml --locked --only POINT --no-index --record-inputs \\\n"
    "      --push-to REGISTRY/REPO [--sbom] [--cache-from C --cache-to C]\n"
    "(a Slurm array task, a Kubernetes Indexed Job, a CI matrix job: docs/cluster.md). It plans\n"
    "the recipe as build does, finds each point's manifest in REGISTRY/REPO under the tag\n"
    "--push-to gave it (its first tag), and pushes the matrix index over them there, under TAG,\n"
    "else --index-tag, else <stack>-matrix: the same bytes, so the same digest, as the index a\n"
    "one-machine 'stackbuild build RECIPE.yaml --push-to REGISTRY/REPO' pushes. It reads only\n"
    "the registry: no file of the tasks is needed. A point that is not there fails the merge\n"
    "(exit 1), naming the point and its tag: its task did not push it.\n"
    "\n"
    "options:\n"
    "  --registry REGISTRY/REPO[:TAG]  where the tasks pushed the points (required)\n"
    "  --locked             check RECIPE.lock as build --locked does, and that each point in the\n"
    "                       registry was built from these inputs: the record its task attached\n"
    "                       with --record-inputs (else an older image under the tag would be\n"
    "                       taken into the release)\n"
    "  --sbom               check that each point has its SBOM attached (build --sbom)\n"
    "  --sign KEY.pem       sign the index pushed (sigstore format, as build --sign; the tasks\n"
    "                       sign their images with build --sign)\n"
    "  -o, --notes FILE     write the release notes of the index pushed (as 'stackbuild notes\n"
    "                       REGISTRY/REPO:TAG -o FILE')\n"
    "  --only KEY=VALUE     only these points (repeatable, as for build)\n"
    "  --set KEY=VALUE      as for build (give the tasks the same)\n"
    "  --catalog DIR        as for build\n"
    "  --index-tag TAG      the tag of the matrix index (default <stack>-matrix)\n"
    "  --source-date-epoch N, --compression ALGO, --level N, --layer-budget SIZE\n"
    "                       what the tasks were given, for the --locked check of their inputs\n"
    "  --creds, --ca-cert, --insecure-registry  registry access, as for push\n"
    "Also takes the options of every command (stackbuild --help).\n";

ReleaseRequest release_request(const Args& args) {
  ReleaseRequest rq;
  rq.plan = plan_options(args);
  rq.only = args.all("--only");
  rq.locked = args.has("--locked");
  rq.index_tag = args.get("--index-tag");
  rq.build.source_date_epoch = args.integer("--source-date-epoch", 0, INT64_MAX);
  if (auto c = args.get("--compression")) rq.build.layer.compression = parse_compression(*c);
  if (auto level = args.integer("--level", 0, 22)) rq.build.layer.level = static_cast<int>(*level);
  if (auto b = args.get("--layer-budget")) {
    rq.build.layer_budget = parse_bytes(*b);
    if (!rq.build.layer_budget)
      throw Error("--layer-budget wants a size such as 8GiB, 500MiB or 1000000 (bytes), not '" + *b + "'",
                  ErrorKind::Usage);
  }
  return rq;
}

registry::Reference release_registry(const std::string& text) {
  auto ref = registry::Reference::parse(text);
  if (ref.digest) throw Error("--registry " + text + ": a repository (and a tag), not a digest", ErrorKind::Usage);
  return ref;
}

namespace {

// The --registry option given, else a usage error.
std::string registry_arg(const Args& args, const char* command) {
  auto r = args.get("--registry");
  if (!r) throw Error(std::string(command) + " wants --registry REGISTRY/REPO (where the tasks push the points)",
                      ErrorKind::Usage);
  return *r;
}

// Under each tag that points of several platforms share (their tasks pushed
// them under TAG-ARCH), the index over their images that a one-machine
// `build --push-to` pushes there: the same bytes, the points in plan order.
void push_platform_indexes(const registry::Reference& repo, const Release& release,
                           const std::vector<std::optional<IndexEntry>>& entries, const registry::PushOptions& push,
                           const std::optional<fs::path>& sign_key, Status& status) {
  std::map<std::string, std::vector<size_t>> groups;
  std::vector<std::string> order;
  for (size_t i = 0; i < release.points.size(); ++i)
    for (const auto& r : release.points[i].shared) {
      if (groups[r].empty()) order.push_back(r);
      groups[r].push_back(i);
    }
  std::vector<registry::TaggedManifest> indexes;
  for (const auto& r : order) {
    const auto& members = groups[r];
    if (members.size() < 2) {
      status.message(Level::Warning, "tag " + r + " is shared by points of several platforms, and this merge has one of "
                                     "them: its image stays under " + release.points[members.front()].tag +
                                     ", and nothing is pushed under " + r);
      continue;
    }
    std::vector<std::pair<Descriptor, std::string>> ds;
    for (size_t i : members) ds.push_back({entries[i]->manifest, release.points[i].point.recipe.architecture});
    const std::string json = platform_index_json(ds);
    indexes.push_back({r, registry::ManifestRef{kMediaTypeIndex, json, Digest::of_bytes(json), {}, {}, "", "", ""}});
  }
  if (indexes.empty()) return;
  auto start = std::chrono::steady_clock::now();
  auto pushed = registry::push_images(repo, indexes, push, status);
  registry::report_push(pushed, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), status);
  for (const auto& ix : indexes) {
    status.result(repo.name() + ":" + ix.tag + " (index over its platforms)", ix.manifest.digest.str());
    if (sign_key) {
      auto s = registry::sign_image(registry::Reference::parse(repo.name() + ":" + ix.tag), *sign_key, push, status);
      status.result("signed " + s.identity, s.manifest.str());
    }
  }
}

}  // namespace

int cmd_merge(const std::vector<std::string>& argv) {
  std::vector<std::string> flags = kCommonFlags;
  flags.insert(flags.end(), {"--locked", "--sbom"});
  std::vector<std::string> options = kCommonOptions;
  options.insert(options.end(), {"--registry", "-o", "--notes", "--catalog", "--index-tag", "--source-date-epoch",
                                 "--compression", "--level", "--layer-budget", "--creds", "--ca-cert", "-j",
                                 "--jobs", "--sign"});
  Args args(argv, flags, options, {"--only", "--set", "--insecure-registry"});
  if (maybe_help(args, kMergeHelp)) return kExitOk;
  if (args.positional().size() != 1)
    throw Error("merge wants one recipe file (see 'stackbuild merge --help')", ErrorKind::Usage);
  const auto repo = release_registry(registry_arg(args, "merge"));
  auto notes = args.get("-o") ? args.get("-o") : args.get("--notes");
  std::optional<fs::path> sign_key;
  if (auto key = args.get("--sign")) {
    if (!fs::is_regular_file(*key)) throw Error("--sign " + *key + ": no such file", ErrorKind::Usage);
    sign_key = fs::absolute(*key);
  }

  Context ctx = make_context(args);
  Status& status = *ctx.status;
  Release release = plan_release(load_recipe(args.positional()[0]), release_request(args));
  for (const auto& s : release.skipped)
    status.message(Level::Warning, "matrix point " + s + " is unsatisfiable (see 'stackbuild plan'): not in the release");

  // Each point's manifest (and the artifacts on it) as the tasks left them.
  registry::PushOptions push = push_options(args);
  const auto pushed = find_pushed_points(repo, release.points, push.session, status);
  std::vector<std::string> missing;
  std::vector<std::optional<IndexEntry>> entries;
  std::vector<std::vector<std::string>> rows{{"POINT", "TAG", "MANIFEST", "INPUTS", "SBOM"}};
  const bool locked = args.has("--locked"), sbom = args.has("--sbom");
  for (size_t i = 0; i < release.points.size(); ++i) {
    const ReleasePoint& p = release.points[i];
    const PushedPoint& got = pushed[i];
    const std::string where = repo.name() + ":" + p.tag;
    const std::string who = "matrix point " + (p.point.id.empty() ? std::string("(the recipe)") : p.point.id);
    entries.emplace_back();
    bool has_sbom = std::find(got.artifact_types.begin(), got.artifact_types.end(), sbom::kSpdxMediaType) !=
                    got.artifact_types.end();
    rows.push_back({p.point.id.empty() ? "-" : p.point.id, p.tag,
                    got.manifest ? got.manifest->digest.str().substr(0, 19) : "MISSING",
                    !got.manifest ? "-" : same_inputs(p, got) ? "recorded" : got.inputs.empty() ? "none" : "OTHER",
                    has_sbom ? "attached" : "-"});
    if (!got.manifest) {
      missing.push_back(who + ": " + where + " is not in the registry: its task did not push it (see its log)");
      continue;
    }
    if (locked && !same_inputs(p, got)) {
      missing.push_back(who + ": " + where + " (" + got.manifest->digest.str() + ") has " +
                        (got.inputs.empty() ? std::string("no record of its inputs")
                                            : "records of other inputs, not " + p.inputs.str()) +
                        ": its task did not finish, or this is an older build (a task records them last, "
                        "with build --record-inputs)");
      continue;
    }
    if (sbom && !has_sbom) {
      missing.push_back(who + ": " + where + " (" + got.manifest->digest.str() +
                        ") has no SBOM attached: its task ran without --sbom, or stopped before attaching it");
      continue;
    }
    entries.back() = IndexEntry{*got.manifest, p.point.recipe.tags};
  }
  std::string table = text_table(rows);
  status.message(Level::Info, "points in " + repo.name() + ":\n" + table.substr(0, table.size() - 1));
  if (!missing.empty()) {
    std::string text = std::to_string(missing.size()) + " of " + std::to_string(release.points.size()) +
                       " points of the release cannot be merged:";
    for (const auto& m : missing) text += "\n  " + m;
    throw Error(text + "\nnothing was pushed");
  }

  Store store = ctx.store();
  push.store = &store;
  push_platform_indexes(repo, release, entries, push, sign_key, status);

  // The matrix index, as `build --push-to` pushes it: under TAG, else its ref name.
  std::string named = repo.name() + ":" + release.points.front().tag;  // what the notes read without an index
  if (release.matrix) {
    std::vector<MatrixPoint> points;
    for (const auto& p : release.points) points.push_back(p.point);
    TaggedIndex index = matrix_index(points, entries, release.stack, release.index_ref);
    const std::string tag = repo.tag.empty() ? release.index_ref : repo.tag;
    registry::ManifestRef m{kMediaTypeIndex, index.json, index.digest, {}, {}, "", "", ""};
    auto start = std::chrono::steady_clock::now();
    auto r = registry::push_images(repo, {{tag, m}}, push, status);
    registry::report_push(r, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), status);
    status.result(index.ref + " (matrix index)", index.digest.str());
    named = repo.name() + ":" + tag;
    if (sign_key) {  // as build --push --sign signs the index it pushed
      auto s = registry::sign_image(registry::Reference::parse(named), *sign_key, push, status);
      status.result("signed " + s.identity, s.manifest.str());
    }
  } else {
    status.message(Level::Info, "the recipe has one point: there is no matrix index to push");
  }

  if (notes) {  // the release notes, as `stackbuild notes` writes them from the registry
    std::vector<std::string> na{named, "-o", *notes, "--store", ctx.store_root.string()};
    for (const char* o : {"--creds", "--ca-cert", "--progress"})
      if (auto v = args.get(o)) na.insert(na.end(), {o, *v});
    for (const auto& v : args.all("--insecure-registry")) na.insert(na.end(), {"--insecure-registry", v});
    if (args.has("--json")) na.push_back("--json");
    for (const auto& o : args.all("--only")) na.insert(na.end(), {"--only", o});
    cmd_notes(na);
  }
  return kExitOk;
}

}  // namespace sb::cli
