#include "pipeline/matrix_build.hpp"

#include "pipeline/fetch_ahead.hpp"
#include "pipeline/labels.hpp"
#include "pipeline/point_inputs.hpp"
#include "sandbox/emulation.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "util/error.hpp"
#include "util/status.hpp"
#include "util/interrupt.hpp"
#include "util/resources.hpp"
#include "util/threads.hpp"

namespace sb {

BuildOptions point_build_options(const MatrixPoint& point, const BuildOptions& build) {
  BuildOptions o = build;
  o.variables = point.variables;
  o.point = point.inputs;
  o.layer.prefetch = point.prefetch;
  o.labels = point.labels;
  o.base.locked = point.base_lock;
  return o;
}

namespace {

std::string seconds_text(double s) {
  char buf[32];
  snprintf(buf, sizeof buf, "%.1fs", s);
  return buf;
}

// The name a point goes by in progress lines and errors: its first tag, else its matrix values.
std::string point_label(const MatrixPoint& p) {
  std::string tag = p.recipe.tags.empty() ? "" : p.recipe.tags.front();
  if (p.id.empty()) return tag;
  return tag.empty() ? p.id : tag + " (" + p.id + ")";
}

// Seconds from `start` to now on the build's clock (BuildServices::now).
double seconds_since(const MatrixOptions& options, std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(options.build.services.now() - start).count();
}

// Builds one point into `report`; an error gets the point named and is kept.
void build_point(const MatrixPoint& point, const Store& store, const MatrixOptions& options, Status& status,
                 bool scoped, PointReport& report, std::exception_ptr& failure) {
  auto start = options.build.services.now();
  std::unique_ptr<Status> own = scoped ? scoped_status(status, point_label(point)) : nullptr;
  Status& st = own ? *own : status;
  BuildOptions o = point_build_options(point, options.build);
  st.event("point_begin", {{"point", point.id}, {"tags", point.recipe.tags}});
  try {
    check_interrupted();
    BuildResult r = build_image(point.recipe, store, o, st);
    report.tags.clear();
    for (const auto& ti : r.images) report.tags.push_back(ti.tag);
    for (const auto& l : r.layers) {
      (l.cached ? report.layers_reused : report.layers_built) += 1;
      st.event("layer", {{"point", point.id},
                         {"layer", l.name},
                         {"state", l.cached ? "cached" : "built"},
                         {"digest", l.layer.digest.str()},
                         {"size", l.layer.size},
                         {"parts", 1 + l.more.size()},
                         {"seconds", l.seconds}});
    }
    if (!r.images.empty()) {
      const Image& img = r.images.front().image;
      report.image_size = img.config.size + img.manifest.size;
      for (const auto& l : img.layers) report.image_size += l.size;
    }
    report.built = std::move(r);
  } catch (Error& e) {
    if (!point.id.empty()) e.add_trace("while building matrix point " + point.id);
    report.error = e.what();
    failure = std::current_exception();
  } catch (const std::exception& e) {
    report.error = e.what();
    failure = std::current_exception();
  }
  report.seconds = seconds_since(options, start);
  if (report.built) {
    st.message(Level::Info, "layers: " + std::to_string(report.layers_built + report.layers_reused) + " (" +
                                std::to_string(report.layers_built) + " built, " +
                                std::to_string(report.layers_reused) + " from the cache)");
    // A point of another platform: which of its built layers ran its code
    // (build steps, maintainer scripts) under QEMU; the others ran none.
    const std::string arch = point.recipe.architecture, host = sandbox::host_architecture();
    if (!arch.empty() && arch != host) {
      size_t built = 0;
      std::string emulated;
      for (const auto& l : report.built->layers) {
        if (l.cached) continue;
        ++built;
        for (const auto& spec : point.recipe.layers)
          if (spec.name == l.name && (!spec.build.empty() || spec.configure))
            emulated += (emulated.empty() ? "" : ", ") + l.name;
      }
      st.message(Level::Info, "linux/" + arch + " on this linux/" + host + " machine: " +
                                  (emulated.empty() ? "no layer ran linux/" + arch + " code (" + std::to_string(built) +
                                                          " built, none under QEMU)"
                                                    : "layers " + emulated + " ran linux/" + arch +
                                                          " code under QEMU; the other built layers ran none"));
    }
    st.event("point_end", {{"point", point.id},
                           {"tags", report.tags},
                           {"manifest", report.built->images.empty()
                                            ? std::string()
                                            : report.built->images.front().image.manifest.digest.str()},
                           {"size", report.image_size},
                           {"layers_built", report.layers_built},
                           {"layers_reused", report.layers_reused},
                           {"seconds", report.seconds}});
  } else {
    st.event("point_failed", {{"point", point.id}, {"error", report.error}});
  }
}

}  // namespace

size_t points_at_once(const MatrixOptions& options, size_t points, Status& status) {
  size_t jobs = std::max<size_t>(1, std::min<size_t>(static_cast<size_t>(std::max(1, options.jobs)), points));
  if (jobs == 1 || options.memory_per_point == 0) return jobs;
  auto memory = available_memory();
  if (!memory) return jobs;
  size_t fit = std::max<size_t>(1, static_cast<size_t>(*memory / options.memory_per_point));
  if (fit >= jobs) return jobs;
  status.message(Level::Info, "building " + counted(fit, "point", "points") + " at once, not " +
                                  std::to_string(jobs) + ": " + human_bytes(static_cast<double>(*memory)) +
                                  " of memory is available and each point may take " +
                                  human_bytes(static_cast<double>(options.memory_per_point)) +
                                  " (--memory-per-point)");
  return fit;
}

std::string platform_siblings(const MatrixPoint& p) {
  std::string s;
  for (const auto& [k, v] : p.matrix)
    if (k != "platform") s += k + '\x1f' + v + '\x1e';
  return s;
}

MatrixResult build_points(const std::vector<MatrixPoint>& points, const Store& store, const MatrixOptions& options,
                          Status& status) {
  auto start = options.build.services.now();
  MatrixResult result;
  result.points.resize(points.size());
  for (size_t i = 0; i < points.size(); ++i) {
    result.points[i].id = points[i].id;
    result.points[i].tags = points[i].recipe.tags;
    result.points[i].platform = "linux/" + points[i].recipe.architecture;
    result.points[i].siblings = platform_siblings(points[i]);
  }

  // Points go to `jobs` workers in order; after a failure none starts.
  const bool scoped = points.size() > 1;
  std::vector<std::exception_ptr> failures(points.size());
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  // Points at once share the cores: each layer's compressors get their
  // share unless --threads says (the bytes are the same for any count).
  const size_t jobs = points_at_once(options, points.size(), status);
  MatrixOptions shared = options;
  if (shared.build.layer.threads == 0 && jobs > 1)
    shared.build.layer.threads = static_cast<int>(std::max<size_t>(1, (usable_cores() + jobs - 1) / jobs));
  // A --locked build's downloads, fetched ahead of the layers that need them
  // (pipeline/fetch_ahead.hpp); stopped, after the files it is fetching, when
  // the points are done.
  std::optional<FetchAhead> ahead;
  if (options.fetch_ahead && std::any_of(points.begin(), points.end(), [](const MatrixPoint& p) {
        return !p.inputs.lock.empty();
      }))
    ahead.emplace(points, store, shared.build, status);
  auto worker = [&] {
    for (;;) {
      size_t i = next.fetch_add(1);
      if (i >= points.size() || failed.load()) return;
      build_point(points[i], store, shared, status, scoped, result.points[i], failures[i]);
      if (failures[i]) failed.store(true);
    }
  };
  run_on_threads(jobs, worker);
  ahead.reset();
  for (size_t i = 0; i < points.size(); ++i)
    if (failures[i] && !result.failure) result.failure = failures[i];  // the first in matrix order
  if (!result.failure && interrupted()) {
    try {
      check_interrupted();
    } catch (...) {
      result.failure = std::current_exception();
    }
  }

  result.seconds = seconds_since(options, start);
  return result;
}

void write_matrix(const std::vector<MatrixPoint>& points, MatrixResult& result, const Store& store,
                  const MatrixOptions& options) {
  auto start = options.build.services.now();
  if (!result.failure) {
    if (!options.index_ref.empty() && !points.empty())
      result.index = matrix_index(points, result.points, points.front().recipe.stack, options.index_ref);
    result.platform_indexes = platform_indexes(result.points);
    std::set<std::string> shared;
    for (const auto& pi : result.platform_indexes) shared.insert(pi.tag);
    std::vector<TaggedImage> images;
    for (const auto& r : result.points)
      for (const auto& ti : r.built->images)
        if (!shared.count(ti.tag)) images.push_back(ti);
    std::vector<TaggedIndex> indexes;
    for (const auto& pi : result.platform_indexes) indexes.push_back(pi.index);
    if (result.index) indexes.push_back(*result.index);
    try {
      write_images(images, indexes, store, options.build);
    } catch (...) {
      result.failure = std::current_exception();
    }
  }
  result.seconds += seconds_since(options, start);
}

MatrixResult build_matrix(const std::vector<MatrixPoint>& points, const Store& store, const MatrixOptions& options,
                          Status& status) {
  MatrixResult result = build_points(points, store, options, status);
  write_matrix(points, result, store, options);
  return result;
}

MatrixPoint matrix_point(const Planned& planned, const resolve::PlanPoint& p) {
  const Recipe& recipe = planned.recipe;
  MatrixPoint m;
  m.id = p.point.values.empty() ? "" : p.point.id();  // "" without a matrix
  m.recipe = resolve::instantiate(recipe, p);
  m.variables = resolve::point_variables(recipe, p);
  for (const auto& [k, v] : p.point.values) m.matrix.emplace_back(k, v.str());
  if (p.stack) m.versions = p.stack->versions;
  m.inputs = point_inputs(p, planned.catalog);
  m.labels = stack_labels(m.recipe, p.stack ? &*p.stack : nullptr);
  return m;
}

std::map<std::string, std::set<std::string>> only_values(const std::vector<std::string>& only) {
  std::map<std::string, std::set<std::string>> want;
  for (const auto& o : only) {
    auto eq = o.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == o.size())
      throw Error("--only wants KEY=VALUE, not '" + o + "'", ErrorKind::Usage);
    want[o.substr(0, eq)].insert(o.substr(eq + 1));
  }
  return want;
}

