#include "fetch/pip/index.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <ctime>

#include <mutex>
#include <nlohmann/json.hpp>

#include "fetch/pip/version.hpp"
#include "fetch/pip/zip.hpp"
#include "util/digest.hpp"
#include "util/error.hpp"
#include "util/file.hpp"
#include "util/number.hpp"
#include "util/process.hpp"
#include "util/text.hpp"
#include "util/utf8.hpp"

namespace sb::pip {

namespace {

std::vector<std::string> words(const std::string& s) {
  std::vector<std::string> out;
  size_t p = 0;
  while ((p = s.find_first_not_of(" \t\r\n", p)) != std::string::npos) {
    size_t e = s.find_first_of(" \t\r\n", p);
    out.push_back(s.substr(p, e == std::string::npos ? std::string::npos : e - p));
    p = e;
  }
  return out;
}

// An INI file as pip's configparser reads it: section -> key -> value
// (continuation lines joined with '\n'); keys with '_' read as '-'.
using Ini = std::map<std::string, std::map<std::string, std::string>>;

Ini parse_ini(const std::string& text) {
  Ini ini;
  std::string section, key;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t e = text.find('\n', pos);
    if (e == std::string::npos) e = text.size();
    std::string line = text.substr(pos, e - pos);
    pos = e + 1;
    std::string t = trim(line);
    if (t.empty() || t[0] == '#' || t[0] == ';') continue;
    if (!key.empty() && (line[0] == ' ' || line[0] == '\t')) {
      ini[section][key] += "\n" + t;
      continue;
    }
    if (t[0] == '[' && t.back() == ']') {
      section = trim(t.substr(1, t.size() - 2));
      key.clear();
      continue;
    }
    size_t eq = t.find_first_of("=:");
    if (eq == std::string::npos) continue;
    key = trim(t.substr(0, eq));
    for (auto& c : key) c = c == '_' ? '-' : static_cast<char>(tolower(static_cast<unsigned char>(c)));
    ini[section][key] = trim(t.substr(eq + 1));
  }
  return ini;
}

std::string unescape_html(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '&') {
      out += s[i];
      continue;
    }
    size_t semi = s.find(';', i);
    if (semi == std::string::npos || semi - i > 10) {
      out += s[i];
      continue;
    }
    std::string ent = s.substr(i + 1, semi - i - 1);
    if (ent == "amp") out += '&';
    else if (ent == "lt") out += '<';
    else if (ent == "gt") out += '>';
    else if (ent == "quot") out += '"';
    else if (ent == "apos") out += '\'';
    else if (ent.starts_with("#x") || ent.starts_with("#X") || ent.starts_with("#")) {
      bool hex = ent.size() > 1 && (ent[1] == 'x' || ent[1] == 'X');
      auto code = parse_integer<uint32_t>(std::string_view(ent).substr(hex ? 2 : 1), hex ? 16 : 10);
      if (code && *code > 0 && *code <= 0x10FFFF && (*code < 0xD800 || *code > 0xDFFF)) append_utf8(out, *code);
      else out += "&" + ent + ";";  // not a character: kept as written
    } else out += "&" + ent + ";";
    i = semi;
  }
  return out;
}

std::optional<Digest> sha256_of(const std::string& hex) {
  if (hex.empty()) return std::nullopt;
  return Digest::parse("sha256:" + hex);
}

}  // namespace

std::string join_url(const std::string& base, const std::string& ref) {
  if (ref.find("://") != std::string::npos && ref.find("://") < ref.find_first_of("/?#")) return ref;
  size_t scheme_end = base.find("://");
  if (scheme_end == std::string::npos) throw Error("'" + base + "' is not an absolute URL");
  if (ref.starts_with("//")) return base.substr(0, scheme_end + 1) + ref;
  size_t host_end = base.find('/', scheme_end + 3);
  std::string origin = host_end == std::string::npos ? base : base.substr(0, host_end);
  if (ref.starts_with("/")) return origin + ref;
  std::string path = host_end == std::string::npos ? "/" : base.substr(host_end);
  path = path.substr(0, path.find_first_of("?#"));
  if (ref.empty()) return origin + path;
  std::string dir = path.substr(0, path.rfind('/') + 1);
  std::string rest = ref, query;
  if (size_t q = rest.find_first_of("?#"); q != std::string::npos) {
    query = rest.substr(q);
    rest = rest.substr(0, q);
  }
  std::vector<std::string> segs;
  std::string full = dir + rest;
  for (size_t p = 1; p <= full.size();) {
    size_t e = full.find('/', p);
    if (e == std::string::npos) e = full.size();
    std::string seg = full.substr(p, e - p);
    if (seg == "..") {
      if (!segs.empty()) segs.pop_back();
    } else if (seg != ".") {
      segs.push_back(seg);
    }
    p = e + 1;
  }
  std::string out;
  for (const auto& s : segs) out += "/" + s;
  if ((rest.ends_with("/") || rest.ends_with("/.") || rest.ends_with("/..") || rest == "." || rest == "..") &&
      !out.ends_with("/"))
    out += "/";
  return origin + (out.empty() ? "/" : out) + query;
}

