#include "resolve/lockfile.hpp"

#include <map>
#include <set>

namespace sb::resolve {

namespace {

nlohmann::json lock_json(const Plan& plan, const std::vector<nlohmann::json>& extras = {}) {
  nlohmann::json points = nlohmann::json::array();
  for (size_t i = 0; i < plan.points.size(); ++i) {
    const auto& p = plan.points[i];
    nlohmann::json j = {{"matrix", matrix_json(p.point)}};
    if (p.stack) j["resolved"] = *p.stack;
    else j["unsatisfiable"] = p.conflict ? p.conflict->summary : std::string("unsatisfiable");
    if (i < extras.size() && extras[i].is_object())
      for (const auto& [k, v] : extras[i].items()) j[k] = v;
    points.push_back(std::move(j));
  }
  return {{"lockfile_version", kLockfileVersion},
          {"recipe", std::filesystem::path(plan.recipe).filename().string()},
          {"stack", plan.stack},
          {"points", points}};
}

// "cuda=12.6 pytorch=2.6 arch=8.0;9.0" from a lock's matrix object.
std::string point_name(const nlohmann::json& matrix) {
  if (matrix.empty()) return "(no matrix)";
  std::string s;
  for (const auto& [k, v] : matrix.items()) {
    std::string val;
    if (v.is_array())
      for (const auto& x : v) val += (val.empty() ? "" : ";") + x.get<std::string>();
    else
      val = v.get<std::string>();
    s += (s.empty() ? "" : " ") + k + "=" + val;
  }
  return s;
}

std::string get(const nlohmann::json& j, const char* field, const std::string& key) {
  if (!j.contains(field) || !j[field].contains(key)) return "(none)";
  return j[field][key].get<std::string>();
}

void compare(const std::string& name, const nlohmann::json& old_p, const nlohmann::json& new_p,
             std::vector<std::string>& out) {
  bool was = old_p.contains("resolved"), is = new_p.contains("resolved");
  if (was != is) {
    out.push_back("point " + name + ": " +
                  (was ? "resolved in the lock, unsatisfiable now (" + new_p.value("unsatisfiable", "") + ")"
                       : "unsatisfiable in the lock, resolves now"));
    return;
  }
  if (!is) return;
  const auto& o = old_p["resolved"];
  const auto& n = new_p["resolved"];
  std::set<std::string> comps;
  for (const auto* side : {&o, &n})
    if (side->contains("versions"))
      for (const auto& [k, v] : (*side)["versions"].items()) comps.insert(k);
  for (const auto& c : comps) {
    std::string ov = get(o, "versions", c), nv = get(n, "versions", c);
    std::string ob = get(o, "builds", c), nb = get(n, "builds", c);
    if (ov != nv) out.push_back("point " + name + ": " + c + " " + ov + " -> " + nv);
    else if (ob != nb) out.push_back("point " + name + ": " + c + " " + ov + " build " + ob + " -> " + nb);
  }
  for (const char* f : {"driver_min", "nvidia_require_cuda", "arch"})
    if (o.value(f, nlohmann::json()) != n.value(f, nlohmann::json()))
      out.push_back("point " + name + ": " + f + " " + o.value(f, nlohmann::json()).dump() + " -> " +
                    n.value(f, nlohmann::json()).dump());
}

// Refuses a lockfile whose fields lock_changes() reads have the wrong shape,
// naming the field: "points[1].resolved.versions.cudnn is 9, not a string".
// A hand edit or a bad merge should not pass as "no changes".
void check_shape(const nlohmann::json& lock) {
  auto wrong = [](const std::string& field, const nlohmann::json& v, const char* want) {
    std::string shown = v.dump();
    if (shown.size() > 40) shown = shown.substr(0, 37) + "...";
    throw Error(field + " is " + shown + ", not " + want);
  };
  auto strings = [&](const nlohmann::json& obj, const std::string& field) {
    if (!obj.is_object()) wrong(field, obj, "an object");
    for (const auto& [k, v] : obj.items())
      if (!v.is_string()) wrong(field + "." + k, v, "a string");
  };
  if (!lock.contains("stack") || !lock["stack"].is_string())
    wrong("stack", lock.value("stack", nlohmann::json()), "a string");
  std::map<std::string, size_t> seen;
  for (size_t i = 0; i < lock["points"].size(); ++i) {
    const auto& p = lock["points"][i];
    const std::string at = "points[" + std::to_string(i) + "]";
    if (!p.is_object()) wrong(at, p, "an object");
    if (!p.contains("matrix") || !p["matrix"].is_object())
      wrong(at + ".matrix", p.value("matrix", nlohmann::json()), "an object");
    for (const auto& [k, v] : p["matrix"].items()) {
      bool ok = v.is_string() || v.is_array();
      if (v.is_array())
        for (const auto& x : v) ok = ok && x.is_string();
      if (!ok) wrong(at + ".matrix." + k, v, "a string or a list of strings");
    }
    if (auto [it, added] = seen.emplace(p["matrix"].dump(), i); !added)
      throw Error(at + " has the matrix of points[" + std::to_string(it->second) +
                  "]: " + p["matrix"].dump());
    if (p.contains("resolved") == p.contains("unsatisfiable"))
      throw Error(at + " has " + (p.contains("resolved") ? "both" : "neither") +
                  " of resolved and unsatisfiable");
    if (p.contains("unsatisfiable")) {
      if (!p["unsatisfiable"].is_string())
        wrong(at + ".unsatisfiable", p["unsatisfiable"], "a string");
      continue;
    }
    const auto& r = p["resolved"];
    if (!r.is_object()) wrong(at + ".resolved", r, "an object");
    for (const char* f : {"versions", "builds"})  // absent: every component shows as changed
      if (r.contains(f)) strings(r[f], at + ".resolved." + f);
    for (const char* f : {"driver_min", "driver_min_compat", "nvidia_require_cuda"})
      if (r.contains(f) && !r[f].is_string()) wrong(at + ".resolved." + f, r[f], "a string");
    if (r.contains("arch")) {
      const auto& a = r["arch"];
      if (!a.is_array()) wrong(at + ".resolved.arch", a, "a list of strings");
      for (size_t k = 0; k < a.size(); ++k)
        if (!a[k].is_string())
          wrong(at + ".resolved.arch[" + std::to_string(k) + "]", a[k], "a string");
    }
  }
}

}  // namespace

std::filesystem::path lock_path(const std::filesystem::path& recipe) {
  std::filesystem::path p = recipe;
  p += ".lock";
  return p;
}

std::string render_lock(const Plan& plan) { return lock_json(plan).dump(2) + "\n"; }

std::string render_lock(const Plan& plan, const std::vector<nlohmann::json>& extras) {
  return lock_json(plan, extras).dump(2) + "\n";
}

const nlohmann::json* locked_point(const nlohmann::json& lock, const Point& point) {
  if (!lock.is_object() || !lock.contains("points") || !lock["points"].is_array()) return nullptr;
  nlohmann::json want = matrix_json(point);
  for (const auto& p : lock["points"])
    if (p.is_object() && p.contains("matrix") && p["matrix"] == want) return &p;
  return nullptr;
}

nlohmann::json locked_field(const std::string& lock_text, const Point& point,
                            const std::string& field) {
  nlohmann::json lock = nlohmann::json::parse(lock_text, nullptr, false);
  const nlohmann::json* p = locked_point(lock, point);
  return p && p->contains(field) ? (*p)[field] : nlohmann::json(nullptr);
}

namespace {

// A layer entry's pins, name -> version: its "packages", "wheels" or
// "archives" list (a name is "name", or "component" for redist archives;
// the same name twice, e.g. a package for two architectures, keeps both).
std::map<std::string, std::string> pins_of(const nlohmann::json& entry) {
  std::map<std::string, std::string> out;
  for (const char* list : {"packages", "wheels", "archives"}) {
    if (!entry.contains(list) || !entry[list].is_array()) continue;
    for (const auto& item : entry[list]) {
      if (!item.is_object()) continue;
      std::string name = item.value("name", item.value("component", std::string()));
      std::string arch = item.value("architecture", item.value("variant", std::string()));
      if (!arch.empty() && arch != "all") name += ":" + arch;
      out[name] = item.value("version", std::string());
    }
  }
  return out;
}

bool has_pins(const nlohmann::json& entry) {
  for (const char* list : {"packages", "wheels", "archives"})
    if (entry.is_object() && entry.contains(list)) return true;
  return false;
}

void diff_point(const std::string& name, const nlohmann::json& o, const nlohmann::json& n,
                std::vector<std::string>& out) {
  compare(name, o, n, out);  // the resolved versions
  std::set<std::string> sections;
  for (const auto* side : {&o, &n})
    for (const auto& [k, v] : side->items())
      if (k != "matrix" && k != "resolved" && k != "unsatisfiable") sections.insert(k);
  const nlohmann::json none = nlohmann::json::object();
  for (const auto& s : sections) {
    const nlohmann::json& os = o.contains(s) ? o[s] : none;
    const nlohmann::json& ns = n.contains(s) ? n[s] : none;
    if (os == ns) continue;
    if (s == "base") {
      out.push_back("point " + name + ": base " + os.value("digest", std::string("(none)")) + " -> " +
                    ns.value("digest", std::string("(none)")));
      continue;
    }
    std::set<std::string> layers;
    for (const auto* side : {&os, &ns})
      if (side->is_object())
        for (const auto& [k, v] : side->items()) layers.insert(k);
    for (const auto& layer : layers) {
      const nlohmann::json& ol = os.is_object() && os.contains(layer) ? os[layer] : none;
      const nlohmann::json& nl = ns.is_object() && ns.contains(layer) ? ns[layer] : none;
      if (ol == nl) continue;
      const std::string at = "point " + name + ": " + s + " " + layer + ": ";
      if (!has_pins(ol) && !has_pins(nl)) {
        out.push_back(at + (ol.empty() ? "new" : nl.empty() ? "removed" : "changed"));
        continue;
      }
      auto a = pins_of(ol), b = pins_of(nl);
      size_t before = out.size();
      for (const auto& [pin, v] : b) {
        auto it = a.find(pin);
        if (it == a.end()) out.push_back(at + "+ " + pin + " " + v);
        else if (it->second != v) out.push_back(at + pin + " " + it->second + " -> " + v);
      }
      for (const auto& [pin, v] : a)
        if (!b.count(pin)) out.push_back(at + "- " + pin + " " + v);
      if (out.size() == before) out.push_back(at + "the same versions, other files or requests");
    }
  }
}

nlohmann::json parse_lock(const std::string& text) {
  if (text.empty()) return nlohmann::json::object();
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  return j.is_object() ? j : nlohmann::json::object();
}

}  // namespace

std::vector<std::string> lock_diff(const std::string& before, const std::string& after) {
  const nlohmann::json a = parse_lock(before), b = parse_lock(after);
  std::map<std::string, const nlohmann::json*> old_points;
  if (a.contains("points") && a["points"].is_array())
    for (const auto& p : a["points"])
      if (p.is_object() && p.contains("matrix")) old_points[p["matrix"].dump()] = &p;
  std::vector<std::string> out;
  std::set<std::string> seen;
  if (b.contains("points") && b["points"].is_array())
    for (const auto& p : b["points"]) {
      if (!p.is_object() || !p.contains("matrix")) continue;
      const std::string key = p["matrix"].dump();
      seen.insert(key);
      auto it = old_points.find(key);
      if (it == old_points.end())
        out.push_back("point " + point_name(p["matrix"]) + ": new");
      else
        diff_point(point_name(p["matrix"]), *it->second, p, out);
    }
  for (const auto& [key, p] : old_points)
    if (!seen.count(key)) out.push_back("point " + point_name((*p)["matrix"]) + ": removed");
  return out;
}

std::vector<std::string> lock_changes(const std::string& lock_text, const std::string& lock_file, const Plan& plan) {
  nlohmann::json old_lock;
  try {
    old_lock = nlohmann::json::parse(lock_text);
  } catch (const nlohmann::json::exception& e) {
    throw InputError({lock_file, 0, 0}, "not a lockfile: " + std::string(e.what()),
                     "write it again with 'stackbuild lock'");
  }
  if (!old_lock.is_object() || old_lock.value("lockfile_version", 0) != kLockfileVersion ||
      !old_lock.contains("points") || !old_lock["points"].is_array())
    throw InputError({lock_file, 0, 0}, "not a version " + std::to_string(kLockfileVersion) + " lockfile",
                     "write it again with 'stackbuild lock'");
  try {
    check_shape(old_lock);
  } catch (const Error& e) {
    throw InputError({lock_file, 0, 0}, "a malformed lockfile: " + std::string(e.what()),
                     "write it again with 'stackbuild lock'");
  }
  nlohmann::json now = lock_json(plan);
  std::vector<std::string> out;
  if (old_lock["stack"] != now["stack"])
    out.push_back("stack " + old_lock["stack"].get<std::string>() + " -> " +
                  now["stack"].get<std::string>());
  std::map<std::string, const nlohmann::json*> old_points;
  try {
    for (const auto& p : old_lock["points"]) old_points[p.at("matrix").dump()] = &p;
    std::set<std::string> seen;
    for (const auto& p : now["points"]) {
      std::string key = p["matrix"].dump();
      seen.insert(key);
      auto it = old_points.find(key);
      if (it == old_points.end()) out.push_back("point " + point_name(p["matrix"]) + ": not in the lock (new in the matrix)");
      else compare(point_name(p["matrix"]), *it->second, p, out);
    }
    for (const auto& [key, p] : old_points)
      if (!seen.count(key)) out.push_back("point " + point_name((*p)["matrix"]) + ": in the lock, no longer in the matrix");
  } catch (const nlohmann::json::exception& e) {
    throw InputError({lock_file, 0, 0}, "a malformed lockfile: " + std::string(e.what()),
                     "write it again with 'stackbuild lock'");
  }
  return out;
}

}  // namespace sb::resolve