std::vector<size_t> select_points(const Recipe& recipe, const resolve::Plan& plan, const std::vector<std::string>& only) {
  const auto want = only_values(only);  // KEY -> the VALUEs asked for
  std::vector<std::map<std::string, std::string>> vars;
  for (const auto& p : plan.points) vars.push_back(resolve::point_variables(recipe, p));
  for (const auto& [key, values] : want) {
    std::set<std::string> seen;
    for (const auto& v : vars)
      if (auto it = v.find(key); it != v.end()) seen.insert(it->second);
    if (seen.empty()) {
      std::set<std::string> keys;
      for (const auto& v : vars)
        for (const auto& [k, x] : v) keys.insert(k);
      std::string all;
      for (const auto& k : keys) all += (all.empty() ? "" : ", ") + k;
      throw Error("--only " + key + "=...: no matrix point has a value for '" + key + "' (keys: " + all + ")",
                  ErrorKind::Usage);
    }
    bool any = false;
    for (const auto& v : values) any = any || seen.count(v);
    if (!any) {
      std::string all;
      for (const auto& s : seen) all += (all.empty() ? "" : ", ") + s;
      throw Error("--only: no matrix point has " + key + "=" + *values.begin() + " (" + key + " is one of: " + all +
                      ")",
                  ErrorKind::Usage);
    }
  }
  std::vector<size_t> out;
  for (size_t i = 0; i < plan.points.size(); ++i) {
    bool ok = true;
    for (const auto& [key, values] : want) {
      auto it = vars[i].find(key);
      ok = ok && it != vars[i].end() && values.count(it->second);
    }
    if (ok) out.push_back(i);
  }
  if (out.empty()) throw Error("--only: no matrix point matches all of the filters given", ErrorKind::Usage);
  return out;
}

