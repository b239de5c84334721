#include "apt/solver.hpp"

#include <algorithm>
#include <optional>

#include "apt/version.hpp"
#include "util/error.hpp"

namespace sb::apt {

namespace {

struct Marked {
  std::string version;
  const Package* pkg = nullptr;  // null: installed in a lower layer
};

struct ProvidedBy {
  std::string provider;
  std::string version;  // "" = unversioned
};

// What is marked so far; copied to backtrack (a few hundred entries).
struct State {
  std::map<std::string, Marked> marked;
  std::map<std::string, std::vector<ProvidedBy>> provides;
  std::vector<std::pair<std::string, Atom>> negative;  // (owner, Conflicts/Breaks atom)
  std::map<std::string, std::string> reason;
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
    s.marked[name] = {p.get("Version"), nullptr};
    for (const auto& g : parse_depends(p.get("Provides")))
      for (const auto& a : g) s.provides[a.name].push_back({name, a.version});
    for (const char* f : {"Conflicts", "Breaks"})
      for (const auto& g : parse_depends(p.get(f)))
        for (const auto& a : g) s.negative.emplace_back(name, a);
  }

  bool satisfied(const Atom& a, const State& s) const {
    if (auto it = s.marked.find(a.name); it != s.marked.end() && satisfies(it->second.version, a.op, a.version))
      return true;
    if (auto it = s.provides.find(a.name); it != s.provides.end())
      for (const auto& p : it->second)
        if (a.op == Relation::Any || (!p.version.empty() && satisfies(p.version, a.op, a.version))) return true;
    return false;
  }

  // Marks `p`; returns an error (empty on success) without touching its deps.
  std::string mark(const Package* p, const std::string& why, State& s) {
    std::string name(p->name);
    if (auto it = s.marked.find(name); it != s.marked.end()) {
      if (it->second.version == p->version) return "";
      return name + " " + std::string(p->version) + " is wanted, but " + name + " " + it->second.version +
             (it->second.pkg ? " is already chosen" : " is installed in a lower layer");
    }
    std::vector<Atom> neg;
    for (auto f : {p->conflicts, p->breaks})
      for (const auto& g : parse_depends(f))
        for (const auto& a : g) neg.push_back(a);
    // Its Conflicts/Breaks against what is marked (real names and provides).
    for (const auto& a : neg) {
      if (auto it = s.marked.find(a.name); it != s.marked.end() && a.name != name &&
                                           satisfies(it->second.version, a.op, a.version))
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
      if (a.name == name && satisfies(p->version, a.op, a.version))
        return owner + " conflicts with " + a.str() + ", so " + name + " " + std::string(p->version) + " cannot join it";
      for (const auto& g : provided)
        for (const auto& pv : g)
          if (pv.name == a.name && (a.op == Relation::Any || (!pv.version.empty() && satisfies(pv.version, a.op, a.version))))
            return owner + " conflicts with " + a.str() + ", which " + name + " provides";
    }
    s.marked[name] = {std::string(p->version), p};
    for (const auto& g : provided)
      for (const auto& a : g) s.provides[a.name].push_back({name, a.version});
    for (const auto& a : neg) s.negative.emplace_back(name, a);
    s.reason[name] = why;
    return "";
  }

  // The packages that could satisfy `a`, best first.
  std::vector<const Package*> choices(const Atom& a) const {
    std::vector<const Package*> out;
    for (const Package* p : index_.versions(a.name))
      if (satisfies(p->version, a.op, a.version)) out.push_back(p);
    std::vector<const Package*> prov;
    for (const auto& pv : index_.providers(a.name)) {
      if (a.op != Relation::Any && (pv.version.empty() || !satisfies(pv.version, a.op, a.version))) continue;
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
    std::vector<std::pair<const Package*, std::string>> roots;
    auto add_root = [&](const Package* p, const std::string& why) {
      if (!s.marked.count(std::string(p->name))) roots.emplace_back(p, why);
    };
    if (req.essential)
      for (const Package* p : index_.essential()) add_root(p, "essential");
    if (req.required)
      for (const Package* p : index_.by_priority("required")) add_root(p, "priority required");
    for (const auto& spec : req.packages) add_root(find_request(spec, s), "requested");
    for (const auto& [p, why] : roots) {
      std::string err = mark(p, why, s);
      if (!err.empty()) throw Error("cannot install " + p->id() + ": " + err);
    }
    for (const auto& [p, why] : roots) {
      std::string err = install_deps(p, s);
      if (!err.empty()) throw Error("cannot install " + std::string(p->name) + " (" + why + "):\n  " + err);
    }
    Solution out;
    for (const auto& [name, m] : s.marked)
      if (m.pkg) out.packages.push_back(m.pkg), out.reason[name] = s.reason[name];
    return out;
  }

 private:
  const Package* find_request(const std::string& spec, const State& s) {
    std::string name = spec, version;
    if (auto eq = spec.find('='); eq != std::string::npos) name = spec.substr(0, eq), version = spec.substr(eq + 1);
    if (auto colon = name.find(':'); colon != std::string::npos) name.resize(colon);
    const auto& vs = index_.versions(name);
    for (const Package* p : vs)
      if (version.empty() || p->version == version) return p;
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
  int tries_ = 0;
};

}  // namespace

Solution solve(const PackageIndex& index, const SolveRequest& request) { return Solver(index).run(request); }

}  // namespace sb::apt
