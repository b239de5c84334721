#include "pipeline/release.hpp"

#include <algorithm>
#include <fstream>

#include <nlohmann/json.hpp>

#include "image/layout.hpp"
#include "pipeline/base_image.hpp"
#include "pipeline/build.hpp"
#include "pipeline/lock.hpp"
#include "registry/pull.hpp"
#include "registry/push.hpp"
#include "registry/referrers.hpp"
#include "util/error.hpp"
#include "util/version.hpp"

namespace sb {

namespace {

// Every file under `path` (or `path` itself): its name below `path`, type,
// permission bits, and contents or link target, in name order.
void hash_tree(const fs::path& path, const std::string& name, KeyHasher& key) {
  std::error_code ec;
  auto st = fs::symlink_status(path, ec);
  if (ec || !fs::exists(st)) {
    key.field(name, "missing");
    return;
  }
  key.field(name + ":mode", static_cast<int64_t>(st.permissions()));
  if (fs::is_symlink(st)) {
    key.field(name + ":link", fs::read_symlink(path).string());
  } else if (fs::is_directory(st)) {
    std::vector<fs::path> children;
    for (const auto& e : fs::directory_iterator(path)) children.push_back(e.path());
    std::sort(children.begin(), children.end());
    key.field(name + ":dir", static_cast<int64_t>(children.size()));
    for (const auto& c : children) hash_tree(c, name + "/" + c.filename().string(), key);
  } else if (fs::is_regular_file(st)) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error("cannot read " + path.string() + " (a file the recipe copies or builds from)");
    Sha256 sha;
    char buf[1 << 16];
    while (in.read(buf, sizeof buf) || in.gcount() > 0) sha.update(buf, static_cast<size_t>(in.gcount()));
    key.field(name + ":file", sha.finish().str());
  } else {
    key.field(name + ":special", static_cast<int64_t>(st.type()));
  }
}

}  // namespace

Digest point_inputs_digest(const MatrixPoint& point, const BuildOptions& options) {
  KeyHasher key;
  key.field("stackbuild-point-inputs", "1")
      .field("stackbuild", kStackbuildVersion)
      .field("point", point.id)
      .field("recipe", nlohmann::json(point.recipe).dump())
      .field("lock", point.inputs.lock)
      .field("base", point.base_lock)
      .field("epoch", choose_source_date_epoch(point.recipe, options.source_date_epoch));
  hash_layer_options(key, options.layer).field("budget", static_cast<int64_t>(layer_budget(point.recipe, options)));
  for (const auto& p : point.prefetch) key.field("prefetch", p);  // its eStargz layers' order, from the layout
  for (const auto& [k, v] : point.variables) key.field("variable:" + k, v);
  for (const auto& [k, v] : point.labels) key.field("label:" + k, v);
  // Local files: what copy:, source: {path:} and patches: read from the host.
  for (const auto& l : point.recipe.layers) {
    for (const auto& c : l.copy)
      hash_tree(fs::path(c.src).is_absolute() ? fs::path(c.src) : c.base / c.src, "copy:" + l.name + ":" + c.src, key);
    if (!l.source.path.empty())
      hash_tree(fs::path(l.source.path).is_absolute() ? fs::path(l.source.path) : l.source.base / l.source.path,
                "source:" + l.name, key);
    for (const auto& p : l.patches) hash_tree(p.file, "patch:" + l.name + ":" + p.path, key);
  }
  return key.finish();
}

std::string platform_task_tag(const std::string& ref_name, const std::string& architecture) {
  return ref_name + "-" + architecture;
}

std::set<std::string> shared_platform_tags(const Planned& planned, const MatrixPoint& point) {
  std::set<std::string> mine, out;
  for (const auto& t : point.recipe.tags) mine.insert(layout_ref_name(t));
  const std::string siblings = platform_siblings(point);
  for (const auto& q : planned.plan.points) {
    if (!q.stack || q.point.id() == point.id) continue;
    MatrixPoint other = matrix_point(planned, q);
    if (platform_siblings(other) != siblings || other.recipe.architecture == point.recipe.architecture) continue;
    for (const auto& t : other.recipe.tags)
      if (mine.count(layout_ref_name(t))) out.insert(layout_ref_name(t));
  }
  return out;
}