TaggedIndex matrix_index(const std::vector<MatrixPoint>& points, const std::vector<PointReport>& reports,
                         const std::string& stack, const std::string& ref) {
  std::vector<std::optional<IndexEntry>> entries(points.size());
  for (size_t i = 0; i < points.size() && i < reports.size(); ++i) {
    const auto& r = reports[i];
    if (!r.built || r.built->images.empty()) continue;
    entries[i] = IndexEntry{r.built->images.front().image.manifest, r.tags};
  }
  return matrix_index(points, entries, stack, ref);
}

TaggedIndex matrix_index(const std::vector<MatrixPoint>& points, const std::vector<std::optional<IndexEntry>>& entries,
                         const std::string& stack, const std::string& ref) {
  std::vector<Descriptor> manifests;
  for (size_t i = 0; i < points.size() && i < entries.size(); ++i) {
    if (!entries[i]) continue;
    const Descriptor& m = entries[i]->manifest;
    Descriptor d{m.media_type, m.digest, m.size, m.annotations, std::nullopt};
    d.platform = std::make_pair(std::string("linux"), points[i].recipe.architecture);
    d.annotations["dev.stackbuild.point"] = points[i].id;
    std::string tags;
    for (const auto& t : entries[i]->tags) tags += (tags.empty() ? "" : ",") + t;
    if (!tags.empty()) d.annotations["dev.stackbuild.tags"] = tags;
    for (const auto& [k, v] : points[i].matrix) d.annotations["dev.stackbuild.matrix." + k] = v;
    for (const auto& [c, v] : points[i].versions) d.annotations["dev.stackbuild.version." + c] = v;
    manifests.push_back(std::move(d));
  }
  std::map<std::string, std::string> annotations{{"dev.stackbuild.stack", stack}};
  if (!points.empty() && !points.front().recipe.release.empty())  // ${release}: for the release notes
    annotations["dev.stackbuild.release"] = points.front().recipe.release;
  std::string json = make_index_json(manifests, annotations);
  return TaggedIndex{ref, json, Digest::of_bytes(json)};
}

