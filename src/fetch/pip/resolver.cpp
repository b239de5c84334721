#include "fetch/pip/resolver.hpp"

#include <algorithm>
#include <deque>
#include <map>

#include <nlohmann/json.hpp>

#include "util/error.hpp"
#include "util/json.hpp"

namespace sb::pip {

void to_json(nlohmann::json& j, const PinnedWheel& w) {
  j = {{"name", w.name}, {"version", w.version}, {"filename", w.filename},
       {"sha256", w.sha256 ? w.sha256->hex() : ""}, {"requested", w.requested}};
  if (!w.url.empty()) j["url"] = w.url;
  if (w.size) j["size"] = *w.size;
  if (!w.extras.empty()) j["extras"] = w.extras;
}

void from_json(const nlohmann::json& j, PinnedWheel& w) {
  w.name = j.at("name").get<std::string>();
  w.key = normalize_name(w.name);
  w.version = j.at("version").get<std::string>();
  w.filename = j.at("filename").get<std::string>();
  if (!WheelName::parse(w.filename))
    throw Error("filename '" + w.filename + "' is not a wheel file name");
  w.url = j.value("url", std::string());  // none: found by file name on the index (a lockfile's pins)
  std::string sha = j.value("sha256", "");
  if (!sha.empty()) w.sha256 = Digest::parse("sha256:" + sha);
  if (j.contains("size")) w.size = json_size(j, "size");
  w.requested = j.value("requested", false);
  if (j.contains("extras")) w.extras = j["extras"].get<std::set<std::string>>();
}

namespace {

struct Candidate {
  Version version;
  DistFile file;
};

struct Constraint {
  Requirement req;
  std::string origin;  // the project whose metadata asked; "" = the user
  std::string origin_version;
};

// A clash on one project; `blame` is the project (and version) whose
// requirement came last, the one backtracking excludes next.
struct Clash {
  Error error;
  std::string blame, blame_version;
};

struct Chosen {
  Candidate cand;
  std::string name;
  std::vector<Requirement> deps;
  std::set<std::string> extras_done;
};

class Resolver {
 public:
  Resolver(const Target& t, Index& index, const ResolveOptions& o)
      : target_(t), env_(MarkerEnv::linux_cpython(t.python, t.machine)), tags_(t), index_(index), opts_(o) {}

  // Greedy resolution, newest first; on a clash the project whose requirement
  // caused it is excluded at its chosen version and the resolution restarts
  // (pages and metadata are cached, so a restart costs little).
  std::vector<PinnedWheel> run(const std::vector<Requirement>& roots) {
    std::vector<Requirement> excluded;
    std::optional<Error> first;  // what is reported when backtracking finds nothing
    for (int attempt = 0;; ++attempt) {
      try {
        return attempt_(roots, excluded);
      } catch (Clash& c) {
        if (!first) first = c.error;
        if (c.blame.empty() || attempt >= 200) throw *first;
        excluded.push_back(Requirement::parse(c.blame + "!=" + c.blame_version));
      }
    }
  }

 private:
  std::vector<PinnedWheel> attempt_(const std::vector<Requirement>& roots, const std::vector<Requirement>& excluded) {
    cons_.clear();
    chosen_.clear();
    root_keys_.clear();
    queue_.clear();
    for (const auto& r : roots) {
      if (!r.applies(env_)) continue;
      cons_.push_back({r, "", ""});
      queue_.push_back(r.key);
      root_keys_.insert(r.key);
    }
    for (const auto& r : excluded) cons_.push_back({r, "~", ""});
    for (const auto& [r, who] : opts_.constraints) cons_.push_back({r, "@" + who, ""});
    int rounds = 0;
    while (!queue_.empty()) {
      if (++rounds > opts_.max_rounds) throw Error("pip resolution did not settle after " + std::to_string(rounds) + " steps");
      look_ahead();
      std::string key = queue_.front();
      queue_.pop_front();
      if (opts_.provided.count(key)) continue;
      if (auto in = opts_.installed.find(key); in != opts_.installed.end())
        keep_installed(key, in->second);
      else
        decide(key);
    }
    return result();
  }

  std::set<std::string> extras_of(const std::string& key) const {
    std::set<std::string> out;
    for (const auto& c : cons_)
      if (c.req.key == key) out.insert(c.req.extras.begin(), c.req.extras.end());
    return out;
  }

