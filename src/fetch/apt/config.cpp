#include "fetch/apt/config.hpp"

#include <strings.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <optional>

#include "util/error.hpp"
#include "util/file.hpp"
#include "util/process.hpp"
#include "util/text.hpp"

namespace sb::apt {

struct AptConfig::Node {
  std::string tag;  // "" for a list item
  std::string value;
  std::string where;
  std::vector<std::unique_ptr<Node>> children;
};

namespace {

using Node = AptConfig::Node;

bool same_name(std::string_view a, std::string_view b) {
  return a.size() == b.size() && strncasecmp(a.data(), b.data(), a.size()) == 0;
}

// "a::b::c" -> a, b, c; an empty part ("a::" or "a::::b") is a new list item.
std::vector<std::string_view> name_parts(std::string_view name) {
  std::vector<std::string_view> out;
  for (size_t pos = 0;;) {
    size_t end = name.find("::", pos);
    out.push_back(
        name.substr(pos, end == std::string_view::npos ? std::string_view::npos : end - pos));
    if (end == std::string_view::npos) return out;
    pos = end + 2;
  }
}

Node* lookup(Node* root, std::string_view name, bool create) {
  Node* n = root;
  for (auto part : name_parts(name)) {
    Node* next = nullptr;
    if (!part.empty())
      for (auto& c : n->children)
        if (same_name(c->tag, part)) {
          next = c.get();
          break;
        }
    if (!next) {
      if (!create) return nullptr;
      n->children.push_back(std::make_unique<Node>());
      next = n->children.back().get();
      next->tag = std::string(part);
    }
    n = next;
  }
  return n;
}

// The names apt reads in a configuration directory: letters, digits, '-',
// '_' and '.', and no extension (when `no_extension_too`) or `extension`.
bool apt_reads(const std::string& name, std::string_view extension, bool no_extension_too) {
  if (name.empty() || name[0] == '.') return false;
  for (unsigned char ch : name)
    if (!isalnum(ch) && ch != '-' && ch != '_' && ch != '.') return false;
  size_t dot = name.rfind('.');
  if (dot == std::string::npos) return no_extension_too;
  return name.substr(dot + 1) == extension;
}

std::vector<fs::path> files_apt_reads(const fs::path& dir, std::string_view extension,
                                      bool no_extension_too) {
  std::vector<fs::path> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_directory()) continue;
    if (apt_reads(e.path().filename().string(), extension, no_extension_too))
      out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

struct Word {
  std::string text;
  bool quoted = false;  // began with '"'
};

// Words as apt reads them: whitespace ends a word outside quotes; the
// quotes go ("Q"::a" is Q::a).
std::vector<Word> words_of(std::string_view s) {
  std::vector<Word> out;
  bool in_word = false, quote = false;
  for (char ch : s) {
    if (!quote && (ch == ' ' || ch == '\t' || ch == '\r')) {
      in_word = false;
      continue;
    }
    if (!in_word) {
      out.push_back({"", ch == '"'});
      in_word = true;
    }
    if (ch == '"')
      quote = !quote;
    else
      out.back().text += ch;
  }
  return out;
}

// One file of apt.conf syntax into the tree below `root`.
class ConfParser {
 public:
  ConfParser(Node* root, std::string file, int depth)
      : root_(root), file_(std::move(file)), depth_(depth) {}

  void parse(std::string_view text) {
    std::string stmt;  // the statement so far, comments left out
    bool in_comment = false;
    for (size_t pos = 0; pos <= text.size();) {
      size_t nl = text.find('\n', pos);
      std::string_view line =
          text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
      pos = nl == std::string_view::npos ? text.size() + 1 : nl + 1;
      ++line_;
      bool quote = false;
      for (size_t i = 0; i < line.size(); ++i) {
        char ch = line[i];
        char next = i + 1 < line.size() ? line[i + 1] : '\0';
        if (in_comment) {
          if (ch == '*' && next == '/') in_comment = false, ++i;
          continue;
        }
        if (quote || ch == '"') {
          if (ch == '"') quote = !quote;
          stmt += ch;
          continue;
        }
        if (ch == '/' && next == '/') break;
        if (ch == '/' && next == '*') {
          in_comment = true, ++i;
          continue;
        }
        if (ch == '#' && !line.substr(i).starts_with("#clear") &&
            !line.substr(i).starts_with("#include"))
          break;
        if (ch == ';' || ch == '{' || ch == '}') {
          statement(stmt, ch);
          stmt.clear();
          continue;
        }
        stmt += ch;
      }
      if (quote) fail("a quoted value does not end on its line");
      stmt += ' ';
    }
    if (!trim_view(stmt).empty()) fail("extra junk at end of file (a statement without its ';'?)");
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw Error("apt configuration " + file_ + ":" + std::to_string(line_) + ": " + what);
  }