IndexConfig index_config(const std::string& setting, const fs::path& root,
                         const std::map<std::string, std::string>& env,
                         const std::function<std::string()>& default_index) {
  IndexConfig c;
  auto get = [&](const char* k) {
    auto it = env.find(k);
    return it == env.end() ? std::string() : it->second;
  };
  std::string index, extra, cert, index_from, proxy, trusted;
  std::vector<fs::path> files = {"/etc/xdg/pip/pip.conf", "/etc/pip.conf"};
  std::string home = get("HOME");
  if (!home.empty()) files.push_back(fs::path(home) / ".pip/pip.conf");
  std::string xdg = get("XDG_CONFIG_HOME");
  if (!xdg.empty()) files.push_back(fs::path(xdg) / "pip/pip.conf");
  else if (!home.empty()) files.push_back(fs::path(home) / ".config/pip/pip.conf");
  if (!get("VIRTUAL_ENV").empty()) files.push_back(fs::path(get("VIRTUAL_ENV")) / "pip.conf");
  std::string env_file = get("PIP_CONFIG_FILE");
  if (env_file == "/dev/null" || env_file == "os.devnull") files.clear();
  else if (!env_file.empty()) files.push_back(env_file);
  for (const auto& f : files) {
    fs::path p = root / f.relative_path();
    std::error_code ec;
    if (!fs::is_regular_file(p, ec)) continue;
    Ini ini = parse_ini(read_file(p));
    for (const char* sec : {"global", "download", "install"}) {
      auto& s = ini[sec];
      if (s.count("index-url")) index = s["index-url"], index_from = p.string();
      if (s.count("extra-index-url")) extra = s["extra-index-url"];
      if (s.count("cert")) cert = s["cert"];
      if (s.count("proxy")) proxy = s["proxy"];
      if (s.count("trusted-host")) trusted = s["trusted-host"];
    }
  }
  if (!get("PIP_INDEX_URL").empty()) index = get("PIP_INDEX_URL"), index_from = "PIP_INDEX_URL";
  if (!get("PIP_EXTRA_INDEX_URL").empty()) extra = get("PIP_EXTRA_INDEX_URL");
  if (!get("PIP_CERT").empty()) cert = get("PIP_CERT");
  if (!get("PIP_PROXY").empty()) proxy = get("PIP_PROXY");
  if (!get("PIP_TRUSTED_HOST").empty()) trusted = get("PIP_TRUSTED_HOST");
  if (!setting.empty()) index = setting, index_from = "the stackbuild setting";
  if (index.empty() && default_index) index = default_index(), index_from = "pip's default index";
  if (index.empty())
    throw Error("no Python package index configured: set STACKBUILD_PIP_INDEX_URL, PIP_INDEX_URL or index-url "
                "in pip.conf (and there is no pip on this machine to ask for its default)");
  c.urls.push_back(index);
  for (const auto& w : words(extra)) c.urls.push_back(w);
  if (!cert.empty()) c.ca_file = cert;
  c.origin = index_from;
  c.proxy = trim(proxy);
  for (auto& w : words(trusted)) {
    std::transform(w.begin(), w.end(), w.begin(), ::tolower);
    c.trusted_hosts.push_back(w);
  }
  for (auto& u : c.urls)
    if (!u.ends_with("/")) u += "/";
  return c;
}

