#include "pipeline/run_build.hpp"

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <set>

#include <nlohmann/json.hpp>

#include "image/image.hpp"
#include "image/layout.hpp"
#include "pipeline/base_image.hpp"
#include "pipeline/labels.hpp"
#include "pipeline/lock.hpp"
#include "pipeline/prefetch_order.hpp"
#include "pipeline/registry_cache.hpp"
#include "pipeline/release.hpp"
#include "registry/pull.hpp"
#include "registry/referrers.hpp"
#include "registry/sign.hpp"
#include "util/error.hpp"

namespace sb {

namespace {

// What the steps hand on to each other.
struct Job {
  const BuildRequest& request;
  Services& services;
  Status& status;
  std::optional<Planned> planned;                  // none: the recipe builds as written
  std::set<std::string> matrix_ids;                // every point of the matrix, for --cache-to
  std::vector<MatrixPoint> points;                 // the points to build
  std::vector<std::vector<std::string>> push_of;   // each point's push: targets
  bool matrix = false;                             // more than one point: an index over them
  MatrixOptions options;                           // request.matrix, with the index and the cache
  std::optional<Store> store;
  registry::PushOptions registry;                  // request.registry, with the store
  std::unique_ptr<RegistryCache> remote;           // --cache-from
  std::optional<Error> gate_failure;               // thrown after the cache export
  ProvenanceRun provenance;                        // --provenance: what every statement shares
  BuildOutcome out;
};

// Points i and j may not share a ref name in one layout, nor take the index's.
void check_ref_names(const std::vector<MatrixPoint>& points, const std::string& index_ref) {
  std::map<std::string, std::string> owner;  // ref name -> the point's label
  std::map<std::string, const MatrixPoint*> first;  // ref name -> the first point with it
  for (const auto& p : points)
    for (const auto& t : p.recipe.tags) {
      std::string ref = layout_ref_name(t);
      std::string who = p.id.empty() ? t : p.id;
      auto [it, fresh] = owner.emplace(ref, who);
      auto [f, _] = first.emplace(ref, &p);
      // Points of one tag that differ only in platform: an image index under it.
      const bool siblings = f->second != &p && platform_siblings(*f->second) == platform_siblings(p) &&
                            f->second->recipe.architecture != p.recipe.architecture &&
                            std::find(f->second->recipe.tags.begin(), f->second->recipe.tags.end(), t) !=
                                f->second->recipe.tags.end();
      if (!fresh && it->second != who && !siblings)
        throw Error("two matrix points would have the ref name '" + ref + "' in one OCI layout: " + it->second +
                        " and " + who + "; make the TAG parts of their tags differ (e.g. ${cuda})",
                    ErrorKind::Input);
    }
  if (!index_ref.empty() && owner.count(index_ref))
    throw Error("the matrix index's ref name '" + index_ref + "' is also the tag of " + owner[index_ref] +
                    "; choose another with --index-tag",
                ErrorKind::Usage);
}

// --provenance: the files the plan read (the recipe, its parents, the
// lockfile, the catalog), by digest as they are now, and the request's
// parameters, for every image's statement.
void provenance_inputs(Job& j) {
  const BuildRequest& rq = j.request;
  if (!rq.provenance) return;
  const fs::path catalog = j.planned ? j.planned->catalog_dir : fs::path();
  j.provenance.files = recipe_files(rq.recipe, rq.locked, catalog);
  provenance::Parameters& p = j.provenance.parameters;
  p.recipe = rq.recipe.file.string();
  p.only = rq.only;
  p.set = rq.plan.sets;
  p.locked = rq.locked;
  p.catalog = catalog.string();
  p.compression = to_string(rq.matrix.build.layer.compression);
  p.level = rq.matrix.build.layer.level;
  p.layer_budget = rq.matrix.build.layer_budget;
  p.allow_host_paths = rq.matrix.build.allow_host_paths;
}

// The recipe's matrix expanded and resolved against the catalog; --locked:
// checked against the lockfile. A recipe with nothing to plan builds as written.
void plan(Job& j) {
  const BuildRequest& rq = j.request;
  if (needs_plan(rq.recipe) || rq.locked || !rq.plan.sets.empty() || rq.plan.catalog || !rq.only.empty()) {
    j.planned = plan_recipe(rq.recipe, rq.plan);
    if (rq.locked) check_lock(*j.planned);
  }
  provenance_inputs(j);
}

// The planned points to build: --only's, less the unsatisfiable ones (a
// warning; with --strict, or when none is left, the error).
void choose_planned(Job& j) {
  const BuildRequest& rq = j.request;
  const Planned& planned = *j.planned;
  const auto& all = planned.plan.points;
  for (const auto& p : all) j.matrix_ids.insert(p.point.id());
  if (planned.plan.unsatisfiable() == all.size())
    throw Error(unsatisfiable_report(planned.plan), ErrorKind::Unsatisfiable);
  std::vector<size_t> chosen;
  if (!rq.only.empty())
    chosen = select_points(planned.recipe, planned.plan, rq.only);
  else
    for (size_t i = 0; i < all.size(); ++i) chosen.push_back(i);
  resolve::Plan picked = planned.plan;  // the chosen points, for the report
  picked.points.clear();
  for (size_t i : chosen) picked.points.push_back(all[i]);
  if (size_t bad = picked.unsatisfiable()) {
    if (rq.strict || bad == picked.points.size())
      throw Error((rq.strict ? "--strict: " : "") + unsatisfiable_report(picked) + "\nnothing was built",
                  ErrorKind::Unsatisfiable);
    j.status.message(Level::Warning, unsatisfiable_report(picked) + "\nthey are skipped; building the other " +
                                         std::to_string(picked.points.size() - bad));
    for (const auto& p : picked.points)
      if (!p.stack) j.status.event("point_skipped", {{"point", p.point.id()}, {"reason", "unsatisfiable"}});
  }
  for (const auto& p : picked.points) {
    if (!p.stack) continue;
    j.points.push_back(matrix_point(planned, p));
    if (rq.locked) {
      j.points.back().inputs = locked_point_inputs(planned, p);  // apt, pip, redist: the pinned files
      j.points.back().base_lock = locked_base(planned, p);       // from: the pinned digest
    }
    j.push_of.push_back(p.push);
  }
  j.matrix = all.size() > 1;
}

// The points to build (the plan's, or the recipe as written), their tags and
// ref names checked against each other and the request.
void choose_points(Job& j) {
  const BuildRequest& rq = j.request;
  if (j.planned) {
    choose_planned(j);
  } else {
    j.matrix_ids.insert("");
    MatrixPoint only;
    only.recipe = rq.recipe;
    only.labels = stack_labels(rq.recipe, nullptr);
    j.points.push_back(std::move(only));
    std::vector<std::string> push;
    for (const auto& t : rq.recipe.push) push.push_back(t.value);
    j.push_of.push_back(push);
  }
  const BuildOptions& o = j.options.build;
  if (!o.tags.empty() && j.points.size() > 1)
    throw Error("--tag names one image, and this run builds " + std::to_string(j.points.size()) +
                    " points; give the recipe's tags: ${vars} (e.g. ${cuda}) or choose one point with --only",
                ErrorKind::Usage);
  if (!o.tags.empty())
    for (auto& p : j.points) p.recipe.tags = o.tags;
  if (j.matrix && !rq.no_index) {
    j.options.index_ref = rq.index_tag.value_or(rq.recipe.stack + "-matrix");
    try {
      validate_tag(j.options.index_ref);
    } catch (Error& e) {
      throw Error("--index-tag: " + std::string(e.what()), ErrorKind::Usage);
    }
  }
  if (o.format == OutputFormat::OciLayout) check_ref_names(j.points, j.options.index_ref);
  if (o.format == OutputFormat::DockerArchive) {  // one image a tag: one platform
    std::set<std::string> platforms;
    for (const auto& p : j.points) platforms.insert("linux/" + p.recipe.architecture);
    std::string list;
    for (const auto& p : platforms) list += (list.empty() ? "" : " and ") + p;
    if (platforms.size() > 1)
      throw Error("--format docker-archive holds images of one platform, and this run builds " + list +
                      "; choose one with --platform",
                  ErrorKind::Usage);
  }
  if (rq.sbom && o.format != OutputFormat::OciLayout)
    throw Error("--sbom goes into an OCI layout, and --format docker-archive writes none; build a layout, or run "
                "'stackbuild sbom' on one",
                ErrorKind::Usage);
  if (rq.provenance && o.format != OutputFormat::OciLayout)
    throw Error("--provenance goes into an OCI layout beside each image, and --format docker-archive has no place "
                "for it; build a layout",
                ErrorKind::Usage);
}

// The prefetch order attached to the image of `tag` (a ref name) for
// `platform` in the repository `repo`, if it has one.
std::optional<std::vector<std::string>> registry_prefetch(Job& j, const std::string& repo, const std::string& tag,
                                                          const std::string& platform) {
  auto ref = registry::Reference::parse(repo + ":" + tag);
  std::optional<registry::Listing> listing;
  try {
    listing = registry::list_images(ref, *j.store, j.registry.session, j.status, {kPrefetchOrderType});
  } catch (const Error& e) {
    j.status.message(Level::Warning, "--prefetch-from: no order from " + ref.str() + ": " + e.what());
    return std::nullopt;
  }
  for (const auto& image : listing->images) {
    auto arch = image.platform.find("architecture");
    if (listing->images.size() > 1 && (arch == image.platform.end() || "linux/" + arch->second != platform)) continue;
    for (const auto& a : image.artifacts)
      if (a.type == kPrefetchOrderType)
        return parse_prefetch_document(a.file, "the prefetch order " + a.manifest.str() + " at " + ref.str());
  }
  return std::nullopt;
}

// A point with eStargz layers takes the prefetch order attached to the image
// its first tag names in the output layout, or in --prefetch-from's layout or
// repository (pipeline/prefetch_order.hpp).
void take_prefetch_orders(Job& j) {
  const BuildOptions& o = j.options.build;
  const auto& from = j.request.prefetch_from;
  if (o.format != OutputFormat::OciLayout && !from) return;
  const bool remote = from && !fs::is_directory(*from);
  for (auto& p : j.points) {
    if (p.recipe.tags.empty() || !has_estargz_layers(p.recipe, o)) continue;
    const std::string ref = layout_ref_name(p.recipe.tags.front());
    const std::string platform = "linux/" + p.recipe.architecture;
    const std::string source = from ? *from : o.output.string();
    auto order = remote ? registry_prefetch(j, *from, ref, platform) : layout_prefetch(source, ref, platform, *j.store);
    if (!order) {
      if (from) j.status.message(Level::Info, "--prefetch-from: " + source + " has no prefetch order for " + ref);
      continue;
    }
    p.prefetch = std::move(*order);
    j.status.message(Level::Info, (p.id.empty() ? std::string("the image") : p.id) + ": eStargz layers put " +
                                      counted(p.prefetch.size(), "file", "files") + " first, the prefetch order of " +
                                      source + ":" + ref);
  }
}

// Each point's layers and image, into the store (--cache-from: a layer the
// store lacks may come from a registry's cache).
void build_all(Job& j) {
  j.store.emplace(j.services.open_store());
  j.registry.store = &*j.store;
  if (j.points.size() > 1)
    j.status.message(Level::Info, "building " + std::to_string(j.points.size()) + " matrix points, " +
                                      std::to_string(std::min<size_t>(j.options.jobs, j.points.size())) +
                                      " at a time");
  if (!j.request.cache_from.empty()) {
    j.remote = std::make_unique<RegistryCache>(j.request.cache_from, j.registry.session, j.status, j.registry.jobs);
    j.options.build.cache_from = j.remote.get();
  }
  take_prefetch_orders(j);
  j.out.built = build_points(j.points, *j.store, j.options, j.status);
  for (const auto& p : j.out.built.points)
    if (p.built) {
      for (const auto& w : p.built->warnings) j.status.message(Level::Warning, w);
      if (!p.built->base.empty()) j.status.result("base", p.built->base);
    }
}

// The images and the matrix index, into one layout or archive (only when every point built).
// A point's prefetch order goes along to its new images, so the next build keeps it.
void write_outputs(Job& j) {
  write_matrix(j.points, j.out.built, *j.store, j.options);
  if (j.out.built.failure || j.options.build.format != OutputFormat::OciLayout) return;
  for (size_t i = 0; i < j.out.built.points.size() && i < j.points.size(); ++i) {
    const auto& p = j.out.built.points[i];
    if (!p.built || j.points[i].prefetch.empty()) continue;
    std::set<Digest> done;
    for (const auto& ti : p.built->images)
      if (done.insert(ti.image.manifest.digest).second)
        add_prefetch_to_layout(j.options.build.output, ti.image.manifest, j.points[i].prefetch);
  }
}

// The gate: with a push (or --verify) each image's tests run before anything
// is pushed; the counts go into the summary.
void verify_images(Job& j) {
  j.out.reports.resize(j.out.built.points.size());
  if (j.out.built.failure) return;
  j.gate_failure = gate_build(j.out.built, j.request.gate, j.request.pushing(), *j.store, j.status,
                              j.services.show_report, j.out.reports);
}

// The gate's reports go into the layout beside their images, as `test
// --add-to-layout` puts them (`notes` reads them; a failed one says what failed).
void add_reports(Job& j) {
  if (j.options.build.format != OutputFormat::OciLayout) return;
  const MatrixResult& r = j.out.built;
  for (size_t i = 0; i < r.points.size() && i < j.out.reports.size(); ++i) {
    if (!r.points[i].built) continue;
    auto subjects = report_subjects(*r.points[i].built);
    for (size_t k = 0; k < j.out.reports[i].size() && k < subjects.size(); ++k)
      add_report_to_layout(j.options.build.output, j.out.reports[i][k], subjects[k], j.status);
  }
}

// The table of the points for people, and the "summary" event.
void summarize(Job& j) {
  const MatrixResult& r = j.out.built;
  std::string table = summary_table(r);
  j.status.message(Level::Info, "summary (" + std::to_string(r.points.size()) +
                                    (r.points.size() == 1 ? " point, " : " points, ") +
                                    std::to_string(r.seconds).substr(0, 5) + " s):\n" +
                                    table.substr(0, table.empty() ? 0 : table.size() - 1));
  j.status.event("summary", summary_json(r));
}

// --cache-to: what was built goes to each registry cache.
void export_caches(Job& j) {
  if (j.request.cache_to.empty()) return;
  std::vector<PointCache> caches;
  for (const auto& p : j.out.built.points)
    if (p.built) caches.push_back({j.request.recipe.stack, p.id, cache_entries(p.built->layers, *j.store)});
  for (const auto& ref : j.request.cache_to) {
    auto start = std::chrono::steady_clock::now();
    CacheExport done = export_cache(ref, caches, j.matrix_ids, *j.store, j.registry, j.status);
    j.status.message(Level::Info, "cache to " + ref.str() + ": " + counted(caches.size(), "point", "points") +
                                      " written, " + std::to_string(done.points_kept) + " kept; blobs: " +
                                      std::to_string(done.push.blobs_sent) + " sent (" +
                                      human_bytes(static_cast<double>(done.push.bytes_sent)) + "), " +
                                      std::to_string(done.push.blobs_mounted) + " mounted, " +
                                      std::to_string(done.push.blobs_present) + " already there, in " +
                                      std::to_string(seconds_since(start)).substr(0, 4) + " s");
    j.status.result("cache " + ref.str(), done.index.str());
  }
}

// A result per image, the matrix index and the output.
void report_results(Job& j) {
  const MatrixResult& r = j.out.built;
  for (const auto& p : r.points)
    for (const auto& img : p.built->images) j.status.result(img.tag, img.image.manifest.digest.str());
  if (r.index) j.status.result(r.index->ref + " (matrix index)", r.index->digest.str());
  j.status.result("output", j.options.build.output.string());
}

// --sbom: each image's SBOM into the layout, beside the image it refers to.
void add_sboms(Job& j) {
  j.out.sboms.resize(j.out.built.points.size());
  if (j.request.sbom) j.out.sboms = add_built_sboms(j.out.built, j.options.build.output, *j.store, j.status);
}

// --provenance: each image's statement into the layout, beside the image,
// with this run's reports and SBOMs of it as byproducts.
void add_provenance(Job& j) {
  if (!j.request.provenance) return;
  j.provenance.run.finished = j.services.build.date();
  j.out.provenance = add_built_provenance(j.provenance, j.points, j.out.built, j.out.reports, j.out.sboms,
                                          j.options.build.output, j.status);
}

// Each pushed image's prefetch order goes along, as `stackbuild push` sends
// the layout's, so a build elsewhere takes it with --prefetch-from.
void attach_prefetch_orders(Job& j) {
  for (size_t i = 0; i < j.out.built.points.size() && i < j.points.size(); ++i) {
    const auto& p = j.out.built.points[i];
    if (!p.built || j.points[i].prefetch.empty()) continue;
    const std::string doc = prefetch_document(j.points[i].prefetch);
    std::set<Digest> done;
    for (const auto& ti : p.built->images) {
      const Descriptor& m = ti.image.manifest;
      if (!done.insert(m.digest).second) continue;
      for (const auto& t : j.push_of[i]) {
        auto r = registry::attach_artifact(registry::Reference::parse(t), {m.media_type, m.digest, m.size},
                                           kPrefetchOrderType, doc, {}, j.registry, j.status);
        j.status.message(Level::Info, "prefetch order of " + ti.tag + " attached as " + r.artifact.str() + " (" +
                                          r.how + ")");
      }
    }
  }
}

// A task of a fan-out (--no-index) that builds one platform of a tag that
// points of other platforms share pushes its image under TAG-ARCH (release.hpp),
// and `stackbuild merge` the index over them under TAG.
void push_shared_tags_apart(Job& j) {
  for (size_t i = 0; i < j.points.size() && i < j.push_of.size(); ++i) {
    const MatrixPoint& p = j.points[i];
    const std::set<std::string> shared = shared_platform_tags(*j.planned, p);
    if (shared.empty()) continue;
    std::vector<std::string> named;
    auto add = [&](const std::string& t) {
      if (std::find(named.begin(), named.end(), t) == named.end()) named.push_back(t);
    };
    for (const auto& t : j.push_of[i]) {
      auto ref = registry::Reference::parse(t);
      if (!ref.tag.empty()) {  // REPO:TAG given: that tag
        add(t);
        continue;
      }
      for (const auto& tag : p.recipe.tags) {
        const std::string r = layout_ref_name(tag);
        if (!shared.count(r)) {
          add(ref.name() + ":" + r);
          continue;
        }
        const std::string apart = platform_task_tag(r, p.recipe.architecture);
        add(ref.name() + ":" + apart);
        j.status.message(Level::Info, "point " + p.id + ": shared tag " + r + ": pushed as " + apart +
                                          " ('stackbuild merge' pushes the index over its platforms under " + r + ")");
      }
    }
    j.push_of[i] = named;
  }
}

// --push, --push-to: the images to the registry, then their reports, SBOMs
// and provenance as artifacts referring to them; --sign: then their
// signatures (and the provenance's).
void push_all(Job& j) {
  const BuildRequest& rq = j.request;
  if (!rq.pushing()) return;
  std::map<std::string, std::string> index_tags;  // REGISTRY/REPO -> the index's tag there
  if (!rq.push_to.empty()) {
    std::vector<std::string> targets;
    for (const auto& t : rq.push_to) {
      auto ref = registry::Reference::parse(t);
      if (ref.digest) throw Error("--push-to " + t + ": push to a digest is not possible", ErrorKind::Usage);
      if (j.out.built.index && !ref.tag.empty()) {  // TAG names the index; each image keeps its ref names
        index_tags[ref.name()] = ref.tag;
        targets.push_back(ref.name());
      } else {
        targets.push_back(t);
      }
    }
    for (auto& p : j.push_of) p = targets;
    if (rq.no_index && j.planned) push_shared_tags_apart(j);
  }
  bool any = false;
  for (const auto& p : j.push_of) any = any || !p.empty();
  if (!any) throw Error("--push: the recipe has no push: targets; give --push-to REGISTRY/REPO", ErrorKind::Usage);
  const auto pushed = push_built_images(j.out.built, j.push_of, index_tags, j.registry, j.status);
  attach_built_reports(j.out.built, j.out.reports, j.push_of, j.registry.session, *j.store, j.status);
  attach_prefetch_orders(j);
  attach_built_sboms(j.out.sboms, j.push_of, j.registry.session, *j.store, j.status);
  if (rq.provenance) attach_built_provenance(j.out.provenance, j.push_of, rq.sign_key, j.registry, j.status);
  if (rq.sign_key)  // --sign: each image and index as it is in the registry now
    for (const auto& ref : pushed) {
      auto s = registry::sign_image(registry::Reference::parse(ref), *rq.sign_key, j.registry, j.status);
      j.status.result("signed " + s.identity, s.manifest.str());
    }
}

// --record-inputs: each point's inputs digest, attached to its image in each
// repository it went to, after the image, its reports, SBOMs and signatures:
// a record there says the point is complete (pipeline/release.hpp).
void record_inputs(Job& j) {
  const BuildRequest& rq = j.request;
  if (!rq.record_inputs || !rq.pushing()) return;
  for (size_t i = 0; i < j.out.built.points.size() && i < j.points.size(); ++i) {
    const PointReport& p = j.out.built.points[i];
    if (!p.built || p.built->images.empty()) continue;
    const Descriptor& m = p.built->images.front().image.manifest;
    const std::string inputs = point_inputs_digest(j.points[i], j.options.build).str();
    const std::string doc = nlohmann::json{{"point", j.points[i].id}, {"inputs", inputs}}.dump() + "\n";
    registry::PushOptions o = j.registry;
    for (const auto& t : j.push_of[i]) {
      auto ref = registry::Reference::parse(t);
      auto r = registry::attach_artifact(ref, {m.media_type, m.digest, m.size}, kInputsArtifactType, doc,
                                         {{kInputsAnnotation, inputs}}, o, j.status);
      j.status.message(Level::Info, "inputs " + inputs + " of " + (j.points[i].id.empty() ? "the image" : j.points[i].id) +
                                        " recorded at " + ref.name() + "@" + m.digest.str() + " (" + r.how + ")");
    }
  }
}

// Runs one step and reports its seconds as a "step" event.
void step(Job& j, const char* name, void (*run)(Job&)) {
  const auto& now = j.services.build.now;
  auto start = now();
  run(j);
  j.status.event("step", {{"step", name}, {"seconds", std::chrono::duration<double>(now() - start).count()}});
}

}  // namespace

BuildOutcome run_build(const BuildRequest& request, Services& services, Status& status) {
  Job j{request, services, status};
  j.options = request.matrix;
  j.options.build.services = services.build;
  j.registry = request.registry;
  if (services.build.registry) j.registry.session.transport = services.build.registry;
  if (request.provenance)  // the run's own: one invocation, started now, for every image
    j.provenance.run = {request.builder_id, provenance::new_invocation_id(), services.build.date(), {}};

  step(j, "plan", plan);              // matrix, catalog, resolve: the Plan (--locked: checked; --provenance: its files)
  step(j, "select", choose_points);   // the points to build, their tags and ref names
  step(j, "build", build_all);        // each point's layers and image, into the store
  step(j, "write", write_outputs);    // the images and the matrix index: one layout or archive
  step(j, "verify", verify_images);   // the gate: the images' tests, before anything is pushed
  step(j, "reports", add_reports);    // the gate's reports into the layout, beside their images
  step(j, "summary", summarize);      // the table of the points
  if (j.out.built.failure) std::rethrow_exception(j.out.built.failure);  // a point failed: nothing written
  step(j, "cache", export_caches);    // --cache-to, even after a failed test: the run after the fix starts from it
  if (j.gate_failure) throw *j.gate_failure;
  step(j, "results", report_results); // a digest per image, the index, the output
  step(j, "sbom", add_sboms);         // --sbom: into the layout, beside each image
  step(j, "provenance", add_provenance);  // --provenance: into the layout, beside each image
  step(j, "push", push_all);          // --push: the images, then their reports, SBOMs and provenance
  step(j, "record", record_inputs);   // --record-inputs: each point's inputs, last
  return std::move(j.out);
}

}  // namespace sb
