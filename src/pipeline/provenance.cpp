#include "pipeline/provenance.hpp"

#include <algorithm>
#include <set>

#include <nlohmann/json.hpp>

#include "image/layout.hpp"
#include "image/sbom.hpp"
#include "pipeline/layer_kind.hpp"
#include "registry/referrers.hpp"
#include "registry/sign.hpp"
#include "resolve/lockfile.hpp"
#include "util/error.hpp"

namespace sb {

using json = nlohmann::json;
using provenance::Resource;

namespace {

Resource file_resource(const fs::path& path, const char* kind) {
  Resource r;
  r.name = path.string();
  r.annotations["kind"] = kind;
  try {
    r.sha256(Digest::of_file(path));
  } catch (Error& e) {
    e.add_trace(std::string("while reading the ") + kind + " " + path.string() + " for the provenance");
    throw;
  }
  return r;
}

// "REF@sha256:..." (BuildResult::base) as the base image's descriptor.
std::optional<Resource> base_resource(const std::string& pinned) {
  size_t at = pinned.rfind('@');
  if (at == std::string::npos) return std::nullopt;
  Resource r;
  r.name = pinned.substr(0, at);
  r.sha256(Digest::parse(pinned.substr(at + 1)));
  r.media_type = kMediaTypeManifest;
  r.annotations["kind"] = "base-image";
  return r;
}

}  // namespace

std::vector<Resource> recipe_files(const Recipe& recipe, bool locked, const fs::path& catalog_dir) {
  std::vector<Resource> out{file_resource(recipe.file, "recipe")};
  for (const auto& parent : recipe.extends_chain) out.push_back(file_resource(parent, "recipe-parent"));
  if (locked) out.push_back(file_resource(resolve::lock_path(recipe.file), "lockfile"));
  if (!catalog_dir.empty()) {
    std::vector<fs::path> files;  // as load_catalog() reads them: every *.yaml
    for (const auto& e : fs::directory_iterator(catalog_dir))
      if (e.is_regular_file() && e.path().extension() == ".yaml") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) out.push_back(file_resource(f, "catalog"));
  }
  return out;
}

Resource layer_input(const char* kind, const std::string& layer, const std::string& file, const std::string& purl,
                     const std::string& url, const std::optional<Digest>& sha256) {
  Resource r;
  r.name = file;
  r.uri = purl;
  r.download_location = provenance::without_login(url);
  if (sha256) r.sha256(*sha256);
  r.annotations = {{"kind", kind}, {"layer", layer}};
  return r;
}

std::vector<Resource> source_inputs(const std::string& layer, const std::string& label) {
  std::vector<Resource> out;
  json j = json::parse(label, nullptr, false);
  if (!j.is_object()) return out;
  auto text = [&](const json& o, const char* key) {
    return o.contains(key) && o[key].is_string() ? o[key].get<std::string>() : std::string();
  };
  Resource r;
  r.annotations = {{"kind", "source"}, {"layer", layer}};
  std::vector<Resource> files;  // a Debian source package's files
  if (!text(j, "component").empty()) r.name = text(j, "component") + (text(j, "version").empty() ? "" : " " + text(j, "version"));
  if (std::string git = text(j, "git"); !git.empty()) {
    git = provenance::without_login(git);
    const std::string commit = text(j, "commit");
    // SLSA's form for a repository: git+URL@REF, the commit as its digest.
    r.uri = (git.starts_with("git+") ? git : "git+" + git) + "@" + (text(j, "ref").empty() ? commit : text(j, "ref"));
    if (!commit.empty()) r.digest["gitCommit"] = commit;
  } else if (std::string archive = text(j, "archive"); !archive.empty()) {
    r.uri = provenance::without_login(archive);
    if (!text(j, "sha256").empty()) r.digest["sha256"] = text(j, "sha256");
  } else if (j.contains("debian") && j["debian"].is_object() && !text(j["debian"], "package").empty()) {
    // Debian's source package: its purl, and the .dsc and each file by sha256.
    const json& d = j["debian"];
    r.uri = "pkg:deb/debian/" + text(d, "package") + (text(d, "version").empty() ? "" : "@" + text(d, "version")) +
            "?arch=source";
    if (r.name.empty()) r.name = text(d, "package") + " " + text(d, "version");
    if (d.contains("dsc") && d["dsc"].is_object() && !text(d["dsc"], "sha256").empty())
      r.digest["sha256"] = text(d["dsc"], "sha256");
    if (d.contains("files") && d["files"].is_array())
      for (const auto& f : d["files"]) {
        if (!f.is_object() || text(f, "name").empty() || text(f, "sha256").empty()) continue;
        Resource file;
        file.name = text(f, "name");
        file.digest["sha256"] = text(f, "sha256");
        file.annotations = {{"kind", "source-file"}, {"layer", layer}};
        files.push_back(file);
      }
  } else if (std::string tree = text(j, "local"); tree.starts_with("sha256:")) {
    // A local directory: never its host path; the digest source::tree_digest gives its tree.
    if (r.name.empty()) r.name = "the local source of layer " + layer;
    r.digest["stackbuildTree"] = tree.substr(7);
  } else {
    return out;
  }
  out.push_back(r);
  out.insert(out.end(), files.begin(), files.end());
  if (j.contains("patches") && j["patches"].is_array())
    for (const auto& p : j["patches"]) {
      if (!p.is_object() || text(p, "path").empty() || text(p, "sha256").empty()) continue;
      Resource patch;
      patch.name = text(p, "path");
      patch.digest["sha256"] = text(p, "sha256");
      patch.annotations = {{"kind", "patch"}, {"layer", layer}};
      out.push_back(patch);
    }
  return out;
}