  const std::vector<Candidate>& candidates(const std::string& key) {
    auto it = cands_.find(key);
    if (it != cands_.end()) return it->second;
    std::map<Version, std::pair<int, DistFile>> best;  // version -> best (rank, file)
    Version py = Version::parse(target_.python);
    for (const auto& f : index_.files(key)) {
      auto w = WheelName::parse(f.filename);
      if (!w) {
        other_files_[key]++;
        continue;
      }
      auto v = Version::try_parse(w->version);
      auto rank = w->best_rank(tags_);
      if (!v || !rank || f.yanked) {
        other_files_[key]++;
        continue;
      }
      if (!f.requires_python.empty()) {
        try {
          if (!SpecifierSet::parse(f.requires_python).contains(py, true)) continue;
        } catch (const Error&) {  // an unreadable Requires-Python: pip ignores it too
        }
      }
      auto& slot = best[*v];
      if (slot.second.filename.empty() || *rank < slot.first) slot = {*rank, f};
    }
    std::vector<Candidate> out;
    for (auto b = best.rbegin(); b != best.rend(); ++b) out.push_back({b->first, b->second.second});
    return cands_[key] = out;
  }

  [[noreturn]] void conflict(const std::string& key, const SpecifierSet& spec, const std::vector<Candidate>& cs) {
    std::string msg = "no wheel of " + key + " for " + target_.describe() + " satisfies '" + spec.str() + "'";
    if (cs.empty()) {
      msg = "no wheel of " + key + " for " + target_.describe() +
            (other_files_[key] ? " (the index has " + std::to_string(other_files_[key]) +
                                     " files of it for other platforms or sdists, which stackbuild does not build)"
                               : " (the index lists no file of it)");
    }
    Error e(msg);
    Clash clash{e, "", ""};
    for (const auto& c : cons_) {
      if (c.req.key != key) continue;
      if (c.origin == "~") {
        e.add_trace("'" + c.req.str() + "' excluded while backtracking");
        continue;
      }
      if (c.origin.starts_with("@")) {
        e.add_trace("'" + c.req.str() + "' required by " + c.origin.substr(1) + " (its catalog record's wheel)");
        continue;
      }
      e.add_trace("'" + c.req.str() + "' asked by " +
                  (c.origin.empty() ? std::string("the recipe") : c.origin + " " + c.origin_version));
      if (!c.origin.empty()) clash.blame = c.origin, clash.blame_version = c.origin_version;
    }
    if (!cs.empty()) {
      std::string vs;
      for (size_t i = 0; i < cs.size() && i < 8; ++i) vs += (i ? ", " : "") + cs[i].version.str();
      e.add_trace("versions with a wheel for the target: " + vs + (cs.size() > 8 ? ", ..." : ""));
    }
    clash.error = e;
    throw clash;
  }

  // A project a lower layer installed: every requirement on it must accept
  // that version (a layer cannot replace a lower layer's files cleanly).
  void keep_installed(const std::string& key, const ResolveOptions::Installed& in) {
    Version v = Version::parse(in.version);
    for (const auto& c : cons_) {
      if (c.req.key != key || c.origin == "~" || c.req.specifier.contains(v, true)) continue;
      Error e((c.origin.empty() ? std::string("the recipe") : c.origin + " " + c.origin_version) + " requires '" +
              c.req.str() + "', but layer '" + in.layer + "' below installed " + key + " " + in.version);
      e.add_trace("install the version it needs in that layer, or let this layer's requirements choose it");
      throw e;
    }
  }

  // Starts fetching the metadata of the wheel decide() will most likely
  // pick for each project waiting in the queue, so that the wheels an index
  // without PEP 658 files makes us download for their METADATA come several
  // at a time rather than one after another. Only a guess: decide() still
  // chooses, and asks the index for what it chose.
  void look_ahead() {
    std::vector<DistFile> files;
    for (const auto& key : queue_) {
      if (chosen_.count(key) || opts_.provided.count(key) || opts_.installed.count(key)) continue;
      if (!looked_ahead_.insert(key).second) continue;
      try {
        if (const Candidate* c = pick(key, spec_of(key))) files.push_back(c->file);
      } catch (const std::exception&) {  // decide() meets it again and reports it
      }
    }
    if (!files.empty()) index_.prefetch_metadata(files);
  }

  // What every constraint on `key` asks, together.
  SpecifierSet spec_of(const std::string& key) const {
    SpecifierSet spec;
    for (const auto& c : cons_)
      if (c.req.key == key) {
        if (!c.req.url.empty()) throw Error("'" + c.req.str() + "': direct URL requirements are not supported");
        spec.add(c.req.specifier);
      }
    return spec;
  }

