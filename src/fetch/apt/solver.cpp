#include "fetch/apt/solver.hpp"

#include <algorithm>
#include <optional>
#include <set>

#include "fetch/apt/version.hpp"
#include "util/error.hpp"

namespace sb::apt {

namespace {

struct Marked {
  std::string version;
  const Package* pkg = nullptr;  // null: installed in a lower layer
  std::string arch, multi_arch;  // its Architecture and Multi-Arch
};

struct ProvidedBy {
  std::string provider;
  std::string version;  // "" = unversioned
  std::string arch, multi_arch;  // the provider's
};

// What is marked so far; copied to backtrack (a few hundred entries).
struct State {
  std::map<std::string, Marked> marked;
  std::map<std::string, std::vector<ProvidedBy>> provides;
  std::vector<std::pair<std::string, Atom>> negative;  // (owner, Conflicts/Breaks atom)
  std::map<std::string, std::string> reason;
  std::map<std::string, std::string> replaced;  // installed below, upgraded here: name -> old version
};

const int kBudget = 20000;  // choices tried before giving up

int priority_rank(std::string_view p) {
  if (p == "required") return 0;
  if (p == "important") return 1;
  if (p == "standard") return 2;
  if (p == "optional") return 3;
  return 4;
}

class Solver {
 public:
  explicit Solver(const PackageIndex& index) : index_(index) {}

  void add_installed(const Paragraph& p, State& s) {
    std::string name = p.get("Package");
    installed_[name] = &p;
    s.marked[name] = {p.get("Version"), nullptr, p.get("Architecture"), p.get("Multi-Arch")};
    for (const auto& g : parse_depends(p.get("Provides")))
      for (const auto& a : g) s.provides[a.name].push_back({name, a.version, p.get("Architecture"), p.get("Multi-Arch")});
    for (const char* f : {"Conflicts", "Breaks"})
      for (const auto& g : parse_depends(p.get(f)))
        for (const auto& a : g) s.negative.emplace_back(name, a);
  }

  // Multi-Arch in an image of one architecture, as dpkg reads a qualifier:
  // none, ":native" or the image's own architecture match a package of that
  // architecture or "all"; ":any" matches only a package that is
  // "Multi-Arch: allowed" (in Conflicts and Breaks, any package); any other
  // architecture matches nothing.
  bool arch_fits(const Atom& a, std::string_view arch, std::string_view multi_arch, bool negative = false) const {
    if (a.arch.empty()) return true;
    if (a.arch == "any") return negative || multi_arch == "allowed";
    if (a.arch == "native" || a.arch == index_.architecture()) return arch == index_.architecture() || arch == "all";
    return false;
  }

  bool satisfied(const Atom& a, const State& s) const {
    if (auto it = s.marked.find(a.name); it != s.marked.end() && satisfies(it->second.version, a.op, a.version) &&
                                         arch_fits(a, it->second.arch, it->second.multi_arch))
      return true;
    if (auto it = s.provides.find(a.name); it != s.provides.end())
      for (const auto& p : it->second)
        if ((a.op == Relation::Any || (!p.version.empty() && satisfies(p.version, a.op, a.version))) &&
            arch_fits(a, p.arch, p.multi_arch))
          return true;
    return false;
  }

  // Forgets what `name` provides and conflicts with (its version below is
  // being replaced).
  static void drop(const std::string& name, State& s) {
    for (auto it = s.provides.begin(); it != s.provides.end();) {
      auto& v = it->second;
      v.erase(std::remove_if(v.begin(), v.end(), [&](const ProvidedBy& p) { return p.provider == name; }), v.end());
      it = v.empty() ? s.provides.erase(it) : std::next(it);
    }
    auto& n = s.negative;
    n.erase(std::remove_if(n.begin(), n.end(), [&](const auto& e) { return e.first == name; }), n.end());
  }

