#include "pipeline/publish.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <set>

#include <nlohmann/json.hpp>

#include "image/layout.hpp"
#include "image/sbom.hpp"
#include "pipeline/matrix_build.hpp"
#include "registry/referrers.hpp"
#include "util/error.hpp"

namespace sb {

using json = nlohmann::json;

namespace {

// A report artifact's annotations: its title, and when it was made (UTC, to
// the millisecond), by which `notes` takes an image's newest report.
std::map<std::string, std::string> report_annotations() {
  auto now = std::chrono::system_clock::now();
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
  std::string created = rfc3339(ms / 1000);  // "2026-12-03T14:20:01Z"
  char frac[8];
  snprintf(frac, sizeof frac, ".%03dZ", static_cast<int>(ms % 1000));
  created.replace(created.size() - 1, 1, frac);
  return {{"org.opencontainers.image.title", "stackbuild test report"},
          {"org.opencontainers.image.created", created}};
}

// An artifact's push: the session, and the store's record of which
// repositories hold which blobs.
registry::PushOptions attach_options(const registry::SessionOptions& session, const Store& store) {
  registry::PushOptions o;
  o.session = session;
  o.store = &store;
  return o;
}

// A built image as the push code takes it: its documents, its layers from the store.
registry::ManifestRef manifest_ref(const Image& img, const Store& store) {
  registry::ManifestRef m{kMediaTypeManifest, img.manifest_json, img.manifest.digest, {}, {}, "", "", ""};
  ImageConfig c = read_image_config(img.config_json, "the config of " + img.manifest.digest.str());
  m.os = c.os, m.architecture = c.architecture;  // its platform in an index over it
  m.blobs.push_back({img.config.digest, img.config.size, kMediaTypeConfig, {}, img.config_json});
  for (const auto& l : img.layers) m.blobs.push_back({l.digest, l.size, l.media_type, store.blob_path(l.digest), {}});
  return m;
}

}  // namespace

std::vector<AttachSubject> report_subjects(const BuildResult& built) {
  std::vector<AttachSubject> out;
  std::set<Digest> seen;  // as the gate: one report per distinct image, in image order
  for (const auto& ti : built.images)
    if (seen.insert(ti.image.manifest.digest).second)
      out.push_back({kMediaTypeManifest, ti.image.manifest.digest, ti.image.manifest.size});
  return out;
}

void add_report_to_layout(const fs::path& layout, const verify::VerifyReport& report, const AttachSubject& subject,
                          Status& status) {
  Descriptor d{subject.media_type, subject.digest, subject.size, {}, {}};
  Digest a = add_layout_artifact(layout, kTestReportType, json(report).dump(2) + "\n", d, report_annotations());
  status.result("test report of " + report.image, a.str());
}

void attach_reports(const std::vector<verify::VerifyReport>& reports, const std::vector<AttachSubject>& subjects,
                    const std::string& target, const registry::SessionOptions& session, const Store& store,
                    Status& status) {
  auto ref = registry::Reference::parse(target);
  registry::PushOptions o = attach_options(session, store);
  for (size_t i = 0; i < reports.size() && i < subjects.size(); ++i) {
    std::string bytes = json(reports[i]).dump(2) + "\n";
    registry::Subject s{subjects[i].media_type, subjects[i].digest, subjects[i].size};
    auto r = registry::attach_artifact(ref, s, registry::kTestReportType, bytes, report_annotations(), o, status);
    status.message(Level::Info, "test report of " + reports[i].image + " attached to " + ref.name() + "@" +
                                    s.digest.str() + " as " + r.artifact.str() + " (" + r.how + ")");
  }
}

void attach_built_reports(const MatrixResult& built, const std::vector<std::vector<verify::VerifyReport>>& reports,
                          const std::vector<std::vector<std::string>>& targets, const registry::SessionOptions& session,
                          const Store& store, Status& status) {
  for (size_t i = 0; i < built.points.size() && i < reports.size(); ++i) {
    const auto& p = built.points[i];
    if (!p.built || reports[i].empty()) continue;
    for (const auto& t : targets[i]) attach_reports(reports[i], report_subjects(*p.built), t, session, store, status);
  }
}

std::string built_image_sbom(const Store& store, const std::string& tag, const Image& image) {
  std::vector<std::pair<Digest, fs::path>> layers;
  for (const auto& l : image.layers) layers.emplace_back(l.digest, store.blob_path(l.digest));
  return sbom::image_sbom(store, sbom::sbom_name(image.manifest_json, layout_ref_name(tag), tag),
                          image.manifest.digest, image.config_json, layers);
}

std::vector<std::vector<SbomOf>> add_built_sboms(const MatrixResult& built, const fs::path& layout, const Store& store,
                                                 Status& status) {
  std::vector<std::vector<SbomOf>> out(built.points.size());
  for (size_t i = 0; i < built.points.size(); ++i) {
    const auto& p = built.points[i];
    if (!p.built) continue;
    std::set<Digest> seen;  // one image under several tags has one SBOM
    for (const auto& ti : p.built->images) {
      if (!seen.insert(ti.image.manifest.digest).second) continue;
      SbomOf s{ti.tag, ti.image.manifest, built_image_sbom(store, ti.tag, ti.image)};
      Digest d = add_layout_artifact(layout, sbom::kSpdxMediaType, s.document, s.image,
                                     sbom::sbom_annotations(sbom::Format::Spdx));
      status.result("sbom of " + ti.tag, d.str());
      out[i].push_back(std::move(s));
    }
  }
  return out;
}

void attach_sbom(const std::string& target, const std::string& name, const Descriptor& image, const char* type,
                 const std::string& document, const std::map<std::string, std::string>& annotations,
                 const registry::SessionOptions& session, const Store& store, Status& status) {
  auto ref = registry::Reference::parse(target);
  auto r = registry::attach_artifact(ref, {image.media_type, image.digest, image.size}, type, document, annotations,
                                     attach_options(session, store), status);
  status.message(Level::Info, "SBOM of " + name + " attached to " + ref.name() + "@" + image.digest.str() + " as " +
                                  r.artifact.str() + " (" + r.how + ")");
}

void attach_built_sboms(const std::vector<std::vector<SbomOf>>& sboms,
                        const std::vector<std::vector<std::string>>& targets, const registry::SessionOptions& session,
                        const Store& store, Status& status) {
  for (size_t i = 0; i < sboms.size() && i < targets.size(); ++i)
    for (const auto& t : targets[i])
      for (const auto& s : sboms[i])
        attach_sbom(t, s.name, s.image, sbom::kSpdxMediaType, s.document, sbom::sbom_annotations(sbom::Format::Spdx),
                    session, store, status);
}

std::vector<std::string> push_built_images(const MatrixResult& built, const std::vector<std::vector<std::string>>& targets,
                       const std::map<std::string, std::string>& index_tags, const registry::PushOptions& o,
                       Status& status) {
  const Store& store = *o.store;
  struct Repo {
    registry::Reference ref;
    std::vector<registry::TaggedManifest> images;
    std::map<std::string, std::string> owner;  // tag -> the point pushed under it
    std::map<std::string, std::vector<std::pair<const PointReport*, registry::ManifestRef>>> platforms;  // tag -> its points
  };
  std::map<std::string, Repo> repos;  // by REGISTRY/REPO, in name order
  // Points that differ only in platform may share a tag: an index over them
  // goes under it (the layout's per-tag index, byte for byte).
  auto add = [&](Repo& repo, const std::string& tag, const std::string& who, const registry::ManifestRef& m,
                 const PointReport* point = nullptr) {
    auto [it, fresh] = repo.owner.emplace(tag, who);
    if (!fresh && it->second == who) return;
    if (!fresh) {
      auto& group = repo.platforms[tag];
      auto img = std::find_if(repo.images.begin(), repo.images.end(), [&](const auto& t) { return t.tag == tag; });
      const bool siblings = point && !group.empty() && group.front().first->siblings == point->siblings &&
                            std::none_of(group.begin(), group.end(),
                                         [&](const auto& g) { return g.first->platform == point->platform; });
      if (!siblings)
        throw Error("push: " + repo.ref.name() + ":" + tag + " would name both " + it->second + " and " + who +
                        "; give each point its own tag (e.g. ${cuda} in push:)",
                    ErrorKind::Usage);
      group.emplace_back(point, m);
      std::vector<registry::ManifestRef> ms;
      for (const auto& g : group) ms.push_back(g.second);
      img->manifest = registry::make_index(ms);
      return;
    }
    if (point) repo.platforms[tag].emplace_back(point, m);
    repo.images.push_back({tag, m});
  };
  std::vector<registry::ManifestRef> all;  // every point's manifest, for the index
  for (size_t i = 0; i < built.points.size() && i < targets.size(); ++i) {
    const PointReport& p = built.points[i];
    if (!p.built || p.built->images.empty()) continue;
    registry::ManifestRef m = manifest_ref(p.built->images.front().image, store);
    all.push_back(m);
    std::string who = p.id.empty() ? "the image" : "point " + p.id;
    for (const auto& t : targets[i]) {
      auto ref = registry::Reference::parse(t);
      if (ref.digest) throw Error("push to a digest is not possible: " + t, ErrorKind::Usage);
      Repo& repo = repos[ref.name()];
      repo.ref = ref;
      if (!ref.tag.empty())
        add(repo, ref.tag, who, m, &p);
      else
        for (const auto& ti : p.built->images) add(repo, layout_ref_name(ti.tag), who, m, &p);
    }
  }
  if (built.index) {  // the matrix index goes wherever the points went, after them
    registry::ManifestRef index{kMediaTypeIndex, built.index->json, built.index->digest, {}, all, "", "", ""};
    for (auto& [name, repo] : repos) {
      auto it = index_tags.find(name);
      add(repo, it == index_tags.end() ? built.index->ref : it->second, "the matrix index", index);
    }
  }
  std::vector<std::string> pushed;
  for (auto& [name, repo] : repos) {
    auto start = std::chrono::steady_clock::now();
    auto r = registry::push_images(repo.ref, repo.images, o, status);
    registry::report_push(r, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), status);
    for (const auto& [ref, digest] : r.pushed) pushed.push_back(ref);
  }
  return pushed;
}

}  // namespace sb
