#include "pipeline/source_tree.hpp"

#include <algorithm>
#include <cctype>

#include "catalog/catalog.hpp"
#include "fetch/apt/config.hpp"
#include "fetch/fetcher.hpp"
#include "util/error.hpp"
#include "util/process.hpp"

namespace sb {

namespace {

bool is_commit(const std::string& ref);

// A Debian source is fetched as apt layers fetch: through the machine's apt
// network settings (proxies, CA files, logins; fetch/apt/config.hpp).
void debian_network(fetch::FetchOptions& fo, const fs::path& root) {
  std::shared_ptr<apt::AptNetwork> net = apt::machine_network(root);
  fo.client.route = [net](const std::string& url) { return net->route(url); };
  fo.untrusted_hint = "a private CA is named in apt.conf's Acquire::https::CaInfo, as for apt; see docs/apt.md";
  fo.unauthorized_hint = "a login goes in /etc/apt/auth.conf.d/*.conf, as for apt (apt_auth.conf(5)); see docs/apt.md";
}

// A git source refused before git runs (check_git_sources() tells it from other errors).
class UnsafeGitSource : public InputError {
 public:
  using InputError::InputError;
};

// The catalog's source of the one component of `spec` at the point's version:
// the newest record whose version is the point's (or starts with it: a matrix
// value such as "2.6" is a prefix) and that names a git or archive source.
// Errors point at `key`: `from` (from: source) or `keep_source`.
// A git URL or ref that git would read as an option, or a transport that
// is not allowed, is refused here, before any command runs (plan, lock and
// build all describe the source first), pointing at where it was written.
void check_git_source(const source::SourceSpec& s, const SourceLocation& where, const std::string& whose) {
  if (std::string why = source::git_url_problem(s.url); !why.empty())
    throw UnsafeGitSource(where, whose + ": git URL '" + s.url + "' " + why,
                     "git sources are https://, http://, ssh://, git:// or file:// URLs, or [user@]host:path");
  if (std::string why = source::git_ref_problem(s.ref); !why.empty())
    throw UnsafeGitSource(where, whose + ": git ref '" + s.ref + "' " + why,
                          "a ref is a commit (40 hex), a tag or a branch");
}

source::SourceSpec catalog_source(const LayerSpec& spec, const std::map<std::string, std::string>& vars,
                                  const PointInputs& point, const std::string& key, std::string& what) {
  const std::string& name = spec.use.front();
  std::string asked = vars.count(name) ? vars.at(name) : spec.version.value;
  const std::string asking = key == "from" ? "'from: source'" : "'keep_source'";
  if (!point.catalog)
    throw InputError(spec.at(key), "layer '" + spec.name + "': " + asking + " needs the catalog (layers/)",
                     "or give the layer its own 'source:'");
  const catalog::Component* c = point.catalog->find(name);
  auto prefix = catalog::Version::parse(asked);
  // Among those, the record of the build the point chose (${<name>_build}) wins,
  // so that messages and the cache key name the record the image holds.
  auto it = vars.find(name + "_build");
  const std::string chosen_build = it == vars.end() ? std::string() : it->second;
  auto rank = [&](const catalog::Record& r) { return std::make_pair(r.build == chosen_build, r.version); };
  const catalog::Record* best = nullptr;
  if (c && prefix)
    for (const auto& r : c->records)
      if ((r.sources.git || r.sources.archive || r.sources.debian) && r.version.matches(*prefix) &&
          (!best || rank(*best) < rank(r)))
        best = &r;
  if (!best)
    throw InputError(spec.at(key),
                     "layer '" + spec.name + "': " + asking + ": the catalog names no source (git, archive or debian) for " +
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
  } else if (!best->sources.git) {  // only Debian's source package: from the machine's Debian repositories
    s.kind = source::SourceSpec::Kind::Debian;
    s.debian.root = env_or("STACKBUILD_APT_ROOT", "/");
    s.debian.name = best->sources.debian->name;
    s.debian.suite =
        best->sources.debian->suite.empty() ? source::debian_default_suite(s.debian.root) : best->sources.debian->suite;
    if (s.debian.suite.empty())
      throw InputError(best->where, "the catalog's Debian source of " + best->label() +
                                        " names no suite, and the machine names no release",
                       "give the record's sources.debian a suite");
    what = "Debian source " + s.debian.name + " (" + s.debian.suite + ") (catalog: " + best->label() + ")";
  } else {
    s.kind = source::SourceSpec::Kind::Git;
    s.url = best->sources.git->url;
    s.ref = best->sources.git->ref;
    check_git_source(s, best->where, "the catalog's source of " + best->label());
    what = "git " + s.url + " at " + s.ref + " (catalog: " + best->label() + ")";
  }
  return s;
}

// The source of `spec` (its own `source:`, else the catalog's through `key`).
LayerSource describe_source(const LayerSpec& spec, const std::map<std::string, std::string>& vars,
                            const PointInputs& point, const std::string& key, const nlohmann::json& locked) {
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
    out.local_tree = source::tree_digest(s.path);
    id.field("local", out.local_tree->str());
  } else if (!d.url.empty()) {
    s.kind = source::SourceSpec::Kind::Archive;
    s.url = d.url;
    s.sha256 = Digest::parse("sha256:" + d.sha256);
    out.what = "archive " + d.url;
  } else if (!d.debian.empty()) {
    s.kind = source::SourceSpec::Kind::Debian;
    s.debian.root = env_or("STACKBUILD_APT_ROOT", "/");
    s.debian.name = d.debian;
    s.debian.version = d.version;
    s.debian.suite = d.suite.empty() ? source::debian_default_suite(s.debian.root) : d.suite;
    if (s.debian.suite.empty())
      throw InputError(d.where, "layer '" + spec.name + "': source: Debian's " + d.debian +
                                    " names no suite, and the machine names no release (" +
                                    (s.debian.root / "etc/os-release").string() + ")",
                       "give source.suite (trixie, bookworm, ...)");
    out.what = "Debian source " + d.debian + (d.version.empty() ? "" : " " + d.version) + " (" + s.debian.suite + ")";
  } else if (!d.git.empty()) {
    s.kind = source::SourceSpec::Kind::Git;
    s.url = d.git;
    s.ref = d.ref;
    check_git_source(s, d.where, "layer '" + spec.name + "': source");
    out.what = "git " + d.git + " at " + d.ref;
  } else {
    s = catalog_source(spec, vars, point, key, out.what);
  }
  out.named_ref = s.ref;
  if (s.kind == source::SourceSpec::Kind::Git && locked.is_object() && locked.contains(spec.name)) {
    const auto& e = locked[spec.name];
    if (e.is_object() && e.value("git", "") == s.url && e.value("ref", "") == s.ref && e.contains("commit") &&
        e["commit"].is_string() && is_commit(e["commit"].get<std::string>())) {
      out.what += " (locked: " + e["commit"].get<std::string>() + ")";
      s.ref = e["commit"].get<std::string>();
    }
  }
  if (s.kind == source::SourceSpec::Kind::Debian && locked.is_object() && locked.contains(spec.name)) {
    const auto& e = locked[spec.name];
    if (e.is_object() && e.value("debian", "") == s.debian.name && e.value("suite", "") == s.debian.suite &&
        (s.debian.version.empty() || e.value("version", "") == s.debian.version)) {
      source::DebianSource pinned;
      try {
        source::from_json(e, pinned);
      } catch (const std::exception& x) {
        throw Error("layer '" + spec.name + "': the lockfile's Debian source entry does not read: " + x.what());
      }
      s.debian.locked = pinned;
      if (e.contains("tree") && e["tree"].is_string()) out.locked_tree = Digest::parse(e["tree"].get<std::string>());
      out.what += " (locked: " + pinned.version + ", .dsc sha256:" + pinned.dsc.sha256.hex().substr(0, 12) + ")";
    }
  }
  if (s.kind == source::SourceSpec::Kind::Archive) id.field("archive", s.url).field("sha256", s.sha256->str());
  if (s.kind == source::SourceSpec::Kind::Debian) {
    id.field("debian", s.debian.name).field("version", s.debian.version).field("suite", s.debian.suite);
    if (s.debian.locked) id.field("dsc", s.debian.locked->dsc.sha256.str());
  }
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

bool is_commit(const std::string& ref) {
  return ref.size() == 40 && std::all_of(ref.begin(), ref.end(), [](char c) { return std::isxdigit(c); });
}

// The commit `ref` names in the repository at `url` now: a commit as given;
// else a tag (peeled, when annotated), then a branch, then a full ref name.
std::string remote_commit(const std::string& url, const std::string& ref) {
  if (is_commit(ref)) return ref;
  ProcessSpec p;
  for (const auto& [what, why] : {std::pair{"URL '" + url + "'", source::git_url_problem(url)},
                                  std::pair{"ref '" + ref + "'", source::git_ref_problem(ref)}})
    if (!why.empty()) throw Error("git source " + what + " " + why);
  p.argv = {"git", "-c", "protocol.ext.allow=never", "ls-remote", "--", url, ref, ref + "^{}"};
  p.env = current_environment();
  p.env["GIT_TERMINAL_PROMPT"] = "0";
  p.capture_stdout = true;
  p.merge_stderr = true;
  ProcessResult r = run_process(p);
  if (r.exit_status != 0)
    throw Error("git ls-remote " + url + " " + ref + " failed (exit status " + std::to_string(r.exit_status) +
                "):\n" + r.output.substr(0, 2000));
  std::map<std::string, std::string> refs;  // ref name -> object
  size_t pos = 0;
  while (pos < r.output.size()) {
    size_t end = r.output.find('\n', pos);
    if (end == std::string::npos) end = r.output.size();
    std::string line = r.output.substr(pos, end - pos);
    pos = end + 1;
    size_t tab = line.find('\t');
    if (tab == 40 && is_commit(line.substr(0, 40))) refs[line.substr(41)] = line.substr(0, 40);
  }
  for (const std::string& name : {"refs/tags/" + ref + "^{}", "refs/tags/" + ref, "refs/heads/" + ref, ref})
    if (auto it = refs.find(name); it != refs.end()) return it->second;
  throw Error("git source " + url + ": no tag or branch '" + ref + "' there (git ls-remote)");
}

// The source of `spec` at the point (its own or the catalog's), of any kind, if any.
std::optional<LayerSource> source_of(const LayerSpec& spec, const std::map<std::string, std::string>& vars,
                                     const PointInputs& point) {
  if (spec.from_source()) return describe_source(spec, vars, point, "from", nullptr);
  if (spec.keeps_source_beside()) return describe_source(spec, vars, point, "keep_source", nullptr);
  return std::nullopt;
}

// The git source of `spec` at the point (its own or the catalog's), if any.
std::optional<LayerSource> git_source_of(const LayerSpec& spec, const std::map<std::string, std::string>& vars,
                                         const PointInputs& point) {
  if (!spec.source.path.empty() || !spec.source.url.empty()) return std::nullopt;  // local or archive: not git
  if (!spec.source.debian.empty()) return std::nullopt;
  std::optional<LayerSource> s = source_of(spec, vars, point);
  if (s && s->spec.kind != source::SourceSpec::Kind::Git) s.reset();
  return s;
}

// Each patch as the recipe names it, with the sha256 of its file now.
nlohmann::json patches_json(const LayerSpec& spec) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& p : spec.patches) out.push_back({{"path", p.path}, {"sha256", Digest::of_file(p.file).hex()}});
  return out;
}