  // Marks `p`; returns an error (empty on success) without touching its deps.
  // A version below is replaced when `p` is newer (or `downgrade` allows it).
  std::string mark(const Package* p, const std::string& why, State& s, bool downgrade = false) {
    std::string name(p->name);
    if (auto it = s.marked.find(name); it != s.marked.end()) {
      if (it->second.version == p->version) return "";
      if (it->second.pkg)
        return name + " " + std::string(p->version) + " is wanted, but " + name + " " + it->second.version +
               " is already chosen";
      if (!downgrade && compare_versions(p->version, it->second.version) < 0)
        return name + " " + std::string(p->version) + " is wanted, but the newer " + name + " " + it->second.version +
               " is installed in a lower layer (a downgrade is done only when asked for as " + name + "=" +
               std::string(p->version) + ")";
      std::string old = it->second.version;
      drop(name, s);
      s.marked.erase(it);
      if (!s.replaced.count(name)) s.replaced[name] = old;
    }
    std::vector<Atom> neg;
    for (auto f : {p->conflicts, p->breaks})
      for (const auto& g : parse_depends(f))
        for (const auto& a : g) neg.push_back(a);
    // Its Conflicts/Breaks against what is marked (real names and provides).
    for (const auto& a : neg) {
      if (auto it = s.marked.find(a.name); it != s.marked.end() && a.name != name &&
                                           satisfies(it->second.version, a.op, a.version) &&
                                           arch_fits(a, it->second.arch, it->second.multi_arch, true))
        return name + " " + std::string(p->version) + " conflicts with " + a.name + " " + it->second.version;
      if (auto it = s.provides.find(a.name); it != s.provides.end())
        for (const auto& pv : it->second)
          if (pv.provider != name && (a.op == Relation::Any || (!pv.version.empty() && satisfies(pv.version, a.op, a.version))))
            return name + " " + std::string(p->version) + " conflicts with " + a.name + " (provided by " + pv.provider + ")";
    }
    // What is marked against it and what it provides.
    auto provided = parse_depends(p->provides);
    for (const auto& [owner, a] : s.negative) {
      if (owner == name) continue;
      if (a.name == name && satisfies(p->version, a.op, a.version) && arch_fits(a, p->architecture, p->multi_arch, true))
        return owner + " conflicts with " + a.str() + ", so " + name + " " + std::string(p->version) + " cannot join it";
      for (const auto& g : provided)
        for (const auto& pv : g)
          if (pv.name == a.name && (a.op == Relation::Any || (!pv.version.empty() && satisfies(pv.version, a.op, a.version))))
            return owner + " conflicts with " + a.str() + ", which " + name + " provides";
    }
    s.marked[name] = {std::string(p->version), p, std::string(p->architecture), std::string(p->multi_arch)};
    for (const auto& g : provided)
      for (const auto& a : g)
        s.provides[a.name].push_back({name, a.version, std::string(p->architecture), std::string(p->multi_arch)});
    for (const auto& a : neg) s.negative.emplace_back(name, a);
    s.reason[name] = why;
    return "";
  }

  // The packages that could satisfy `a`, best first.
  std::vector<const Package*> choices(const Atom& a) const {
    std::vector<const Package*> out;
    for (const Package* p : index_.versions(a.name))
      if (satisfies(p->version, a.op, a.version) && arch_fits(a, p->architecture, p->multi_arch)) out.push_back(p);
    std::vector<const Package*> prov;
    for (const auto& pv : index_.providers(a.name)) {
      if (a.op != Relation::Any && (pv.version.empty() || !satisfies(pv.version, a.op, a.version))) continue;
      if (!arch_fits(a, pv.package->architecture, pv.package->multi_arch)) continue;
      if (index_.candidate(pv.package->name) != pv.package) continue;  // only candidates provide
      prov.push_back(pv.package);
    }
    // As apt orders providers: by Priority (required first), then by name.
    std::sort(prov.begin(), prov.end(), [](const Package* x, const Package* y) {
      int rx = priority_rank(x->priority), ry = priority_rank(y->priority);
      return rx != ry ? rx < ry : x->name < y->name;
    });
    out.insert(out.end(), prov.begin(), prov.end());
    return out;
  }

  // Why no choice exists for `a`, in words.
  std::string unavailable(const Atom& a) const {
    const auto& vs = index_.versions(a.name);
    if (!a.arch.empty() && a.arch != "any" && a.arch != "native" && a.arch != index_.architecture())
      return a.str() + ", but the image has one architecture, " + index_.architecture();
    if (a.arch == "any" && !vs.empty() &&
        std::none_of(vs.begin(), vs.end(), [](const Package* p) { return p->multi_arch == "allowed"; }))
      return a.str() + ", but " + a.name + " is not 'Multi-Arch: allowed' (only such a package satisfies :any)";
    if (vs.empty() && index_.providers(a.name).empty()) return a.str() + " which no source provides";
    if (!vs.empty()) {
      std::string have;
      for (const Package* p : vs) have += (have.empty() ? "" : ", ") + std::string(p->version);
      return a.str() + " but only " + have + " is available";
    }
    return a.str() + ", a virtual package, but no provider fits";
  }