provenance::Provenance image_provenance(const ProvenanceRun& run, const MatrixPoint& point, const BuildResult& built,
                                        const Digest& image, std::vector<Resource> byproducts) {
  provenance::Provenance p{{}, image, run.parameters, run.files, std::move(byproducts), run.run};
  for (const auto& ti : built.images)
    if (ti.image.manifest.digest == image) p.subject_names.push_back(ti.tag);
  provenance::Parameters& params = p.parameters;
  params.point = point.matrix.empty() ? "" : point.id;  // not "(no matrix)"
  params.matrix = point.matrix;
  params.tags = p.subject_names;
  params.architecture = point.recipe.architecture;
  params.source_date_epoch = built.source_date_epoch;
  if (auto base = base_resource(built.base)) p.dependencies.push_back(*base);
  for (const auto& layer : built.layers) {
    p.dependencies.insert(p.dependencies.end(), layer.inputs.begin(), layer.inputs.end());
    if (!layer.source.empty()) {
      auto sources = source_inputs(layer.name, layer.source);
      p.dependencies.insert(p.dependencies.end(), sources.begin(), sources.end());
    }
  }
  return p;
}

const std::map<std::string, std::string>& provenance_annotations() {
  static const std::map<std::string, std::string> a{{"org.opencontainers.image.title", "stackbuild provenance"},
                                                    {"in-toto.io/predicate-type", provenance::kPredicateType}};
  return a;
}

std::vector<std::vector<ProvenanceOf>> add_built_provenance(
    const ProvenanceRun& run, const std::vector<MatrixPoint>& points, const MatrixResult& built,
    const std::vector<std::vector<verify::VerifyReport>>& reports, const std::vector<std::vector<SbomOf>>& sboms,
    const fs::path& layout, Status& status) {
  std::vector<std::vector<ProvenanceOf>> out(built.points.size());
  for (size_t i = 0; i < built.points.size() && i < points.size(); ++i) {
    const auto& b = built.points[i].built;
    if (!b) continue;
    const auto subjects = report_subjects(*b);  // the order of the point's reports
    std::set<Digest> seen;
    for (const auto& ti : b->images) {
      const Digest& digest = ti.image.manifest.digest;
      if (!seen.insert(digest).second) continue;
      std::vector<Resource> byproducts;
      for (size_t k = 0; i < reports.size() && k < reports[i].size() && k < subjects.size(); ++k)
        if (subjects[k].digest == digest) {
          Resource r;
          r.name = "test report";
          r.media_type = kTestReportType;
          r.sha256(Digest::of_bytes(json(reports[i][k]).dump(2) + "\n"));  // the bytes attached beside the image
          byproducts.push_back(r);
        }
      if (i < sboms.size())
        for (const auto& s : sboms[i])
          if (s.image.digest == digest) {
            Resource r;
            r.name = "sbom";
            r.media_type = sbom::kSpdxMediaType;
            r.sha256(Digest::of_bytes(s.document));
            byproducts.push_back(r);
          }
      std::string doc =
          provenance::statement_json(image_provenance(run, points[i], *b, digest, std::move(byproducts)));
      if (!layout.empty()) {
        Digest a = add_layout_artifact(layout, provenance::kMediaType, doc, ti.image.manifest, provenance_annotations());
        status.result("provenance of " + ti.tag, a.str());
      }
      out[i].push_back({ti.tag, ti.image.manifest, std::move(doc)});
    }
  }
  return out;
}

void attach_built_provenance(const std::vector<std::vector<ProvenanceOf>>& statements,
                             const std::vector<std::vector<std::string>>& targets,
                             const std::optional<fs::path>& sign_key, const registry::PushOptions& options,
                             Status& status) {
  for (size_t i = 0; i < statements.size() && i < targets.size(); ++i)
    for (const auto& t : targets[i])
      for (const auto& s : statements[i]) {
        auto ref = registry::Reference::parse(t);
        registry::Subject subject{s.image.media_type, s.image.digest, s.image.size};
        auto r = registry::attach_artifact(ref, subject, provenance::kMediaType, s.document, provenance_annotations(),
                                           options, status);
        status.message(Level::Info, "provenance of " + s.name + " attached to " + ref.name() + "@" +
                                        s.image.digest.str() + " as " + r.artifact.str() + " (" + r.how + ")");
        if (!sign_key) continue;
        registry::Reference artifact = ref;  // the statement's artifact, by digest: what is signed
        artifact.tag.clear();
        artifact.digest = r.artifact;
        auto signed_ = registry::sign_image(artifact, *sign_key, options, status);
        status.result("signed provenance of " + s.name, signed_.manifest.str());
      }
}

}  // namespace sb