  void statement(const std::string& text, char end) {
    std::vector<Word> words = words_of(text);
    if (words.empty()) {
      if (end == '{') fail("a block starts with no name");
      if (end == '}' && !scopes_.empty()) scopes_.pop_back();
      return;
    }
    if (!words[0].quoted && words[0].text.starts_with('#')) return directive(words, end);
    std::string tag = words[0].text;
    std::optional<std::string> value;
    if (words.size() == 1 && end != '{') {  // a lone word is a list item
      value = tag;
      tag.clear();
    } else if (words.size() > 1) {
      if (words.size() > 2 &&
          std::any_of(words.begin() + 1, words.end(), [](const Word& w) { return !w.quoted; }))
        fail("extra junk after value");
      value = words[1].text;
      for (size_t i = 2; i < words.size(); ++i) *value += " " + words[i].text;
    }
    std::string full = scopes_.empty() ? tag : scopes_.back() + "::" + tag;
    Node* n = lookup(root_, full, true);
    if (value) {
      n->value = *value;
      n->where = file_ + ":" + std::to_string(line_);
    }
    if (end == '{') scopes_.push_back(full);
    if (end == '}' && !scopes_.empty()) scopes_.pop_back();
  }

  void directive(const std::vector<Word>& words, char end) {
    const std::string& name = words[0].text;
    if (!scopes_.empty()) fail("directives can only be used at the top level (" + name + ")");
    if (name != "#clear" && name != "#include") fail("unknown directive " + name);
    if (words.size() < 2) fail(name + " wants a name");
    if (words.size() > 2) fail("extra junk after " + name + " " + words[1].text);
    if (end != ';') fail(name + " ends with ';'");
    if (name == "#clear") {
      if (Node* n = lookup(root_, words[1].text, false)) {
        n->value.clear();
        n->children.clear();
      }
      return;
    }
    if (depth_ >= 16) fail("#include nests too deep");
    fs::path p = words[1].text;
    try {
      if (words[1].text.ends_with('/')) {
        if (!fs::is_directory(p))
          fail("#include names " + p.string() + ", which is not a directory");
        for (const auto& f : files_apt_reads(p, "conf", true)) include(f);
      } else {
        if (!fs::exists(p)) fail("#include names " + p.string() + ", which does not exist");
        include(p);
      }
    } catch (Error& e) {
      e.add_trace("included from " + file_ + ":" + std::to_string(line_));
      throw;
    }
  }

  void include(const fs::path& p) { ConfParser(root_, p.string(), depth_ + 1).parse(read_file(p)); }