  // Satisfies the dependencies of marked package `p`, depth first.
  std::string install_deps(const Package* p, State& s) {
    std::string name(p->name);
    for (auto field : {p->pre_depends, p->depends}) {
      std::vector<Alternatives> groups;
      try {
        groups = parse_depends(field, index_.architecture());
      } catch (Error& e) {
        return name + ": " + e.what();
      }
      for (const auto& g : groups) {
        bool ok = false;
        for (const auto& a : g) ok = ok || satisfied(a, s);
        if (ok) continue;
        std::string group_str;
        for (const auto& a : g) group_str += (group_str.empty() ? "" : " | ") + a.str();
        std::vector<std::string> why_not;
        for (const auto& a : g) {
          auto cs = choices(a);
          if (cs.empty()) why_not.push_back(unavailable(a));
          for (const Package* c : cs) {
            if (++tries_ > kBudget) return "gave up after " + std::to_string(kBudget) + " choices";
            State saved = s;
            std::string err = mark(c, name, s);
            if (err.empty()) err = install_deps(c, s);
            if (err.empty()) {
              ok = true;
              break;
            }
            s = std::move(saved);
            why_not.push_back(err);
          }
          if (ok) break;
        }
        if (ok) continue;
        std::string msg = name + ": depends on " + group_str;
        if (why_not.size() == 1 && g.size() == 1 && why_not[0].rfind(g[0].str(), 0) == 0)
          msg = name + ": depends on " + why_not[0];
        else
          for (const auto& w : why_not) msg += "\n  " + w;
        return msg;
      }
    }
    return "";
  }

  Solution run(const SolveRequest& req) {
    State s;
    for (const auto& p : req.installed) add_installed(p, s);
    struct Root {
      const Package* p;
      std::string why;
      bool exact;  // "name=version": may replace a newer version below
    };
    std::vector<Root> roots;
    auto add_root = [&](const Package* p, const std::string& why, bool exact = false) {
      auto it = s.marked.find(std::string(p->name));
      if (it == s.marked.end()) return roots.push_back({p, why, exact});
      // Installed below: a request for a newer candidate (or another exact
      // version) upgrades it, as `apt-get install NAME` does.
      bool requested = why == "requested";
      if (requested && it->second.version != p->version &&
          (exact || compare_versions(p->version, it->second.version) > 0))
        roots.push_back({p, why, exact});
    };
    if (req.essential)
      for (const Package* p : index_.essential()) add_root(p, "essential");
    if (!req.priority.empty()) {
      int upto = priority_rank(req.priority);
      if (upto > 2) throw Error("priority '" + req.priority + "' is not required, important or standard");
      for (const char* level : {"required", "important", "standard"})
        if (priority_rank(level) <= upto)
          for (const Package* p : index_.by_priority(level)) add_root(p, std::string("priority ") + level);
    }
    for (const auto& spec : req.packages) add_root(find_request(spec, s), "requested", spec.find('=') != std::string::npos);
    for (const auto& r : roots) {
      std::string err = mark(r.p, r.why, s, r.exact);
      if (!err.empty()) throw Error("cannot install " + r.p->id() + ": " + err);
    }
    for (const auto& r : roots) {
      std::string err = install_deps(r.p, s);
      if (!err.empty()) throw Error("cannot install " + std::string(r.p->name) + " (" + r.why + "):\n  " + err);
    }
    if (req.recommends) install_recommends(s);
    check_below(s);
    Solution out;
    for (const auto& [name, m] : s.marked)
      if (m.pkg) out.packages.push_back(m.pkg), out.reason[name] = s.reason[name];
    out.upgraded = s.replaced;
    return out;
  }

  // Recommends of every package marked here (and of what they bring), each
  // group's first alternative that installs with its dependencies; a group
  // nothing satisfies is left out (apt only warns of those).
  void install_recommends(State& s) {
    std::set<std::string> done;
    for (bool more = true; more;) {
      more = false;
      std::vector<const Package*> todo;
      for (const auto& [name, m] : s.marked)
        if (m.pkg && done.insert(name).second) todo.push_back(m.pkg);
      for (const Package* p : todo) {
        std::vector<Alternatives> groups;
        try {
          groups = parse_depends(p->recommends, index_.architecture());
        } catch (const Error&) {
          continue;  // a malformed Recommends is not worth failing for
        }
        std::string why = std::string(p->name) + " (Recommends)";
        for (const auto& g : groups) {
          bool ok = false;
          for (const auto& a : g) ok = ok || satisfied(a, s);
          for (size_t i = 0; !ok && i < g.size(); ++i)
            for (const Package* c : choices(g[i])) {
              State saved = s;
              std::string err = mark(c, why, s);
              if (err.empty()) err = install_deps(c, s);
              if (err.empty()) {
                ok = more = true;
                break;
              }
              s = std::move(saved);
            }
        }
      }
    }
  }

