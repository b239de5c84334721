#include "fetch/apt/control.hpp"

#include <strings.h>

#include "util/error.hpp"
#include "util/text.hpp"

namespace sb::apt {

namespace {

const std::string kEmpty;

bool iequal(std::string_view a, std::string_view b) {
  return a.size() == b.size() && strncasecmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace

std::vector<std::string> split_words(std::string_view s) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && isspace(static_cast<unsigned char>(s[i]))) ++i;
    size_t j = i;
    while (j < s.size() && !isspace(static_cast<unsigned char>(s[j]))) ++j;
    if (j > i) out.emplace_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

const std::string& Paragraph::get(std::string_view name) const {
  for (const auto& [k, v] : fields)
    if (iequal(k, name)) return v;
  return kEmpty;
}

bool Paragraph::has(std::string_view name) const {
  for (const auto& [k, v] : fields)
    if (iequal(k, name)) return true;
  return false;
}

void Paragraph::set(const std::string& name, const std::string& value) {
  for (auto& [k, v] : fields)
    if (iequal(k, name)) {
      v = value;
      return;
    }
  fields.emplace_back(name, value);
}

std::string Paragraph::str() const {
  std::string s;
  for (const auto& [k, v] : fields) {
    s += k + ":";
    if (!v.empty() && v[0] != '\n') s += " ";
    for (char c : v) {
      s += c;
      if (c == '\n') s += ' ';
    }
    s += "\n";
  }
  return s;
}

void for_each_paragraph(std::string_view text, const std::function<void(const Paragraph&)>& fn) {
  Paragraph p;
  size_t pos = 0;
  auto flush = [&] {
    if (!p.fields.empty()) fn(p);
    p.fields.clear();
  };
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    while (!line.empty() && line.back() == '\r') line.remove_suffix(1);  // CRLF, or worse
    pos = end + 1;
    if (trim_view(line).empty()) {
      flush();
      continue;
    }
    if (line[0] == '#') continue;
    if (line[0] == ' ' || line[0] == '\t') {  // a continuation line
      if (p.fields.empty()) throw Error("control data: a continuation line before any field: '" + std::string(line) + "'");
      p.fields.back().second += "\n" + std::string(line.substr(1));
      continue;
    }
    auto colon = line.find(':');
    if (colon == std::string_view::npos) throw Error("control data: a line without ':': '" + std::string(line) + "'");
    p.fields.emplace_back(std::string(line.substr(0, colon)), std::string(trim_view(line.substr(colon + 1))));
  }
  flush();
}

std::vector<Paragraph> parse_paragraphs(std::string_view text, bool comments) {
  std::vector<Paragraph> out;
  // for_each_paragraph skips '#' lines only at the start of a line, which is
  // where deb822 allows them; Packages data never starts a line with '#'.
  (void)comments;
  for_each_paragraph(text, [&](const Paragraph& p) { out.push_back(p); });
  return out;
}

std::string Atom::str() const {
  std::string s = name;
  if (!arch.empty()) s += ":" + arch;
  if (op != Relation::Any) s += " (" + relation_str(op) + " " + version + ")";
  return s;
}

std::vector<Alternatives> parse_depends(std::string_view field, std::string_view arch) {
  std::vector<Alternatives> out;
  auto fail = [&](const std::string& why) -> Error {
    return Error("malformed dependency field '" + std::string(trim_view(field)) + "': " + why);
  };
  size_t pos = 0;
  while (pos <= field.size()) {
    size_t comma = field.find(',', pos);
    if (comma == std::string_view::npos) comma = field.size();
    std::string_view group = trim_view(field.substr(pos, comma - pos));
    pos = comma + 1;
    if (group.empty()) {
      if (comma == field.size()) break;
      continue;
    }
    Alternatives alts;
    size_t gpos = 0;
    while (gpos <= group.size()) {
      size_t bar = group.find('|', gpos);
      if (bar == std::string_view::npos) bar = group.size();
      std::string_view a = trim_view(group.substr(gpos, bar - gpos));
      gpos = bar + 1;
      Atom atom;
      bool keep = true;
      // [arch list] and <profiles>
      if (auto lb = a.find('['); lb != std::string_view::npos) {
        auto rb = a.find(']', lb);
        if (rb == std::string_view::npos) throw fail("unclosed '['");
        auto archs = split_words(a.substr(lb + 1, rb - lb - 1));
        bool neg = !archs.empty() && archs[0][0] == '!';
        bool listed = false;
        for (auto& x : archs) listed |= (neg ? x.substr(1) : x) == arch;
        if (!arch.empty()) keep = neg ? !listed : listed;
        a = trim_view(a.substr(0, lb));
      }
      if (auto lt = a.find('<'); lt != std::string_view::npos && a.find('(') > lt) a = trim_view(a.substr(0, lt));
      if (auto lp = a.find('('); lp != std::string_view::npos) {
        auto rp = a.find(')', lp);
        if (rp == std::string_view::npos) throw fail("unclosed '('");
        std::string_view rel = trim_view(a.substr(lp + 1, rp - lp - 1));
        size_t k = 0;
        while (k < rel.size() && (rel[k] == '<' || rel[k] == '>' || rel[k] == '=')) ++k;
        if (k == 0) throw fail("no relation in '(" + std::string(rel) + ")'");
        atom.op = parse_relation(rel.substr(0, k));
        atom.version = std::string(trim_view(rel.substr(k)));
        a = trim_view(a.substr(0, lp));
      }
      if (auto colon = a.find(':'); colon != std::string_view::npos) {
        atom.arch = std::string(a.substr(colon + 1));
        a = a.substr(0, colon);
      }
      atom.name = std::string(a);
      if (atom.name.empty()) throw fail("an empty package name");
      if (keep) alts.push_back(std::move(atom));
      if (bar == group.size()) break;
    }
    if (!alts.empty()) out.push_back(std::move(alts));
    if (comma == field.size()) break;
  }
  return out;
}

}  // namespace sb::apt