std::vector<PlatformIndex> platform_indexes(const std::vector<PointReport>& reports) {
  std::vector<PlatformIndex> out;
  std::map<std::string, size_t> at;  // tag -> its entry in `out`
  std::map<std::string, std::vector<size_t>> owners;
  std::vector<std::string> order;
  for (size_t i = 0; i < reports.size(); ++i) {
    if (!reports[i].built) continue;
    for (const auto& ti : reports[i].built->images) {
      auto& o = owners[ti.tag];
      if (o.empty()) order.push_back(ti.tag);
      if (std::find(o.begin(), o.end(), i) == o.end()) o.push_back(i);
    }
  }
  for (const auto& tag : order) {
    const auto& o = owners[tag];
    if (o.size() < 2) continue;
    std::vector<std::pair<Descriptor, std::string>> ds;
    std::vector<Image> children;
    std::set<std::string> platforms;
    for (size_t i : o) {
      const PointReport& r = reports[i];
      if (r.siblings != reports[o.front()].siblings || !platforms.insert(r.platform).second)
        throw Error("tag '" + tag + "' names two images of " + r.platform + " (points " + reports[o.front()].id +
                    " and " + r.id + ")");
      const Image* img = nullptr;
      for (const auto& ti : r.built->images)
        if (ti.tag == tag) img = &ti.image;
      ds.push_back({img->manifest, r.platform.substr(r.platform.find('/') + 1)});
      children.push_back(*img);
    }
    std::string json = platform_index_json(ds);
    out.push_back({tag, o, TaggedIndex{layout_ref_name(tag), json, Digest::of_bytes(json), children}});
  }
  return out;
}