  // The newest candidate `spec` admits: a final release unless pre-releases
  // are allowed or only a pre-release satisfies it. nullptr: none.
  const Candidate* pick(const std::string& key, const SpecifierSet& spec) {
    const auto& cs = candidates(key);
    for (bool pre : {opts_.pre, true})
      for (const auto& c : cs)
        if (spec.contains(c.version, pre)) return &c;
    return nullptr;
  }

  void decide(const std::string& key) {
    SpecifierSet spec = spec_of(key);
    std::set<std::string> extras = extras_of(key);
    auto ch = chosen_.find(key);
    if (ch != chosen_.end() && spec.contains(ch->second.cand.version, true)) {
      if (extras != ch->second.extras_done) add_deps(key);
      return;
    }
    const Candidate* chosen = pick(key, spec);
    if (!chosen) conflict(key, spec, candidates(key));
    if (ch != chosen_.end()) drop_deps(key);
    Chosen c{*chosen, key, {}, {}};
    auto meta = parse_metadata(index_.metadata(chosen->file));
    if (auto n = meta.find("Name"); n != meta.end()) c.name = n->second;
    for (auto [b, e] = meta.equal_range("Requires-Dist"); b != e; ++b) {
      try {
        c.deps.push_back(Requirement::parse(b->second));
      } catch (Error& err) {
        err.add_trace("in the metadata of " + chosen->file.filename);
        throw;
      }
    }
    chosen_[key] = std::move(c);
    add_deps(key);
  }

  void drop_deps(const std::string& key) {
    std::vector<Constraint> kept;
    for (auto& c : cons_) {
      if (c.origin == key) queue_.push_back(c.req.key);
      else kept.push_back(std::move(c));
    }
    cons_ = std::move(kept);
  }

  // Records what the chosen version asks for the extras wanted of it. A
  // dependency on the project itself ("jax[cuda]" asking "jax[cuda12]") adds
  // extras: they are followed here to a fixed point, because dropping the
  // project's own constraints first also drops those self-requirements, and
  // re-queueing the project would flip its extras back and forth for ever.
  void add_deps(const std::string& key) {
    drop_deps(key);
    Chosen& c = chosen_.at(key);
    std::set<std::string> extras = extras_of(key);
    for (bool grew = true; grew;) {
      grew = false;
      for (const auto& d : c.deps)
        if (d.key == key && d.applies(env_, extras))
          for (const auto& e : d.extras) grew |= extras.insert(e).second;
    }
    c.extras_done = extras;
    for (const auto& d : c.deps) {
      if (!d.applies(env_, c.extras_done)) continue;
      cons_.push_back({d, key, c.cand.version.str()});
      queue_.push_back(d.key);
    }
  }

  // What is still reachable from the roots (a changed version may orphan some).
  std::vector<PinnedWheel> result() {
    std::set<std::string> seen;
    std::deque<std::string> todo(root_keys_.begin(), root_keys_.end());
    while (!todo.empty()) {
      std::string k = todo.front();
      todo.pop_front();
      if (!seen.insert(k).second || !chosen_.count(k)) continue;
      for (const auto& c : cons_)
        if (c.origin == k) todo.push_back(c.req.key);
    }
    std::vector<PinnedWheel> out;
    for (const auto& [k, c] : chosen_) {
      if (!seen.count(k)) continue;
      PinnedWheel w;
      w.name = c.name;
      w.key = k;
      w.version = c.cand.version.str();
      w.filename = c.cand.file.filename;
      w.url = c.cand.file.url;
      w.sha256 = c.cand.file.sha256;
      w.size = c.cand.file.size;
      w.requested = root_keys_.count(k) > 0;
      w.extras = c.extras_done;
      for (const auto& d : c.deps) w.requires_dist.push_back(d.str());
      out.push_back(std::move(w));
    }
    return out;
  }

  Target target_;
  MarkerEnv env_;
  TagPriority tags_;
  Index& index_;
  ResolveOptions opts_;
  std::vector<Constraint> cons_;
  std::map<std::string, Chosen> chosen_;
  std::map<std::string, std::vector<Candidate>> cands_;
  std::map<std::string, int> other_files_;
  std::set<std::string> root_keys_;
  std::deque<std::string> queue_;
  std::set<std::string> looked_ahead_;
};

}  // namespace

std::vector<PinnedWheel> resolve(const std::vector<Requirement>& roots, const Target& target, Index& index,
                                 const ResolveOptions& options) {
  return Resolver(target, index, options).run(roots);
}

}  // namespace sb::pip
