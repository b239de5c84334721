#include "fetch/pip/requirement.hpp"

#include <algorithm>
#include <cstring>

#include "util/error.hpp"
#include "util/text.hpp"

namespace sb::pip {

struct Marker::Node {
  // and/or: kids; comparison: lhs op rhs, each a variable name or a literal.
  std::string kind;  // "and", "or", "cmp"
  std::vector<std::shared_ptr<const Node>> kids;
  std::string op, lhs, rhs;
  bool lhs_var = false, rhs_var = false;
};

namespace {

constexpr std::string_view kBlanks = " \t";  // PEP 508's whitespace

const std::set<std::string> kVariables = {
    "python_version", "python_full_version", "os_name", "sys_platform", "platform_release",
    "platform_system", "platform_version", "platform_machine", "platform_python_implementation",
    "implementation_name", "implementation_version", "extra", "os.name", "sys.platform",
    "platform.version", "platform.machine", "platform.python_implementation", "python_implementation"};

class MarkerParser {
 public:
  explicit MarkerParser(const std::string& t) : t_(t) {}

  std::shared_ptr<const Marker::Node> parse() {
    auto n = parse_or();
    skip();
    if (p_ != t_.size()) fail("unexpected '" + t_.substr(p_) + "'");
    return n;
  }

 private:
  void skip() {
    while (p_ < t_.size() && isspace(static_cast<unsigned char>(t_[p_]))) ++p_;
  }
  [[noreturn]] void fail(const std::string& what) {
    throw Error("marker '" + t_ + "' at column " + std::to_string(p_ + 1) + ": " + what);
  }
  bool word(const std::string& w) {
    skip();
    if (t_.compare(p_, w.size(), w) != 0) return false;
    size_t e = p_ + w.size();
    if (e < t_.size() && (isalnum(static_cast<unsigned char>(t_[e])) || t_[e] == '_')) return false;
    p_ = e;
    return true;
  }
  std::shared_ptr<const Marker::Node> parse_or() {
    auto n = parse_and();
    while (word("or")) {
      auto o = std::make_shared<Marker::Node>();
      o->kind = "or";
      o->kids = {n, parse_and()};
      n = o;
    }
    return n;
  }
  std::shared_ptr<const Marker::Node> parse_and() {
    auto n = parse_atom();
    while (word("and")) {
      auto a = std::make_shared<Marker::Node>();
      a->kind = "and";
      a->kids = {n, parse_atom()};
      n = a;
    }
    return n;
  }
  std::shared_ptr<const Marker::Node> parse_atom() {
    skip();
    if (p_ < t_.size() && t_[p_] == '(') {
      ++p_;
      auto n = parse_or();
      skip();
      if (p_ >= t_.size() || t_[p_] != ')') fail("missing ')'");
      ++p_;
      return n;
    }
    auto n = std::make_shared<Marker::Node>();
    n->kind = "cmp";
    value(n->lhs, n->lhs_var);
    skip();
    for (const char* op : {"===", "==", "!=", "<=", ">=", "~=", "<", ">"})
      if (t_.compare(p_, strlen(op), op) == 0) {
        n->op = op;
        p_ += strlen(op);
        break;
      }
    if (n->op.empty()) {
      if (word("in")) n->op = "in";
      else if (word("not") && word("in")) n->op = "not in";
      else fail("expected a comparison operator");
    }
    value(n->rhs, n->rhs_var);
    return n;
  }
  void value(std::string& out, bool& is_var) {
    skip();
    if (p_ < t_.size() && (t_[p_] == '"' || t_[p_] == '\'')) {
      char q = t_[p_++];
      size_t e = t_.find(q, p_);
      if (e == std::string::npos) fail("unterminated string");
      out = t_.substr(p_, e - p_);
      p_ = e + 1;
      is_var = false;
      return;
    }
    size_t b = p_;
    while (p_ < t_.size() && (isalnum(static_cast<unsigned char>(t_[p_])) || t_[p_] == '_' || t_[p_] == '.')) ++p_;
    out = t_.substr(b, p_ - b);
    if (!kVariables.count(out)) fail(out.empty() ? "expected a variable or a quoted string" : "unknown variable '" + out + "'");
    is_var = true;
  }