std::string platform_index_json(const std::vector<std::pair<Descriptor, std::string>>& manifests) {
  std::vector<Descriptor> ds;
  for (const auto& [m, arch] : manifests) {
    // As registry::make_index lists a pushed manifest: type, digest, size, platform.
    Descriptor d{m.media_type, m.digest, m.size, {}, std::nullopt};
    d.platform = std::make_pair(std::string("linux"), arch);
    ds.push_back(d);
  }
  return make_index_json(ds);
}

nlohmann::json summary_json(const MatrixResult& result) {
  nlohmann::json points = nlohmann::json::array();
  for (const auto& p : result.points) {
    nlohmann::json j{{"point", p.id}, {"tags", p.tags}, {"seconds", p.seconds}};
    if (p.built && !p.built->images.empty()) {
      j["manifest"] = p.built->images.front().image.manifest.digest.str();
      j["size"] = p.image_size;
      j["layers_built"] = p.layers_built;
      j["layers_reused"] = p.layers_reused;
      j["state"] = "built";
    } else {
      j["state"] = p.error.empty() ? "not started" : "failed";
      if (!p.error.empty()) j["error"] = p.error;
    }
    j["tests"] = p.tests ? nlohmann::json(*p.tests) : nlohmann::json(nullptr);
    points.push_back(j);
  }
  nlohmann::json j{{"points", points}, {"seconds", result.seconds}};
  if (result.index) j["index"] = {{"ref", result.index->ref}, {"digest", result.index->digest.str()}};
  return j;
}

std::string text_table(const std::vector<std::vector<std::string>>& rows) {
  if (rows.empty()) return "";
  std::vector<size_t> width(rows.front().size(), 0);
  for (const auto& r : rows)
    for (size_t c = 0; c < r.size() && c < width.size(); ++c) width[c] = std::max(width[c], r[c].size());
  std::string out;
  for (const auto& r : rows) {
    std::string line;
    for (size_t c = 0; c < r.size(); ++c) {
      line += r[c];
      if (c + 1 < r.size() && c < width.size()) line += std::string(width[c] - r[c].size() + 2, ' ');
    }
    out += line + "\n";
  }
  return out;
}

std::string summary_table(const MatrixResult& result) {
  std::vector<std::vector<std::string>> rows{{"POINT", "TAG", "MANIFEST", "SIZE", "LAYERS", "TIME", "TESTS"}};
  for (const auto& p : result.points) {
    std::string tag = p.tags.empty() ? "-" : p.tags.front();
    for (size_t i = 1; i < p.tags.size(); ++i) tag += "," + p.tags[i];
    std::vector<std::string> row{p.id.empty() ? "-" : p.id, tag};
    if (p.built && !p.built->images.empty()) {
      row.push_back(p.built->images.front().image.manifest.digest.str().substr(0, 19));
      row.push_back(human_bytes(static_cast<double>(p.image_size)));
      row.push_back(std::to_string(p.layers_built) + " built, " + std::to_string(p.layers_reused) + " reused");
      row.push_back(seconds_text(p.seconds));
    } else {
      row.insert(row.end(), {p.error.empty() ? "not started" : "FAILED", "-", "-",
                             p.error.empty() ? "-" : seconds_text(p.seconds)});
    }
    row.push_back(p.tests.value_or("-"));
    rows.push_back(std::move(row));
  }
  std::string out = text_table(rows);
  if (result.index) out += "matrix index: " + result.index->ref + " " + result.index->digest.str() + "\n";
  return out;
}

}  // namespace sb
