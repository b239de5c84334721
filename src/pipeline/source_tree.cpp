#include "pipeline/source_tree.hpp"

#include "catalog/catalog.hpp"
#include "pipeline/plan.hpp"
#include "util/error.hpp"

namespace sb {

namespace {

// The catalog's source of the one component of `spec` at the point's version:
// the newest record whose version is the point's (or starts with it: a matrix
// value such as "2.6" is a prefix) and that names a git or archive source.
// Errors point at `key`: `from` (from: source) or `keep_source`.
source::SourceSpec catalog_source(const Recipe& recipe, const LayerSpec& spec,
                                  const std::map<std::string, std::string>& vars, const std::string& key,
                                  std::string& what) {
  const std::string& name = spec.use.front();
  std::string asked = vars.count(name) ? vars.at(name) : spec.version.value;
  const std::string asking = key == "from" ? "'from: source'" : "'keep_source'";
  auto dir = find_catalog(recipe.file);
  if (!dir) throw InputError(spec.at(key), "layer '" + spec.name + "': " + asking + " needs the catalog (layers/)",
                             "or give the layer its own 'source:'");
  catalog::Catalog cat = catalog::load_catalog(*dir);
  const catalog::Component* c = cat.find(name);
  auto prefix = catalog::Version::parse(asked);
  // Among those, the record of the build the point chose (${<name>_build}) wins,
  // so that messages and the cache key name the record the image holds.
  auto it = vars.find(name + "_build");
  const std::string chosen_build = it == vars.end() ? std::string() : it->second;
  auto rank = [&](const catalog::Record& r) { return std::make_pair(r.build == chosen_build, r.version); };
  const catalog::Record* best = nullptr;
  if (c && prefix)
    for (const auto& r : c->records)
      if ((r.sources.git || r.sources.archive) && r.version.matches(*prefix) && (!best || rank(*best) < rank(r)))
        best = &r;
  if (!best)
    throw InputError(spec.at(key),
                     "layer '" + spec.name + "': " + asking + ": the catalog names no source (git or archive) for " +
                         name + " " + (asked.empty() ? "(no version at this point)" : asked),
                     "give the layer its own 'source:' (path, url + sha256, or git + ref)" +
                         std::string(key == "keep_source" ? ", or drop 'keep_source'" : ""));
  source::SourceSpec s;
  if (best->sources.archive) {
    if (best->sources.archive->sha256.empty())
      throw InputError(best->where, "the catalog's archive source of " + best->label() + " has no sha256",
                       "pin it in the catalog, or give the layer its own 'source:' with url and sha256");
    s.kind = source::SourceSpec::Kind::Archive;
    s.url = best->sources.archive->url;
    s.sha256 = Digest::parse("sha256:" + best->sources.archive->sha256);
    what = "archive " + s.url + " (catalog: " + best->label() + ")";
  } else {
    s.kind = source::SourceSpec::Kind::Git;
    s.url = best->sources.git->url;
    s.ref = best->sources.git->ref;
    what = "git " + s.url + " at " + s.ref + " (catalog: " + best->label() + ")";
  }
  return s;
}

// The source of `spec` (its own `source:`, else the catalog's through `key`).
LayerSource describe_source(const Recipe& recipe, const LayerSpec& spec,
                            const std::map<std::string, std::string>& vars, const std::string& key) {
  LayerSource out;
  source::SourceSpec& s = out.spec;
  const SourceDecl& d = spec.source;
  KeyHasher id;
  id.field("stackbuild-layer-source", "1");
  if (!d.path.empty()) {
    s.kind = source::SourceSpec::Kind::Local;
    s.path = fs::path(d.path).is_absolute() ? fs::path(d.path) : d.base / d.path;
    std::error_code ec;
    if (!fs::is_directory(s.path, ec))
      throw InputError(d.where, "layer '" + spec.name + "': source.path " + s.path.string() + " is not a directory");
    out.what = "local directory " + s.path.string();
    id.field("local", source::tree_digest(s.path).str());
  } else if (!d.url.empty()) {
    s.kind = source::SourceSpec::Kind::Archive;
    s.url = d.url;
    s.sha256 = Digest::parse("sha256:" + d.sha256);
    out.what = "archive " + d.url;
  } else if (!d.git.empty()) {
    s.kind = source::SourceSpec::Kind::Git;
    s.url = d.git;
    s.ref = d.ref;
    out.what = "git " + d.git + " at " + d.ref;
  } else {
    s = catalog_source(recipe, spec, vars, key, out.what);
  }
  if (s.kind == source::SourceSpec::Kind::Archive) id.field("archive", s.url).field("sha256", s.sha256->str());
  if (s.kind == source::SourceSpec::Kind::Git) id.field("git", s.url).field("ref", s.ref);
  for (const auto& p : spec.patches) {
    std::error_code ec;
    if (!fs::is_regular_file(p.file, ec))
      throw InputError(p.where, "layer '" + spec.name + "': patch '" + p.path + "' not found (looked for " +
                                    p.file.string() + ")");
    s.patches.push_back(p.file);
    id.field("patch", Digest::of_file(p.file).str());
  }
  out.identity = id.finish();
  out.kept = !spec.keep_source.empty();
  out.image_path = out.kept ? spec.keep_source : "/usr/src/" + spec.name;
  return out;
}

}  // namespace

std::optional<LayerSource> layer_source(const Recipe& recipe, const LayerSpec& spec,
                                        const std::map<std::string, std::string>& vars) {
  if (!spec.from_source()) return std::nullopt;
  return describe_source(recipe, spec, vars, "from");
}

std::optional<LayerSource> kept_source(const Recipe& recipe, const LayerSpec& spec,
                                       const std::map<std::string, std::string>& vars) {
  if (!spec.keeps_source_beside()) return std::nullopt;
  return describe_source(recipe, spec, vars, "keep_source");
}

}  // namespace sb