  const std::string& t_;
  size_t p_ = 0;
};

std::string canonical_var(const std::string& v) {
  if (v == "os.name") return "os_name";
  if (v == "sys.platform") return "sys_platform";
  if (v == "platform.version") return "platform_version";
  if (v == "platform.machine") return "platform_machine";
  if (v == "platform.python_implementation" || v == "python_implementation") return "platform_python_implementation";
  return v;
}

bool compare(const std::string& op, const std::string& l, const std::string& r) {
  if (op == "in") return r.find(l) != std::string::npos;
  if (op == "not in") return r.find(l) == std::string::npos;
  // PEP 508: a version comparison when the right side is a version specifier.
  std::string rv = r.ends_with(".*") ? r.substr(0, r.size() - 2) : r;
  if (op != "===" && Version::try_parse(l) && Version::try_parse(rv)) {
    Specifier s{op, r, false};
    if (r.ends_with(".*")) s = {op, r.substr(0, r.size() - 2), true};
    return s.contains(Version::parse(l));
  }
  if (op == "==" || op == "===") return l == r;
  if (op == "!=") return l != r;
  if (op == "<") return l < r;
  if (op == "<=") return l <= r;
  if (op == ">") return l > r;
  if (op == ">=") return l >= r;
  return false;  // ~= on non-versions
}

bool eval(const Marker::Node& n, const MarkerEnv& env, const std::set<std::string>& extras) {
  if (n.kind == "and") return eval(*n.kids[0], env, extras) && eval(*n.kids[1], env, extras);
  if (n.kind == "or") return eval(*n.kids[0], env, extras) || eval(*n.kids[1], env, extras);
  // `extra == "name"`: true when the name is among the extras asked.
  if ((n.lhs_var && n.lhs == "extra") || (n.rhs_var && n.rhs == "extra")) {
    std::string lit = normalize_name(n.lhs_var ? n.rhs : n.lhs);
    bool has = extras.count(lit) > 0;
    if (n.op == "==" || n.op == "===") return has;
    if (n.op == "!=") return !has;
    return false;
  }
  auto get = [&](const std::string& v, bool var) {
    if (!var) return v;
    auto it = env.vars.find(canonical_var(v));
    return it == env.vars.end() ? std::string() : it->second;
  };
  return compare(n.op, get(n.lhs, n.lhs_var), get(n.rhs, n.rhs_var));
}

}  // namespace

MarkerEnv MarkerEnv::linux_cpython(const std::string& python, const std::string& machine) {
  std::string full = python, short_ = python;
  if (std::count(python.begin(), python.end(), '.') == 1) full = python + ".0";
  else short_ = python.substr(0, python.find('.', python.find('.') + 1));
  return MarkerEnv{{{"python_version", short_},
                    {"python_full_version", full},
                    {"os_name", "posix"},
                    {"sys_platform", "linux"},
                    {"platform_system", "Linux"},
                    {"platform_machine", machine},
                    {"platform_python_implementation", "CPython"},
                    {"implementation_name", "cpython"},
                    {"implementation_version", full},
                    {"platform_release", ""},
                    {"platform_version", ""}}};
}

Marker Marker::parse(const std::string& text) {
  Marker m;
  m.text_ = trim(text, kBlanks);
  if (!m.text_.empty()) m.root_ = MarkerParser(m.text_).parse();
  return m;
}

bool Marker::evaluate(const MarkerEnv& env, const std::set<std::string>& extras) const {
  return !root_ || eval(*root_, env, extras);
}

Requirement Requirement::parse(const std::string& text) {
  Requirement r;
  std::string t = text;
  try {
    // The marker: after the first ';' (a URL requirement needs a space before it).
    size_t semi = t.find(';');
    if (semi != std::string::npos) {
      r.marker = Marker::parse(t.substr(semi + 1));
      t = t.substr(0, semi);
    }
    size_t p = 0;
    while (p < t.size() && isspace(static_cast<unsigned char>(t[p]))) ++p;
    size_t b = p;
    while (p < t.size() && (isalnum(static_cast<unsigned char>(t[p])) || t[p] == '-' || t[p] == '_' || t[p] == '.')) ++p;
    r.name = t.substr(b, p - b);
    if (r.name.empty()) throw Error("no project name");
    r.key = normalize_name(r.name);
    std::string rest = trim(t.substr(p), kBlanks);
    if (rest.starts_with("[")) {
      size_t e = rest.find(']');
      if (e == std::string::npos) throw Error("missing ']'");
      std::string ex = rest.substr(1, e - 1);
      for (size_t q = 0; q <= ex.size();) {
        size_t c = ex.find(',', q);
        if (c == std::string::npos) c = ex.size();
        std::string one = trim(ex.substr(q, c - q), kBlanks);
        if (!one.empty()) r.extras.insert(normalize_name(one));
        q = c + 1;
      }
      rest = trim(rest.substr(e + 1), kBlanks);
    }
    if (rest.starts_with("@")) {
      r.url = trim(rest.substr(1), kBlanks);
      return r;
    }
    if (rest.starts_with("(")) {
      if (!rest.ends_with(")")) throw Error("missing ')'");
      rest = trim(rest.substr(1, rest.size() - 2), kBlanks);
    }
    r.specifier = SpecifierSet::parse(rest);
  } catch (Error& e) {
    throw Error("requirement '" + text + "': " + e.what());
  }
  return r;
}

std::string Requirement::str() const {
  std::string s = name;
  if (!extras.empty()) {
    s += "[";
    for (const auto& e : extras) s += (s.back() == '[' ? "" : ",") + e;
    s += "]";
  }
  s += url.empty() ? specifier.str() : " @ " + url;
  if (!marker.empty()) s += "; " + marker.str();
  return s;
}

}  // namespace sb::pip
