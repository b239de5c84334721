// The licenses of Debian packages, from /usr/share/doc/<package>/copyright:
// dpkg's database says nothing of licenses, so scanners (syft, trivy) read
// these files. A machine-readable one (DEP-5, "Format: .../copyright-format/
// 1.0/") names each license of its Files paragraphs by a short name
// ("GPL-2+", "BSD-3-clause", "Expat"); those names become an SPDX expression,
// a name SPDX has no identifier for ("public-domain") a LicenseRef that the
// document defines, as syft writes them. A free-form file is only
// pointed at: what it refers to in /usr/share/common-licenses is reported as
// words, not as a license it could not be shown to declare.
#include <algorithm>
#include <cctype>
#include <regex>

#include "image/sbom.hpp"
#include "util/text.hpp"

namespace sb::sbom {

namespace {

bool field_is(std::string_view line, std::string_view name) {
  return line.size() > name.size() && line[name.size()] == ':' &&
         ascii_lower(line.substr(0, name.size())) == name;
}

// Debian's short name -> the SPDX identifier; license_ref(name) when there is none.
std::string spdx_of_debian(const std::string& name) {
  std::string n = ascii_lower(name);
  // The GNU family: GPL-2, GPL-2+, LGPL-2.1+, GFDL-1.3, GFDL-NIV-1.3+, with or
  // without ".0", -only, -or-later.
  static const std::regex gnu(R"((agpl|gpl|lgpl|gfdl|gfdl-niv)-(\d)(\.\d)?(\+|-only|-or-later)?)");
  std::smatch m;
  if (std::regex_match(n, m, gnu)) {
    static const std::map<std::string, std::string> families = {
        {"agpl", "AGPL"}, {"gpl", "GPL"}, {"lgpl", "LGPL"}, {"gfdl", "GFDL"}, {"gfdl-niv", "GFDL"}};
    const std::string& family = families.at(m[1].str());
    std::string version = m[2].str() + (m[3].matched ? m[3].str() : ".0");
    bool later = m[4].str() == "+" || m[4].str() == "-or-later";
    std::string id = family + "-" + version + (m[1].str() == "gfdl-niv" ? "-no-invariants" : "") +
                     (later ? "-or-later" : "-only");
    return license_expression_known(id) ? id : license_ref(name);
  }
  static const std::map<std::string, std::string> aliases = {
      {"expat", "MIT"},           {"artistic", "Artistic-1.0-Perl"},
      {"psf", "PSF-2.0"},         {"psf-2", "PSF-2.0"},
      {"zope-2.1", "ZPL-2.1"},    {"sil-ofl-1.1", "OFL-1.1"},
      {"libpng", "libpng-2.0"},   {"cc0", "CC0-1.0"},
      {"apache-2", "Apache-2.0"}, {"mpl-2", "MPL-2.0"}};
  if (auto it = aliases.find(n); it != aliases.end()) return it->second;
  // Otherwise an SPDX identifier written in any case: "BSD-3-clause", "Apache-2.0", "Zlib".
  std::string id = spdx_license_id(name);
  return id.empty() ? license_ref(name) : id;
}

// One DEP-5 license line ("GPL-2+ or Artistic, and BSD-3-clause") as SPDX:
// "or"/"and" become OR/AND (AND binds tighter, as in DEP-5), a comma ends a
// group that is then parenthesized, "with X exception" becomes WITH when X is
// an exception SPDX lists (else the whole "A with X exception" is one
// LicenseRef). "" when the line is not an expression.
std::string spdx_of_dep5(const std::string& line) {
  std::vector<std::string> words;
  std::string cur;
  for (char c : line) {
    if (c == ',' || std::isspace(static_cast<unsigned char>(c))) {
      if (!cur.empty()) words.push_back(cur), cur.clear();
      if (c == ',') words.emplace_back(",");
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) words.push_back(cur);
  std::vector<std::pair<std::string, std::string>> groups;  // (the operator before it, the group)
  std::string group, last_name;
  size_t last_at = 0;  // where the last name's identifier starts in `group`
  bool want_name = true;
  auto end_group = [&](const std::string& op) {
    groups.emplace_back(op, group);
    group.clear();
  };
  std::string pending = "AND";  // the operator after a comma
  for (size_t i = 0; i < words.size(); ++i) {
    std::string w = ascii_lower(words[i]);
    if (w == ",") {
      if (want_name) return "";
      // ", and B" / ", or B": the operator joins the groups.
      std::string op = i + 1 < words.size() ? ascii_lower(words[i + 1]) : "";
      if (op != "and" && op != "or") return "";
      end_group(pending);
      pending = op == "and" ? "AND" : "OR";
      ++i;
      want_name = true;
      continue;
    }
    if (w == "and" || w == "or") {
      if (want_name) return "";
      group += w == "and" ? " AND " : " OR ";
      want_name = true;
      continue;
    }
    if (w == "with") {  // "with OpenSSL exception": the words up to "exception"
      if (want_name) return "";
      std::string name;
      size_t j = i + 1;
      for (; j < words.size() && ascii_lower(words[j]) != "exception"; ++j)
        name += (name.empty() ? "" : "-") + words[j];
      if (j >= words.size()) {  // "with GCC-exception": one word
        if (i + 1 >= words.size() || words[i + 1] == ",") return "";
        j = i + 1;
        name = words[j];
      }
      if (name.empty()) return "";
      std::string exc = spdx_exception_id(name + "-exception");
      if (exc.empty()) exc = spdx_exception_id(name);
      if (!exc.empty() && group.compare(last_at, 11, "LicenseRef-") != 0) {
        group += " WITH " + exc;
      } else {
        group.resize(last_at);
        group += license_ref(last_name + "-with-" + name +
                             (ascii_lower(name).ends_with("exception") ? "" : "-exception"));
      }
      i = j;
      continue;
    }
    if (!want_name) return "";
    last_at = group.size();
    last_name = words[i];
    group += spdx_of_debian(words[i]);
    want_name = false;
  }
  if (want_name) return "";
  end_group(pending);
  if (groups.size() == 1) return groups[0].second;
  std::string out;
  for (const auto& [op, g] : groups)
    out += (out.empty() ? "" : " " + op + " ") +
           (g.find(' ') != std::string::npos ? "(" + g + ")" : g);
  return out;
}

bool or_outside(const std::string& expr) {
  int depth = 0;
  for (size_t i = 0; i < expr.size(); ++i) {
    if (expr[i] == '(') ++depth;
    if (expr[i] == ')') --depth;
    if (depth == 0 && expr.compare(i, 4, " OR ") == 0) return true;
  }
  return false;
}

}  // namespace

std::string reduce_copyright(std::string_view text) {
  std::string out;
  bool blank = true;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    bool empty = line.find_first_not_of(" \t") == std::string_view::npos;
    if (empty) {
      if (!blank) out += '\n';
      blank = true;
      continue;
    }
    if (field_is(line, "format") || field_is(line, "files") || field_is(line, "license") ||
        line.find("/usr/share/common-licenses/") != std::string_view::npos) {
      out.append(line);
      out += '\n';
      blank = false;
    }
  }
  return out;
}

std::string debian_license(std::string_view copyright, std::string& text) {
  std::string reduced = reduce_copyright(copyright);
  bool dep5 = false;
  std::vector<std::string> licenses;  // the Files paragraphs' and the header's, in order, once each
  std::vector<std::string> refs;      // free form: the common licenses it refers to
  // Paragraphs: a header (Format:), Files paragraphs, stand-alone License paragraphs (texts only).
  size_t pos = 0;
  bool first = true;
  while (pos < reduced.size()) {
    size_t end = reduced.find("\n\n", pos);
    if (end == std::string::npos) end = reduced.size();
    std::string para = reduced.substr(pos, end - pos);
    pos = end + 2;
    bool header = false, files = false;
    std::string license;
    size_t lp = 0;
    while (lp < para.size()) {
      size_t le = para.find('\n', lp);
      if (le == std::string::npos) le = para.size();
      std::string_view line(para.data() + lp, le - lp);
      lp = le + 1;
      if (field_is(line, "format")) {
        header = true;
        if (first && line.find("copyright-format") != std::string_view::npos) dep5 = true;
      } else if (field_is(line, "files")) {
        files = true;
      } else if (field_is(line, "license")) {
        license = trim(std::string(line.substr(8)));
      }
      for (size_t at = line.find("/usr/share/common-licenses/"); at != std::string_view::npos;
           at = line.find("/usr/share/common-licenses/", at + 1)) {
        std::string_view rest = line.substr(at + 27);
        size_t stop = 0;
        while (stop < rest.size() && (std::isalnum(static_cast<unsigned char>(rest[stop])) ||
                                      rest[stop] == '-' || rest[stop] == '.' || rest[stop] == '+'))
          ++stop;
        std::string name(rest.substr(0, stop));
        while (!name.empty() && name.back() == '.') name.pop_back();  // the end of a sentence
        if (!name.empty() && std::find(refs.begin(), refs.end(), name) == refs.end())
          refs.push_back(name);
      }
    }
    first = false;
    if ((files || header) && !license.empty() &&
        std::find(licenses.begin(), licenses.end(), license) == licenses.end())
      licenses.push_back(license);
  }
  if (!dep5) {
    if (!refs.empty()) {
      text = "refers to";
      for (size_t i = 0; i < refs.size(); ++i)
        text += (i ? ", " : " ") + std::string("/usr/share/common-licenses/") + refs[i];
      text += " (a copyright file not in the machine-readable format)";
    }
    return "";
  }
  // The terms of every line, ANDed and each once: "GPL-3+" and "GPL-3+ and
  // ISC" give GPL-3.0-or-later AND ISC. A line that is no expression
  // ("BSD-3-clause and/or GPL-3+", which SPDX cannot say) is one LicenseRef
  // of its words rather than a guess.
  std::vector<std::string> terms;
  for (const auto& l : licenses) {
    std::string s = spdx_of_dep5(l);
    if (s.empty()) s = license_ref(l);
    std::vector<std::string> split;
    if (or_outside(s)) {
      split.push_back("(" + s + ")");
    } else {  // A AND (B OR C): its terms
      int depth = 0;
      size_t from = 0;
      for (size_t i = 0; i <= s.size(); ++i) {
        if (i < s.size() && s[i] == '(') ++depth;
        if (i < s.size() && s[i] == ')') --depth;
        if (i == s.size() || (depth == 0 && s.compare(i, 5, " AND ") == 0)) {
          split.push_back(s.substr(from, i - from));
          from = i + 5;
        }
      }
    }
    for (auto& t : split)
      if (std::find(terms.begin(), terms.end(), t) == terms.end()) terms.push_back(t);
  }
  std::string expr;
  for (const auto& t : terms) expr += (expr.empty() ? "" : " AND ") + t;
  if (terms.size() == 1 && terms[0].front() == '(' &&
      or_outside(terms[0].substr(1, terms[0].size() - 2)))
    expr = terms[0].substr(1, terms[0].size() - 2);  // only "(A OR B)": no parentheses
  if (!expr.empty() && license_expression_known(expr, true)) return expr;
  text.clear();
  for (const auto& l : licenses) text += (text.empty() ? "" : "; ") + l;
  if (!text.empty()) text = "Debian copyright file: " + text;
  return "";
}

}  // namespace sb::sbom
