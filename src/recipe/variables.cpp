#include "recipe/variables.hpp"

#include <cctype>

namespace sb {

namespace {

bool name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-'; }

// Calls on_text for literal runs and on_var for each reference.
template <class Text_, class Var>
void scan(const std::string& s, const SourceLocation& where, Text_ on_text, Var on_var) {
  size_t i = 0;
  while (i < s.size()) {
    if (s.compare(i, 3, "$${") == 0) {
      on_text("${");
      i += 3;
      continue;
    }
    if (s.compare(i, 2, "${") != 0) {
      on_text(std::string(1, s[i++]));
      continue;
    }
    size_t end = s.find('}', i + 2);
    if (end == std::string::npos)
      throw InputError(where, "unterminated variable reference in '" + s + "'",
                       "write ${name}; write $${ for a literal ${");
    std::string name = s.substr(i + 2, end - i - 2);
    if (name.empty()) throw InputError(where, "empty variable reference '${}' in '" + s + "'");
    for (char c : name)
      if (!name_char(c))
        throw InputError(where, "bad variable name '" + name + "' in '" + s + "'",
                         "names are letters, digits, '_' and '-': ${cuda}, ${python}");
    on_var(name);
    i = end + 1;
  }
}

void add(std::vector<VariableUse>& out, const Text& t, bool in_version = false) {
  for (auto& n : variable_names(t.value, t.where)) out.push_back({n, t.where, in_version});
}

}  // namespace

std::vector<std::string> variable_names(const std::string& text, const SourceLocation& where) {
  std::vector<std::string> names;
  scan(text, where, [](const std::string&) {}, [&](const std::string& n) { names.push_back(n); });
  return names;
}

std::vector<VariableUse> variable_uses(const Recipe& r) {
  std::vector<VariableUse> out;
  for (const auto& l : r.layers) {
    add(out, l.version, true);
    for (const auto& c : l.copy) {
      add(out, Text{c.src, c.where});
      add(out, Text{c.dst, c.where});
    }
    for (const auto& [k, v] : l.build.env) add(out, v);
    for (const auto& cmd : l.build.run) add(out, cmd);
    add(out, Text{l.keep_source, l.at("keep_source")});
    add(out, Text{l.source.git, l.source.where});
    add(out, Text{l.source.ref, l.source.where});
    add(out, Text{l.source.version, l.source.where});
    add(out, Text{l.source.suite, l.source.where});
    for (const auto& [list, key] : {std::pair{&l.apt, "apt"}, std::pair{&l.pip, "pip"}, std::pair{&l.packages, "packages"}})
      for (const auto& item : *list) add(out, Text{item, l.at(key)});
  }
  for (const auto& [k, v] : r.config.env) add(out, v);
  auto at = [&](const char* key) {
    auto it = r.key_where.find(key);
    return it == r.key_where.end() ? SourceLocation{r.file.string(), 0, 0} : it->second;
  };
  for (const auto& [k, v] : r.config.labels) add(out, Text{v, at("config")});
  for (const auto& [k, v] : r.annotations) add(out, Text{v, at("annotations")});
  for (size_t i = 0; i < r.tags.size(); ++i)
    add(out, Text{r.tags[i], i < r.tag_where.size() ? r.tag_where[i] : r.tags_where});
  for (const auto& p : r.push) add(out, p);
  add(out, r.from);
  for (const auto& t : r.tests) {
    add(out, t.run);
    add(out, t.expect);
  }
  return out;
}

std::string expand_variables(const Text& t, const VariableLookup& lookup, const std::vector<std::string>& known,
                             const std::string& context) {
  if (t.value.find("${") == std::string::npos) return t.value;
  std::string out;
  scan(
      t.value, t.where, [&](const std::string& s) { out += s; },
      [&](const std::string& name) {
        auto v = lookup(name);
        if (!v) {
          std::string best = suggest(name, known);
          std::string msg = "undefined variable '${" + name + "}'";
          if (!best.empty()) msg += " (did you mean '${" + best + "}'?)";
          if (!context.empty()) msg += " " + context;
          std::string all;
          for (const auto& k : known) all += (all.empty() ? "" : ", ") + ("${" + k + "}");
          throw InputError(t.where, msg, all.empty() ? "no variables are defined here" : "defined here: " + all);
        }
        out += *v;
      });
  return out;
}

}  // namespace sb