  Node* root_;
  std::string file_;
  int depth_;
  int line_ = 0;
  std::vector<std::string> scopes_;  // the full names of the open blocks
};

void dump_node(const Node& n, const std::string& prefix, bool set_only, std::string& out) {
  for (const auto& c : n.children) {
    std::string full = prefix + c->tag;
    if (!full.empty() && (!set_only || !c->where.empty())) out += full + " \"" + c->value + "\";\n";
    dump_node(*c, full + "::", set_only, out);
  }
}

// Where a Dir::Etc:: file is: `key`'s value, else `fallback`, relative to
// Dir::Etc, relative to Dir (whose default is `root`).
fs::path etc_path(const AptConfig& c, const fs::path& root, const std::string& key,
                  const std::string& fallback) {
  std::string v = c.find("Dir::Etc::" + key);
  fs::path p = v.empty() ? fallback : v;
  if (p.is_absolute()) return p;
  std::string etc = c.find("Dir::Etc");
  fs::path e = etc.empty() ? "etc/apt" : etc;
  if (e.is_absolute()) return e / p;
  std::string dir = c.find("Dir");
  return (dir.empty() ? root : fs::path(dir)) / e / p;
}

bool apt_bool(const std::string& v, bool fallback) {
  std::string l = v;
  std::transform(l.begin(), l.end(), l.begin(), ::tolower);
  if (l == "true" || l == "yes" || l == "on" || l == "1" || l == "enable" || l == "with")
    return true;
  if (l == "false" || l == "no" || l == "off" || l == "0" || l == "disable" || l == "without")
    return false;
  return fallback;
}

}  // namespace

AptConfig::AptConfig() : root_(std::make_unique<Node>()) {}
AptConfig::~AptConfig() = default;
AptConfig::AptConfig(AptConfig&&) noexcept = default;
AptConfig& AptConfig::operator=(AptConfig&&) noexcept = default;

void AptConfig::parse(std::string_view text, const std::string& where) {
  ConfParser(root_.get(), where, 0).parse(text);
}

void AptConfig::read_file(const fs::path& file) {
  parse(sb::read_file(file), file.string());
}

std::string AptConfig::find(std::string_view name) const {
  const Node* n = lookup(root_.get(), name, false);
  return n ? n->value : std::string();
}

std::string AptConfig::where(std::string_view name) const {
  const Node* n = lookup(root_.get(), name, false);
  return n ? n->where : std::string();
}

std::string AptConfig::dump(bool set_only) const {
  std::string out;
  dump_node(*root_, "", set_only, out);
  return out;
}

AptConfig machine_apt_config(const fs::path& root, bool read_env) {
  AptConfig c;
  if (read_env)
    if (const char* f = getenv("APT_CONFIG"); f && *f && fs::exists(f)) c.read_file(f);
  for (const auto& f : files_apt_reads(etc_path(c, root, "parts", "apt.conf.d"), "conf", true))
    c.read_file(f);
  fs::path main = etc_path(c, root, "main", "apt.conf");
  if (fs::exists(main)) c.read_file(main);
  return c;
}

std::vector<AuthEntry> parse_auth_conf(std::string_view text, const std::string& where) {
  struct Token {
    std::string text;
    int line;
  };
  std::vector<Token> tokens;
  int line = 1;
  for (size_t i = 0; i < text.size();) {
    char ch = text[i];
    if (ch == '\n') ++line;
    if (isspace(static_cast<unsigned char>(ch))) {
      ++i;
      continue;
    }
    if (ch == '#') {  // a comment, to the end of the line
      i = text.find('\n', i);
      if (i == std::string_view::npos) break;
      continue;
    }
    size_t end = i;
    while (end < text.size() && !isspace(static_cast<unsigned char>(text[end]))) ++end;
    tokens.push_back({std::string(text.substr(i, end - i)), line});
    i = end;
  }
  std::vector<AuthEntry> out;
  for (size_t i = 0; i + 1 < tokens.size(); ++i) {
    const std::string& key = tokens[i].text;
    const std::string& value = tokens[i + 1].text;
    if (key == "machine") {
      AuthEntry e;
      e.where = where + ":" + std::to_string(tokens[i].line);
      std::string rest = value;
      if (auto p = rest.find("://"); p != std::string::npos) {
        e.scheme = rest.substr(0, p);
        rest = rest.substr(p + 3);
      }
      if (auto slash = rest.find('/'); slash != std::string::npos) {
        e.path = rest.substr(slash);
        rest = rest.substr(0, slash);
      }
      if (rest.starts_with('[')) {  // [v6]:port
        auto close = rest.find(']');
        e.host = rest.substr(1, close == std::string::npos ? std::string::npos : close - 1);
        if (close != std::string::npos && close + 1 < rest.size() && rest[close + 1] == ':')
          e.port = rest.substr(close + 2);
      } else if (auto colon = rest.find(':'); colon != std::string::npos) {
        e.host = rest.substr(0, colon);
        e.port = rest.substr(colon + 1);
      } else {
        e.host = rest;
      }
      std::transform(e.host.begin(), e.host.end(), e.host.begin(), ::tolower);
      std::transform(e.scheme.begin(), e.scheme.end(), e.scheme.begin(), ::tolower);
      out.push_back(e);
      ++i;
    } else if ((key == "login" || key == "password") && !out.empty()) {
      (key == "login" ? out.back().login : out.back().password) = value;
      ++i;
    }  // other tokens are ignored, as apt does
  }
  return out;
}

std::vector<AuthEntry> machine_auth_entries(const AptConfig& config, const fs::path& root) {
  std::vector<AuthEntry> out;
  auto add = [&](const fs::path& f) {
    // Logins are kept from other users (mode 0600, root's): a run that may
    // not read them goes without.
    if (::access(f.c_str(), R_OK) != 0) return;
    auto e = parse_auth_conf(read_file(f), f.string());
    out.insert(out.end(), e.begin(), e.end());
  };
  for (const auto& f :
       files_apt_reads(etc_path(config, root, "netrcparts", "auth.conf.d"), "conf", false))
    add(f);
  fs::path main = etc_path(config, root, "netrc", "auth.conf");
  if (fs::exists(main)) add(main);
  return out;
}

AptNetwork::AptNetwork(AptConfig config, std::vector<AuthEntry> logins)
    : config_(std::move(config)), logins_(std::move(logins)) {}

std::pair<std::string, std::string> AptNetwork::first(const std::vector<std::string>& names) const {
  for (const auto& n : names)
    if (std::string v = config_.find(n); !v.empty()) return {v, n};
  return {};
}

std::string AptNetwork::auto_detected(const std::string& command, const std::string& setting,
                                      const std::string& site) const {
  std::lock_guard<std::mutex> g(detect_mu_);
  const std::string key = command + '\n' + site;
  if (auto it = detected_.find(key); it != detected_.end()) return it->second;
  ProcessSpec spec;
  spec.argv = {command, site};
  spec.env = current_environment();
  spec.capture_stdout = true;
  ProcessResult r;
  try {
    r = run_process(spec);
  } catch (const Error& e) {
    throw Error(setting + " (" + config_.where(setting) + "): " + e.what());
  }
  if (r.exit_status != 0)
    throw Error(setting + " (" + config_.where(setting) + "): '" + command + " " + site + "' exited with status " +
                std::to_string(r.exit_status));
  std::string line = trim(r.output.substr(0, r.output.find('\n')));
  detected_[key] = line;
  return line;
}

std::optional<AuthEntry> take_url_login(std::string& uri) {
  size_t begin = uri.find("://");
  if (begin == std::string::npos) return std::nullopt;
  begin += 3;
  size_t end = std::min(uri.find_first_of("/?#", begin), uri.size());
  size_t at = uri.rfind('@', end - 1);
  if (at == std::string::npos || at < begin || end == begin) return std::nullopt;
  std::string userinfo = uri.substr(begin, at - begin);
  std::string without = uri.substr(0, begin) + uri.substr(at + 1);
  http::UrlParts u = http::split_url(without);
  AuthEntry e;
  e.scheme = u.scheme;
  e.host = u.host;
  e.port = u.port;
  e.path = u.path.ends_with('/') ? u.path : u.path + "/";
  size_t colon = userinfo.find(':');
  e.login = http::url_decode(userinfo.substr(0, colon));
  if (colon != std::string::npos) e.password = http::url_decode(userinfo.substr(colon + 1));
  e.where = "the repository URL";
  uri = without;
  return e;
}

void AptNetwork::add_login(AuthEntry login) {
  std::lock_guard<std::mutex> g(mu_);
  for (const auto& e : url_logins_)
    if (e.scheme == login.scheme && e.host == login.host && e.port == login.port && e.path == login.path &&
        e.login == login.login && e.password == login.password)
      return;
  url_logins_.push_back(std::move(login));
}

http::Route AptNetwork::route(const std::string& url) const {
  http::Route r;
  http::UrlParts u;
  try {
    u = http::split_url(url);
  } catch (const Error&) {
    return r;  // the transfer itself says what is wrong with it
  }
  if (u.scheme != "http" && u.scheme != "https") return r;
  // apt's https method falls back to the http method's settings.
  std::vector<std::string> methods = u.scheme == "https" ? std::vector<std::string>{"https", "http"}
                                                         : std::vector<std::string>{"http"};
  auto names = [&](const std::vector<std::string>& forms) {
    std::vector<std::string> out;
    for (const auto& m : methods)
      for (const auto& f : forms) out.push_back("Acquire::" + m + "::" + f);
    return out;
  };
  // A host's own setting, else what Proxy-Auto-Detect says for the host,
  // else the method's proxy (apt's order).
  auto proxy = first(names({"Proxy::" + u.host}));
  if (proxy.first.empty()) {
    auto detect = first(names({"Proxy-Auto-Detect", "ProxyAutoDetect"}));
    if (!detect.first.empty())
      proxy.first = auto_detected(detect.first, detect.second,
                                  u.scheme + "://" + u.host + (u.port.empty() ? "" : ":" + u.port));
  }
  if (proxy.first.empty()) proxy = first(names({"Proxy"}));
  if (!proxy.first.empty()) r.proxy = proxy.first == "DIRECT" ? "" : proxy.first;
  if (u.scheme == "https") {
    auto ca = first(names({u.host + "::CaInfo", "CaInfo::" + u.host, "CaInfo"}));
    if (!ca.first.empty()) {
      if (!fs::exists(ca.first))
        throw Error(ca.second + " (" + config_.where(ca.second) + ") names " + ca.first +
                    ", which does not exist");
      r.ca_files = {ca.first};
    }
    auto check = [&](const std::string& what) {
      return apt_bool(first(names({u.host + "::" + what, what + "::" + u.host, what})).first, true);
    };
    r.verify_peer = check("Verify-Peer");
    r.verify_host = check("Verify-Host");
  }
  if (!u.user.empty()) return r;  // the URL's own login
  auto matches = [&](const AuthEntry& e) {
    if (e.scheme.empty() ? u.scheme != "https" : e.scheme != u.scheme) return false;
    if (e.host != u.host || (!e.port.empty() && e.port != u.port)) return false;
    return e.path.empty() || u.path.starts_with(e.path);
  };
  std::lock_guard<std::mutex> g(mu_);
  for (const auto* list : {&url_logins_, &logins_})
    for (const auto& e : *list)
      if (matches(e)) {
        r.username = e.login;
        r.password = e.password;
        return r;
      }
  return r;
}

std::shared_ptr<AptNetwork> machine_network(const fs::path& root) {
  AptConfig config = machine_apt_config(root);
  auto logins = machine_auth_entries(config, root);
  return std::make_shared<AptNetwork>(std::move(config), std::move(logins));
}

}  // namespace sb::apt
