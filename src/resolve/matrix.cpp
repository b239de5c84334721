#include "resolve/matrix.hpp"

#include <algorithm>

#include "recipe/parse.hpp"

namespace sb::resolve {

namespace {

bool matches(const Point& p, const MatrixCombo& c) {
  for (const auto& [k, v] : c.values) {
    const MatrixValue* mine = p.get(k);
    if (!mine || !(*mine == v)) return false;
  }
  return true;
}

bool same(const Point& a, const Point& b) {
  if (a.values.size() != b.values.size()) return false;
  for (const auto& [k, v] : a.values) {
    const MatrixValue* other = b.get(k);
    if (!other || !(*other == v)) return false;
  }
  return true;
}

// The product of `axes`, appended to `out` after `prefix`, first axis slowest.
void product(const std::vector<const MatrixAxis*>& axes, size_t i, Point& prefix, std::vector<Point>& out) {
  if (i == axes.size()) {
    out.push_back(prefix);
    return;
  }
  for (const auto& v : axes[i]->values) {
    prefix.values.emplace_back(axes[i]->key, v);
    product(axes, i + 1, prefix, out);
    prefix.values.pop_back();
  }
}

}  // namespace

const MatrixValue* Point::get(const std::string& key) const {
  for (const auto& [k, v] : values)
    if (k == key) return &v;
  return nullptr;
}

std::string Point::id() const {
  if (values.empty()) return "(no matrix)";
  std::string s;
  for (const auto& [k, v] : values) s += (s.empty() ? "" : " ") + k + "=" + v.str();
  return s;
}

std::string Point::id_without(const std::string& key) const {
  std::string s;
  for (const auto& [k, v] : values)
    if (k != key) s += (s.empty() ? "" : " ") + k + "=" + v.str();
  return s;
}

Override parse_override(const std::string& arg) {
  auto eq = arg.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == arg.size())
    throw Error("--set wants key=value (e.g. --set cuda=12.6), not '" + arg + "'", ErrorKind::Usage);
  return {arg.substr(0, eq), arg.substr(eq + 1)};
}

void apply_overrides(Matrix& m, const std::vector<Override>& sets, const std::vector<std::string>& new_keys) {
  for (const auto& s : sets) {
    MatrixValue v;
    v.where = {"--set " + s.key + "=" + s.value, 0, 0};
    if (s.key == "arch") {
      v.is_list = true;
      size_t start = 0;
      while (start <= s.value.size()) {
        size_t end = s.value.find_first_of(",;", start);
        if (end == std::string::npos) end = s.value.size();
        std::string cc = s.value.substr(start, end - start);
        if (!sb::detail::is_compute_capability(cc))
          throw Error("--set arch: bad compute capability '" + cc + "' (write arch=8.0,9.0)", ErrorKind::Usage);
        v.items.push_back(cc);
        start = end + 1;
      }
    } else {
      if (s.key == "platform" && platform_architecture(s.value).empty())
        throw Error("--set platform: '" + s.value + "' is not a platform stackbuild builds for (write linux/amd64 or linux/arm64)",
                    ErrorKind::Usage);
      v.items.push_back(s.value);
    }
    auto axis = std::find_if(m.axes.begin(), m.axes.end(), [&](const MatrixAxis& a) { return a.key == s.key; });
    auto value_of = [&](const MatrixCombo& c) -> const MatrixValue* {
      for (const auto& [k, val] : c.values)
        if (k == s.key) return &val;
      return nullptr;
    };
    const bool in_include = std::any_of(m.include.begin(), m.include.end(), [&](const MatrixCombo& c) { return value_of(c); });
    if (axis == m.axes.end() && in_include) {
      // A key only `include:` entries give (each entry a whole point, as
      // recipes/pytorch.yaml's cuda and pytorch): the entries with this value
      // are chosen; when none has it, every entry takes it instead (--set
      // arch=9.0 over entries that list three archs). No axis is made, so no
      // half-defined point is.
      const bool chosen = std::any_of(m.include.begin(), m.include.end(), [&](const MatrixCombo& c) {
        const MatrixValue* have = value_of(c);
        return have && *have == v;
      });
      if (chosen) {
        std::erase_if(m.include, [&](const MatrixCombo& c) {
          const MatrixValue* have = value_of(c);
          return !have || !(*have == v);
        });
      } else {
        for (auto& c : m.include) {
          bool set = false;
          for (auto& [k, val] : c.values)
            if (k == s.key) val = v, set = true;
          if (!set) c.values.emplace_back(s.key, v);
        }
      }
      continue;
    }
    if (axis == m.axes.end()) {
      if (!in_include && std::find(new_keys.begin(), new_keys.end(), s.key) == new_keys.end()) {
        std::vector<std::string> known = new_keys;
        for (const auto& a : m.axes) known.push_back(a.key);
        std::string best = suggest(s.key, known);
        throw Error("--set " + s.key + ": not a matrix key or catalog component" +
                        (best.empty() ? "" : " (did you mean '" + best + "'?)"),
                    ErrorKind::Usage);
      }
      m.axes.push_back(MatrixAxis{s.key, {}, v.where});
      axis = m.axes.end() - 1;
    }
    axis->values = {v};
    std::erase_if(m.include, [&](const MatrixCombo& c) {
      for (const auto& [k, val] : c.values)
        if (k == s.key && !(val == v)) return true;
      return false;
    });
    std::erase_if(m.exclude, [&](const MatrixCombo& c) {  // an exclude of another value is moot now
      for (const auto& [k, val] : c.values)
        if (k == s.key && !(val == v)) return true;
      return false;
    });
  }
}

std::vector<Point> expand_matrix(const Matrix& m) {
  std::vector<const MatrixAxis*> axes;
  for (const auto& a : m.axes) axes.push_back(&a);
  std::vector<Point> all;
  Point prefix;
  product(axes, 0, prefix, all);
  std::vector<Point> out;
  for (auto& p : all)
    if (std::none_of(m.exclude.begin(), m.exclude.end(), [&](const MatrixCombo& c) { return matches(p, c); }))
      out.push_back(std::move(p));
  if (m.axes.empty() && !m.include.empty()) out.clear();  // only includes: no empty base point
  for (const auto& inc : m.include) {
    std::vector<const MatrixAxis*> rest;
    for (const auto& a : m.axes)
      if (std::none_of(inc.values.begin(), inc.values.end(), [&](const auto& kv) { return kv.first == a.key; }))
        rest.push_back(&a);
    std::vector<Point> extra;
    Point none;
    product(rest, 0, none, extra);
    for (auto& e : extra) {
      Point p;  // axis order, then the include's own keys
      for (const auto& a : m.axes) {
        if (const MatrixValue* v = e.get(a.key)) p.values.emplace_back(a.key, *v);
        for (const auto& [k, v] : inc.values)
          if (k == a.key) p.values.emplace_back(k, v);
      }
      for (const auto& [k, v] : inc.values)
        if (!m.find(k)) p.values.emplace_back(k, v);
      if (std::none_of(out.begin(), out.end(), [&](const Point& q) { return same(p, q); })) out.push_back(p);
    }
  }
  return out;
}

}  // namespace sb::resolve