// The "source" entries of a point's lockfile text (PointInputs::lock; "" when
// not --locked), or null.
nlohmann::json locked_sources(const std::string& point_lock) {
  if (point_lock.empty()) return nullptr;
  auto j = nlohmann::json::parse(point_lock, nullptr, false);
  return j.is_object() && j.contains("source") ? j["source"] : nlohmann::json(nullptr);
}

}  // namespace

std::optional<LayerSource> layer_source(const LayerSpec& spec, const std::map<std::string, std::string>& vars,
                                        const PointInputs& point) {
  if (!spec.from_source()) return std::nullopt;
  return describe_source(spec, vars, point, "from", locked_sources(point.lock));
}

std::optional<LayerSource> kept_source(const LayerSpec& spec, const std::map<std::string, std::string>& vars,
                                       const PointInputs& point) {
  if (!spec.keeps_source_beside()) return std::nullopt;
  return describe_source(spec, vars, point, "keep_source", locked_sources(point.lock));
}

source::SourceLock fetch_layer_source(const LayerSpec& spec, const LayerSource& source, const fs::path& dest,
                                      const Store& store, Status& status, const fetch::FetcherFactory& make_fetcher) {
  int task = status.task_begin("layer " + spec.name + ": source " + source.what, 0);
  fetch::FetchOptions fo = fetch::fetch_options_from_env();
  if (source.spec.kind == source::SourceSpec::Kind::Debian) debian_network(fo, source.spec.debian.root);
  auto fetcher = make_fetcher(store, fo, status);
  source::SourceLock got = [&] {
    try {
      source::SourceLock l = source::prepare_source(source.spec, dest, store, *fetcher);
      if (source.locked_tree && l.tree != *source.locked_tree)
        throw Error("the tree is " + l.tree.str() + ", not the " + source.locked_tree->str() +
                    " the lockfile pins (the same files unpacked and patched otherwise: another patch program?)");
      return l;
    } catch (Error& e) {
      e.add_trace("while preparing the source of layer '" + spec.name + "' for " + source.image_path + " (" +
                  source.what + ")");
      throw;
    }
  }();
  status.task_end(task, "tree " + got.tree.str() + (got.commit.empty() ? "" : ", commit " + got.commit) +
                            (got.debian ? ", Debian " + got.debian->name + " " + got.debian->version +
                                              (got.debian->signature.empty()
                                                   ? " (the .dsc's uploader signature not checked: no Debian keyring "
                                                     "here; apt-get install debian-keyring)"
                                                   : " (.dsc " + got.debian->signature + ")")
                                        : "") +
                            (got.patches.empty() ? "" : ", " + std::to_string(got.patches.size()) + " patches"));
  return got;
}