  // After upgrades: every package left below must still have what it
  // depends on (apt would upgrade it too or refuse; this refuses, saying why).
  void check_below(const State& s) const {
    if (s.replaced.empty()) return;
    std::set<std::string> touched;  // names whose meaning changed: the upgraded packages and what they provided
    for (const auto& [name, old] : s.replaced) {
      touched.insert(name);
      if (auto it = installed_.find(name); it != installed_.end())
        for (const auto& g : parse_depends(it->second->get("Provides")))
          for (const auto& a : g) touched.insert(a.name);
    }
    for (const auto& [name, para] : installed_) {
      if (s.replaced.count(name)) continue;
      for (const char* field : {"Pre-Depends", "Depends"}) {
        std::vector<Alternatives> groups;
        try {
          groups = parse_depends(para->get(field), index_.architecture());
        } catch (const Error&) {
          continue;
        }
        for (const auto& g : groups) {
          bool relevant = false, ok = false;
          for (const auto& a : g) relevant = relevant || touched.count(a.name), ok = ok || satisfied(a, s);
          if (!relevant || ok) continue;
          std::string group_str, ups;
          for (const auto& a : g) group_str += (group_str.empty() ? "" : " | ") + a.str();
          for (const auto& [n, old] : s.replaced)
            ups += (ups.empty() ? "" : ", ") + n + " " + old + " -> " + s.marked.at(n).version;
          throw Error("cannot upgrade " + ups + ": " + name + " " + para->get("Version") +
                      " (installed in a lower layer) depends on " + group_str +
                      "; ask for a version of it that fits too, or leave the lower layer's version");
        }
      }
    }
  }

 private:
  const Package* find_request(const std::string& spec, const State& s) {
    std::string name = spec, version;
    if (auto eq = spec.find('='); eq != std::string::npos) name = spec.substr(0, eq), version = spec.substr(eq + 1);
    std::string arch;  // "name:amd64", "name:all"; another architecture is not in this image
    if (auto colon = name.find(':'); colon != std::string::npos) arch = name.substr(colon + 1), name.resize(colon);
    if (arch == "native") arch = index_.architecture();
    if (!arch.empty() && arch != index_.architecture() && arch != "all")
      throw Error("package " + spec + ": the image has one architecture, " + index_.architecture());
    const auto& vs = index_.versions(name);
    for (const Package* p : vs)
      if ((version.empty() || p->version == version) && (arch.empty() || p->architecture == arch)) return p;
    if (!arch.empty() && std::none_of(vs.begin(), vs.end(), [&](const Package* p) { return p->architecture == arch; }) &&
        !vs.empty())
      throw Error("package " + spec + ": " + name + " is Architecture: " + std::string(vs.front()->architecture) +
                  ", not " + arch);
    if (!vs.empty()) {
      std::string have;
      for (const Package* p : vs) have += (have.empty() ? "" : ", ") + std::string(p->version);
      throw Error("package " + name + " has no version " + version + " (available: " + have + ")");
    }
    std::vector<const Package*> prov;
    for (const auto& pv : index_.providers(name))
      if (index_.candidate(pv.package->name) == pv.package) prov.push_back(pv.package);
    if (prov.size() == 1) return prov.front();
    if (prov.empty()) {
      throw Error("package " + name + " is not in any repository (" + std::to_string(index_.repositories().size()) +
                  " repositories, " + std::to_string(index_.size()) + " packages for " + index_.architecture() + ")");
    }
    std::string names;
    for (const Package* p : prov) names += (names.empty() ? "" : ", ") + std::string(p->name);
    throw Error(name + " is a virtual package provided by " + names + "; name one of them");
  }

  const PackageIndex& index_;
  std::map<std::string, const Paragraph*> installed_;  // below, by name
  int tries_ = 0;
};

}  // namespace

Solution solve(const PackageIndex& index, const SolveRequest& request) { return Solver(index).run(request); }

}  // namespace sb::apt