namespace {

// pip's trusted-host match: HOST is any port of it, HOST:PORT that port
// (the scheme's own when the URL names none).
bool trusted_host(const std::string& entry, const http::UrlParts& u) {
  std::string host = entry, port;
  if (size_t colon = entry.rfind(':'); colon != std::string::npos && entry.find(']') == std::string::npos) {
    host = entry.substr(0, colon);
    port = entry.substr(colon + 1);
  }
  if (host.starts_with('[') && host.ends_with(']')) host = host.substr(1, host.size() - 2);
  if (host != u.host) return false;
  if (port.empty()) return true;
  std::string url_port = !u.port.empty() ? u.port : u.scheme == "https" ? "443" : "80";
  return port == url_port;
}

}  // namespace

http::ClientOptions client_options(const IndexConfig& c) {
  http::ClientOptions o;
  o.transport = c.transport;
  if (!c.ca_file.empty()) o.ca_files = {c.ca_file};
  if (c.proxy.empty() && c.trusted_hosts.empty()) return o;
  o.route = [ca = c.ca_file, proxy = c.proxy, trusted = c.trusted_hosts](const std::string& url) {
    http::Route r;
    if (!ca.empty()) r.ca_files = {ca};
    if (!proxy.empty()) r.proxy = proxy;
    if (trusted.empty()) return r;
    http::UrlParts u;
    try {
      u = http::split_url(url);
    } catch (const Error&) {
      return r;  // the transfer says what is wrong with the URL
    }
    for (const auto& t : trusted)
      if (trusted_host(t, u)) r.verify_peer = r.verify_host = false;
    return r;
  };
  return o;
}

std::string pip_default_index() {
  ProcessSpec spec;
  spec.argv = {"python3", "-c", "from pip._internal.models.index import PyPI; print(PyPI.simple_url)"};
  spec.env = current_environment();
  spec.capture_stdout = true;
  try {
    ProcessResult r = run_process(spec);
    return r.exit_status == 0 ? trim(r.output) : std::string();
  } catch (const Error&) {
    return std::string();
  }
}

std::string pip_default_index(const Store& store) {
  const fs::path python = find_on_path("python3");
  struct stat st {};
  if (python.empty() || ::stat(python.c_str(), &st) != 0) return "";  // no Python on PATH: nothing to ask
  const Digest key = KeyHasher()
                         .field("stackbuild-pip-default-index", "1")
                         .field("python3", fs::absolute(python).string())
                         .field("size", static_cast<int64_t>(st.st_size))
                         .field("mtime", std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec))
                         .finish();
  const int64_t now = static_cast<int64_t>(time(nullptr));
  if (auto rec = store.get_record("pip-default-index", key)) {
    try {
      auto j = nlohmann::json::parse(*rec);
      int64_t age = now - j.at("asked").get<int64_t>();
      if (age >= 0 && age < 24 * 3600) return j.at("url").get<std::string>();
    } catch (const std::exception&) {
      // A damaged record: ask again.
    }
  }
  std::string url = pip_default_index();
  if (!url.empty()) store.put_record("pip-default-index", key, nlohmann::json{{"url", url}, {"asked", now}}.dump());
  return url;
}