Digest source_commit_key(const Digest& layer_key) {
  return KeyHasher()
      .field("stackbuild-source-commit", "1")
      .field("layer", layer_key.str())
      .finish();
}

void check_source_commit_record(const std::string& value) {
  auto j = nlohmann::json::parse(value);
  if (j.contains("debian")) {
    source::DebianSource d;
    source::from_json(j.at("debian"), d);
    return;
  }
  std::string commit = j.at("commit").get<std::string>();
  if (!is_commit(commit)) throw Error("'" + commit + "' is no commit");
}

void record_source_commit(const Store& store, const Digest& layer_key, const std::optional<source::SourceLock>& got) {
  if (!got) return;
  if (got->debian)
    store.put_record(kSourceCommitRecord, source_commit_key(layer_key), nlohmann::json{{"debian", *got->debian}}.dump());
  else if (is_commit(got->commit))
    store.put_record(kSourceCommitRecord, source_commit_key(layer_key),
                     nlohmann::json{{"commit", got->commit}}.dump());
}

std::string recorded_source_commit(const Store& store, const Digest& layer_key) {
  auto text = store.get_record(kSourceCommitRecord, source_commit_key(layer_key));
  if (!text) return "";
  try {
    check_source_commit_record(*text);
    return *text;
  } catch (const std::exception&) {
    return "";
  }
}