Release plan_release(const Recipe& recipe, const ReleaseRequest& rq) {
  Planned planned = plan_recipe(recipe, rq.plan);
  if (rq.locked) check_lock(planned);
  const auto& all = planned.plan.points;
  if (planned.plan.unsatisfiable() == all.size())
    throw Error(unsatisfiable_report(planned.plan), ErrorKind::Unsatisfiable);
  std::vector<size_t> chosen;
  if (!rq.only.empty()) {
    chosen = select_points(planned.recipe, planned.plan, rq.only);
  } else {
    for (size_t i = 0; i < all.size(); ++i) chosen.push_back(i);
  }
  Release r;
  r.stack = planned.recipe.stack;
  r.matrix = all.size() > 1;
  if (r.matrix) {
    r.index_ref = rq.index_tag.value_or(planned.recipe.stack + "-matrix");
    validate_tag(r.index_ref);
  }
  for (size_t i : chosen) {
    const auto& p = all[i];
    if (!p.stack) {
      r.skipped.push_back(p.point.id());
      continue;
    }
    MatrixPoint mp = matrix_point(planned, p);
    if (rq.locked) {
      mp.inputs = locked_point_inputs(planned, p);
      mp.base_lock = locked_base(planned, p);
    }
    // --only KEY=VALUE for each matrix key: must choose this point alone.
    std::vector<std::string> only;
    const auto vars = resolve::point_variables(planned.recipe, p);
    for (const auto& [k, v] : p.point.values) {
      auto it = vars.find(k);
      only.push_back(k + "=" + (it == vars.end() ? v.str() : it->second));
    }
    if (!only.empty() && select_points(planned.recipe, planned.plan, only) != std::vector<size_t>{i})
      throw Error("matrix point " + p.point.id() + " cannot be chosen alone with --only (its values are those of "
                      "another point too), so no task can build it by itself",
                  ErrorKind::Input);
    if (mp.recipe.tags.empty())
      throw Error("matrix point " + (p.point.id().empty() ? std::string("(the recipe)") : p.point.id()) +
                      " has no tags: a task pushes it under its tag, and the merge finds it there; give the recipe "
                      "tags: (with ${vars} of the matrix)",
                  ErrorKind::Input);
    std::string tag = layout_ref_name(mp.recipe.tags.front());
    const std::set<std::string> shared = shared_platform_tags(planned, mp);
    if (shared.count(tag)) tag = platform_task_tag(tag, mp.recipe.architecture);
    Digest inputs = point_inputs_digest(mp, rq.build);
    r.points.push_back(
        ReleasePoint{std::move(mp), std::move(only), std::move(tag), {shared.begin(), shared.end()}, inputs});
  }
  if (r.points.empty())
    throw Error("no point of the release can be built:\n" + unsatisfiable_report(planned.plan), ErrorKind::Unsatisfiable);
  return r;
}

std::vector<PushedPoint> find_pushed_points(const registry::Reference& repo, const std::vector<ReleasePoint>& points,
                                            const registry::SessionOptions& options, Status& status) {
  std::string op = "read " + repo.name();
  registry::Session session(repo.registry, op, registry::push_session_options(repo, options, op), status,
                            repo.repository);
  session.add_scope(repo.repository, "pull");
  auto client = session.make_client();
  std::vector<PushedPoint> out;
  for (const auto& p : points) {
    PushedPoint pp;
    auto m = registry::fetch_manifest(session, *client, repo.repository, p.tag, std::nullopt, true);
    if (m) {
      pp.manifest = Descriptor{m->media_type, m->digest, m->bytes.size(), {}, std::nullopt};
      for (const auto& d : registry::list_referrers(session, *client, repo.repository, m->digest)) {
        std::string type = d.value("artifactType", "");
        pp.artifact_types.push_back(type);
        if (type != kInputsArtifactType || !d.contains("annotations") || !d["annotations"].is_object()) continue;
        const auto& a = d["annotations"];
        if (a.contains(kInputsAnnotation) && a[kInputsAnnotation].is_string())
          pp.inputs.push_back(a[kInputsAnnotation].get<std::string>());
      }
    }
    out.push_back(std::move(pp));
  }
  return out;
}

bool same_inputs(const ReleasePoint& point, const PushedPoint& pushed) {
  return pushed.manifest &&
         std::find(pushed.inputs.begin(), pushed.inputs.end(), point.inputs.str()) != pushed.inputs.end();
}

}  // namespace sb