ProjectPage parse_json_page(const std::string& body, const std::string& page_url) {
  ProjectPage page;
  page.url = page_url;
  try {
    auto j = nlohmann::json::parse(body);
    std::string api = j.at("meta").value("api-version", "1.0");
    if (!api.starts_with("1.")) throw Error("API version " + api + " (stackbuild reads 1.x)");
    for (const auto& f : j.at("files")) {
      DistFile d;
      d.filename = f.at("filename").get<std::string>();
      d.url = join_url(page_url, f.at("url").get<std::string>());
      if (f.contains("hashes") && f["hashes"].contains("sha256")) d.sha256 = sha256_of(f["hashes"]["sha256"]);
      if (f.contains("size") && f["size"].is_number_unsigned()) d.size = f["size"].get<uint64_t>();
      if (f.contains("requires-python") && f["requires-python"].is_string()) d.requires_python = f["requires-python"];
      if (f.contains("yanked")) d.yanked = f["yanked"].is_string() || (f["yanked"].is_boolean() && f["yanked"].get<bool>());
      for (const char* k : {"core-metadata", "data-dist-info-metadata", "dist-info-metadata"}) {
        if (!f.contains(k) || d.has_metadata) continue;
        const auto& m = f[k];
        if (m.is_boolean()) d.has_metadata = m.get<bool>();
        if (m.is_object()) {
          d.has_metadata = true;
          if (m.contains("sha256")) d.metadata_sha256 = sha256_of(m["sha256"]);
        }
      }
      page.files.push_back(std::move(d));
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error("index page " + page_url + " is not PEP 691 JSON: " + e.what());
  } catch (Error& e) {
    e.add_trace("while reading the index page " + page_url);
    throw;
  }
  return page;
}

ProjectPage parse_html_page(const std::string& body, const std::string& page_url) {
  ProjectPage page;
  page.url = page_url;
  std::string base = page_url;
  auto attr = [](const std::string& tag, const std::string& name) -> std::optional<std::string> {
    for (size_t p = 0; (p = tag.find(name, p)) != std::string::npos; p += name.size()) {
      if (p == 0 || !isspace(static_cast<unsigned char>(tag[p - 1]))) continue;
      size_t q = p + name.size();
      while (q < tag.size() && isspace(static_cast<unsigned char>(tag[q]))) ++q;
      if (q >= tag.size() || tag[q] != '=') return std::string();  // a bare attribute
      ++q;
      while (q < tag.size() && isspace(static_cast<unsigned char>(tag[q]))) ++q;
      if (q < tag.size() && (tag[q] == '"' || tag[q] == '\'')) {
        size_t e = tag.find(tag[q], q + 1);
        if (e == std::string::npos) return std::nullopt;
        return unescape_html(tag.substr(q + 1, e - q - 1));
      }
      size_t e = tag.find_first_of(" \t\r\n>", q);
      return unescape_html(tag.substr(q, e - q));
    }
    return std::nullopt;
  };
  if (size_t b = body.find("<base "); b != std::string::npos)
    if (auto href = attr(body.substr(b, body.find('>', b) - b), "href")) base = join_url(page_url, *href);
  for (size_t p = 0; (p = body.find("<a", p)) != std::string::npos;) {
    size_t close = body.find('>', p);
    if (close == std::string::npos) break;
    if (!isspace(static_cast<unsigned char>(body[p + 2]))) {
      p = close;
      continue;
    }
    std::string tag = body.substr(p + 2, close - p - 2);
    size_t end = body.find("</a>", close);
    if (end == std::string::npos) throw Error("index page " + page_url + ": an <a> is not closed");
    DistFile d;
    d.filename = trim(unescape_html(body.substr(close + 1, end - close - 1)));
    p = end;
    auto href = attr(tag, "href");
    if (!href || href->empty()) continue;
    std::string url = *href;
    if (size_t h = url.find('#'); h != std::string::npos) {
      std::string frag = url.substr(h + 1);
      url = url.substr(0, h);
      if (frag.starts_with("sha256=")) d.sha256 = sha256_of(frag.substr(7));
    }
    d.url = join_url(base, url);
    if (auto rp = attr(tag, "data-requires-python")) d.requires_python = *rp;
    d.yanked = attr(tag, "data-yanked").has_value();
    for (const char* k : {"data-core-metadata", "data-dist-info-metadata"}) {
      auto m = attr(tag, k);
      if (!m || d.has_metadata || *m == "false") continue;
      d.has_metadata = true;
      if (m->starts_with("sha256=")) d.metadata_sha256 = sha256_of(m->substr(7));
    }
    page.files.push_back(std::move(d));
  }
  return page;
}

bool FieldLess::operator()(std::string_view a, std::string_view b) const {
  return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) < std::tolower(static_cast<unsigned char>(y));
  });
}

Metadata parse_metadata(const std::string& text) {
  Metadata out;
  std::string last;
  for (size_t pos = 0; pos < text.size();) {
    size_t e = text.find('\n', pos);
    if (e == std::string::npos) e = text.size();
    std::string line = text.substr(pos, e - pos);
    pos = e + 1;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) break;  // the description body follows
    if ((line[0] == ' ' || line[0] == '\t') && !last.empty()) continue;  // folded continuation
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    last = line.substr(0, colon);
    out.emplace(last, trim(line.substr(colon + 1)));
  }
  return out;
}

std::string read_zip_member(const fs::path& zip, const std::string& suffix) {
  ZipReader z(zip, "wheel " + zip.string());
  std::string out;
  for (const auto& m : z.members()) {
    if (!m.name.ends_with(suffix) || m.name.find('/') != m.name.rfind('/')) continue;
    z.read(m, [&](const char* data, size_t n) { out.append(data, n); });
    break;
  }
  return out;
}

}  // namespace sb::pip