std::string source_label(const LayerSpec& spec, const LayerSource& source,
                         const std::map<std::string, std::string>& vars, bool built,
                         const std::string& fetched) {
  nlohmann::json j = nlohmann::json::object();
  if (!spec.use.empty()) {
    const std::string& name = spec.use.front();
    j["component"] = name;
    auto it = vars.find(name);
    std::string version = it != vars.end() ? it->second : spec.version.value;
    if (!version.empty()) j["version"] = version;
  }
  const source::SourceSpec& s = source.spec;
  const nlohmann::json record = fetched.empty() ? nlohmann::json() : nlohmann::json::parse(fetched, nullptr, false);
  const std::string commit = record.is_object() && record.contains("commit") && record["commit"].is_string()
                                 ? record["commit"].get<std::string>()
                                 : "";
  switch (s.kind) {
    case source::SourceSpec::Kind::Debian: {
      // What was unpacked: the version, the .dsc and each file, by sha256;
      // never the host it came from.
      nlohmann::json d = {{"package", s.debian.name}, {"suite", s.debian.suite}};
      if (!s.debian.version.empty()) d["version"] = s.debian.version;
      source::DebianSource got;
      bool known = false;
      if (record.is_object() && record.contains("debian")) {
        try {
          source::from_json(record["debian"], got);
          known = got.name == s.debian.name;
        } catch (const std::exception&) {
        }
      }
      if (known) {
        d["version"] = got.version;
        d["format"] = got.format;
        d["dsc"] = {{"name", got.dsc.name}, {"sha256", got.dsc.sha256.hex()}};
        nlohmann::json files = nlohmann::json::array();
        for (const auto& f : got.files) files.push_back({{"name", f.name}, {"sha256", f.sha256.hex()}});
        d["files"] = files;
      }
      j["debian"] = d;
      break;
    }
    case source::SourceSpec::Kind::Git:
      j["git"] = s.url;
      j["ref"] = source.named_ref;
      if (is_commit(commit))
        j["commit"] = commit;
      else if (is_commit(source.named_ref))
        j["commit"] = source.named_ref;
      break;
    case source::SourceSpec::Kind::Archive:
      j["archive"] = s.url;
      j["sha256"] = s.sha256->hex();
      break;
    case source::SourceSpec::Kind::Local:
      j["local"] = source.local_tree ? source.local_tree->str() : "";
      break;
  }
  if (!spec.patches.empty()) j["patches"] = patches_json(spec);
  if (source.kept) j["path"] = source.image_path;
  j["built"] = built;
  return j.dump();
}

void check_git_sources(const Recipe& recipe, const std::map<std::string, std::string>& vars,
                       const PointInputs& point) {
  for (const auto& spec : recipe.layers) {
    if (!has_source(spec)) continue;
    try {
      git_source_of(spec, vars, point);
    } catch (const UnsafeGitSource&) {
      throw;
    } catch (const Error&) {  // reported by the stage that uses the source, as before
    }
  }
}

bool has_git_source(const LayerSpec& spec, const std::map<std::string, std::string>& vars, const PointInputs& point) {
  return git_source_of(spec, vars, point).has_value();
}

bool has_source(const LayerSpec& spec) {
  return spec.from_source() || spec.keeps_source_beside();
}

nlohmann::json lock_source_layers(const Recipe& recipe, const std::map<std::string, std::string>& vars,
                                  const PointInputs& point, const Store& store, Status& status,
                                  const fetch::FetcherFactory& make_fetcher) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& spec : recipe.layers) {
    try {
      auto s = source_of(spec, vars, point);
      if (!s) continue;
      nlohmann::json e;
      switch (s->spec.kind) {
        case source::SourceSpec::Kind::Git:
          e = {{"git", s->spec.url}, {"ref", s->spec.ref}, {"commit", remote_commit(s->spec.url, s->spec.ref)}};
          break;
        case source::SourceSpec::Kind::Archive: {
          // Fetched now (the build needs it anyway) for its size; its sha256
          // is checked before it enters the store.
          fetch::FetchOptions fo;
          fo.offline = env_or("STACKBUILD_OFFLINE", "") == "1";
          auto fetcher = make_fetcher(store, fo, status);
          std::string name = s->spec.url.substr(s->spec.url.rfind('/') + 1);
          auto got = fetcher->fetch_one({s->spec.url, s->spec.sha256, std::nullopt, name});
          e = {{"archive", s->spec.url}, {"sha256", s->spec.sha256->hex()}, {"size", got.size}};
          break;
        }
        case source::SourceSpec::Kind::Local:
          e = {{"path", s->spec.path.string()}, {"tree", s->local_tree->str()}};
          break;
        case source::SourceSpec::Kind::Debian: {
          // Fetched, unpacked and patched now: the lockfile pins the version,
          // the .dsc and every file by sha256, and the tree they give.
          auto scratch = store.temp_dir();
          source::SourceLock got = fetch_layer_source(spec, *s, scratch->path() / "tree", store, status, make_fetcher);
          e = *got.debian;
          e["tree"] = got.tree.str();
          break;
        }
      }
      e["patches"] = patches_json(spec);
      out[spec.name] = e;
    } catch (Error& e) {
      e.add_trace("while pinning the source of layer '" + spec.name + "' (" + spec.where.str() + ")");
      throw;
    }
  }
  return out;
}

std::string source_lock_mismatch(const LayerSpec& spec, const std::map<std::string, std::string>& vars,
                                 const PointInputs& point, const nlohmann::json& entry) {
  auto s = source_of(spec, vars, point);
  if (!s) return "";
  if (!entry.is_object()) return "its source entry is not an object";
  auto str = [&](const char* k) { return entry.contains(k) && entry[k].is_string() ? entry[k].get<std::string>() : "?"; };
  switch (s->spec.kind) {
    case source::SourceSpec::Kind::Git:
      if (!entry.contains("git")) return "the lockfile pins a source that is not git; the recipe now names git " + s->spec.url;
      if (!entry.contains("commit") || !entry["commit"].is_string() || !is_commit(entry["commit"].get<std::string>()))
        return "its source entry has no commit";
      if (str("git") != s->spec.url || str("ref") != s->spec.ref)
        return "the lockfile pins git " + str("git") + " at " + str("ref") + ", the recipe now names git " +
               s->spec.url + " at " + s->spec.ref;
      break;
    case source::SourceSpec::Kind::Archive:
      if (str("archive") != s->spec.url || str("sha256") != s->spec.sha256->hex())
        return "the lockfile pins archive " + str("archive") + " with sha256 " + str("sha256") +
               ", the recipe now names " + s->spec.url + " with sha256 " + s->spec.sha256->hex();
      break;
    case source::SourceSpec::Kind::Debian: {
      const auto& d = s->spec.debian;
      if (str("debian") != d.name || str("suite") != d.suite ||
          (!d.version.empty() && str("version") != d.version))
        return "the lockfile pins Debian's " + str("debian") + " " + str("version") + " (" + str("suite") +
               "), the recipe now names " + d.name + (d.version.empty() ? "" : " " + d.version) + " (" + d.suite + ")";
      try {
        source::DebianSource pinned;
        source::from_json(entry, pinned);
      } catch (const std::exception& x) {
        return std::string("its Debian source entry does not read: ") + x.what();
      }
      if (!entry.contains("tree") || !entry["tree"].is_string()) return "its Debian source entry pins no tree";
      break;
    }
    case source::SourceSpec::Kind::Local:
      if (str("path") != s->spec.path.string())
        return "the lockfile pins local directory " + str("path") + ", the recipe now names " + s->spec.path.string();
      if (str("tree") != s->local_tree->str())
        return "the local directory " + s->spec.path.string() + " changed since it was locked (tree " + str("tree") +
               ", now " + s->local_tree->str() + ")";
      break;
  }
  // Patches: the same files, in the same order, with the same contents.
  nlohmann::json was = entry.contains("patches") ? entry["patches"] : nlohmann::json::array();
  nlohmann::json now = patches_json(spec);
  if (!was.is_array()) return "its source entry's patches are not a list";
  for (size_t i = 0; i < std::max(was.size(), now.size()); ++i) {
    if (i >= was.size()) return "patch '" + now[i]["path"].get<std::string>() + "' is not in the lockfile";
    std::string wp = was[i].is_object() ? was[i].value("path", "?") : "?";
    std::string ws = was[i].is_object() ? was[i].value("sha256", "?") : "?";
    if (i >= now.size()) return "the lockfile has patch '" + wp + "', which the recipe no longer applies";
    if (wp != now[i]["path"].get<std::string>())
      return "patch " + std::to_string(i + 1) + " is '" + now[i]["path"].get<std::string>() +
             "', the lockfile pins '" + wp + "'";
    if (ws != now[i]["sha256"].get<std::string>())
      return "patch '" + wp + "' changed since it was locked (sha256 " + ws + ", now " +
             now[i]["sha256"].get<std::string>() + ")";
  }
  return "";
}

}  // namespace sb
